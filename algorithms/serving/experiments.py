"""What ``cosa serve`` and ``bench/serving.py`` run: a simulated experiment and a real-copy experiment."""

from __future__ import annotations

import dataclasses

import numpy as np

from . import exec_cost
from .arrivals import generate
from .engine import Result, run, summary
from .model import ServeConfig, swap_time_s, validate


def exec_model(cfg: ServeConfig, exec_s: float | None = None, arch: str = "gpu-h200",
               samples: int = 24) -> exec_cost.ExecTable:
    """A given per-batch time, or OPT-13B on ``arch`` through the cost model at ``cfg``'s tp and max batch."""
    if exec_s is not None:
        return exec_cost.fixed(exec_s)
    return exec_cost.from_costmodel(exec_cost.OPT13B, cfg.max_batch, cfg.tp, arch, samples)


def simulate(cfg: ServeConfig, exec_table) -> tuple[dict, Result]:
    """Validate, draw the arrivals, run the engine; (summary with the config's facts, the raw result)."""
    validate(cfg)
    res = run(cfg, generate(cfg.rates, cfg.cv, cfg.seconds, cfg.seed), exec_table)
    out = summary(res)
    out.update(predicted_swap_s=cfg.swap_s, shards=cfg.shards, exec_base_s=exec_table.base_s,
               exec_per_request_s=exec_table.per_request_s, exec_source=exec_table.source)
    return out, res


def swap_vs_shards(base: ServeConfig, shard_counts=(1, 2, 3, 4), exec_s: float = 0.1) -> list[dict]:
    """Simulated mean swap seconds and the law's value for each shard count (tensor parallel = shards)."""
    rows = []
    for s in shard_counts:
        cfg = dataclasses.replace(base, tp=s, pp=1)
        out, _ = simulate(cfg, exec_cost.fixed(exec_s))
        rows.append({"shards": s, "mean_swap_s": out["mean_swap_s"], "swaps": out["swaps"],
                     "law_s": swap_time_s(cfg.model_bytes, s, cfg.link_gbps, cfg.swap_latency_s),
                     "mean_latency_s": out["mean_latency_s"], "hit_rate": out["hit_rate"]})
    return rows


def real_copies(models: int = 3, slots: int = 2, model_bytes: int = 256 << 20, shard_counts=(1, 2, 3, 4),
                repeats: int = 5, rates=(2.0, 1.0, 1.0), cv: float = 1.0, seconds: float = 10.0,
                exec_s: float = 0.05, seed: int = 0, link_limit_gbps: float | None = None) -> dict:
    """Measure swap seconds vs shard count with real copies (``real.Pools``), calibrate the law's bandwidth
    and latency on this machine, and run the engine with a ``RealSwapper`` at every shard count.

    Returns {"calibration": {...}, "rows": [per shard count: measured fastest/median seconds of ``repeats``
    plain swaps, engine mean swap seconds and swaps, predicted seconds (the pure law, and the law with the
    measured host cap), relative errors of the fastest (as the calibration uses the fastest copies)]}."""
    from .real import Pools, RealSwapper, calibrate, sweep

    workers = max(shard_counts)
    rows = []
    with Pools(models, slots, model_bytes, workers, link_limit_gbps) as pools:
        cal = calibrate(pools, repeats)
        times = sweep(pools, shard_counts, repeats)
        for s in shard_counts:
            t = times[s]
            cfg = validate(ServeConfig(models=models, max_loaded=slots, tp=s, model_bytes=float(model_bytes),
                                       link_gbps=cal.link_gbps, swap_latency_s=cal.latency_s,
                                       rates=tuple(rates), cv=cv, seconds=seconds, seed=seed))
            swapper = RealSwapper(pools, s, tuple(range(slots)))
            res = run(cfg, generate(cfg.rates, cfg.cv, cfg.seconds, cfg.seed), exec_cost.fixed(exec_s), swapper)
            resident_ok = all(pools.holds(m, slot) for m, slot in swapper.slot_of.items())
            eng = summary(res)
            pred, pred_cap = cal.predict_s(model_bytes, s), cal.predict_s(model_bytes, s, host_capped=True)
            best = min(t)
            rows.append({"shards": s, "measured_s": best, "measured_median_s": float(np.median(t)),
                         "engine_mean_swap_s": eng["mean_swap_s"], "engine_swaps": eng["swaps"],
                         "engine_hit_rate": eng["hit_rate"], "resident_bytes_match": resident_ok,
                         "predicted_s": pred, "predicted_host_capped_s": pred_cap,
                         "error": best / pred - 1.0, "error_host_capped": best / pred_cap - 1.0})
    return {"calibration": {"link_gbps": cal.link_gbps, "latency_s": cal.latency_s, "host_gbps": cal.host_gbps,
                            "cores": cal.cores,
                            "model_bytes": model_bytes, "models": models, "slots": slots, "repeats": repeats,
                            "link_limit_gbps": link_limit_gbps},
            "rows": rows}
