"""Serving several models with model-parallel swapping: the OPT-13B swap trend, bursty load, real copies.

    python3 bench/serving.py [--quick] [--exec-s SECONDS] [--link-limit GBPS] [--plot F.png] [--json F] [--results bench/RESULTS.md]

1. Simulated OPT-13B (26 GB fp16), 3 models, 2 resident, tensor parallel over 1..4 GPUs, one PCIe 4.0 x16
   link each (25 GB/s effective): mean swap seconds against the law size / (shards x bandwidth) and the
   published trend (Zou et al., "Computron", arXiv 2306.13835: about 1.35 s on one GPU, about 0.4 s on four),
   and a two-point fit of (bandwidth, fixed latency) to the published figures.
2. Burstiness: cv in {0.25, 1, 4} with Zipf-skewed rates at 4 shards: latency percentiles, hit rate and the
   swap / queue / execute breakdown.
3. Real copies on this machine (``algorithms.serving.real``): 1..4 worker processes copy shards of a model
   between shared-memory pools; measured swap seconds against the law with the bandwidth and latency
   calibrated here (pure law, and with the measured host cap), and the engine run with real swaps; once
   unpaced (this machine's cores share one memory bus) and once with each worker paced to --link-limit
   GB/s (a link slower than the memory system, the law's premise, as PCIe is slower than host DRAM).
Batch times: OPT-13B's GEMMs on the gpu-h200 preset through the cost model, unless --exec-s.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algorithms.serving import ServeConfig, latency_cdf_plot, skewed_rates, swap_time_s  # noqa: E402
from algorithms.serving.experiments import exec_model, real_copies, simulate  # noqa: E402

PUBLISHED_S = {1: 1.35, 4: 0.4}   # Computron's OPT-13B swap seconds on 1 and 4 GPUs (approximate)


def fit_published() -> tuple[float, float]:
    """(GB/s per link, fixed seconds) through the two published points t(s) = B/(s bw) + lat."""
    (s1, t1), (s4, t4) = sorted(PUBLISHED_S.items())
    b = 26e9
    inv = (t1 - t4) / (b / s1 - b / s4)        # seconds per byte of one link
    return 1.0 / inv / 1e9, t1 - b / s1 * inv


def trend_rows(base: ServeConfig, exec_s: float | None) -> tuple[list[dict], dict]:
    rows, runs = [], {}
    bw_fit, lat_fit = fit_published()
    for s in (1, 2, 3, 4):
        cfg = dataclasses.replace(base, tp=s)
        out, res = simulate(cfg, exec_model(cfg, exec_s))
        law = swap_time_s(cfg.model_bytes, s, cfg.link_gbps)
        pub = PUBLISHED_S.get(s)
        rows.append({"shards": s, "mean_swap_s": out["mean_swap_s"], "law_s": law,
                     "sim_over_law": out["mean_swap_s"] / law, "published_s": pub,
                     "law_over_published": law / pub if pub else None,
                     "fit_s": swap_time_s(cfg.model_bytes, s, bw_fit, lat_fit), "swaps": out["swaps"],
                     "hit_rate": out["hit_rate"], "mean_latency_s": out["mean_latency_s"],
                     "p99_latency_s": out["p99_latency_s"], "batch1_s": out["exec_base_s"] + out["exec_per_request_s"]})
        runs[s] = res
    return rows, {"fit_link_gbps": bw_fit, "fit_latency_s": lat_fit}


def cv_rows(base: ServeConfig, exec_s: float | None) -> tuple[list[dict], dict]:
    rows, runs = [], {}
    for cv in (0.25, 1.0, 4.0):
        cfg = dataclasses.replace(base, tp=4, cv=cv, rates=skewed_rates(sum(base.rates), base.models, 1.0))
        out, res = simulate(cfg, exec_model(cfg, exec_s))
        b = out["breakdown"]
        rows.append({"cv": cv, "requests": out["requests"], "swaps": out["swaps"], "hit_rate": out["hit_rate"],
                     "mean_latency_s": out["mean_latency_s"], "p50_latency_s": out["p50_latency_s"],
                     "p95_latency_s": out["p95_latency_s"], "p99_latency_s": out["p99_latency_s"],
                     "swap_s": b["swap_s"], "queue_s": b["queue_s"], "execute_s": b["execute_s"]})
        runs[f"cv={cv:g}"] = res
    return rows, runs


def _table(console, title, rows, cols):
    from rich.table import Table

    t = Table(title=title)
    for head, _, _ in cols:
        t.add_column(head, justify="right")
    for r in rows:
        t.add_row(*("-" if r[k] is None else fmt(r[k]) for _, k, fmt in cols))
    console.print(t)


def _effect(ratio: float) -> str:
    """What adding copy workers did, from all workers' GB/s over one worker's."""
    if ratio < 0.9:
        return f"slow each other down ({ratio:.2f}x one worker's bandwidth together)"
    if ratio < 1.5:
        return f"add little ({ratio:.2f}x one worker's bandwidth together)"
    return f"add bandwidth ({ratio:.2f}x one worker's together)"


def _real_table(console, real, title):
    c = real["calibration"]
    g = lambda v: f"{v:.3g}"
    pct = lambda v: f"{v:+.1%}"
    _table(console, f"{title}: calibrated link {c['link_gbps']:.2f} GB/s, host cap {c['host_gbps']:.2f} GB/s, "
                    f"latency {c['latency_s'] * 1e3:.2f} ms", real["rows"],
           [("shards", "shards", str), ("measured s", "measured_s", g), ("median s", "measured_median_s", g),
            ("law s", "predicted_s", g), ("err", "error", pct), ("capped law s", "predicted_host_capped_s", g),
            ("err capped", "error_host_capped", pct), ("engine swap s", "engine_mean_swap_s", g),
            ("engine swaps", "engine_swaps", str), ("bytes ok", "resident_bytes_match", str)])


def _real_prose(real, label) -> str:
    c, rows = real["calibration"], real["rows"]
    ok_pure = sum(abs(r["error"]) <= 0.2 for r in rows)
    ok_cap = sum(abs(r["error_host_capped"]) <= 0.2 for r in rows)
    worst = max(rows, key=lambda r: abs(r["error"]))
    worst_cap = max(abs(r["error_host_capped"]) for r in rows)
    eng = max(abs(r["engine_mean_swap_s"] / r["predicted_host_capped_s"] - 1) for r in rows)
    eng_pure = max(abs(r["engine_mean_swap_s"] / r["predicted_s"] - 1) for r in rows)
    return (f"{label} ({c['model_bytes'] >> 20} MiB models, {c['cores']} cores): one worker copies at "
            f"{c['link_gbps']:.2f} GB/s and all workers together at {c['host_gbps']:.2f} GB/s, so extra workers "
            f"{_effect(c['host_gbps'] / c['link_gbps'])}.  The fastest of each shard count is within 20% of the "
            f"pure law at {ok_pure} of {len(rows)} shard counts (worst: {worst['shards']} shards, measured "
            f"{worst['measured_s'] / worst['predicted_s']:.2f}x the law) and of the law with the measured host cap "
            f"at {ok_cap} of {len(rows)} (worst {worst_cap:.0%}); the engine's mean real swap is within "
            f"{eng_pure:.0%} of the pure law and {eng:.0%} of the capped law at every shard count.  All resident slots held their model's exact bytes: "
            f"{all(r['resident_bytes_match'] for r in rows)}.")


def prose(trend, fit, cvs, real, paced=None) -> str:
    t1, t4 = trend[0], trend[-1]
    worst = max(abs(r["sim_over_law"] - 1) for r in trend)
    lines = [f"Simulated mean swap time equals the law within {worst:.1%} at every shard count "
             f"({t1['mean_swap_s']:.3f} s on 1 GPU to {t4['mean_swap_s']:.3f} s on 4, a {t1['mean_swap_s'] / t4['mean_swap_s']:.2f}x "
             f"fall).  Against the published {PUBLISHED_S[1]} s and {PUBLISHED_S[4]} s the 25 GB/s law is "
             f"{t1['law_over_published']:.2f}x and {t4['law_over_published']:.2f}x: the published trend is the "
             f"same 1/shards fall, at a lower effective bandwidth; the two published points fit "
             f"{fit['fit_link_gbps']:.1f} GB/s per link plus {fit['fit_latency_s'] * 1e3:.0f} ms per swap."]
    if cvs:
        lo, hi = cvs[0], cvs[-1]
        lines.append(f"Burstier arrivals (cv {lo['cv']:g} -> {hi['cv']:g}) move p99 latency from "
                     f"{lo['p99_latency_s']:.2f} s to {hi['p99_latency_s']:.2f} s and the hit rate from "
                     f"{lo['hit_rate']:.2f} to {hi['hit_rate']:.2f}.")
    if real:
        lines.append(_real_prose(real, "Real copies, unpaced"))
    if paced:
        lines.append(_real_prose(paced, f"Real copies, each worker paced to "
                                        f"{paced['calibration']['link_limit_gbps']:g} GB/s"))
    return "\n\n".join(lines)


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"table": 0, "column": "sim/law", "what": "Simulated mean swap over the law", "stats": ["min", "max"]},
    {"table": 1, "column": "p99 s", "what": "P99 latency over burstiness", "stats": ["min", "max"]},
    {"table": 2, "column": "err", "what": "Real copies (unpaced), fastest against the law", "stats": ["absmin", "absmax"]},
    {"table": 3, "column": "err", "what": "Real copies (paced), fastest against the law", "stats": ["absmin", "absmax"]},
]


def main(argv=None) -> int:
    from rich.console import Console

    from bench.results_section import run_stamp, save_outputs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter runs, small real models")
    ap.add_argument("--exec-s", type=float, default=None, help="per-batch seconds instead of the cost model")
    ap.add_argument("--real-mib", type=int, default=None, help="MiB per model in the real copies (256)")
    ap.add_argument("--repeats", type=int, default=None, help="real copies per shard count (7)")
    ap.add_argument("--link-limit", type=float, default=0.5,
                    help="GB/s each worker is paced to in the second real run (0: skip it)")
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--plot", default=None, help="latency CDF of the cv runs (PNG)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--results", default=None, help="record the tables in this results file")
    args = ap.parse_args(argv)
    seconds = 300.0 if args.quick else 1800.0
    base = ServeConfig(models=3, max_loaded=2, rates=(0.5, 0.5, 0.5), cv=1.0, seconds=seconds, seed=0)
    console = Console(width=200, record=True)
    g = lambda v: f"{v:.3g}"
    trend, fit = trend_rows(base, args.exec_s)
    _table(console, "OPT-13B, 3 models, 2 resident, 25 GB/s per GPU link: mean swap seconds vs shards", trend,
           [("shards", "shards", str), ("sim swap s", "mean_swap_s", g), ("law s", "law_s", g),
            ("sim/law", "sim_over_law", g), ("published s", "published_s", g), ("law/pub", "law_over_published", g),
            ("fit s", "fit_s", g), ("swaps", "swaps", str), ("hit", "hit_rate", g), ("batch(1) s", "batch1_s", g),
            ("mean lat s", "mean_latency_s", g), ("p99 s", "p99_latency_s", g)])
    cvs, runs = cv_rows(base, args.exec_s)
    _table(console, "4 shards, Zipf-skewed rates (total 1.5 req/s): burstiness", cvs,
           [("cv", "cv", g), ("requests", "requests", str), ("swaps", "swaps", str), ("hit", "hit_rate", g),
            ("mean s", "mean_latency_s", g), ("p50 s", "p50_latency_s", g), ("p95 s", "p95_latency_s", g),
            ("p99 s", "p99_latency_s", g), ("swap s", "swap_s", g), ("queue s", "queue_s", g),
            ("execute s", "execute_s", g)])
    if args.plot:
        latency_cdf_plot(runs, args.plot, title="OPT-13B x3, 2 resident, 4 shards: latency CDF by cv")
    real = paced = None
    if not args.skip_real:
        mib = args.real_mib or (64 if args.quick else 256)
        kw = dict(model_bytes=mib << 20, repeats=args.repeats or (3 if args.quick else 7),
                  seconds=5.0 if args.quick else 10.0)
        real = real_copies(**kw)
        _real_table(console, real, f"Real copies, {mib} MiB models, 3 models, 2 slots, unpaced")
        if args.link_limit > 0:
            paced = real_copies(**kw, link_limit_gbps=args.link_limit)
            _real_table(console, paced, f"Real copies, {mib} MiB models, each worker paced to {args.link_limit:g} GB/s")
    notes = prose(trend, fit, cvs, real, paced)
    console.print(notes)
    date, machine = run_stamp()
    given = list(argv if argv is not None else sys.argv[1:])
    kept = [a for i, a in enumerate(given) if a not in ("--json", "--results", "--plot")
            and (i == 0 or given[i - 1] not in ("--json", "--results", "--plot"))]
    command = " ".join(["python3 bench/serving.py", *kept, "--results bench/RESULTS.md"])
    save_outputs(name="serving", title="Serving with model-parallel swapping", command=command, date=date,
                 machine=machine, console=console, data={"trend": trend, "fit": fit, "cv": cvs, "real": real,
                                                           "real_paced": paced},
                 json_path=args.json, results_path=args.results,
                 notes="Swap law: bytes / (shards x link GB/s) + latency.  Batch times: OPT-13B's four GEMMs per "
                       "layer on gpu-h200 through the cost model (fp32 lanes) unless --exec-s.", summary=SUMMARY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
