"""What the CPU code generator prints, decided from a mapping: loop bands, the OpenMP band, packed tiles,
the register micro-kernel.

Reading of a mapping on a CPU arch (``costmodel.presets.cpu`` or a calibrated one: DRAM, a cache shared
by the cores with ``fanout`` = cores, private caches, the innermost level fanning out to SIMD lanes):

* every level but the innermost is one loop band, its temporal loops in the mapping's order followed by
  its spatial loops (``Mapping.loops``);
* the spatial loops of the first level that has any become one ``#pragma omp for collapse(n)`` over
  the dims that split the output into disjoint blocks (``output_separable``); spatial factors of
  reduction dims there, and of any later level, run as sequential loops (no two threads ever add into
  the same output element);
* each input tensor is packed (copied into a contiguous, zero-padded box) at the outermost private
  level that stores it (a level below the cores' fan-out whose ``Mapping.stores`` is true), and
  re-packed only when its tile changes; the box of an axis spans ``AffineExpr.extent`` of the tile
  (``Tensor.tile_words`` without the clipping), so a convolution's halo and padding come with it, except
  that an axis moving an output pixel with a stride is unrolled (``Pack.unrolled``: ``2*P + R`` as R x P
  positions, dense along P);
  an input that the micro-kernel walks along ``j`` (or else ``i``), indexed there by that dim alone, is
  stored as panels of the block's width (``Pack.panel``: B as K x ``nv`` vectors, A as K x ``mr`` rows,
  each panel contiguous, as in a BLAS's packed panels); outputs are accumulated in place (or in the
  scratch, ``Plan.out_scratch``);
* an innermost level that holds outputs only (the register file, ``register_level``) is folded into the
  level above it: that level's tile, with the register level's loops inside, is the micro-kernel;
* a dim whose factors multiply past its bound (``ragged_nest``, chosen by ``cosa.mip.ragged``) runs its
  last kernel tile cut to the bound; only that tile may reach past it;
* the innermost level's tile (temporal and spatial factors together: the SIMD lanes) is the
  micro-kernel: an ``mr`` x (``nv`` x lanes) block of outputs (rows along dim ``i``, lanes along the
  output's contiguous dim ``j``, or along an output dim that fills the vectors better, a small image's
  output channels, accumulated then in a scratch copy of the output with that dim innermost and copied
  into the output after the nest: ``costmodel.microkernel.lane_dim``, ``scratch_axis``; sized to the
  vector registers by ``register_tile``) is held in vector
  registers while the tile's reduction loops (the whole K panel) run inside it in the innermost level's
  order, the innermost one unrolled, the next part of each packed panel prefetched.  So each output
  element is accumulated in the order of the reduction loops of the whole nest, outer to inner (one
  fused multiply-add per step for floats).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from costmodel.microkernel import Block, block, register_tile, scratch_axis
from costmodel.microkernel import separable as output_separable
from costmodel.packing import pack_box, pack_level, panel_axis, parallel_level, reaches_outside, unrolled_axes
from costmodel.packing import stored_shape as packing_stored_shape
from mappings import Mapping, MappingError, validate
from workloads import LoopNest, resolve_dtype

from .. import TargetError

C_TYPES = {"float32": "float", "float64": "double", "int8": "int8_t", "int32": "int32_t"}
WORD_BYTES = {"float32": 4, "float64": 8, "int8": 1, "int32": 4}


@dataclass(frozen=True)
class LoopVar:
    """One loop of a band: C variable ``var`` runs over [0, factor) and moves ``dim`` by ``step``."""

    var: str
    level: int
    dim: str
    factor: int
    step: int
    spatial: bool
    parallel: bool = False


@dataclass(frozen=True)
class Pack:
    """Input ``tensor`` copied at the start of ``level``'s band into a box of ``box`` words per axis
    (C order); ``guard``: some of the box may fall outside the stored tensor (zero-filled)."""

    tensor: str
    level: int
    box: tuple[int, ...]
    guard: bool
    panel: tuple[int, int] | None = None
    """(axis, width): the box is stored as ceil(box[axis] / width) panels, each holding the other axes in C
    order with ``width`` consecutive positions of ``axis`` innermost (the order the micro-kernel reads:
    a row block of ``mr`` A rows per K step, or ``nv`` x lanes of B per K step), so a micro-kernel
    walks one contiguous panel instead of rows a box apart (which map onto a few cache sets)."""
    unrolled: dict = field(default_factory=dict)
    """{axis: ((dim, tile extent), ...) outer to inner}: axes whose index moves an output pixel with a
    stride (``costmodel.packing.unrolled_axes``), stored as one position per point of those dims' tile,
    so the strided pixel runs unit-stride in the box."""

    @property
    def slots(self) -> list[tuple[int, str | None]]:
        """The pack's origin as the emitted code keeps it: (axis, None), the index at the tile's origin, per
        axis, or (axis, dim), the dim's first value, per dim of an unrolled axis."""
        return [(a, d) for a in range(len(self.box)) for d in ([d for d, _ in self.unrolled[a]]
                                                               if a in self.unrolled else [None])]

    @property
    def words(self) -> int:
        return math.prod(self.box)


@dataclass(frozen=True)
class MicroKernel:
    """The innermost tile: ``extents`` per dim; output blocks of ``mr`` rows along ``i`` (None: one row)
    by ``nv`` vectors of ``lanes`` along ``j``; ``outer`` output dims looped around the blocks,
    ``reduction`` dims looped inside them (innermost level's order)."""

    extents: dict
    j: str | None
    i: str | None
    lanes: int
    nv: int
    mr: int
    outer: tuple[str, ...]
    reduction: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    workload: LoopNest
    mapping: Mapping
    arch: object
    dtypes: dict            # tensor name -> dtype
    shapes: dict            # tensor name -> stored shape (words per axis)
    loops: tuple            # LoopVar of every level but the innermost, outer to inner
    parallel_level: int | None
    packs: dict             # tensor name -> Pack
    guarded: frozenset      # inputs read with bounds checks in the micro-kernel (padding, not packed)
    kernel: MicroKernel
    ragged: dict = field(default_factory=dict)
    """{dim: product of its factors} for a dim whose last kernel tile is cut to the bound
    (``ragged_nest``); empty when the factors multiply to the bounds."""
    out_scratch: int | None = None
    """The output axis the kernel accumulates innermost in a scratch copy of the output, which it copies
    into the output after the nest (``costmodel.microkernel.scratch_axis``: lanes along a strided output
    dim); None: the output is accumulated in place."""

    @property
    def inner_level(self) -> int:
        """The level whose tile is the micro-kernel (``kernel_level``)."""
        return kernel_level(self.mapping, self.arch)

    @property
    def compute_dtype(self) -> str:
        return self.dtypes[self.workload.output.name]

    @property
    def input_shapes(self) -> dict:
        """Tensor name -> the shape a caller passes: ``shapes``, but a subsampled input
        (``workloads.fusion.subsample``) in its stored shape (``CpuKernel`` copies it on each call)."""
        sub = self.workload.op.get("subsampled", {})
        return {n: tuple(sub[n]["shape"]) if n in sub else s for n, s in self.shapes.items()}


def stored_shape(tensor, dims: dict) -> tuple[int, ...]:
    """Words per axis of the stored tensor (``costmodel.packing.stored_shape``: its ``shape``, else the range of
    each index over the loop bounds); TargetError where an index reaches below 0 and the tensor has no shape."""
    if tensor.shape is None:
        for axis, expr in enumerate(tensor.indices):
            lo = expr.value_range(dims)[0]
            if lo < 0:
                raise TargetError(f"index {expr} of '{tensor.name}' reaches {lo} < 0 and the tensor has no shape",
                                  source=f"tensor {tensor.name}", field=f"indices[{axis}]")
    return packing_stored_shape(tensor, dims)


def needs_guard(tensor, dims: dict, shape) -> bool:
    """Whether some index of ``tensor`` over the loop bounds falls outside its stored ``shape`` (padding):
    ``costmodel.packing.reaches_outside``, which prices the same copies."""
    return reaches_outside(tensor, dims, shape)


def _dtypes(workload: LoopNest) -> dict:
    src = f"workload {workload.name}"
    dtypes = {t.name: resolve_dtype(t, "cpu") for t in workload.tensors}
    out = dtypes[workload.output.name]
    if out == "int8":
        raise TargetError("an int8 output would overflow; give the output dtype int32", source=src,
                          field=f"tensors.{workload.output.name}.dtype")
    for t in workload.inputs:
        if out == "int32" and dtypes[t.name] not in ("int8", "int32"):
            raise TargetError(f"input '{t.name}' is {dtypes[t.name]} but the output is int32", source=src,
                              field=f"tensors.{t.name}.dtype")
    return dtypes


def _check_affine(workload: LoopNest) -> None:
    for t in workload.tensors:
        for axis, expr in enumerate(t.indices):
            if any(c < 0 for _, c in expr.terms):
                raise TargetError(f"index {expr} has a negative coefficient, which the CPU back end does not "
                                  "express", source=f"workload {workload.name}", field=f"tensors.{t.name}.indices[{axis}]")


def _band_loops(mapping: Mapping, workload: LoopNest, inner: int) -> tuple[list[LoopVar], int | None]:
    dims = list(workload.dims)
    out = workload.output
    loops = list(mapping.loops(dims))
    remaining = {d: mapping.factor(d) for d in dims}
    steps = []
    for lp in loops:
        remaining[lp.dim] //= lp.factor
        steps.append(remaining[lp.dim])
    par_level = parallel_level(mapping, workload, inner)
    result = []
    for n, (lp, step) in enumerate(zip(loops, steps)):
        if lp.level >= inner:
            continue
        parallel = lp.spatial and lp.level == par_level and output_separable(lp.dim, out, workload.dims)
        result.append(LoopVar(f"v{n}_{dims.index(lp.dim)}", lp.level, lp.dim, lp.factor, step, lp.spatial, parallel))
    # in the parallel level the separable spatial loops go first, so that they collapse into one omp for
    if par_level is not None:
        at = [k for k, lv in enumerate(result) if lv.level == par_level and lv.spatial]
        ordered = sorted((result[k] for k in at), key=lambda lv: not lv.parallel)
        for k, lv in zip(at, ordered):
            result[k] = lv
    return result, par_level


def _packs(mapping, workload, arch, shapes, inner) -> dict:
    packs = {}
    for t in workload.inputs:
        level = pack_level(mapping, workload, arch, t, inner)
        if level is None:
            continue
        box = pack_box(mapping, workload, t, level)
        ext = mapping.tile_extents(level, workload.dims)
        unrolled = {a: tuple((d, ext[d]) for d in dims) for a, dims in unrolled_axes(t, workload).items()}
        assert unrolled or math.prod(box) >= t.tile_words(ext)
        packs[t.name] = Pack(t.name, level, box, needs_guard(t, workload.dims, shapes[t.name]), unrolled=unrolled)
    return packs


def _micro_kernel(mapping, workload, inner, vector_bytes, registers, compute_bytes, scalar) -> MicroKernel:
    dims = list(workload.dims)
    out = workload.output
    ext = mapping.tile_extents(inner, dims)
    in_order = []
    for lm in mapping.levels[inner:]:  # the kernel level's loops, then a register level's below it
        in_order += list(lm.loop_order(dims)) + [d for d in dims if lm.spatial_factor(d) > 1]
    order = list(dict.fromkeys(in_order))
    blk = block(workload, ext, max(1, vector_bytes // compute_bytes), registers, scalar)
    if blk.j is None and out.dims:
        raise TargetError("the output has no dimension that separates its elements",
                          source=f"workload {workload.name}", field=f"tensors.{out.name}.indices")
    if blk.j is None:  # a scalar output (a full reduction): one accumulator
        return MicroKernel(ext, None, None, 1, 1, 1, (), tuple(d for d in order if ext[d] > 1))
    outer = tuple(d for d in dims if d in out.dims and d not in (blk.i, blk.j) and ext[d] > 1)
    reduction = tuple(d for d in order if d not in out.dims and ext[d] > 1)
    return MicroKernel(ext, blk.j, blk.i, blk.lanes, blk.nv, blk.mr, outer, reduction)


def make_plan(workload: LoopNest, mapping: Mapping, arch, *, vector_bytes: int = 32, registers: int = 16,
              scalar: bool = False) -> Plan:
    """Check that the CPU back end can run ``mapping`` of ``workload`` on ``arch`` and decide how.

    ``vector_bytes``/``registers``: the SIMD register width and count (``targets.cpu.build.isa``);
    ``scalar``: no vectors (lanes = 1).  Raises MappingError for an invalid mapping, TargetError for what
    the back end does not express (negative coefficients, sparse tensors, unsupported number types).
    """
    tiles = ragged_nest(workload, mapping, arch)
    validate(mapping, tiles, arch)
    _check_affine(workload)
    sparse = [t.name for t in workload.tensors if t.density < 1.0]
    if sparse:
        raise TargetError(f"tensors {sparse} are sparse; the dense code generator takes dense nests "
                          "(CSR SpMM and SDDMM go through targets.cpu.sparse)", source=f"workload {workload.name}",
                          field="density")
    dtypes = _dtypes(workload)
    shapes = {t.name: stored_shape(t, workload.dims) for t in workload.tensors}
    out = workload.output
    if needs_guard(out, workload.dims, shapes[out.name]):
        raise TargetError("the output's indices leave its stored shape", source=f"workload {workload.name}",
                          field=f"tensors.{out.name}.shape")
    inner = kernel_level(mapping, arch)
    loops, par_level = _band_loops(mapping, tiles, inner)
    packs = _packs(mapping, tiles, arch, shapes, inner)
    # a ragged tile's kernel reads and writes inside the stored tensors: only padding needs guards there
    guarded = frozenset(t.name for t in workload.inputs
                        if t.name not in packs and needs_guard(t, workload.dims, shapes[t.name]))
    kernel = _micro_kernel(mapping, tiles, inner, vector_bytes, registers, WORD_BYTES[dtypes[out.name]],
                           scalar or bool(guarded))
    packs = {name: _with_panel(pk, workload.tensor(name), kernel, tiles.dims) for name, pk in packs.items()}
    ragged = {d: b for d, b in tiles.dims.items() if b != workload.dims[d]}
    scratch = scratch_axis(tiles, Block(kernel.j, kernel.i, kernel.lanes, kernel.mr, kernel.nv))
    return Plan(workload, mapping, arch, dtypes, shapes, tuple(loops), par_level, packs, guarded, kernel, ragged,
                scratch)


def kernel_nest(workload: LoopNest) -> LoopNest:
    """The nest the CPU code generator runs for ``workload``: its dims fused where the memory cannot tell
    them apart (``workloads.fusion.fuse_all``: a 1x1 convolution's output rows and columns become one
    row of pixels, which fills the vectors), else ``workload`` itself.  Same tensors, same memory, same
    order of elements; the arrays are the original ones reshaped (``Plan.shapes``).  Where a strided
    input keeps the pixels apart and its strided copy lets them fuse (a 1x1 convolution of stride 2:
    ``workloads.fusion.subsample``), the nest reads that copy, which ``CpuKernel`` makes on each call
    from the stored array (``Plan.input_shapes``)."""
    from workloads.fusion import fuse_all, subsample

    fused, strided = fuse_all(workload), subsample(workload)
    if strided is not workload:
        copied = fuse_all(strided)
        if copied is not strided:  # the copy's pixels fuse
            return copied
    return fused


def ragged_nest(workload: LoopNest, mapping: Mapping, arch) -> LoopNest:
    """The nest whose tiles ``mapping`` states: ``workload`` itself, or, where the factors of one dim
    multiply to more than its bound (a *ragged* dim: ``cosa.mip.ragged``), ``workload`` with that dim's
    bound raised to their product.  The code then runs the last kernel tile of that dim cut to the
    bound (``Plan.ragged``), so only the last one may reach past it: the product exceeds the bound by
    less than the kernel tile's extent of the dim.  Raises MappingError otherwise."""
    over = {d: mapping.factor(d) for d in workload.dims if mapping.factor(d) > workload.dims[d]}
    if not over:
        return workload
    (d, product), *more = over.items()
    src = "mapping"
    if more:
        raise MappingError(f"the factors of {sorted(over)} multiply past their bounds; only one dim may have a "
                           "ragged last tile", source=src, field="levels")
    extent = mapping.tile_extents(kernel_level(mapping, arch), [d])[d]
    if product - workload.dims[d] >= extent:
        raise MappingError(f"the factors of {d} multiply to {product}, {product - workload.dims[d]} past its bound "
                           f"{workload.dims[d]}: only the last kernel tile ({extent} of {d}) may be ragged, and "
                           "it would be empty", source=src, field=f"factors.{d}")
    return workload.with_dims(**over)


def _with_panel(pack: Pack, tensor, kernel: MicroKernel, bounds: dict) -> Pack:
    """``pack`` stored as micro-kernel panels (``Pack.panel``) where ``costmodel.packing.panel_axis`` says so."""
    from dataclasses import replace

    panel = panel_axis(tensor, kernel, kernel.extents, pack.box, bounds)
    return pack if panel is None else replace(pack, panel=panel)


REGISTER_LEVEL = "Registers"
"""Name of the level ``arch_for(..., registers=...)`` adds below the innermost cache: the accumulators."""


def register_level(arch, registers: int, vector_bytes: int, row_words: int | None = None):
    """``arch`` with the micro-kernel's register file as its innermost level: ``registers`` vector registers
    of ``vector_bytes``, all but three (the B vectors and a broadcast of the largest blocks of
    ``register_tile``) holding output accumulators, so the level holds outputs only and takes over the
    innermost cache's fan-out to the SIMD lanes; the innermost cache then holds the input panels only (the
    kernel's accumulators never live there: it loads an output block once, runs the whole K panel with it
    in registers and stores it).  An arch whose innermost level already holds outputs only is returned as
    it is.  ``row_words``: the bound of the dim the lanes run along; a block row never spans more vectors
    than it fills (a 14-wide output row is one vector, not four; a 49-wide one four, the last partial)."""
    from dataclasses import replace

    from costmodel import Level

    levels = list(arch.levels)
    last = levels[-1]
    if last.name == REGISTER_LEVEL or frozenset(last.holds) == {"output"} or len(levels) < 2:
        return arch
    lanes = last.fanout
    # the vectors of one register block's row: the shape of register_tile for a large tile
    nv = register_tile(60, 12 * lanes, lanes, registers)[1] if lanes > 1 else 1
    if row_words is not None:
        nv = max(1, min(nv, -(-row_words // lanes)))
    regs = Level(REGISTER_LEVEL, max(1, registers - 3) * vector_bytes, frozenset({"output"}),
                 fanout=lanes * nv, spatial_axes=())
    levels[-1] = replace(last, holds=frozenset(last.holds) - {"output"}, fanout=1, spatial_axes=())
    # the fan-out now counts nv vectors of lanes, issued one vector per FMA: the same peak; the cost
    # model counts the micro-kernel's issue cycles from the core's facts (costmodel.microkernel)
    core = {"lanes": lanes, "registers": registers, "fma_per_cycle": float(arch.params.get("fma_per_cycle", 1)),
            "fma_chains": int(arch.params.get("fma_chains", 4)),
            "loads_per_cycle": float(arch.params.get("loads_per_cycle", 1)),
            "pack_cycles_per_word": float(arch.params.get("pack_cycles_per_word", 0.0))}
    return replace(arch, levels=tuple(levels) + (regs,), macs_per_cycle=arch.macs_per_cycle / nv,
                   params={**arch.params, "micro_kernel": core})


def _streamed_operands(workload: LoopNest, arch):
    """Below a register level: the innermost cache holds only the inputs the micro-kernel loads as vectors
    (those indexed by the output's contiguous dim alone, B of a GEMM), which every row block of a tile
    reuses, in half its capacity; the broadcast operands (A) stream from the next cache, ``mr`` words per K step,
    as a BLAS's A panel does, so they do not take the room a long K panel of B needs."""
    from dataclasses import replace

    last = workload.output.indices[-1] if workload.output.indices else None
    if last is None or len(last.terms) != 1:
        return arch
    j = last.dims[0]
    vector_roles = {t.role for t in workload.inputs if j in t.dims}
    broadcast_roles = {t.role for t in workload.inputs if j not in t.dims}
    if not vector_roles or vector_roles & broadcast_roles:
        return arch
    # only a vector operand indexed by j alone is a packed panel (Pack.panel); a sliding window along j
    # (a convolution's input row) is not, and its broadcast operand (the weights, many times the volume
    # of a GEMM's A panel per block) would stream through the cache and evict it: then the cache holds
    # both (measured on a 3x3 convolution: 70 GFLOP/s streamed, 84 held)
    for t in workload.inputs:
        live = [tuple((d, c) for d, c in e.terms if workload.dims[d] > 1) for e in t.indices if j in e.dims]
        if j in t.dims and live != [((j, 1),)]:
            return arch
    levels = list(arch.levels)
    cache = levels[-2]
    # the panel gets half the cache: the other half takes the streamed A panel, the output block's rows
    # and the lines prefetched ahead (a panel that fills the cache evicts them all)
    levels[-2] = replace(cache, holds=frozenset(cache.holds) - broadcast_roles,
                         capacity_bytes=None if cache.capacity_bytes is None else cache.capacity_bytes // 2)
    return replace(arch, levels=tuple(levels))


def kernel_level(mapping: Mapping, arch) -> int:
    """The level whose tile is the micro-kernel: the innermost one, or the one above it when the innermost
    holds outputs only (a register level, ``register_level``): then the micro-kernel runs that level's
    loops too, with its accumulators in registers across them."""
    inner = len(mapping.levels) - 1
    holds = frozenset(arch.levels[inner].holds)
    return inner - 1 if inner > 0 and holds == {"output"} else inner


def arch_for(workload: LoopNest, arch, registers: tuple[int, int] | None = None):
    """``arch`` with the fan-outs the CPU code generator parallelises well stated as spatial axes, for
    schedulers that read them: the cores (the fan-out of the outermost level that has one, below DRAM)
    take dims that separate the output (``output_separable``: no two threads add into one element),
    the SIMD lanes (the innermost level's fan-out) only the output's contiguous dim.  Other fan-outs
    and an arch that already has axes are left as they are.  ``registers`` = (count, bytes each): the
    register file is added as the innermost level first (``register_level``), so a scheduler sizes the
    innermost cache's tile for the input panels alone."""
    from dataclasses import replace

    out = workload.output
    if registers is not None:
        last = out.indices[-1] if out.indices else None
        row = workload.dims[last.dims[0]] if last is not None and len(last.terms) == 1 else None
        arch = register_level(arch, *registers, row_words=row)
        arch = _streamed_operands(workload, arch)
    levels = list(arch.levels)
    separable = frozenset(d for d in workload.dims if d in out.dims and output_separable(d, out, workload.dims))
    last = out.indices[-1] if out.indices else None
    contiguous = frozenset(last.dims) if last is not None and len(last.terms) == 1 else separable
    inner = len(levels) - 1
    cores = next((k for k in range(1, inner) if levels[k].fanout > 1), None)
    for k, dims in ((cores, separable), (inner, contiguous)):
        if k is None or levels[k].fanout <= 1 or levels[k].spatial_axes or not dims:
            continue
        from costmodel import SpatialAxis

        axis = SpatialAxis("cores" if k != inner else "lanes", levels[k].fanout, dims=dims)
        levels[k] = replace(levels[k], spatial_axes=(axis,))
    return replace(arch, levels=tuple(levels))
