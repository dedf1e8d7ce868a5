"""Property: the MIP's run model, fixed to a random valid mapping, counts the cost model's compute commands.

Both sides state their runs through ``costmodel.run_rules``: the cost model
evaluates the rules on the mapping (``compute_runs``), the MIP linearises
them (``cosa.mip.runs``).  Fixing the model's factors, orders and run start
to a mapping (``fix_to_mapping`` -> ``fix_runs``) and solving for the fewest
commands must give the cost model's count wherever every link of the cost
model's run is certified (``merge_options`` non-empty), and never fewer.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mip_runs import model_runs

import workloads
from costmodel import Arch, Level, SpatialAxis, compute_runs
from costmodel.run_rules import order_is_free, run_loops
from cosa.mip import build, build_problem
from cosa.mip.runs import _may_link, candidates, merge_options
from mappings import LevelMapping, Mapping, validate
from workloads.divisors import prime_factors


REGS = 3
AXIS_DIMS = frozenset({"K", "C", "N"})


def runs_arch(rows: int) -> Arch:
    """DRAM, a buffer for inputs and weights, an accumulator feeding 4 PEs, a roomy weight register file
    streaming runs of up to ``rows`` iterations (every dim may loop there; inputs and outputs stream)."""
    return Arch(f"runs{rows}", (
        Level("DRAM", None, read_bandwidth=8, write_bandwidth=8),
        Level("Buffer", 1 << 20, frozenset({"input", "weight"})),
        Level("Accumulator", 1 << 20, frozenset({"output"}), fanout=4,
              spatial_axes=(SpatialAxis("lanes", 4, dims=AXIS_DIMS),)),
        Level("Registers", 1 << 20, frozenset({"weight"}), compute_rows=rows, compute_overhead_cycles=2),
    ), macs_per_cycle=1)


NESTS = {
    "pw": workloads.conv2d("pw", N=2, C=2, K=2, P=6, Q=4),
    "c3": workloads.conv2d("c3", C=2, K=2, P=4, Q=4, R=3, S=3, padding=1),
    "s2": workloads.conv2d("s2", C=2, K=2, P=4, Q=2, R=4, S=2, stride=2),
    "dil": workloads.conv2d("dil", C=2, K=2, P=4, Q=3, R=2, S=1, dilation=(2, 1)),
    "pwn": workloads.conv2d("pwn", N=4, C=2, K=2, P=2, Q=6),
    "mm": workloads.matmul("mm", M=12, N=4, K=2),
}
_FORMS: dict = {}


def _form(name: str, rows: int):
    if (name, rows) not in _FORMS:
        _FORMS[name, rows] = build(build_problem(NESTS[name], runs_arch(rows)), "latency")
    return _FORMS[name, rows]


def _permutation(dims, pick) -> tuple[str, ...]:
    rest, out = list(dims), []
    while rest:
        out.append(pick(rest))
        rest.remove(out[-1])
    return tuple(out)


def draw_mapping(nest, pick) -> Mapping:
    """A valid mapping of ``nest`` on ``runs_arch``: each prime factor of a bound goes to a random slot, a
    pixel's to the run level (3) most often, so that runs form and pixel loops split over the source levels
    above it;
    random orders, at the run level also the pixels in their index order (the order in which they can
    merge, outside the rest) or none (free: the cheapest).  ``pick(options)`` chooses one option."""
    temporal = [dict() for _ in range(4)]
    spatial = [dict() for _ in range(4)]
    for d, bound in nest.dims.items():
        for p in prime_factors(bound):
            pixel = d in ("N", "M", "P", "Q")
            slot = pick(["T0", "T1", "T2", "T3", "T3", "T3", "T3"] if pixel else ["T0", "T1", "T2", "S2", "T3"])
            lanes = math.prod(spatial[2].values())
            where = spatial if slot == "S2" and d in AXIS_DIMS and lanes * p <= 4 else temporal
            level = int(slot[1])
            where[level][d] = where[level].get(d, 1) * p
    dims = list(nest.dims)
    orders = [_permutation(dims, pick) for _ in range(4)]
    pixels = tuple(d for d in ("N", "M", "Q", "P") if d in dims)
    natural = tuple(d for d in dims if d not in pixels) + pixels
    orders[REGS] = pick([(), orders[REGS], natural, natural])
    return Mapping(tuple(LevelMapping(t, sp, o) for t, sp, o in zip(temporal, spatial, orders)))


def certified(problem, mapping, run) -> bool:
    """Whether every link of ``run`` (innermost first) is one the model may claim."""
    cands = candidates(problem, REGS)
    return all(d in cands for d in run) and all(
        _may_link(problem, REGS, d, prev) and merge_options(problem, REGS, d, prev)
        for prev, d in zip(run, run[1:]))


SOLVER_REL = 1e-6  # a count read from a solved model: 23.99998 for 24 was seen (HiGHS's feasibility tolerance)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(NESTS)), rows=st.sampled_from([3, 5, 8]), data=st.data())
def test_fixed_run_model_counts_the_cost_models_compute_commands(name, rows, data):
    nest, arch = NESTS[name], runs_arch(rows)
    mapping = draw_mapping(nest, lambda options: data.draw(st.sampled_from(options)))
    validate(mapping, nest, arch)
    runs = compute_runs(nest, arch, mapping)[REGS]
    form = _form(name, rows)
    computes, chain = model_runs(form, mapping, REGS)
    exact = certified(form.problem, mapping, runs.run_dims)
    if exact:  # the count is a solver's value: HiGHS holds its constraints to about 1e-7, not to the last bit
        assert computes == pytest.approx(runs.computes, rel=SOLVER_REL), (mapping, runs, chain)
    else:
        assert computes >= runs.computes * (1 - SOLVER_REL), (mapping, runs, chain)
    # the model's run is one the mapping realizes: a prefix of the loops in the mapping's (or a free) order
    lm = mapping.levels[REGS]
    loops = run_loops(lm, list(nest.dims))
    chain = [d for d in chain if lm.temporal_factor(d) > 1]
    if not order_is_free(mapping, REGS):
        assert chain == loops[:len(chain)]
    if exact and chain:
        length = math.prod(lm.temporal_factor(d) for d in chain)
        assert computes == pytest.approx(runs.residencies * -(-length // rows) * math.prod(
            lm.temporal_factor(d) for d in loops if d not in chain), rel=SOLVER_REL)


def test_the_property_sees_merged_and_split_runs():
    """The mappings the property draws merge runs, and split the run's pixels over the source levels above
    (where the merge conditions decide), often enough that a wrong rule on either side shows."""
    rng = random.Random(3)
    merged = split = 0
    for _ in range(300):
        name = rng.choice(sorted(NESTS))
        mapping = draw_mapping(NESTS[name], rng.choice)
        merged += len(compute_runs(NESTS[name], runs_arch(5), mapping)[REGS].run_dims) > 1
        lm = mapping.levels[REGS]
        split += any(lm.temporal_factor(d) > 1 and mapping.levels[k].temporal_factor(d) > 1
                     for d in ("P", "Q") for k in (1, 2))
    assert merged >= 30 and split >= 30, (merged, split)
