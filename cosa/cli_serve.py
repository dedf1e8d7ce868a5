"""``cosa serve``: serving several models on a model-parallel group with swapping (``algorithms.serving``).

    cosa serve simulate --models M [--model-bytes B] [--link-gbps G] --max-loaded K --tp T --pp P --cv C
                        --rates r1,r2,... --seconds S [--seed N] [--max-batch N] [--exec-s SECONDS]
                        [--arch gpu-h200] [--swap-latency SECONDS] [--host-gbps G] [--cold] [--json] [--plot F.png]
    cosa serve real [--models 3] [--max-loaded 2] [--model-mib 256] [--shards 1,2,3,4] [--repeats 5]
                    [--rates 2,1,1] [--cv 1] [--seconds 10] [--exec-s 0.05] [--seed 0] [--link-limit-gbps G]
                    [--gpu] [--json]

simulate: defaults are OPT-13B-sized models (26 GB in fp16) and one PCIe 4.0 x16 link per GPU at 25 GB/s
effective (``algorithms.serving.model`` gives the sources); --link-gbps is in GB/s (1e9 bytes/s); the batch
time is OPT-13B's through the cost model on --arch unless --exec-s gives one.  JSON keys: mean_latency_s,
p50_latency_s, p95_latency_s, p99_latency_s, mean_swap_s, swaps, hit_rate, breakdown (mean seconds per
request: swap_s, queue_s, execute_s), and requests, batches, end_s, predicted_swap_s, shards, exec_*.
real: copies real shards between shared-memory pools with 1..4 worker processes, calibrates the swap law
on this machine and compares (--link-limit-gbps paces each worker like a PCIe link slower than host
memory, the law's premise); --gpu adds CuPy pinned host-to-device copies (a GPU and CuPy needed).
Bad input (negative rates, cv <= 0, more resident models than models, a wrong number of rates) prints
one line and exits 2.  Like ``cosa/cli.py`` this module may import ``algorithms``.
"""

from __future__ import annotations

import argparse
import json
import math
import re

from .cli_casgd import finite_number

_BYTES = re.compile(r"^\s*(\d+(?:\.\d*)?(?:e\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "tib": 2**40}


def _error(message: str, field: str | None = None):
    from algorithms.serving import ServingError

    return ServingError(message, source="cosa serve", field=field)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (through cosa.cli.guarded), not argparse's usage block
        raise _error(message)


def parse_bytes(text: str) -> float:
    """'26GB' (1e9) / '24GiB' (2^30) / '2.6e10' -> bytes."""
    m = _BYTES.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"cannot parse '{text}' as bytes (e.g. 26GB, 24GiB, 2.6e10)")
    return float(m.group(1)) * _UNITS[(m.group(2) or "").lower()]


def parse_list(text: str, field: str, kind=float) -> tuple:
    try:
        values = tuple(kind(x) for x in text.split(","))
    except ValueError:
        raise _error(f"'{text}' is not a comma-separated list of numbers", field=field) from None
    if not all(math.isfinite(v) for v in values):
        raise _error(f"'{text}' holds a value that is not finite", field=field)
    return values


def build_parser() -> argparse.ArgumentParser:
    from algorithms.serving import LINK_GBPS, OPT13B_BYTES

    p = _Parser(prog="cosa serve", description="serving several models with model-parallel swapping")
    sub = p.add_subparsers(dest="mode", required=True, parser_class=_Parser)
    s = sub.add_parser("simulate", help="discrete-event simulation")
    s.add_argument("--models", type=int, default=3, help="models served (default 3)")
    s.add_argument("--model-bytes", type=parse_bytes, default=OPT13B_BYTES, help="bytes per model (26GB)")
    s.add_argument("--link-gbps", type=finite_number, default=LINK_GBPS, help="GB/s of one GPU's host link (25)")
    s.add_argument("--swap-latency", type=finite_number, default=0.0, help="fixed seconds added to every swap")
    s.add_argument("--host-gbps", type=finite_number, default=None, help="cap on the links' summed GB/s")
    s.add_argument("--max-loaded", type=int, default=2, help="models resident at once (default 2)")
    s.add_argument("--tp", type=int, default=1, help="tensor-parallel degree: GPUs a layer is split over (default 1)")
    s.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree: stages (default 1)")
    s.add_argument("--cv", type=finite_number, default=1.0, help="coefficient of variation of inter-arrival times")
    s.add_argument("--rates", default=None, help="requests/s per model, r1,r2,... (default 1 each)")
    s.add_argument("--seconds", type=finite_number, default=60.0, help="arrivals in [0, S)")
    s.add_argument("--seed", type=int, default=0, help="seed of the arrivals (default 0)")
    s.add_argument("--max-batch", type=int, default=8, help="most requests per batch (default 8)")
    s.add_argument("--exec-s", type=finite_number, default=None, help="per-batch seconds (default: cost model)")
    s.add_argument("--arch", default="gpu-h200", help="preset for the cost model's batch time")
    s.add_argument("--cold", action="store_true", help="start with no model loaded")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.add_argument("--plot", help="latency CDF (PNG)")
    r = sub.add_parser("real", help="real shard copies between shared-memory pools")
    r.add_argument("--models", type=int, default=3, help="models served (default 3)")
    r.add_argument("--max-loaded", type=int, default=2, help="models resident at once (default 2)")
    r.add_argument("--model-mib", type=int, default=256, help="MiB per model")
    r.add_argument("--shards", default="1,2,3,4", help="shard counts (worker processes), each 1..16")
    r.add_argument("--repeats", type=int, default=5, help="timed swaps per shard count (default 5)")
    r.add_argument("--rates", default="2,1,1", help="requests/s per model for the engine run")
    r.add_argument("--cv", type=finite_number, default=1.0,
                   help="coefficient of variation of inter-arrival times (default 1)")
    r.add_argument("--seconds", type=finite_number, default=10.0, help="arrivals in [0, S) (default 10)")
    r.add_argument("--exec-s", type=finite_number, default=0.05, help="per-batch seconds (default 0.05)")
    r.add_argument("--seed", type=int, default=0, help="seed of the arrivals (default 0)")
    r.add_argument("--link-limit-gbps", type=finite_number, default=None,
                   help="pace each worker to this GB/s (an emulated link slower than the memory system)")
    r.add_argument("--gpu", action="store_true", help="also CuPy pinned host-to-device copies")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def _simulate(args) -> dict:
    from algorithms.serving import ServeConfig, latency_cdf_plot, validate
    from algorithms.serving.experiments import exec_model, simulate

    rates = parse_list(args.rates, "--rates") if args.rates else (1.0,) * max(args.models, 1)
    cfg = validate(ServeConfig(models=args.models, max_loaded=args.max_loaded, tp=args.tp, pp=args.pp,
                               model_bytes=args.model_bytes, link_gbps=args.link_gbps,
                               swap_latency_s=args.swap_latency, host_gbps=args.host_gbps, rates=rates, cv=args.cv,
                               seconds=args.seconds, max_batch=args.max_batch, warm=not args.cold, seed=args.seed))
    out, res = simulate(cfg, exec_model(cfg, args.exec_s, args.arch))
    if args.plot:
        latency_cdf_plot({f"tp={cfg.tp} pp={cfg.pp} cv={cfg.cv:g}": res}, args.plot,
                         title=f"{cfg.models} models, {cfg.max_loaded} resident: request latency CDF")
        out["plot"] = args.plot
    return out


def _real(args) -> dict:
    from algorithms.serving import ServeConfig, validate
    from algorithms.serving.experiments import real_copies

    shards = parse_list(args.shards, "--shards", int)
    if any(not 1 <= s <= 16 for s in shards):
        raise _error(f"each must be in 1..16, got {args.shards}", field="--shards")
    if args.model_mib < 1 or args.repeats < 1:
        raise _error("--model-mib and --repeats must be >= 1", field="--model-mib" if args.model_mib < 1
                     else "--repeats")
    rates = parse_list(args.rates, "--rates")
    validate(ServeConfig(models=args.models, max_loaded=args.max_loaded, rates=rates, cv=args.cv,
                         seconds=args.seconds, seed=args.seed))
    if args.link_limit_gbps is not None and args.link_limit_gbps <= 0:
        raise _error(f"must be > 0, got {args.link_limit_gbps}", field="--link-limit-gbps")
    out = real_copies(args.models, args.max_loaded, args.model_mib << 20, shards, args.repeats, rates, args.cv,
                      args.seconds, args.exec_s, args.seed, args.link_limit_gbps)
    if args.gpu:
        from algorithms.serving import gpu

        out["gpu"] = [{"shards": s, "seconds": gpu.measure_h2d(args.model_mib << 20, s, args.repeats)}
                      for s in shards]
    return out


def _print_simulate(d: dict) -> None:
    b = d["breakdown"]
    print(f"{d['requests']} requests, {d['batches']} batches, {d['swaps']} swaps of {d['mean_swap_s']:.3f} s "
          f"(law {d['predicted_swap_s']:.3f} s, {d['shards']} shards), hit rate {d['hit_rate'] or 0:.3f}")
    if d["requests"]:
        print(f"latency mean {d['mean_latency_s']:.3f} s  p50 {d['p50_latency_s']:.3f}  p95 {d['p95_latency_s']:.3f}"
              f"  p99 {d['p99_latency_s']:.3f}  = swap {b['swap_s']:.3f} + queue {b['queue_s']:.3f}"
              f" + execute {b['execute_s']:.3f}")
    print(f"batch time {d['exec_base_s']:.4f} + {d['exec_per_request_s']:.4f} x batch s ({d['exec_source']})")


def _print_real(d: dict) -> None:
    c = d["calibration"]
    paced = f" (paced to {c['link_limit_gbps']:g})" if c.get("link_limit_gbps") else ""
    print(f"calibration: link {c['link_gbps']:.2f} GB/s per worker{paced}, host cap {c['host_gbps']:.2f} GB/s, "
          f"latency {c['latency_s'] * 1e3:.2f} ms, {c['cores']} cores, {c['model_bytes'] >> 20} MiB per model")
    print("shards  measured_s  law_s  err    capped_s  err    engine_swap_s  swaps  bytes_ok")
    for r in d["rows"]:
        print(f"{r['shards']:>6}  {r['measured_s']:10.4f}  {r['predicted_s']:.4f} {r['error']:+6.1%}"
              f"  {r['predicted_host_capped_s']:.4f}  {r['error_host_capped']:+6.1%}  {r['engine_mean_swap_s']:13.4f}"
              f"  {r['engine_swaps']:5d}  {r['resident_bytes_match']}")
    for g in d.get("gpu", []):
        print(f"gpu shards={g['shards']}: " + " ".join(f"{t:.4f}" for t in g["seconds"]))


def main(argv: list[str]) -> int:
    """``argv`` after ``serve``; errors are the caller's (``cosa.cli.guarded`` prints FrameworkError)."""
    args = build_parser().parse_args(argv)
    out = _simulate(args) if args.mode == "simulate" else _real(args)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        (_print_simulate if args.mode == "simulate" else _print_real)(out)
    return 0
