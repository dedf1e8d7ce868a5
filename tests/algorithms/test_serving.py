"""algorithms.serving: the swap law, residency, batching, arrivals and determinism of the engine."""

import dataclasses

import numpy as np
import pytest

from algorithms.serving import (OPT13B_BYTES, Request, ServeConfig, ServingError, generate, run, skewed_rates,
                                summary, swap_time_s, validate)
from algorithms.serving import exec_cost
from algorithms.serving.arrivals import gamma_times
from algorithms.serving.experiments import simulate, swap_vs_shards

EXEC = exec_cost.fixed(0.05)


def _run(cfg, exec_table=EXEC):
    validate(cfg)
    return run(cfg, generate(cfg.rates, cfg.cv, cfg.seconds, cfg.seed), exec_table)


def test_swap_law_exact():
    assert swap_time_s(26e9, 4, 25.0) == 26e9 / (4 * 25e9)
    assert swap_time_s(1e9, 2, 10.0, 0.01) == 1e9 / (2 * 10e9) + 0.01
    assert swap_time_s(1e9, 4, 10.0, 0.0, host_gbps=15.0) == 1e9 / 15e9
    cfg = ServeConfig(models=4, max_loaded=2, tp=2, pp=2, swap_latency_s=0.05, rates=(3, 2, 1, 1), seconds=30)
    res = _run(cfg)
    assert res.swaps, "a skewed load over 4 models with 2 slots must swap"
    law = OPT13B_BYTES / (4 * 25e9) + 0.05
    assert all(s.seconds == pytest.approx(law, rel=1e-12, abs=1e-12) for s in res.swaps)
    assert summary(res)["mean_swap_s"] == pytest.approx(law, rel=1e-12)


def test_opt13b_trend_is_the_law_within_10_percent():
    rows = swap_vs_shards(ServeConfig(models=3, max_loaded=2, rates=(1.0, 1.0, 1.0), seconds=60))
    for r in rows:
        assert r["swaps"] > 0
        assert abs(r["mean_swap_s"] / r["law_s"] - 1) < 0.10
    assert [r["shards"] for r in rows] == [1, 2, 3, 4]
    assert rows[0]["mean_swap_s"] / rows[3]["mean_swap_s"] == pytest.approx(4.0, rel=1e-9)


def test_no_swaps_when_every_model_fits():
    cfg = ServeConfig(models=3, max_loaded=3, rates=(2, 1, 0.5), cv=4.0, seconds=30)
    s = summary(_run(cfg))
    assert s["swaps"] == 0 and s["hit_rate"] == 1.0 and s["breakdown"]["swap_s"] == 0.0
    cold = summary(_run(dataclasses.replace(cfg, warm=False)))
    assert cold["swaps"] == 3          # warm-up only: one load per model, never again


def test_one_model_hit_rate_one():
    s = summary(_run(ServeConfig(models=1, max_loaded=1, rates=(5.0,), seconds=20)))
    assert s["requests"] > 50 and s["hit_rate"] == 1.0 and s["swaps"] == 0


def test_latency_decomposes_and_covers_execution():
    cfg = ServeConfig(models=3, max_loaded=1, rates=(4, 2, 1), cv=2.0, seconds=20, max_batch=4)
    res = _run(cfg, exec_cost.ExecTable(0.02, 0.01, "test"))
    assert res.served
    for s in res.served:
        assert s.latency_s >= s.execute_s - 1e-12 and s.execute_s > 0
        assert s.swap_s >= 0 and s.queue_s >= -1e-12
        assert s.swap_s + s.queue_s + s.execute_s == pytest.approx(s.latency_s, abs=1e-9)
        assert (s.swap_s == 0) or not s.hit
    d = summary(res)
    b = d["breakdown"]
    assert b["swap_s"] + b["queue_s"] + b["execute_s"] == pytest.approx(d["mean_latency_s"], rel=1e-9)
    assert d["p50_latency_s"] <= d["p95_latency_s"] <= d["p99_latency_s"]
    assert sorted(s.rid for s in res.served) == list(range(len(res.served)))   # every request served once


def test_determinism_with_seed():
    cfg = ServeConfig(models=3, max_loaded=2, rates=(1, 0.5, 0.25), cv=4.0, seconds=60, seed=7)
    assert summary(_run(cfg)) == summary(_run(cfg))
    assert summary(_run(dataclasses.replace(cfg, seed=8))) != summary(_run(cfg))


def test_lru_victim_and_batching():
    cfg = ServeConfig(models=3, max_loaded=2, rates=(1, 1, 1), max_batch=4, swap_latency_s=0.0)
    reqs = [Request(0, 1, 0.0), Request(1, 2, 1.0)] + [Request(2 + i, 2, 2.0) for i in range(10)]
    res = run(cfg, reqs, exec_cost.fixed(0.1))
    assert [(s.model, s.victim) for s in res.swaps] == [(2, 0)]   # model 1 used at t=0.1; model 0 never
    sizes = {}
    for s in res.served:
        sizes.setdefault(s.start_s, []).append(s.rid)
    # model 2 loads over [1, 2.04) s: its 11 requests wait and run as batches of 4, 4, 3
    assert sorted(len(v) for v in sizes.values()) == [1, 3, 4, 4]
    assert res.batches == 4


def test_residency_never_exceeds_max_loaded():
    cfg = ServeConfig(models=5, max_loaded=2, rates=skewed_rates(6.0, 5, 1.0), cv=4.0, seconds=30, warm=False)
    res = _run(cfg)
    resident = set()
    for s in res.swaps:
        if s.victim is not None:
            assert s.victim in resident
            resident.discard(s.victim)
        assert s.model not in resident
        resident.add(s.model)
        assert len(resident) <= 2
    starts = [s.start_s for s in res.swaps]
    ends = [s.done_s for s in res.swaps]
    assert all(b >= a for a, b in zip(ends, starts[1:]))   # one load at a time on the links


def test_gamma_arrivals_rate_and_cv():
    rng = np.random.default_rng(0)
    for cv in (0.25, 1.0, 4.0):
        t = gamma_times(rng, 20.0, cv, 2000.0)
        gaps = np.diff(t)
        assert len(t) / 2000.0 == pytest.approx(20.0, rel=0.1)
        assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.1)
    assert len(gamma_times(rng, 0.0, 1.0, 10.0)) == 0
    a, b = generate((1.0, 2.0), 1.0, 50.0, 3), generate((1.0, 2.0, 5.0), 1.0, 50.0, 3)
    assert [r.arrival_s for r in a if r.model == 0] == [r.arrival_s for r in b if r.model == 0]


def test_skewed_rates():
    r = skewed_rates(6.0, 3, 1.0)
    assert sum(r) == pytest.approx(6.0) and r[0] > r[1] > r[2]
    assert skewed_rates(3.0, 3, 0.0) == pytest.approx((1.0, 1.0, 1.0))


@pytest.mark.parametrize("change, field", [
    ({"rates": (1.0, -1.0, 1.0)}, "rates[1]"), ({"cv": 0.0}, "cv"), ({"cv": -1.0}, "cv"),
    ({"max_loaded": 4}, "max_loaded"), ({"rates": (1.0, 1.0)}, "rates"), ({"tp": 0}, "tp"),
    ({"link_gbps": 0.0}, "link_gbps"), ({"seconds": float("inf")}, "seconds")])
def test_bad_input(change, field):
    with pytest.raises(ServingError) as e:
        validate(dataclasses.replace(ServeConfig(), **change))
    assert e.value.field == field and "\n" not in str(e.value)


def test_exec_cost_layers_and_costmodel():
    t = exec_cost.Transformer(layers=2, hidden=64, ffn=256, prompt=4)
    assert exec_cost.layer_gemms(t, 2, 2) == [("qkv", 8, 96, 64), ("out", 8, 64, 32), ("fc1", 8, 128, 64),
                                              ("fc2", 8, 64, 128)]
    assert exec_cost.layer_gemms(t, 1, 3)[1] == ("out", 4, 64, 64)   # uneven split: the largest piece, padded
    assert exec_cost.layer_gemms(dataclasses.replace(t, split_pad=1), 1, 3)[1] == ("out", 4, 64, 22)
    assert exec_cost.layer_gemms(exec_cost.OPT13B, 1, 3)[2] == ("fc1", 128, 6848, 5120)
    with pytest.raises(ServingError):
        exec_cost.layer_gemms(t, 1, 0)
    tab = exec_cost.from_costmodel(t, max_batch=2, tp=1, samples=4)
    one, two = tab(0, 1), tab(0, 2)
    assert 0 < one <= two
    assert two == pytest.approx(exec_cost.batch_seconds(t, 2, 1, samples=4), rel=1e-9)
    out, _ = simulate(ServeConfig(models=2, max_loaded=1, rates=(1.0, 1.0), seconds=5), tab)
    assert out["exec_source"].startswith("costmodel") and out["breakdown"]["execute_s"] >= one - 1e-12
