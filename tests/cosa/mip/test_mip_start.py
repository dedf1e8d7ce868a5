"""The MIP start: a valid baseline mapping's point of the model is handed to the solver."""

from __future__ import annotations

import pytest

import costmodel
import workloads
from cosa.mip import driver, tiebreak
from cosa.mip.decode import fix_to_mapping, unfix_all
from cosa.mip.formulation import build
from cosa.mip.predict import baseline_mappings, load_start, predict
from cosa.mip.problem import build_problem
from cosa.mip.solve import solve
from mappings import LevelMapping, Mapping, validate

GEMMINI = costmodel.presets.gemmini()
SIMBA = costmodel.presets.simba()
CONV = workloads.conv2d("pw", C=32, K=32, P=14, Q=14)


def _form(nest, arch):
    return build(build_problem(nest, arch, "all"), "latency")


def _unexpressible(mapping: Mapping) -> Mapping:
    """``mapping`` with its spatial factors moved to DRAM, which has no spatial axis."""
    levels = list(mapping.levels)
    spatial = {}
    for k, lm in enumerate(levels):
        for d, f in lm.spatial.items():
            spatial[d] = spatial.get(d, 1) * f
        levels[k] = LevelMapping(lm.temporal, {}, lm.order, lm.bypass)
    levels[0] = LevelMapping(levels[0].temporal, spatial, levels[0].order, levels[0].bypass)
    return Mapping(tuple(levels))


def test_baselines_are_valid_and_gemmini_default_comes_first():
    found = list(baseline_mappings(CONV, GEMMINI, seed=0))
    assert found[0][0] == "gemmini-default"
    assert [s for s, _ in found[1:]] == ["random"] * (len(found) - 1) and len(found) > 1
    for _, mapping in found:
        validate(mapping, CONV, GEMMINI)
    simba = list(baseline_mappings(CONV, SIMBA, seed=0))
    assert simba and all(s == "random" for s, _ in simba)
    # seeded: the same draws twice
    assert [m for _, m in baseline_mappings(CONV, SIMBA, seed=0)] == [m for _, m in simba]


def test_start_point_is_the_models_value_of_the_mapping_and_becomes_the_incumbent():
    form = _form(CONV, GEMMINI)
    source, mapping = next(baseline_mappings(CONV, GEMMINI))
    expected = predict(form, mapping)
    point, spent = load_start(form, mapping, source)
    assert point is not None and spent > 0
    assert point.objective == pytest.approx(expected, rel=1e-9)
    # every variable is free again and holds a value
    assert all(not v.fixed for v in form.nT.values()) and all(v.value is not None for v in form.nT.values())
    result = solve(form.model, "highs", time_limit_s=0.05, mip_gap=0.0, warm_start=True)
    assert result.has_solution
    assert result.objective <= point.objective + 1e-9


def test_unexpressible_or_infeasible_mapping_gives_no_start():
    form = _form(CONV, GEMMINI)
    _, mapping = next(baseline_mappings(CONV, GEMMINI))
    bad = _unexpressible(mapping)
    assert not fix_to_mapping(form, bad)
    unfix_all(form)
    assert load_start(form, bad, "test")[0] is None
    # everything in the scratchpad: the tiles cannot fit, so the fixed model is infeasible
    big = workloads.conv2d("big", C=128, K=128, P=28, Q=28)
    form = _form(big, GEMMINI)
    dims = big.dims
    levels = [LevelMapping({}, {}, ()) for _ in GEMMINI.levels]
    levels[1] = LevelMapping(dict(dims), {}, tuple(dims))
    assert load_start(form, Mapping(tuple(levels)), "test")[0] is None


def test_tiny_time_limit_still_returns_a_valid_schedule_no_worse_than_the_start():
    nest = workloads.conv2d("c3", C=16, K=16, P=8, Q=8, R=3, S=3, padding=1)
    result = driver.mip_schedule(nest, GEMMINI, time_limit_s=0.01)
    validate(result.mapping, nest, GEMMINI)
    assert result.extra["start"] == "gemmini-default"
    assert result.stats.objective <= result.extra["start_objective"] + 1e-9


def test_same_input_same_schedule():
    first = driver.mip_schedule(CONV, SIMBA, time_limit_s=60)
    second = driver.mip_schedule(CONV, SIMBA, time_limit_s=60)
    assert first.extra["start"] == "random"
    assert first.mapping == second.mapping
    assert first.stats.objective == second.stats.objective and first.stats.status == second.stats.status


def test_falls_back_to_a_plain_solve_when_no_start_loads(monkeypatch):
    _, mapping = next(baseline_mappings(CONV, GEMMINI))
    plain = driver.mip_schedule(CONV, GEMMINI, time_limit_s=60, warm_start=False)
    assert plain.extra["start"] is None and plain.extra["starts_used"] == 0
    monkeypatch.setattr(driver, "baseline_mappings", lambda *a, **k: iter([("test", _unexpressible(mapping))]))
    result = driver.mip_schedule(CONV, GEMMINI, time_limit_s=60)
    assert result.extra["start"] is None and result.extra["starts_used"] == 0
    assert result.extra["returned"] == "mip"
    validate(result.mapping, CONV, GEMMINI)
    assert result.mapping == plain.mapping and result.stats.objective == plain.stats.objective


@pytest.mark.parametrize("status", ["time_limit", "optimal"])
def test_time_limited_incumbent_worse_than_the_start_is_replaced_by_it(monkeypatch, status):
    """Stopped by the clock, the cost model picks between the incumbent and the baseline start;
    a proven-optimal answer stays the MIP's."""
    import dataclasses
    import random

    from cosa.baselines import random_mapping

    rng = random.Random(3)
    draws = [random_mapping(CONV, GEMMINI, rng) for _ in range(6)]
    poor = max(draws, key=lambda m: costmodel.evaluate(CONV, GEMMINI, m).cycles)
    _, default = next(baseline_mappings(CONV, GEMMINI))
    assert costmodel.evaluate(CONV, GEMMINI, poor).cycles > costmodel.evaluate(CONV, GEMMINI, default).cycles
    real_solve = driver.solve
    monkeypatch.setattr(driver, "solve", lambda *a, **k: dataclasses.replace(real_solve(*a, **k), status=status))
    monkeypatch.setattr(driver, "decode", lambda form: poor)
    monkeypatch.setattr(tiebreak, "decode", lambda form: poor)  # the tie-breaking solve decodes the same
    result = driver.mip_schedule(CONV, GEMMINI, time_limit_s=60, polish=False)
    if status == "time_limit":
        assert result.extra["returned"] == "gemmini-default" and result.mapping == default
        assert result.stats.status == "time_limit"
    else:
        assert result.extra["returned"] == "mip" and result.mapping == poor
