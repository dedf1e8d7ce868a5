"""Lexicographic tie-breaking (the objective within a tolerance, then DRAM bytes, then energy) in the
baselines and the MIP, checked against brute force over every mapping of small problems."""

import random
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from costmodel import Arch, Level, SpatialAxis, evaluate
from cosa import schedule
from cosa.baselines import MapSpace, exhaustive, random_search
from cosa.baselines.mapspace import random_mapping_with_rejections
from cosa.baselines.objective import TIE_TOLERANCE, TieSet, lexicographic_best
from mappings import LevelMapping, Mapping, MappingError, validate
from workloads import ROLES, matmul


def brute_force_choice(costed, objective_of, tolerance):
    """The rule written out plainly: the candidates within ``tolerance`` of the best objective, then the
    fewest DRAM bytes, then the least energy, then the best objective, then the first in the list."""
    best = min(objective_of(c) for c, _ in costed)
    ties = [(c, m) for c, m in costed if objective_of(c) <= best * (1 + tolerance)]
    return min(ties, key=lambda cm: (cm[0].dram_bytes, cm[0].energy_pj, objective_of(cm[0])))  # the first of equals


def every_valid_mapping(workload, arch):
    out = []
    for mapping in MapSpace(workload, arch).enumerate():
        try:
            validate(mapping, workload, arch)
        except MappingError:
            continue
        out.append((evaluate(workload, arch, mapping), mapping))
    return out


@settings(max_examples=200, deadline=None)
@given(points=st.lists(st.tuples(st.integers(100, 130), st.integers(1, 6), st.integers(1, 6)), min_size=1,
                       max_size=30),
       tolerance=st.sampled_from([0.0, 0.01, 0.02, 0.1]))
def test_tie_set_streams_to_the_plain_rule(points, tolerance):
    costed = [(SimpleNamespace(cycles=float(c), energy_pj=float(e), dram_bytes=float(b)),
               Mapping((LevelMapping(temporal={"M": n + 1}),)))
              for n, (c, b, e) in enumerate(points)]
    want = brute_force_choice(costed, lambda c: c.cycles, tolerance)
    ties = TieSet("latency", tolerance)
    for cost, mapping in costed:
        ties.offer(cost, mapping)
    assert ties.best()[:2] == want
    assert lexicographic_best([(c, m, None) for c, m in costed], "latency", tolerance)[:2] == want


def fast_dram_array() -> Arch:
    """DRAM fast enough that the cycles tie at the compute time for many tilings that move different bytes,
    a 16-byte buffer over a 2 x 2 array of one-weight registers."""
    axes = (SpatialAxis("rows", 2, roles=frozenset({"input", "weight"})),
            SpatialAxis("cols", 2, roles=frozenset({"weight", "output"})))
    return Arch("fast-dram-array", (
        Level("DRAM", None, frozenset(ROLES), read_bandwidth=1000, write_bandwidth=1000,
              read_energy_pj_per_byte=50, write_energy_pj_per_byte=50),
        Level("Buffer", 16, frozenset(ROLES), read_energy_pj_per_byte=2, write_energy_pj_per_byte=2, fanout=4,
              spatial_axes=axes),
        Level("Registers", 1, frozenset({"weight"}), read_energy_pj_per_byte=0.1, write_energy_pj_per_byte=0.1),
    ), macs_per_cycle=1, mac_energy_pj=1.0)


ARCH = fast_dram_array()
GEMMS = {n: matmul(n, M=m, N=nn, K=k) for n, m, nn, k in (("mm_4x4x2", 4, 4, 2), ("mm_4x4x4", 4, 4, 4))}


@pytest.fixture(scope="module")
def spaces():
    return {name: every_valid_mapping(w, ARCH) for name, w in GEMMS.items()}


def ties_of(costed, objective_of):
    best = min(objective_of(c) for c, _ in costed)
    return [c for c, _ in costed if objective_of(c) <= best * (1 + TIE_TOLERANCE)]


@pytest.mark.parametrize("objective", ["latency", "energy"])
def test_exhaustive_picks_the_lexicographic_minimum(spaces, objective):
    value = (lambda c: c.cycles) if objective == "latency" else (lambda c: c.energy_pj)
    want, _ = brute_force_choice(spaces["mm_4x4x2"], value, TIE_TOLERANCE)
    got = exhaustive(GEMMS["mm_4x4x2"], ARCH, objective=objective)
    assert (got.cost.cycles, got.cost.dram_bytes, got.cost.energy_pj) == (want.cycles, want.dram_bytes,
                                                                            want.energy_pj)


def test_the_ties_differ_in_bytes(spaces):
    """The cases above can fail: their latency ties move different numbers of DRAM bytes."""
    for costed in spaces.values():
        ties = ties_of(costed, lambda c: c.cycles)
        assert min(c.dram_bytes for c in ties) < max(c.dram_bytes for c in ties)


def test_random_search_picks_the_lexicographic_minimum_of_its_samples():
    seed, samples, workload = 7, 60, GEMMS["mm_4x4x4"]
    rng = random.Random(seed)
    space = MapSpace(workload, ARCH)
    drawn = []
    for _ in range(samples):  # the baseline's own stream, redrawn
        mapping, _ = random_mapping_with_rejections(workload, ARCH, rng, space=space)
        drawn.append((evaluate(workload, ARCH, mapping), mapping))
    want, want_mapping = brute_force_choice(drawn, lambda c: c.cycles, TIE_TOLERANCE)
    got = random_search(workload, ARCH, samples=samples, seed=seed)
    assert got.mapping == want_mapping and got.cost.dram_bytes == want.dram_bytes


@pytest.mark.parametrize("name", sorted(GEMMS))
def test_mip_breaks_ties_toward_the_fewest_dram_bytes(spaces, name):
    """Among every mapping whose cycles are within the tolerance of the best the cost model finds, the MIP's
    schedule moves the fewest DRAM bytes (the exhaustive enumeration is the ground truth)."""
    costed = spaces[name]
    best = min(c.cycles for c, _ in costed)
    got = schedule(GEMMS[name], ARCH, scheduler="cosa", objective="latency", time_limit_s=30, bound=False)
    assert got.cost.cycles <= best * (1 + TIE_TOLERANCE)
    assert got.cost.dram_bytes == min(c.dram_bytes for c in ties_of(costed, lambda c: c.cycles))
    assert any(s["what"].startswith("fewest DRAM bytes") for s in got.extra["tie_solves"])


def test_optimal_is_claimed_with_its_model_and_withdrawn_where_a_baseline_is_better():
    from cosa.compare import _checked_claim
    from cosa.compare_rows import CompareRow
    from cosa.schedule import SolverStats

    stats = SolverStats(solver="highs", status="optimal", gap=0.0004, model="the MIP's linearised model")
    assert stats.claim() == "optimal in the MIP's linearised model (gap 0.04%)"
    assert SolverStats(solver="random", status="ok").claim() == "ok"
    rows = [CompareRow("l", "cosa", cycles=100.0, objective_value=100.0, claim=stats.claim()),
            CompareRow("l", "random", cycles=98.0, objective_value=98.0, claim="ok"),
            CompareRow("l", "exhaustive", cycles=99.0, objective_value=99.0, claim="optimal in the cost model")]
    cosa_row, random_row, exhaustive_row = (_checked_claim(r, rows, "latency") for r in rows)
    assert cosa_row.claim == ("optimal in the MIP's linearised model (gap 0.04%); not optimal in the cost model, "
                              "where random 2.0%, exhaustive 1.0% lower cycles")
    assert random_row.claim == "ok"
    assert exhaustive_row.claim.endswith("where random 1.0% lower cycles")
    alone = _checked_claim(rows[0], rows[:1], "latency")
    assert alone.claim == stats.claim()


def test_a_latency_schedule_on_scratchpads_without_a_bandwidth_still_breaks_ties_by_energy(monkeypatch):
    # Simba's on-chip buffers have no bandwidth, so its latency model states no traffic for them and no
    # energy; the least-energy tie-break then solves a model that states every level pair
    import cosa.mip.driver as driver
    from cosa import schedule as sched
    from costmodel import preset as arch_preset
    from workloads import conv2d

    w, arch = conv2d("c", C=32, K=64, H=8, W=8, R=3, S=3, padding=1), arch_preset("simba")
    got = sched(w, arch, bound=False)
    assert got.extra["tie_break"] == "least energy"
    assert got.extra["tie_solves"][-1]["what"] == "least energy" and got.extra["tie_solves"][-1]["status"] == "optimal"
    monkeypatch.setattr(driver, "least_energy_rebuilt", lambda *a, **k: (None, 0.0, "off"))
    without = sched(w, arch, bound=False)
    assert got.cost.cycles == without.cost.cycles and got.cost.dram_bytes <= without.cost.dram_bytes
    assert got.cost.energy_pj < 0.8 * without.cost.energy_pj  # 4.8 against 6.7 uJ when written
