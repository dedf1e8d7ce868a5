"""``driver.mip_search``: the schedule before the tie-breaking solves, then the final one; and the padded
scheduler, which breaks the ties of its winning padding only."""

from __future__ import annotations

import pytest

from cosa import SchedulingError, schedule
from cosa.mip import driver
from cosa.mip.padding import candidates
from cosa.mip.problem import build_problem
from costmodel import preset
from workloads import matmul

MM = matmul("mm", M=64, N=96, K=256)  # compute-bound on Eyeriss: 128 of 168 PEs busy, so paddings are tried


def test_mip_search_yields_the_schedule_before_the_tie_solves_then_mip_schedules():
    arch = preset("eyeriss")
    steps = list(driver.mip_search(MM, arch, time_limit_s=30))
    whole = driver.mip_schedule(MM, arch, time_limit_s=30)
    assert len(steps) == 2
    first, last = steps
    whats = lambda s: [t["what"].split(" (")[0] for t in s.extra["tie_solves"]]  # noqa: E731
    assert whats(first) == ["fewest compute"] and first.extra["tie_break"] in ("main", "fewest compute")
    assert whats(last) == ["fewest compute", "fewest DRAM bytes", "least energy"]
    assert last.mapping == whole.mapping and last.cost == whole.cost  # same input, same schedule
    assert last.stats.solve_s > first.stats.solve_s
    # the tie solves keep within the tolerance of the schedule they start from, and never add DRAM bytes
    assert last.cost.cycles <= first.cost.cycles * (1 + last.extra["tie_tolerance"])
    assert (last.cost.dram_bytes, last.cost.energy_pj) <= (first.cost.dram_bytes, first.cost.energy_pj)


def test_mip_search_without_tie_solves_yields_once():
    steps = list(driver.mip_search(MM, preset("eyeriss"), objective="edp", time_limit_s=30))
    assert len(steps) == 1 and steps[0].extra["tie_solves"] == [] and steps[0].extra["tie_break"] == "main"


def test_padding_breaks_the_winners_ties_only_and_picks_what_breaking_every_layers_ties_picks():
    arch = preset("eyeriss")
    found = candidates(MM, build_problem(MM, arch).slots, 0.125)
    layers = [MM] + [MM.with_dims(**{d: p for d, (_, p) in c.dims.items()}) for c in found]
    every = [driver.mip_schedule(w, arch, time_limit_s=30) for w in layers]
    # the rule before: every layer's ties broken, the fewest cycles win (the layer as written on equals)
    want = min(every, key=lambda s: (s.cost.cycles, layers.index(s.workload)))
    got = schedule(MM, arch, bound=False, time_limit_s=30, pad=0.125)
    assert got.mapping == want.mapping and got.cost.cycles == want.cost.cycles
    assert got.cost.dram_bytes == want.cost.dram_bytes and got.cost.energy_pj == want.cost.energy_pj
    assert len(got.extra["tie_solves"]) == 3  # the winner's: fewest compute, DRAM bytes, energy
    tried = got.extra["pad_tried"]
    assert len(tried) == len(layers)
    assert got.stats.total_s == pytest.approx(sum(t["seconds"] for t in tried))


@pytest.mark.parametrize("tolerance, caps", [(0.02, [0.02, 0.01]), (0.0, [0.0])])
def test_the_fewest_dram_bytes_solve_retries_at_half_the_cap_only_when_half_is_a_different_cap(monkeypatch,
                                                                                                 tolerance, caps):
    # a fewest-DRAM-bytes mapping the cost model puts outside the tolerance is retried at half the cap;
    # at tolerance 0 half the cap is the same cap, so the same solve is not run twice
    from cosa.baselines import random_search

    arch = preset("eyeriss")
    slow = random_search(MM, arch, samples=1, seed=1)  # 27,392 cycles with its orders polished, against 12,288
    asked = []

    def fewest(form, objective_value, cap, *args):
        asked.append(cap)
        return slow.mapping, 0.0, "optimal"

    monkeypatch.setattr(driver, "fewest_dram_bytes", fewest)
    got = driver.mip_schedule(MM, arch, time_limit_s=30, tie_tolerance=tolerance)
    assert slow.cost.cycles > got.cost.cycles * (1 + tolerance)  # the retry's condition holds
    assert asked == pytest.approx(caps)


def test_without_tie_breaks_the_search_stops_at_the_schedule_the_tie_solves_start_from():
    arch = preset("eyeriss")
    first, last = driver.mip_search(MM, arch, time_limit_s=30)
    steps = list(driver.mip_search(MM, arch, time_limit_s=30, tie_breaks=False))
    assert len(steps) == 1
    fast = steps[0]
    assert fast.mapping == first.mapping and fast.cost == first.cost and fast.extra["tie_breaks"] is False
    assert [t["what"] for t in fast.extra["tie_solves"]] == ["fewest compute"]
    # the tie solves keep the cycles within the tolerance and cut DRAM bytes, which this schedule does not
    assert last.cost.cycles <= fast.cost.cycles * (1 + last.extra["tie_tolerance"])
    assert last.cost.dram_bytes < fast.cost.dram_bytes
    with pytest.raises(SchedulingError, match="tie_breaks must be True or False"):
        next(driver.mip_search(MM, arch, tie_breaks="no"))
