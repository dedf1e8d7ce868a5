"""Where a CPU mapping's inputs are packed, how often, and what the copies cost one core.

The CPU code generator (``targets.cpu.plan``) copies each input's tile into a contiguous private buffer
at the *pack level*: the outermost level below the cores' fan-out (the parallel level: the first level
with a spatial loop over a dim that separates the output) that stores the tensor.  The copy sits at the
top of that level's loop band and runs again only when the tile's origin has moved since the thread's
last copy.  So the copies are a software cost, paid whatever the caches hold: a tile that an LRU cache
still has (``Cost`` counts no fill for it) is copied again when a loop between two of its uses moves it.

Copies per core = the iterations, per core, of the loops above the pack level from the outermost down to
the innermost one whose dim indexes the tensor (loops inside that one leave the origin where it is; a
parallel loop's iterations are shared by the cores).  Words per copy = the tile's box (halo included:
``AffineExpr.extent`` per axis; an axis that moves an output pixel with a stride, ``2*P + R``, is
*unrolled*: one word per point of its dims, ``unrolled_axes``), except that a blocked transpose costs whole
register squares (``transposed_copy_words``).  Cycles = words x ``pack_cycles_per_word``
(``MicroKernelSpec``: what ``cosa arch calibrate cpu`` measures on copies shaped as the generator's, row
and panel copies alike).

A tile stored as micro-kernel *panels* (``panel_axis``: the blocks' rows or vectors contiguous, as a
BLAS packs A and B) is read by the micro-kernel as one sequential stream, which the core's prefetchers
fetch ahead of use: its fills from the outer caches overlap the FMAs (``streamed_inputs``;
``costmodel.evaluate``).  A sliding window's rows, read a row apart, are not.  The copies themselves read
the source, so a packed input's reads from DRAM, whose streams otherwise overlap the FMAs, stall
(``copy_fill_cycles``).  ``bench/cpu_packs.py`` sets both terms beside the copies' measured share of the
kernel's time.  It times a kernel called again and again, whose inputs then stay in the last-level cache:
there the DRAM part over-counts (a 1x1 convolution's 0.8 MB input copied in 9 % of the call, priced at 24 %),
while 9.4 MB of weights copied once (res5a_branch2b) measured 29 % against 29 %.
"""

from __future__ import annotations

import math

from workloads.dtypes import resolve_dtype

from .microkernel import block, kernel_level, lane_stride, separable, spec_of


def parallel_level(mapping, workload, kernel: int) -> int | None:
    """The level whose spatial loops the threads share: the first above the kernel level with a spatial
    loop over an output-separable dim (``microkernel.separable``), or None."""
    out = workload.output
    return next((lp.level for lp in mapping.loops(list(workload.dims))
                 if lp.spatial and lp.level < kernel and separable(lp.dim, out, workload.dims)), None)


def pack_level(mapping, workload, arch, tensor, kernel: int) -> int | None:
    """The level at which ``tensor`` (an input) is packed, or None when no level below the cores stores it."""
    par = parallel_level(mapping, workload, kernel)
    first = 1 if par is None else par + 1
    return next((lv for lv in range(first, kernel + 1) if mapping.stores(lv, tensor, arch)), None)


def unrolled_axes(tensor, workload) -> dict[int, tuple[str, ...]]:
    """{axis: dims, outer to inner} of ``tensor``'s axes that a pack *unrolls*: an axis whose index moves an
    output pixel dim (one that indexes the output alone on an axis) with a stride, ``2*Q`` of a strided 1x1
    convolution or ``2*P + R`` of a strided 3x3 one.  The packed box holds such an axis as one position per
    point of its dims' tile (``R x P`` words for ``2*P + R``: an im2col of that axis), the strided pixel
    dim innermost, so the micro-kernel reads it as unit-stride vectors, not gathers.  Dims of bound 1 have
    no place (their terms are 0)."""
    bounds, out = workload.dims, workload.output
    alone = {e.terms[0][0] for e in out.indices if len(e.terms) == 1}
    found = {}
    for a, e in enumerate(tensor.indices):
        live = [(d, c) for d, c in e.terms if bounds[d] > 1]
        if live and all(c > 0 for _, c in live) and any(c > 1 and d in alone for d, c in live):
            found[a] = tuple(d for d, c in sorted(live, key=lambda dc: (dc[0] in alone and dc[1] > 1, dc[1], dc[0])))
    return found


def pack_box(mapping, workload, tensor, level: int) -> tuple[int, ...]:
    """Words per axis of ``tensor``'s packed tile at ``level``: the range of each index over the tile, or,
    along an unrolled axis (``unrolled_axes``), the product of its dims' tile extents."""
    extents = mapping.tile_extents(level, workload.dims)
    compact = unrolled_axes(tensor, workload)
    return tuple(math.prod(extents[d] for d in compact[a]) if a in compact else expr.extent(extents)
                 for a, expr in enumerate(tensor.indices))


def copies_per_core(mapping, workload, tensor, level: int, kernel: int) -> int:
    """How many times one core copies ``tensor``'s tile at ``level`` (see the module docstring)."""
    dims = list(workload.dims)
    out = workload.output
    par = parallel_level(mapping, workload, kernel)
    # a parallel loop gives each core one of its iterations: it never moves a core's origin
    above = [lp for lp in mapping.loops(dims) if lp.level < level
             and not (lp.spatial and lp.level == par and separable(lp.dim, out, workload.dims))]
    relevant = [k for k, lp in enumerate(above) if lp.dim in tensor.dims]
    return math.prod(lp.factor for lp in above[:relevant[-1] + 1]) if relevant else 1


#: Words per side of the squares a transposing copy moves through the vector registers, per number type,
#: on machines with AVX-512 (``targets.cpu.prelude.transposer``'s ``trp_``); elsewhere it copies word by word.
SQUARE_WORDS = {"float32": 16, "float64": 8}


def stored_shape(tensor, bounds: dict) -> tuple[int, ...]:
    """Words per axis of ``tensor`` as stored: its ``shape``, else each index's range over ``bounds``."""
    if tensor.shape is not None:
        return tuple(tensor.shape)
    return tuple(e.value_range(bounds)[1] + 1 for e in tensor.indices)


def reaches_outside(tensor, bounds: dict, shape) -> bool:
    """Whether some index of ``tensor`` over ``bounds`` falls outside its stored ``shape`` (padding): its
    copies then test each row against the borders (a guarded pack)."""
    for expr, size in zip(tensor.indices, shape):
        lo, hi = expr.value_range(bounds)
        if lo < 0 or hi >= size:
            return True
    return False


def transposed_run(box, shape, axis: int, unrolled, guarded: bool) -> int:
    """How many trailing axes of a panel pack's source (panels along ``axis`` of a ``box`` cut from a tensor
    stored as ``shape``) read as one contiguous run that its panels hold in the same order, so the copy is a
    blocked transpose of rows of that run (0: none, the copy goes word by word): axes after the panel axis,
    none of them ``unrolled`` (``unrolled_axes``), each but the outermost of them whole (box = stored
    extent); never for a ``guarded`` pack."""
    n = len(box)
    if guarded or axis == n - 1 or axis in unrolled:
        return 0
    merged = 0
    while merged < n - 1 - axis and (n - 1 - merged) not in unrolled:
        merged += 1
        if box[n - merged] != shape[n - merged]:
            break
    return merged


def transposed_copy_words(box, axis: int, width: int, merged: int, side: int) -> float:
    """The words one transposing copy of ``box`` (panels ``width`` wide along ``axis``, the last ``merged`` axes
    one contiguous run) costs as if each moved alone.  The copy passes ``side`` rows of the run at a time
    through the registers, and each column it writes costs a whole ``side``-word column however few of the
    rows hold data (the shuffle network runs on all ``side`` registers): a panel of ``width`` rows costs
    ``ceil(width / side) * side`` rows.  A 4-row panel's full 4 x ``side`` blocks take the four-row path and
    cost their own words.  Measured on Zen 4 against the kernels' own counters (``targets.cpu.profile``, the
    150 sampled mappings of ``bench/cpu_rank.py``, ``pack_cycles_per_word`` 0.56): a call writing 16 columns
    took 150-165 cycles with 2, 8 or 16 rows alike (priced 0.56 x 256 = 144), calls of 3-9 columns from 2- to
    8-row panels 13-20 (27-81), a four-row block 25-32 (36); priced by their words, 2-row GEMM A panels cost
    a quarter of the 4.8 cycles per word they took."""
    n = len(box)
    run = math.prod(box[n - merged:])
    others = math.prod(box[a] for a in range(n - merged) if a != axis)
    panels = box[axis] // width
    if width == 4:
        columns = (run // side) * side * 4 + (run % side) * side
    else:
        columns = -(-width // side) * side * run
    return panels * others * columns


def copy_words(workload, mapping, arch, kernel: int, tensor, level: int) -> float:
    """The words one copy of ``tensor``'s tile at ``level`` costs at ``pack_cycles_per_word``: its box's words,
    or, for a blocked transpose on an AVX-512 machine (``transposed_run``), its squares'
    (``transposed_copy_words``)."""
    box = pack_box(mapping, workload, tensor, level)
    words = math.prod(box)
    spec = spec_of(arch)
    side = SQUARE_WORDS.get(resolve_dtype(tensor, "cpu"))
    if spec is None or side is None or not str(arch.params.get("isa", "")).startswith("avx512"):
        return words
    extents = mapping.tile_extents(kernel, workload.dims)
    panel = panel_axis(tensor, block(workload, extents, spec.lanes, spec.registers), extents, box, workload.dims)
    if panel is None:
        return words
    shape = stored_shape(tensor, workload.dims)
    merged = transposed_run(box, shape, panel[0], unrolled_axes(tensor, workload),
                            reaches_outside(tensor, workload.dims, shape))
    return transposed_copy_words(box, panel[0], panel[1], merged, side) if merged else words


def pack_cycles_by_tensor(workload, mapping, arch, kernel: int, per_word: float) -> dict[str, float]:
    """{packed input: cycles one core spends copying it into its packed tiles over the whole nest}: copies
    (``copies_per_core``) x words per copy (``copy_words``) x ``per_word``."""
    out = {}
    for t in workload.inputs:
        level = pack_level(mapping, workload, arch, t, kernel)
        if level is not None:
            words = copy_words(workload, mapping, arch, kernel, t, level)
            out[t.name] = copies_per_core(mapping, workload, t, level, kernel) * words * per_word
    return out


def pack_cycles(workload, mapping, arch, kernel: int, per_word: float) -> float:
    """Cycles one core spends copying its inputs into their packed tiles over the whole nest."""
    return sum(pack_cycles_by_tensor(workload, mapping, arch, kernel, per_word).values())


def copy_fill_cycles(workload, arch, mapping, accesses, kernel: int, only=None,
                     gathered: frozenset = frozenset()) -> dict[str, float]:
    """{level name: cycles} of the packed inputs' reads from the levels whose transfers otherwise overlap
    compute (``double_buffered``: DRAM, which the prefetchers stream while the FMAs run): the kernel reads
    a packed input's source only inside its copies, which run between the FMAs, so those reads stall.
    ``accesses``: ``costmodel.evaluate.access_counts``'s per level; ``only``: these inputs' reads alone;
    ``gathered``: inputs read in place lane by lane (``gathered_inputs``), whose reads are no stream
    either and stall as well."""
    packed = {t.name: t for t in workload.inputs
              if (pack_level(mapping, workload, arch, t, kernel) is not None or t.name in gathered)
              and (only is None or t.name in only)}
    out = {}
    for i, lv in enumerate(arch.levels):
        if not lv.double_buffered:
            continue
        read = sum(a.reads * lv.bytes_per_word(packed[n]) * packed[n].density
                   for n, a in accesses.get(i, {}).items() if n in packed)
        if read:
            out[lv.name] = lv.transfer_cycles(read / arch.instances(i), 0.0)
    return out


def panel_axis(tensor, blk, extents: dict, box: tuple, bounds: dict) -> tuple[int, int] | None:
    """(axis, width) when ``tensor``'s packed ``box`` is stored as panels of the micro-kernel's register
    block ``blk`` (``microkernel.Block``; ``extents``: the kernel tile's), else None.  Panels go along
    ``j`` (width ``nv`` x lanes) for a tensor indexed by ``j`` alone on one axis, else along ``i`` (width
    ``mr``) likewise for a tensor not indexed by ``j`` (one that is, a convolution's input rows, would have
    its vectors gathered a panel width apart: measured 8-10x slower on a 1x1 convolution), where the
    blocks tile the box exactly."""
    for d, width in ((blk.j, blk.nv * blk.lanes), (blk.i, blk.mr)):
        if d is None or width <= 1 or extents[d] % width:
            continue
        if d == blk.i and blk.j in tensor.dims:
            return None  # the kernel loads this tensor as vectors along j: rows panelled along i would gather them
        axes = [a for a, e in enumerate(tensor.indices) if d in e.dims]
        # the axis moves with d alone (other dims on it have bound 1, as a 1x1 convolution's R; with a
        # stride the pack unrolls it, ``unrolled_axes``): then the blocks start on panel boundaries, so
        # no vector straddles two panels
        live = [(d2, c) for d2, c in tensor.indices[axes[0]].terms if bounds[d2] > 1] if len(axes) == 1 else []
        if len(live) != 1 or live[0][0] != d or live[0][1] < 1:
            continue
        return (axes[0], width) if box[axes[0]] % width == 0 else None
    return None


def streamed_inputs(workload, mapping, arch, kernel: int, blk) -> frozenset[str]:
    """The inputs packed as panels of ``blk``: the streams whose cache fills overlap the FMAs."""
    extents = mapping.tile_extents(kernel, workload.dims)
    out = set()
    for t in workload.inputs:
        level = pack_level(mapping, workload, arch, t, kernel)
        if level is not None and panel_axis(t, blk, extents, pack_box(mapping, workload, t, level),
                                            workload.dims) is not None:
            out.add(t.name)
    return frozenset(out)


def gathered_inputs(workload, mapping, arch, kernel: int, blk) -> frozenset[str]:
    """The inputs the micro-kernel reads as vectors along ``blk.j`` whose lanes are not adjacent where it
    reads them: where they are stored (no level below the cores keeps them: no pack;
    ``microkernel.lane_stride``), or in a pack that is no panel along ``j`` (``panel_axis``: the blocks do
    not tile the box) and keeps another axis innermost.  The generator gathers such a vector lane by lane
    (``ldg`` in ``targets.cpu.emit``), so each costs a load per lane (``microkernel.step_cycles``), and the
    lines of one read in place, a row of the stored array apart, are no stream the prefetchers run ahead
    of (``copy_fill_cycles``).  A 3x3 convolution's weights, stored K x C x S x R and read along K, are
    gathered: res5b_branch2b's, kept out of every cache (``factors.bypasses``, lanes 18 KB apart), ran in
    6.8 ms where its packed mapping ran in 1.5 ms; the model priced them at 1.05 ms without these two terms
    (so the scheduler chose them) and at 4.2 ms with them (the packed one: 1.55 ms).  A 7 x 7 1x1
    convolution's weights packed 512 x 64 and read along K in 7 x 3 blocks (48 channels, which do not
    tile 512: no panel) ran at 0.40x NumPy (``bench/cpu_kernels.py --cases res5b_branch2a --threads 1
    --lane-gain 1.1``, Zen 4)."""
    if blk.j is None or blk.lanes <= 1:
        return frozenset()
    extents = mapping.tile_extents(kernel, workload.dims)
    out = set()
    for t in workload.inputs:
        if blk.j not in t.dims:
            continue
        level = pack_level(mapping, workload, arch, t, kernel)
        if level is None:
            if lane_stride(t, blk.j, workload.dims) != 1:
                out.add(t.name)
            continue
        box = pack_box(mapping, workload, t, level)
        if panel_axis(t, blk, extents, box, workload.dims) is not None or \
                any(blk.j in t.indices[a].dims for a in unrolled_axes(t, workload)):
            continue
        if lane_stride(t, blk.j, workload.dims, box) != 1:  # the box is stored in C order
            out.add(t.name)
    return frozenset(out)


def read_once(workload, arch, mapping, tensor) -> bool:
    """Whether a copy of ``tensor`` (an input) would be read once and never again: a plain array (each axis
    at most one dim, unit coefficient, no offset: no window, no padding) and every dim that does not index it
    covered by one register block (``microkernel.block``), so no block and no loop reads a word twice.
    Such a copy cannot pay for itself, and the kernel reads the tensor where it is stored (a 7 x 7 1x1
    convolution's weights: 49 pixels in one 4 x 64 block; a GEMM's B, reread by every row block, is not)."""
    spec = spec_of(arch)
    if spec is None or any(len(e.terms) > 1 or any(c != 1 for _, c in e.terms) or e.offset for e in tensor.indices):
        return False
    kernel = kernel_level(arch)
    blk = block(workload, mapping.tile_extents(kernel, workload.dims), spec.lanes, spec.registers)
    cover = {blk.i: blk.mr, blk.j: blk.nv * blk.lanes}
    return all(n <= cover.get(d, 1) for d, n in workload.dims.items() if d not in tensor.dims)
