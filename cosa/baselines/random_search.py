"""The random baseline: seeded sampling of valid mappings, keeping the best under an objective."""

from __future__ import annotations

import random
import time

from workloads import LoopNest

from ..schedule import Schedule, SchedulingError, SolverStats
from .mapspace import MapSpace, random_mapping_with_rejections
from .objective import TIE_TOLERANCE, TieSet, check_objective, objective_value

DEFAULT_SAMPLES = 1000


def random_search(workload: LoopNest, arch, samples: int | None = None, seconds: float | None = None, seed: int = 0,
                  objective: str = "latency", tie_tolerance: float = TIE_TOLERANCE) -> Schedule:
    """Best of random valid mappings: the lexicographic choice of ``cosa.baselines.objective`` (the
    objective, values within ``tie_tolerance`` of the best as ties, then DRAM bytes, energy, the objective,
    the first drawn).

    Budget: ``samples`` valid mappings evaluated, or ``seconds`` of wall time,
    whichever ends first when both are given (``DEFAULT_SAMPLES`` when neither).
    At least one mapping is always evaluated.  Deterministic for a given seed
    and sample budget (a time budget stops wherever the clock says).
    """
    src = f"random_search({workload.name})"
    check_objective(objective, src)
    if samples is not None and (not isinstance(samples, int) or samples < 1):
        raise SchedulingError(f"samples must be a positive integer, got {samples!r}", source=src, field="samples")
    if seconds is not None and not seconds > 0:
        raise SchedulingError(f"seconds must be positive, got {seconds!r}", source=src, field="seconds")
    if samples is None and seconds is None:
        samples = DEFAULT_SAMPLES
    from costmodel import evaluate

    start = time.perf_counter()
    rng = random.Random(seed)
    space = MapSpace(workload, arch)
    build_s = time.perf_counter() - start
    ties = TieSet(objective, tie_tolerance)
    evaluated = rejected = 0
    while True:
        mapping, tries = random_mapping_with_rejections(workload, arch, rng, space=space)
        rejected += tries
        cost = evaluate(workload, arch, mapping)
        evaluated += 1
        ties.offer(cost, mapping)
        if samples is not None and evaluated >= samples:
            break
        if seconds is not None and time.perf_counter() - start >= seconds:
            break
    solve_s = time.perf_counter() - start - build_s
    cost, mapping, _ = ties.best()
    stats = SolverStats(solver="random", status="ok", build_s=build_s, solve_s=solve_s, evaluated=evaluated,
                        seed=seed, objective=objective_value(cost, objective))
    extra = {"objective": objective, "samples": evaluated, "rejected": rejected, "tie_tolerance": tie_tolerance,
             "budget": {"samples": samples, "seconds": seconds}}
    return Schedule(workload, arch, mapping, cost, "random", stats, extra)
