"""The mapspace, the random baseline and the exhaustive baseline on tiny problems."""

import itertools
import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from costmodel import Arch, Level, SpatialAxis, evaluate
from cosa import SchedulingError
from cosa.baselines import MapSpace, exhaustive, random_mapping, random_search
from cosa.baselines.mapspace import _compositions, _count_compositions, prime_factors
from cosa.baselines.objective import TIE_TOLERANCE, secondary_key
from mappings import LevelMapping, Mapping, validate
from workloads import ROLES, conv2d, einsum, matmul


def toy_array(dim: int = 2) -> Arch:
    """DRAM -> a shared buffer -> a dim x dim array of one-weight registers (a small weight-stationary machine)."""
    axes = (SpatialAxis("rows", dim, roles=frozenset({"input", "weight"})),
            SpatialAxis("cols", dim, roles=frozenset({"weight", "output"})))
    return Arch("toy-array", (
        Level("DRAM", None, frozenset(ROLES), read_bandwidth=4, write_bandwidth=4,
              read_energy_pj_per_byte=50, write_energy_pj_per_byte=50),
        Level("Buffer", 64, frozenset(ROLES), read_energy_pj_per_byte=2, write_energy_pj_per_byte=2,
              fanout=dim * dim, spatial_axes=axes),
        Level("Registers", 1, frozenset({"weight"}), read_energy_pj_per_byte=0.1, write_energy_pj_per_byte=0.1),
    ), macs_per_cycle=1, mac_energy_pj=1.0)


def toy_cluster() -> Arch:
    """DRAM -> a 32-byte buffer with 4 PEs (no axis shape) -> 8-byte PE buffers."""
    return Arch("toy-cluster", (
        Level("DRAM", None, frozenset(ROLES), read_bandwidth=2, write_bandwidth=2,
              read_energy_pj_per_byte=40, write_energy_pj_per_byte=40),
        Level("Global", 32, frozenset(ROLES), read_energy_pj_per_byte=3, write_energy_pj_per_byte=3, fanout=4),
        Level("PE", 8, frozenset(ROLES), read_energy_pj_per_byte=0.5, write_energy_pj_per_byte=0.5),
    ), macs_per_cycle=1, mac_energy_pj=1.0)


TINY_MATMUL = matmul("tiny", M=2, N=4, K=2)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 400), slots=st.integers(1, 5))
def test_compositions_are_exact_and_counted(n, slots):
    comps = list(_compositions(n, slots))
    assert len(comps) == len(set(comps)) == _count_compositions(n, slots)
    assert all(math.prod(c) == n for c in comps)
    assert math.prod(prime_factors(n)) == n


def test_slots_follow_the_spatial_axes():
    space = MapSpace(TINY_MATMUL, toy_array())
    spatial = {d: [s for s in space.slots[d] if s.spatial] for d in TINY_MATMUL.dims}
    assert spatial["M"] == []  # M indexes the input and the output: no axis admits it
    assert [s.axis for s in spatial["K"]] == [0] and [s.axis for s in spatial["N"]] == [1]
    assert space.order_levels == (0, 1)  # nothing is stored below the registers


@pytest.mark.parametrize("workload,arch", [(TINY_MATMUL, toy_array()), (matmul("m", M=4, N=2, K=3), toy_cluster())])
def test_exhaustive_size_counts_the_unchecked_enumeration(workload, arch):
    space = MapSpace(workload, arch)
    mappings = list(space.enumerate(check=False))
    assert len(mappings) == space.exhaustive_size()
    texts = {repr(m) for m in mappings}
    assert len(texts) == len(mappings)
    assert all(all(m.factor(d) == b for d, b in workload.dims.items()) for m in mappings)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_random_mappings_are_valid_and_seeded(seed):
    for workload, arch in ((TINY_MATMUL, toy_array()), (conv2d("c", N=2, C=2, K=4, P=3, Q=2, R=2, S=1), toy_cluster())):
        first = random_mapping(workload, arch, random.Random(seed))
        validate(first, workload, arch)
        assert random_mapping(workload, arch, random.Random(seed)) == first


def test_sampling_rarely_needs_rejection():
    workload, arch = conv2d("c", N=2, C=4, K=4, P=4, Q=2, R=3, S=1), toy_cluster()
    space = MapSpace(workload, arch)
    rng = random.Random(7)
    assert sum(space.fits(space.sample(rng)) for _ in range(200)) >= 190


def _permuted(mapping: Mapping, level: int, order: tuple[str, ...]) -> Mapping:
    levels = list(mapping.levels)
    lm = levels[level]
    levels[level] = LevelMapping(lm.temporal, lm.spatial, order, lm.bypass)
    return Mapping(tuple(levels))


PRUNING_CASES = [
    (conv2d("c", N=2, C=2, K=2, P=3, Q=2, R=2, S=2), toy_cluster()),
    # a and b index the same tensors (A and Out): interchangeable at every level
    (einsum("abk,kc->abc", {"a": 2, "b": 3, "k": 2, "c": 2}, name="e"), toy_cluster()),
]


@pytest.mark.parametrize("case", range(len(PRUNING_CASES)))
@pytest.mark.parametrize("seed", range(4))
def test_pruned_orders_do_not_change_the_cost(case, seed):
    """The laws the exhaustive search relies on, checked against the cost model: the order at
    levels outside ``order_levels`` and the relative order of same-signature dims do not matter."""
    workload, arch = PRUNING_CASES[case]
    space = MapSpace(workload, arch)
    rng = random.Random(seed)
    base_mapping = random_mapping(workload, arch, rng, space=space)
    base = evaluate(workload, arch, base_mapping)
    for level, lm in enumerate(base_mapping.levels):
        current = [d for d in lm.loop_order(space.dims) if d in lm.temporal]
        for perm in itertools.permutations(current):
            same_class = [space.signature[d] for d in perm] == [space.signature[d] for d in current]
            if level in space.order_levels and not same_class:
                continue
            cost = evaluate(workload, arch, _permuted(base_mapping, level, perm))
            assert (cost.cycles, cost.energy_pj, cost.dram_bytes) == (base.cycles, base.energy_pj, base.dram_bytes)


def test_pruning_cases_exercise_both_laws():
    workload, arch = PRUNING_CASES[1]
    space = MapSpace(workload, arch)
    assert space.signature["a"] == space.signature["b"]
    assert list(space.canonical_orders(("a", "b", "k"))) == [("a", "b", "k"), ("a", "k", "b"), ("k", "a", "b")]


def test_exhaustive_beats_every_random_sample():
    workload, arch = TINY_MATMUL, toy_array()
    best = exhaustive(workload, arch)
    assert best.scheduler == "exhaustive" and best.stats.solver == "exhaustive"
    assert best.stats.evaluated == best.extra["evaluated"] > 0
    assert best.extra["space_size"] == MapSpace(workload, arch).exhaustive_size()
    fastest = best.extra["best_objective"]
    assert fastest <= best.cost.cycles <= fastest * (1 + TIE_TOLERANCE)
    rng = random.Random(3)
    for _ in range(60):  # no sample is faster than the fastest, nor a tie that moves fewer bytes
        m = random_mapping(workload, arch, rng)
        cost = evaluate(workload, arch, m)
        assert cost.cycles >= fastest
        if cost.cycles <= fastest * (1 + TIE_TOLERANCE):
            assert secondary_key(cost) >= secondary_key(best.cost)
    found = random_search(workload, arch, samples=40, seed=5)
    assert found.cost.cycles >= best.cost.cycles


def test_exhaustive_objectives_rank_by_their_metric():
    workload, arch = matmul("m", M=4, N=2, K=3), toy_cluster()
    by_latency = exhaustive(workload, arch, objective="latency")
    by_energy = exhaustive(workload, arch, objective="energy")
    by_edp = exhaustive(workload, arch, objective="edp")
    assert by_energy.cost.energy_pj <= by_latency.cost.energy_pj
    assert by_latency.cost.cycles <= by_energy.cost.cycles
    edp = lambda s: s.cost.cycles * s.cost.energy_pj
    assert edp(by_edp) <= min(edp(by_latency), edp(by_energy))


def test_random_search_is_deterministic_per_seed():
    workload, arch = conv2d("c", N=2, C=2, K=4, P=3, Q=2, R=2, S=1), toy_cluster()
    a = random_search(workload, arch, samples=30, seed=11)
    b = random_search(workload, arch, samples=30, seed=11)
    assert a.mapping == b.mapping and a.cost == b.cost
    assert a.stats.evaluated == 30 and a.stats.seed == 11 and a.stats.solver == "random"
    more = random_search(workload, arch, samples=60, seed=11)  # a longer run of the same stream: no worse but ties
    assert more.cost.cycles <= a.cost.cycles * (1 + TIE_TOLERANCE)


def test_random_search_time_budget():
    s = random_search(TINY_MATMUL, toy_array(), seconds=0.3, seed=1)
    assert s.stats.evaluated >= 1 and s.stats.total_s < 5


def test_bad_budgets_and_spaces_raise():
    with pytest.raises(SchedulingError, match="samples"):
        random_search(TINY_MATMUL, toy_array(), samples=0)
    with pytest.raises(SchedulingError, match="objective"):
        random_search(TINY_MATMUL, toy_array(), samples=1, objective="area")
    with pytest.raises(SchedulingError, match="limit"):
        exhaustive(matmul("big", M=64, N=64, K=64), toy_array(), limit=1000)


def test_swapping_same_signature_dims_keeps_the_cost():
    workload, arch = PRUNING_CASES[1]
    outer = {"a": 2, "b": 3, "k": 2, "c": 2}
    costs = []
    for order in (("a", "k", "b", "c"), ("b", "k", "a", "c")):
        for level in (0, 1):
            levels = [LevelMapping(), LevelMapping(), LevelMapping()]
            levels[level] = LevelMapping(temporal=outer, order=order)
            mapping = Mapping(tuple(levels))
            validate(mapping, workload, arch)
            cost = evaluate(workload, arch, mapping)
            costs.append((level, cost.cycles, cost.energy_pj, cost.dram_bytes))
    assert costs[0] == costs[2] and costs[1] == costs[3]
