"""Smaller first fills, for an arch whose cost model waits for them (``params["fill_before_compute"]``).

Under that option the cost model adds the cycles the first tiles take to arrive before the loops start and
the last output tiles take to leave after them (``costmodel.onload``: ZigZag's onloading and offloading).
The MIP's objective does not see them: it prices the loops only, so it happily fills a large buffer whose
first tile then takes longer than the tile saves (Simba's 128 weight buffers on a BERT GEMM: 88 k cycles
before the first MAC of a 221 k-cycle run).  ``smaller_fills`` looks around the driver's best mapping for
one the cost model ranks better:

* the prime-factor descent of ``factors.polish_factors`` under the exact cost model (a factor moved off the
  filled level shrinks its tile);
* re-solves of the same model with the budget of the level whose fill (or drain) link is the slowest
  capped at half the bytes the current mapping's tiles take there, so the MIP itself picks the loops
  outside the smaller tile, their order and what the other levels hold; repeated from the winner, at most
  ``MAX_RESOLVES`` times, while the cost model ranks each one better;
* the other way (``once_loaded_fills``): a re-solve per input with no temporal loop over its dims above
  the first level below DRAM that stores it, so that level's tile is loaded once in the run.  The cost
  model takes such a tile's bytes out of the loops' transfers into the first fill, where they borrow the
  port's idle cycles (``costmodel.onload``); the MIP prices the loops' transfers only and cannot see that
  (BERT's attention context on Simba: 30,106 cycles with the value matrix B loaded once, as LOMA maps it,
  against the MIP's 30,336).

Every candidate is priced by the cost model and returned for the driver's lexicographic pool, so the
driver's mapping can only improve.  Seconds: each re-solve is one MIP solve (about as long as the main
one, at most ``RESOLVE_LIMIT_S``), the descent milliseconds per cost-model call.
"""

from __future__ import annotations

import dataclasses
import time

from mappings.validate import tile_bytes, violations
from costmodel.onload import fill_and_drain

from ..baselines.objective import objective_value
from .decode import decode
from .factors import polish_factors
from .formulation import build
from .polish import polish_orders
from .solve import solve

MAX_RESOLVES = 3
RESOLVE_LIMIT_S = 2.0
MAX_DESCENT = 200  # cost-model calls of one factor descent
MIN_SHARE = 0.01  # fill and drain under this share of the cycles: nothing to gain


def slowest_link_level(workload, arch, mapping, cost) -> tuple[int | None, float]:
    """(index of the child level of the slowest fill or drain link, its cycles); (None, 0) without one."""
    foot = {arch.level_index(name): per for name, per in cost.footprint_words.items()}
    loops = cost.cycles - cost.fill_cycles - cost.drain_cycles
    edges = fill_and_drain(workload, arch, mapping, foot, loops, cost.transfer_cycles)
    link = max(edges.links, key=lambda x: x.cycles, default=None)
    if link is None or link.cycles <= 0:
        return None, 0.0
    return arch.level_index(link.child), link.cycles


def _resolve(problem, level: int | None, mapping, objective: str, weights, options: dict):
    """The MIP's mapping with level ``level``'s budget capped at half the bytes ``mapping``'s tiles take
    there (``level`` None: the levels that ``refill_needs_room`` halves at their whole capacity), or None (no
    solution in time, or one that does not fit); and the solver seconds."""
    o = options
    arch = problem.arch
    capacity = list(problem.capacity)
    if level is None:
        for i, lv in enumerate(arch.levels):
            if arch.refilled_by_double_buffer(i) and not lv.double_buffered:
                capacity[i] = lv.capacity_bytes
    else:
        need = sum(tile_bytes(mapping, problem.workload, arch, level).values())
        capacity[level] = min(capacity[level] if capacity[level] is not None else need, need / 2)
    if tuple(capacity) == tuple(problem.capacity):
        return None, 0.0
    form = build(dataclasses.replace(problem, capacity=tuple(capacity)), objective, weights)
    limit = min(RESOLVE_LIMIT_S, max(o["deadline"] - time.perf_counter(), 0.05))
    result = solve(form.model, o["solver"], limit, o["mip_gap"], o["seed"], o["src"], size=form.size())
    if not result.has_solution:
        return None, result.solve_s
    got = decode(form)
    return (None if violations(got, problem.workload, problem.arch) else got), result.solve_s


def once_loaded_fills(problem, evaluate, objective: str, weights, options: dict):
    """Per input tensor not loaded once already, the MIP's mapping with no temporal loop over its dims above
    the first level below DRAM that stores it, polished and priced, as (mapping, cost, how, cost-model
    calls); and the solver seconds.  ``options``: as ``smaller_fills``'s, plus ``mapping`` (the driver's best)."""
    from costmodel.onload import once_loaded

    o = options
    workload, arch = problem.workload, problem.arch
    loaded_once = once_loaded(workload, arch, o["mapping"])
    out, solve_s = [], 0.0
    for tensor in workload.tensors:
        chain = [i for i in problem.holders[tensor.name] if i > 0]
        if tensor.is_output or not chain or (tensor.name, chain[0]) in loaded_once:
            continue
        if time.perf_counter() >= o["deadline"]:
            break
        form = build(problem, "latency", weights)
        for (k, d, p), var in form.nT.items():
            if k < chain[0] and d in tensor.dims:
                var.fix(0)
        limit = min(RESOLVE_LIMIT_S, max(o["deadline"] - time.perf_counter(), 0.05))
        result = solve(form.model, o["solver"], limit, o["mip_gap"], o["seed"], o["src"], size=form.size())
        solve_s += result.solve_s
        if not result.has_solution:
            continue
        got = decode(form)
        if violations(got, workload, arch):
            continue
        got, got_cost, n = polish_orders(workload, arch, got, evaluate, objective, cost=evaluate(workload, arch, got),
                                         tolerance=o["tie_tolerance"])
        out.append((got, got_cost, f"fill: {tensor.name} loaded once into {arch.levels[chain[0]].name}", n + 1))
    return out, solve_s


def smaller_fills(problem, mapping, cost, evaluate, objective: str, weights, options: dict):
    """Candidates around ``mapping`` (the driver's best, ``cost`` its cost) with smaller fills, each as
    (mapping, cost, how, cost-model calls); and the solver seconds spent.  ``options``: solver, mip_gap,
    seed, src, deadline, tie_tolerance."""
    workload, arch = problem.workload, problem.arch
    out, solve_s = [], 0.0
    if cost.fill_cycles + cost.drain_cycles <= MIN_SHARE * cost.cycles:
        return out, solve_s
    other, other_cost, n = polish_factors(workload, arch, mapping, evaluate, objective, cost=cost,
                                          max_evaluations=MAX_DESCENT)
    if other is not mapping:
        out.append((other, other_cost, "fill: factor moves", n))
    best, best_cost = mapping, cost
    for k in range(MAX_RESOLVES + 1):
        if time.perf_counter() >= options["deadline"]:
            break
        level, _ = slowest_link_level(workload, arch, best, best_cost)
        if k > 0 and (level is None or level == 0):
            break
        got, spent = _resolve(problem, None if k == 0 else level, best, "latency", weights, options)
        solve_s += spent
        if got is None:
            if k == 0:
                continue
            break
        got_cost = evaluate(workload, arch, got)
        got, got_cost, n = polish_orders(workload, arch, got, evaluate, objective, cost=got_cost,
                                         tolerance=options["tie_tolerance"])
        out.append((got, got_cost, "fill: whole buffers" if k == 0 else f"fill: {arch.levels[level].name} halved",
                    n + 1))
        if objective_value(got_cost, objective) >= objective_value(best_cost, objective):
            if k == 0:
                continue
            break
        best, best_cost = got, got_cost
    if best is not mapping:
        other, other_cost, n = polish_factors(workload, arch, best, evaluate, objective, cost=best_cost,
                                              max_evaluations=MAX_DESCENT)
        if other is not best:
            out.append((other, other_cost, "fill: halved, factor moves", n))
    return out, solve_s
