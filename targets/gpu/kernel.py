"""One GPU kernel description from a mapping on a ``gpu`` arch; ``printers`` writes it as CUDA C or OpenCL C.

The arch has four levels (``costmodel.preset("gpu")``): DRAM, L2 (fans out to
thread blocks), Shared (per block; fans out to threads), Registers (per
thread).  The mapping's loop nest becomes, in one kernel:

* grid: one block per combination of the L2 level's spatial factors, block:
  one thread per combination of the Shared level's spatial factors (both
  one-dimensional, decoded mixed-radix in the mapping's dim order);
* loop bands: every block runs the DRAM, L2, Shared and Registers temporal
  loops in the mapping's orders (outer to inner); DRAM and L2 are
  hardware-managed, so their tiles are loop bands only;
* shared-memory tiles: a tensor the mapping keeps at Shared is staged by the
  whole block (barrier, cooperative copy, barrier) right inside the innermost
  DRAM/L2 loop that indexes it, so loops inside it reuse the tile, exactly
  when the cost model counts a refill;
* register tiles: a tensor kept at Registers is copied per thread inside the
  innermost DRAM/L2/Shared loop that indexes it; the output always
  accumulates in a per-thread register tile (the Registers level's extents);
* output: tiles start at zero and are added to the next outer holder when
  they leave (register tile -> shared tile or global, shared tile -> global);
  the host zeroes the output first.  Threads that differ only in reduction
  dims add their partial sums one reduction rank after another (a barrier
  between ranks); blocks that differ in a reduction dim add with atomics.

Accumulation order of an output element (fp results differ from NumPy's by
rounding only): each thread sums its products in the mapping's loop order
into its register tile; register tiles are added to the shared tile (or
global memory) each time they leave, in loop order and, across threads, by
increasing reduction rank; shared tiles are added to global memory each time
they leave; across blocks (a reduction dim on the grid) in atomic, unordered
fashion.

Tile sizes and halos come from ``targets.gpu.layout`` (``workloads.footprint``'s
``stored_axis``), loop strides from ``costmodel.tiling.nest_loops``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from costmodel.tiling import nest_loops
from mappings import format_loopnest, validate
from workloads.dtypes import resolve_dtype
from workloads.footprint import group_dims

from .errors import GpuError
from .layout import Lin, array_shape, axis_in_range, global_index, lin_sum, tile_layout

SHARED, REGISTERS = 2, 3


# --- the description -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Loop:
    """``for (int var = 0; var < count; ++var)``; ``coop``: the block's threads share the iterations
    (``var = tid; var < count; var += threads``); ``unroll``: a loop over a register tile, unrolled so that
    the tile's indices are constants (the tile then lives in registers)."""

    var: str
    count: int
    body: tuple
    coop: bool = False
    unroll: bool = False


@dataclass(frozen=True)
class Let:
    """``const int var = expr;``"""

    var: str
    expr: str


@dataclass(frozen=True)
class Store:
    """``array[index] op value`` with op ``=``, ``+=`` or ``atomic+=``."""

    array: str
    index: str
    value: str
    op: str = "="


@dataclass(frozen=True)
class If:
    cond: str
    body: tuple


@dataclass(frozen=True)
class Barrier:
    """All threads of the block wait; shared and global writes before it are visible after it."""


@dataclass(frozen=True)
class Comment:
    text: str


@dataclass(frozen=True)
class Param:
    """A kernel argument: one tensor in global memory (row-major, ``shape``)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    output: bool

    @property
    def words(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Array:
    """A tile buffer: ``space`` is ``shared`` (one per block) or ``register`` (one per thread)."""

    name: str
    dtype: str
    words: int
    space: str


@dataclass(frozen=True)
class KernelDesc:
    """The kernel both printers write: launch ``blocks`` x ``threads`` (1-D), ``params`` in tensor order.
    ``atomic``: blocks add to the output atomically; ``ranks``: threads per output element (added in turn)."""

    name: str
    params: tuple[Param, ...]
    arrays: tuple[Array, ...]
    blocks: int
    threads: int
    body: tuple
    acc_dtype: str
    atomic: bool
    ranks: int = 1
    notes: tuple[str, ...] = ()
    workload: object = field(default=None, compare=False, repr=False)
    mapping: object = field(default=None, compare=False, repr=False)

    @property
    def shared_bytes(self) -> int:
        return sum(a.words * DTYPE_BYTES[a.dtype] for a in self.arrays if a.space == "shared")


DTYPE_BYTES = {"float32": 4, "float64": 8, "int8": 1, "int32": 4}


# --- checks ------------------------------------------------------------------------------------------

def check_arch(arch) -> None:
    """A gpu arch: DRAM, L2 (holds every tensor; block fan-out), Shared (thread fan-out), Registers (no fan-out)."""
    src = f"arch {arch.name}"
    fan = [lv.fanout for lv in arch.levels]
    if len(arch.levels) != 4 or fan[0] != 1 or fan[3] != 1 or len(arch.levels[1].holds) != 3:
        raise GpuError("the gpu target needs 4 levels: DRAM, L2 (fan-out = blocks), shared memory (fan-out = "
                       f"threads), registers; got {[f'{lv.name} x{lv.fanout}' for lv in arch.levels]} "
                       "(use --arch gpu or gpu-h200)", source=src, field="levels")


def number_types(workload) -> tuple[dict[str, str], str]:
    """Per tensor its number type on the gpu target, and the accumulator type.

    Floats: every tensor float32, or every tensor float64.  Integers: int8 or
    int32 operands into an int32 output (an int8 output is widened to int32).
    """
    types = {t.name: resolve_dtype(t, "gpu") for t in workload.tensors}
    out = workload.output.name
    floats = {types[t] for t in types if types[t].startswith("float")}
    src = f"workload {workload.name}"
    if floats:
        if len(floats) > 1 or len(floats) != len(set(types.values())):
            raise GpuError(f"mixed number types {types}; the gpu target takes all float32, all float64, or int8/"
                           "int32 operands into an int32 output", source=src, field="dtype")
        return types, floats.pop()
    types[out] = "int32"
    return types, "int32"


def _check_output(workload) -> None:
    """Each output element is written by one thread of one block per tile: the output index must be one-to-one
    on the dims that index it (every axis a mixed-radix combination of its own dims)."""
    t = workload.output
    for axis, (expr, extent) in enumerate(zip(t.indices, array_shape(t, workload.dims))):
        if not axis_in_range(expr, workload.dims, extent):
            raise GpuError(f"output index '{expr}' leaves the stored extent {extent}", source=f"workload {workload.name}",
                           field=f"tensors.{t.name}.indices[{axis}]")
    seen = set()
    for axis, expr in enumerate(t.indices):
        span = 0
        for dim, coef in sorted(expr.terms, key=lambda dc: abs(dc[1])):
            if workload.dims[dim] == 1:
                continue
            if dim in seen or abs(coef) <= span:
                raise GpuError(f"output index '{expr}' is not one-to-one on its dims; the gpu target writes each "
                               "output element from one thread", source=f"workload {workload.name}",
                               field=f"tensors.{t.name}.indices[{axis}]")
            seen.add(dim)
            span += abs(coef) * (workload.dims[dim] - 1)


def _check_sizes(workload) -> None:
    for t in workload.tensors:
        words = math.prod(array_shape(t, workload.dims))
        if words >= 2 ** 31:
            raise GpuError(f"{words:,} words do not fit the kernels' 32-bit indices", source=f"workload {workload.name}",
                           field=f"tensors.{t.name}")
    if not workload.inputs:
        raise GpuError("a nest without input tensors has nothing to multiply", source=f"workload {workload.name}",
                       field="tensors")


def ident(name: str, prefix: str) -> str:
    """``prefix`` + ``name`` made a C identifier (prefixed: no clash with C keywords or the kernel's locals)."""
    return prefix + re.sub(r"\W", "_", str(name))


def kernel_name(workload) -> str:
    return ident(workload.name, "cosa_")


# --- building ---------------------------------------------------------------------------------------

class _Builder:
    def __init__(self, workload, arch, mapping):
        self.w, self.arch, self.m = workload, arch, mapping
        self.dims = dict(workload.dims)
        self.groups = group_dims(workload)
        self.types, self.acc = number_types(workload)
        self.loops = nest_loops(mapping, list(self.dims))
        self.var = {lp: f"{'s' if lp.spatial else 't'}{lp.level}_{lp.dim}" for lp in self.loops}
        self.temporal = [lp for lp in self.loops if not lp.spatial]
        self.out = workload.output
        self.names = {t.name: ident(t.name, "g_") for t in workload.tensors}
        self.block_loops = [lp for lp in self.loops if lp.spatial and lp.level == 1]
        self.thread_loops = [lp for lp in self.loops if lp.spatial and lp.level == 2]
        self.blocks = math.prod(lp.factor for lp in self.block_loops)
        self.threads = math.prod(lp.factor for lp in self.thread_loops)
        self.block_reduce = any(lp.dim not in self.out.dims for lp in self.block_loops)
        self.rank_loops = [lp for lp in self.thread_loops if lp.dim not in self.out.dims]
        self.ranks = math.prod(lp.factor for lp in self.rank_loops)
        self.layout = {}
        self.point = {}
        for level in (SHARED, REGISTERS):
            extents = mapping.tile_extents(level, self.dims)
            for t in workload.tensors:
                if mapping.stores(level, t, arch) or (level == REGISTERS and t.is_output):
                    self.layout[level, t.name] = tile_layout(t, extents, self.groups, self.dims)
                    outer = [j for j, lp in enumerate(self.temporal) if lp.level < level and lp.dim in t.dims]
                    self.point[level, t.name] = max(outer, default=-1)

    # positions ------------------------------------------------------------------------------------
    def pos(self, lo: int = 0, hi: int = 99) -> dict[str, Lin]:
        """Per dim, the sum of stride * var over the loops with lo <= level < hi."""
        out = {d: Lin() for d in self.dims}
        for lp in self.loops:
            if lo <= lp.level < hi:
                out[lp.dim] = out[lp.dim] + Lin.of(self.var[lp], lp.stride)
        return out

    def box(self, level: int, tensor, prefix: str):
        """Loop variables over the level's tile extents of ``tensor``'s dims: (loc per dim, loop list)."""
        extents = self.m.tile_extents(level, self.dims)
        loc = {d: Lin() for d in self.dims}
        loops = []
        for d in self.dims:
            if d in tensor.dims and extents[d] > 1:
                loc[d] = Lin.of(f"{prefix}_{d}")
                loops.append((f"{prefix}_{d}", extents[d]))
        return loc, loops

    @staticmethod
    def nest(loops, body) -> tuple:
        for var, count in reversed(loops):
            body = (Loop(var, count, tuple(body), unroll=True),)
        return tuple(body)

    def tile_name(self, level: int, t) -> str:
        return f"{'sh' if level == SHARED else 'rg'}_{self.names[t.name]}"

    def guarded(self, guards: list[str], value: str) -> str:
        return f"(({' && '.join(guards)}) ? {value} : 0)" if guards else value

    # reads and fills ----------------------------------------------------------------------------------
    def global_read(self, t, base: dict[str, Lin], loc: dict[str, Lin]) -> str:
        values = [(lin_sum([base[d].scale(c) + loc[d].scale(c) for d, c in e.terms]) + e.offset).c()
                  for e in t.indices]
        index, guards = global_index(t, values, self.dims)
        return self.guarded(guards, f"{self.names[t.name]}[{index}]")

    def tile_read(self, level: int, t, base: dict[str, Lin], loc: dict[str, Lin]) -> str:
        lay = self.layout[level, t.name]
        return self.guarded(lay.guard(base, loc, self.dims), f"{self.tile_name(level, t)}[{lay.index(base, loc).c()}]")

    def outside_registers(self, t, base3: dict[str, Lin], loc3: dict[str, Lin]) -> str:
        """Read of ``t`` at positions base3 + loc3 (``loc3`` local to the register tile) from its shared tile,
        or from global memory when it bypasses shared memory."""
        if (SHARED, t.name) in self.layout:
            b2, l2 = self.pos(0, SHARED), {d: self.pos(SHARED, REGISTERS)[d] + loc3[d] for d in self.dims}
            return self.tile_read(SHARED, t, b2, l2)
        return self.global_read(t, base3, loc3)

    def fill_from_global(self, level: int, t) -> tuple:
        """Copy the tile of ``t`` at ``level`` from global memory, entry by entry (guarded: padding is 0)."""
        lay = self.layout[level, t.name]
        base = self.pos(0, level)
        values = []
        for k, (axis, stride) in enumerate(zip(lay.axes, lay.strides)):
            entry = f"i / {stride}" if stride > 1 else "i"
            if k > 0:
                entry += f" % {axis.span}"
            values.append(axis.value_of_entry(entry, base))
        index, guards = global_index(t, values, self.dims)
        store = Store(self.tile_name(level, t), "i", self.guarded(guards, f"{self.names[t.name]}[{index}]"))
        return (Loop("i", lay.words, (store,), coop=level == SHARED, unroll=level == REGISTERS),)

    def fill_registers_from_shared(self, t) -> tuple:
        loc, loops = self.box(REGISTERS, t, "u")
        base3 = self.pos(0, REGISTERS)
        lay = self.layout[REGISTERS, t.name]
        store = Store(self.tile_name(REGISTERS, t), lay.index(base3, loc).c(), self.outside_registers(t, base3, loc))
        guards = lay.guard(base3, loc, self.dims)  # a whole-axis tile skips the padding positions
        return self.nest(loops, [If(" && ".join(guards), (store,)) if guards else store])

    def zero(self, level: int, t) -> tuple:
        lay = self.layout[level, t.name]
        return (Loop("i", lay.words, (Store(self.tile_name(level, t), "i", "0"),), coop=level == SHARED,
                     unroll=level == REGISTERS),)

    # output write-backs ----------------------------------------------------------------------------------
    def write_global(self, level: int, loc: dict[str, Lin], value: str) -> Store:
        t = self.out
        base = self.pos(0, level)
        values = [(lin_sum([base[d].scale(c) + loc[d].scale(c) for d, c in e.terms]) + e.offset).c()
                  for e in t.indices]
        index, _ = global_index(t, values, self.dims)  # in range: _check_output
        return Store(self.names[t.name], index, value, "atomic+=" if self.block_reduce else "+=")

    def writeback_registers(self) -> tuple:
        t = self.out
        loc, loops = self.box(REGISTERS, t, "u")
        base3 = self.pos(0, REGISTERS)
        value = self.tile_read(REGISTERS, t, base3, loc)
        if (SHARED, t.name) in self.layout:
            b2, l2 = self.pos(0, SHARED), {d: self.pos(SHARED, REGISTERS)[d] + loc[d] for d in self.dims}
            lay = self.layout[SHARED, t.name]
            store, parent = Store(self.tile_name(SHARED, t), lay.index(b2, l2).c(), value, "+="), "shared tile"
        else:
            store, parent = self.write_global(REGISTERS, loc, value), "global memory"
        body = self.nest(loops, [store])
        if self.ranks == 1 or store.op == "atomic+=":
            return (Comment(f"{t.name}: register tile -> {parent}"),) + body
        rank = Lin()
        radix = 1
        for lp in reversed(self.rank_loops):
            rank = rank + Lin.of(self.var[lp], radix)
            radix *= lp.factor
        return (Comment(f"{t.name}: register tiles -> parent, one reduction rank of {self.ranks} at a time"),
                Loop("rank", self.ranks, (If(f"{rank.c()} == rank", body), Barrier())))

    def writeback_shared(self) -> tuple:
        t = self.out
        lay = self.layout[SHARED, t.name]
        extents = self.m.tile_extents(SHARED, self.dims)
        dims = [d for d in self.dims if d in t.dims and extents[d] > 1]
        loc = {d: Lin() for d in self.dims}
        radix = 1
        lets = []
        for d in reversed(dims):
            lets.append(Let(f"v_{d}", f"i / {radix} % {extents[d]}" if radix > 1 else f"i % {extents[d]}"))
            loc[d] = Lin.of(f"v_{d}")
            radix *= extents[d]
        value = f"{self.tile_name(SHARED, t)}[{lay.index(self.pos(0, SHARED), loc).c()}]"
        store = self.write_global(SHARED, loc, value)
        return (Comment(f"{t.name}: shared tile -> global memory"), Barrier(),
                Loop("i", radix, tuple(reversed(lets)) + (store,), coop=True))

    # the nest -------------------------------------------------------------------------------------------
    def opens(self, j: int) -> list:
        out = []
        shared = [t for t in self.w.tensors if self.point.get((SHARED, t.name)) == j]
        if shared:
            out += [Comment(f"stage {', '.join(t.name for t in shared)} in shared memory"), Barrier()]
            for t in shared:
                out += self.zero(SHARED, t) if t.is_output else self.fill_from_global(SHARED, t)
            out.append(Barrier())
        for t in self.w.tensors:
            if self.point.get((REGISTERS, t.name)) != j:
                continue
            if t.is_output:
                out += self.zero(REGISTERS, t)
            elif (SHARED, t.name) in self.layout:
                out += self.fill_registers_from_shared(t)
            else:
                out += self.fill_from_global(REGISTERS, t)
        return out

    def closes(self, j: int) -> list:
        out = []
        if self.point[REGISTERS, self.out.name] == j:
            out += self.writeback_registers()
        if self.point.get((SHARED, self.out.name)) == j:
            out += self.writeback_shared()
        return out

    def mac(self) -> tuple:
        cast = f"({C_ACC[self.acc]})"
        factors = []
        loc3, base3 = self.pos(REGISTERS), self.pos(0, REGISTERS)
        for t in self.w.inputs:
            if (REGISTERS, t.name) in self.layout:
                read = self.tile_read(REGISTERS, t, base3, loc3)
            else:
                read = self.outside_registers(t, base3, loc3)
            factors.append(f"{cast}{read}")
        lay = self.layout[REGISTERS, self.out.name]
        return (Store(self.tile_name(REGISTERS, self.out), lay.index(base3, loc3).c(), " * ".join(factors), "+="),)

    def band(self, j: int) -> tuple:
        if j == len(self.temporal):
            return self.mac()
        lp = self.temporal[j]
        body = self.opens(j) + list(self.band(j + 1)) + self.closes(j)
        return (Loop(self.var[lp], lp.factor, tuple(body), unroll=lp.level == REGISTERS),)

    def coords(self, loops, source: str) -> list:
        out, radix = [], 1
        for lp in reversed(loops):
            expr = f"{source} / {radix} % {lp.factor}" if radix > 1 else f"{source} % {lp.factor}"
            out.append(Let(self.var[lp], expr))
            radix *= lp.factor
        return list(reversed(out))

    def build(self) -> KernelDesc:
        body = self.coords(self.block_loops, "bid") + self.coords(self.thread_loops, "tid")
        body += self.opens(-1) + list(self.band(0)) + self.closes(-1)
        arrays = tuple(Array(self.tile_name(level, t), self.acc if t.is_output else self.types[t.name],
                             self.layout[level, t.name].words, "shared" if level == SHARED else "register")
                       for level in (SHARED, REGISTERS) for t in self.w.tensors if (level, t.name) in self.layout)
        params = tuple(Param(self.names[t.name], self.types[t.name], array_shape(t, self.dims), t.is_output)
                       for t in self.w.tensors)
        notes = (f"grid {self.blocks} block(s) x {self.threads} thread(s); shared memory "
                 f"{sum(a.words * DTYPE_BYTES[a.dtype] for a in arrays if a.space == 'shared')} B per block",
                 "output zeroed by the host; " + ("blocks add partial sums atomically" if self.block_reduce else
                                                   "each output element is owned by one block"),
                 "mapping:") + tuple(format_loopnest(self.m, self.w, self.arch).splitlines())
        return KernelDesc(kernel_name(self.w), params, arrays, self.blocks, self.threads, tuple(body), self.acc,
                          self.block_reduce, self.ranks, notes, self.w, self.m)


C_ACC = {"float32": "float", "float64": "double", "int32": "int"}


def build_kernel(workload, arch, mapping) -> KernelDesc:
    """The kernel description of ``mapping`` (validated against ``workload`` and ``arch``).

    Raises GpuError for an arch that is not a gpu arch, number types or an
    output index the target cannot express; MappingError for an invalid mapping.
    """
    check_arch(arch)
    validate(mapping, workload, arch)
    _check_output(workload)
    _check_sizes(workload)
    return _Builder(workload, arch, mapping).build()
