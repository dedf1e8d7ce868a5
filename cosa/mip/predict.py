"""The model's own estimate of a given mapping, and a MIP start built from one.

Fixing the placement and order variables to a mapping leaves a small
problem (the continuous traffic and latency terms, the run binaries) that
HiGHS solves in a fraction of a second; its solution is a feasible point of
the full model, which the driver hands to the solver as a MIP start.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from .decode import fix_to_mapping, unfix_all
from .formulation import Formulation
from .solve import solve

RANDOM_START_SAMPLES = 4


@dataclass(frozen=True)
class StartPoint:
    """A feasible point of the model loaded into its variables.

    ``source``: where the mapping came from ("gemmini-default", "random",
    "incumbent"); ``objective``: the model's objective at that point;
    ``solve_s``: seconds of the fixed solve.
    """

    source: str
    objective: float
    solve_s: float


def predict(form: Formulation, mapping, time_limit_s: float = 10.0) -> float | None:
    """Objective value the model assigns to ``mapping`` (None when the model cannot express it,
    or finds it infeasible, e.g. a tile the share grid cannot place)."""
    try:
        if not fix_to_mapping(form, mapping):
            return None
        result = solve(form.model, "highs", time_limit_s=time_limit_s, mip_gap=0.0)
    finally:
        unfix_all(form)
    return result.objective if result.has_solution else None


def load_start(form: Formulation, mapping, source: str, time_limit_s: float = 10.0, seed: int = 0,
               solve_fn=solve) -> tuple[StartPoint | None, float]:
    """Load the model's solution for ``mapping`` into its variables (all left unfixed).

    Returns (the start point, or None when the model cannot express the
    mapping or finds it infeasible, and the seconds spent).  After a None the
    variable values are meaningless; solve without a start.  ``solve_fn``:
    the solver call (``solve.solve``'s signature; the driver passes its own so
    that all of its solver calls go one way).
    """
    result = None
    t0 = time.perf_counter()
    try:
        if fix_to_mapping(form, mapping):
            result = solve_fn(form.model, "highs", time_limit_s=time_limit_s, mip_gap=0.0, seed=seed)
    finally:
        unfix_all(form)
    spent = time.perf_counter() - t0
    if result is None or not result.has_solution or result.objective is None:
        return None, spent
    return StartPoint(source, float(result.objective), result.solve_s), spent


def baseline_mappings(workload, arch, seed: int = 0, samples: int = RANDOM_START_SAMPLES):
    """Valid mappings to start the MIP from, best first: yields (source, mapping) pairs.

    On a Gemmini preset the vendor heuristic's mapping (when it applies and
    validates); then ``samples`` seeded random valid mappings ranked by the
    cost model's cycles (drawn only when the caller asks for more).  Yields
    nothing when none is found.
    """
    from mappings import validate
    from workloads import FrameworkError

    try:
        from ..baselines import gemmini_default_mapping

        mapping, _ = gemmini_default_mapping(workload, arch)
        validate(mapping, workload, arch)
    except FrameworkError:
        pass  # not a Gemmini preset, a shape the heuristic does not handle, or a tile that does not fit
    else:
        yield "gemmini-default", mapping
    try:
        from costmodel import evaluate

        from ..baselines import MapSpace, random_mapping

        rng = random.Random(seed)
        space = MapSpace(workload, arch)
        drawn = []
        for _ in range(samples):
            mapping = random_mapping(workload, arch, rng, space=space)
            drawn.append((float(evaluate(workload, arch, mapping).cycles), len(drawn), mapping))
    except FrameworkError:
        return  # no valid random mapping within the sampler's tries: start without one
    for _, _, mapping in sorted(drawn, key=lambda x: x[:2]):
        yield "random", mapping
