"""Padded layers: a dim rounded up so that its factors fill the spatial fan-out.

A dim whose prime factors cannot fill an array dimension (N = 2304 = 2^8 * 3^2 on Eyeriss's 168 = 2^3 * 3 * 7
PEs fills at most 144 of them) may be padded to a bound that can (2352 = 168 * 14): the padded iterations run
on idle units, so the layer takes the padded layer's cycles, which can be fewer.  ZigZag's mapper pads this
way by itself; here it is an option of the MIP scheduler (``pad``: the largest fraction a dim may grow by).

``best_fill`` is the most spatial instances any choice of spatial factors can occupy (each slot's product
at most its size, each dim's factors across slots dividing its bound); ``candidates`` ranks single-dim
paddings by that fill times the share of real work (bound / padded bound) and keeps those that beat the
layer as written, best first; ``padded_schedule`` (what ``cosa.scheduler.schedule`` runs with ``pad``)
solves the MIP on the best few and keeps the cheapest in the cost model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from workloads.divisors import divisors


@dataclass(frozen=True)
class Padding:
    """One padded layer: ``dims`` {dim: (bound, padded bound)}, its ``fill`` (``best_fill``) and ``score``
    (fill times the real share of the work)."""

    dims: dict
    fill: int
    score: float


def best_fill(bounds: dict[str, int], slots) -> int:
    """Most spatial instances the dims' divisors can occupy on ``slots`` (``Problem.slots``: a size and the
    dims admitted each): the largest product of per-slot products, each a product of divisors of the admitted
    dims' remaining bounds and at most the slot's size."""
    slots = [s for s in slots if s.size > 1]
    best = [1]

    def per_slot(k: int, remaining: dict[str, int], so_far: int) -> None:
        if k == len(slots):
            best[0] = max(best[0], so_far)
            return
        if so_far * math.prod(s.size for s in slots[k:]) <= best[0]:
            return
        slot = slots[k]
        dims = [d for d in slot.dims if remaining.get(d, 1) > 1]
        seen: set[tuple] = set()

        def within(j: int, product: int, used: dict[str, int]) -> None:
            if j == len(dims):
                key = tuple(sorted(used.items()))
                if key in seen:
                    return
                seen.add(key)
                rest = {d: (b // used[d] if d in used else b) for d, b in remaining.items()}
                per_slot(k + 1, rest, so_far * product)
                return
            d = dims[j]
            for f in divisors(remaining[d]):
                if product * f > slot.size:
                    break
                within(j + 1, product * f, {**used, d: f} if f > 1 else used)

        within(0, 1, {})

    per_slot(0, dict(bounds), 1)
    return best[0]


def candidates(workload, slots, max_growth: float, keep: int = 2) -> list[Padding]:
    """Single-dim paddings of ``workload`` that grow a dim by at most ``max_growth`` (a fraction) to the next
    multiple of a divisor of a spatial slot's size, ranked by ``Padding.score``; only those whose score beats
    the layer as written by more than 1 %, at most ``keep``."""
    slots = [s for s in slots if s.size > 1]
    bounds = dict(workload.dims)
    base = best_fill(bounds, slots)
    steps = sorted({t for s in slots for t in divisors(s.size) if t > 1})
    seen, out = set(), []
    for d, b in bounds.items():
        if not any(d in s.dims for s in slots):
            continue
        for t in steps:
            padded = -(-b // t) * t
            if padded == b or padded > b * (1 + max_growth) or (d, padded) in seen:
                continue
            seen.add((d, padded))
            fill = best_fill({**bounds, d: padded}, slots)
            score = fill * b / padded
            if score > base * 1.01:
                out.append(Padding({d: (b, padded)}, fill, score))
    out.sort(key=lambda p: (-p.score, sorted(p.dims.items())))
    return out[:keep]


def padded_schedule(workload, arch, max_growth: float, keep: int = 2, **mip_options):
    """The MIP's schedule of ``workload`` and of its best ``keep`` paddings (``candidates``), the cheapest in the
    cost model by the objective (ties: the layer as written).  The paddings are solved only when the layer as
    written is bound by compute and a padding's score promises more busy units than its utilization gives
    (a layer bound by a bandwidth gains nothing from more units).  The layers are compared by their schedules
    before the tie-breaking solves (``driver.mip_search``: the main solution, the fewest-compute one, polished),
    and only the winner's ties are then broken: those solves cost more than the rest together and, capped
    within the tie tolerance of the main solution's objective, they are there to cut DRAM bytes and energy,
    not the objective.  A padded winner is a Schedule of the padded
    layer (its ``workload``), with ``extra["padded"]`` {dim: [bound, padded bound]} and its utilization and MACs
    those of the real layer; ``extra["pad_tried"]`` lists every padding solved, its objective value (before
    the tie-breaking solves) and seconds (the Schedule's ``stats`` count every solve's seconds)."""
    import dataclasses

    from ..baselines.objective import objective_value
    from .driver import mip_search
    from .problem import build_problem

    objective = mip_options.get("objective", "latency")
    search = mip_search(workload, arch, **mip_options)
    best = next(search)
    best_value = objective_value(best.cost, objective)
    tried = [{"padded": {}, "objective": best_value, "seconds": best.stats.total_s}]
    found = candidates(workload, build_problem(workload, arch).slots, max_growth, keep)
    busy = best.cost.utilization * arch.total_macs_per_cycle / arch.macs_per_cycle  # units the layer keeps busy
    if best.cost.bound_by != "compute":
        found = []
    build_s = solve_s = 0.0  # the losers' seconds
    won = 0  # the winner's index in tried
    for cand in [c for c in found if c.score > busy * 1.01]:
        layer = workload.with_dims(**{d: p for d, (_, p) in cand.dims.items()})
        other = mip_search(layer, arch, **mip_options)
        got = next(other)
        value = objective_value(got.cost, objective)
        tried.append({"padded": {d: list(v) for d, v in cand.dims.items()}, "objective": value,
                      "seconds": got.stats.total_s})
        if value < best_value * (1 - 1e-9):
            build_s, solve_s = build_s + best.stats.build_s, solve_s + best.stats.solve_s
            best, best_value, search, won = got, value, other, len(tried) - 1
            padded = cand.dims
        else:
            build_s, solve_s = build_s + got.stats.build_s, solve_s + got.stats.solve_s
    final = next(search, None)  # the winner's tie-breaking solves, when it has any
    if final is not None:
        tried[won]["seconds"] = final.stats.total_s
        best = final
    best = dataclasses.replace(best, stats=dataclasses.replace(best.stats, build_s=best.stats.build_s + build_s,
                                                                solve_s=best.stats.solve_s + solve_s))
    if best.workload is workload:  # seconds: every solve's, the paddings' included
        return dataclasses.replace(best, extra={**best.extra, "pad_tried": tried})
    real = workload.macs
    cost = dataclasses.replace(best.cost, macs=real, ideal_cycles=real / arch.total_macs_per_cycle,
                               utilization=real / arch.total_macs_per_cycle / best.cost.cycles)
    return dataclasses.replace(best, cost=cost, extra={**best.extra, "pad_tried": tried,
                                                       "padded": {d: list(v) for d, v in padded.items()}})
