"""The exhaustive baseline: every factorization, placement and cost-relevant order of a small problem."""

from __future__ import annotations

import time

from workloads import LoopNest

from ..schedule import Schedule, SchedulingError, SolverStats
from .mapspace import MapSpace
from .objective import TIE_TOLERANCE, TieSet, check_objective, objective_value

DEFAULT_LIMIT = 2_000_000


def exhaustive(workload: LoopNest, arch, objective: str = "latency", limit: int = DEFAULT_LIMIT,
               tie_tolerance: float = TIE_TOLERANCE) -> Schedule:
    """The lexicographic optimum of the mapspace in the cost model: the objective, with values within
    ``tie_tolerance`` of the best as ties, then DRAM bytes, energy, the objective and the first found
    (``cosa.baselines.objective``).

    Raises SchedulingError when the space (``MapSpace.exhaustive_size``: factorizations
    times pruned orders) exceeds ``limit``, or when no mapping is valid.
    """
    from costmodel import evaluate
    from mappings import MappingError, validate

    src = f"exhaustive({workload.name})"
    check_objective(objective, src)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise SchedulingError(f"limit must be a positive number of mappings, got {limit!r}", source=src,
                              field="limit")
    start = time.perf_counter()
    space = MapSpace(workload, arch)
    # the cheap lower bound first: counting a huge space exactly takes long itself
    size = space.size_lower_bound()
    if size <= limit:
        size = space.exhaustive_size()
    if size > limit:
        raise SchedulingError(f"the mapspace has at least {size:,} points, more than the limit {limit:,}; "
                              "use a smaller problem, a larger limit (--exhaustive-limit N) or another scheduler", source=src, field="limit")
    build_s = time.perf_counter() - start
    ties = TieSet(objective, tie_tolerance)
    best_value = None
    evaluated = invalid = 0
    for mapping in space.enumerate():
        try:
            validate(mapping, workload, arch)
        except MappingError:  # the quick checks are necessary, not sufficient
            invalid += 1
            continue
        cost = evaluate(workload, arch, mapping)
        evaluated += 1
        ties.offer(cost, mapping)
        value = objective_value(cost, objective)
        best_value = value if best_value is None else min(best_value, value)
    solve_s = time.perf_counter() - start - build_s
    if not len(ties):
        raise SchedulingError("no valid mapping in the whole mapspace", source=src, field="mapping")
    cost, mapping, _ = ties.best()
    stats = SolverStats(solver="exhaustive", status="optimal", build_s=build_s, solve_s=solve_s,
                        evaluated=evaluated, objective=objective_value(cost, objective), model="the cost model")
    extra = {"objective": objective, "space_size": size, "evaluated": evaluated, "invalid": invalid,
             "tie_tolerance": tie_tolerance, "best_objective": best_value}
    return Schedule(workload, arch, mapping, cost, "exhaustive", stats, extra)
