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


