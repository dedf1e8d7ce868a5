"""Turning the vendor heuristic's tiles into a Mapping on the gemmini preset (see ``gemmini_default``).

Exact tile extents standing for the vendor's padded ones, and the loop
structure of each library call (matmul WS/OS, conv-as-matmul, conv, grouped
and depthwise conv) on the preset's levels DRAM, Scratchpad, Accumulator,
Registers.
"""

from __future__ import annotations

from mappings import LevelMapping, Mapping
from workloads import LoopNest
from workloads.divisors import divisors, largest_divisor_at_most

from ..schedule import SchedulingError


def tile_extent(bound: int, vendor_extent: int, dim: int, on_array: bool) -> int:
    """The exact tile extent standing for the vendor's (padded) one: a divisor of ``bound``
    that is <= ``vendor_extent``.  For a dim the array unrolls, the one whose largest
    divisor <= DIM is largest (the vendor fills whole DIM-wide blocks), then the
    largest; for the others simply the largest."""
    cap = min(vendor_extent, bound)
    candidates = [e for e in divisors(bound) if e <= cap]
    if on_array:
        return max(candidates, key=lambda e: (largest_divisor_at_most(e, dim), e))
    return max(candidates)


def check_preset(arch) -> None:
    if len(arch.levels) != 4:
        raise SchedulingError(f"expected the gemmini preset's 4 levels (DRAM, Scratchpad, Accumulator, Registers), "
                              f"got {list(arch.level_names)}", source=f"arch {arch.name}", field="levels")


def matmul_mapping(workload: LoopNest, shape, extents: dict[str, int], dim: int,
                    dataflow: str) -> Mapping:
    i, j, k = shape.i, shape.j, shape.k
    bounds = workload.dims
    outer = {d: bounds[d] for d in shape.batch}
    outer.update({d: bounds[d] // extents[d] for d in (i, j, k)})
    dram = LevelMapping(temporal=outer, order=shape.batch + (i, j, k))
    if dataflow == "ws":
        sk = largest_divisor_at_most(extents[k], dim)
        sj = largest_divisor_at_most(extents[j], dim)
        array = LevelMapping(temporal={k: extents[k] // sk, j: extents[j] // sj}, spatial={k: sk, j: sj},
                             order=(j, k))
        regs = LevelMapping(temporal={i: extents[i]}, order=(i,))
    else:
        si = largest_divisor_at_most(extents[i], dim)
        sj = largest_divisor_at_most(extents[j], dim)
        array = LevelMapping(temporal={i: extents[i] // si, j: extents[j] // sj}, spatial={i: si, j: sj},
                             order=(i, j))
        regs = LevelMapping(temporal={k: extents[k]}, order=(k,))
    return Mapping((dram, LevelMapping(), array, regs))


def row_extents(bounds: dict[str, int], rows: int, dims=("P", "Q", "N")) -> dict[str, int]:
    """Exact extents for a tile of ``rows`` rows of the flattened [N, Q, P] image (P fastest): fill P, then
    Q, then N, each with the largest divisor of its bound that fits; an inner dim left partial stops the rest."""
    out, left = {}, rows
    for d in dims:
        e = largest_divisor_at_most(bounds[d], left)
        out[d] = e
        left = left // e if e == bounds[d] else 1
    return out


def pointwise_mapping(workload: LoopNest, extents: dict[str, int], dim: int, dataflow: str) -> Mapping:
    """A 1x1 stride-1 convolution as tiled_matmul_auto's i (N, Q, P), j (K), k (C) walk."""
    b = workload.dims
    dram = LevelMapping(temporal={d: b[d] // extents[d] for d in ("N", "Q", "P", "K", "C")},
                        order=("N", "Q", "P", "K", "C", "S", "R"))
    sk = largest_divisor_at_most(extents["K"], dim)
    if dataflow == "ws":
        sc = largest_divisor_at_most(extents["C"], dim)
        array = LevelMapping(temporal={"C": extents["C"] // sc, "K": extents["K"] // sk}, spatial={"C": sc, "K": sk},
                             order=("K", "C"))
        regs = LevelMapping(temporal={d: extents[d] for d in ("N", "Q", "P")}, order=("N", "Q", "P"))
    else:
        sp = largest_divisor_at_most(extents["P"], dim)
        array = LevelMapping(temporal={"N": extents["N"], "Q": extents["Q"], "P": extents["P"] // sp,
                                       "K": extents["K"] // sk},
                             spatial={"P": sp, "K": sk}, order=("N", "Q", "P", "K"))
        regs = LevelMapping(temporal={"C": extents["C"]}, order=("C",))
    return Mapping((dram, LevelMapping(), array, regs))


CONV_ORDER = ("N", "Q", "P", "K", "S", "R", "C")  # batch, porow, pocol, poch, krow, kcol, kch


def unrollable(arch, workload: LoopNest, dims) -> set:
    """The dims the array level of ``arch`` can unroll (a grouped layer's channel dims, indexed through
    the group, may not be)."""
    axes = tuple(getattr(arch.levels[2], "spatial_axes", ()) or ())
    if not axes:
        return set(dims)
    return {d for d in dims if any(axis.admits(d, workload) for axis in axes)}


def conv_mapping(workload: LoopNest, extents: dict[str, int], dim: int, unroll=("C", "K")) -> Mapping:
    """tiled_conv's walk; a group dim G is walked outermost (one library call per group) or, for a
    depthwise layer, inside the pixel tiles (tiled_conv_dw's channel loop).  Only the dims in ``unroll``
    go on the array."""
    bounds = workload.dims
    order = CONV_ORDER
    if "G" in bounds:
        depthwise = bounds["K"] == 1 and bounds["C"] == 1
        order = ("N", "Q", "P", "G") + CONV_ORDER[3:] if depthwise else ("G",) + CONV_ORDER
        extents = dict(extents, G=1)
    dram = LevelMapping(temporal={d: bounds[d] // extents[d] for d in order}, order=order)
    sc = largest_divisor_at_most(extents["C"], dim) if "C" in unroll else 1
    sk = largest_divisor_at_most(extents["K"], dim) if "K" in unroll else 1
    array = LevelMapping(temporal={"K": extents["K"] // sk, "S": extents["S"], "R": extents["R"],
                                   "C": extents["C"] // sc},
                         spatial={"C": sc, "K": sk}, order=("K", "S", "R", "C"))
    regs = LevelMapping(temporal={d: extents[d] for d in ("N", "Q", "P")}, order=("N", "Q", "P"))
    return Mapping((dram, LevelMapping(), array, regs))




SHRINK_ORDER = {
    # per call kind and overflowing level: the dims whose tile extent shrinks first (the reduction first:
    # fewer operand rows and no extra output traffic, the accumulator tile staying resident)
    "matmul": {"Scratchpad": ("k", "i", "j"), "Accumulator": ("i", "j")},
    "conv": {"Scratchpad": ("C", "P", "Q", "N", "K"), "Accumulator": ("P", "Q", "N", "K")},
}


def fit_extents(workload: LoopNest, arch, extents: dict[str, int], make, shrink: dict, on_array, dim: int):
    """(mapping, extents, shrunk) with ``make(extents)`` valid on ``arch``: where exact divisor tiles overflow
    a level the vendor's padded ones fit (its rows hold whole DIM-wide blocks, ours as wide as the divisor
    allows, so a dim like 1000 = 8 x 125 needs 1.6x the rows), the overflowing level's dims in ``shrink``
    order step down to their next smaller divisor tile until it fits.  ``shrunk``: dim -> (extent before,
    after).  Raises SchedulingError when nothing is left to shrink."""
    from mappings.validate import violations

    extents, shrunk = dict(extents), {}
    while True:
        mapping = make(extents)
        found = violations(mapping, workload, arch)
        capacity = [e for e in found if (e.field or "").endswith(".capacity")]
        if not found or len(capacity) < len(found):
            return mapping, extents, shrunk
        level = capacity[0].field.rsplit(".", 1)[0]
        for d in shrink.get(level, ()):
            smaller = [e for e in divisors(workload.dims[d]) if e < extents[d]]
            if smaller:
                before = extents[d]
                extents[d] = tile_extent(workload.dims[d], before - 1, dim, d in on_array)
                shrunk[d] = (shrunk.get(d, (before,))[0], extents[d])
                break
        else:
            raise SchedulingError(f"the vendor's tiles overflow the {level} and no tile is left to shrink: "
                                  f"{capacity[0]}", source=f"workload {workload.name}", field="mapping")
