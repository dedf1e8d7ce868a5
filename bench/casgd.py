"""CA-SGD against SGD on two MPI ranks joined by a real network path with an added latency: the path's
measured alpha and beta, the measured speedup and best s, and the alpha-beta-gamma model's predicted
speedup and best s for that alpha and beta and a measured gamma.

p = 2 ranks (no more ranks than this machine's cores), each in its own network namespace, MPICH over
TCP between them (``bench/netpath.py``).  One row per path, added one-way delay and way of waiting:

* ``netem``: a veth pair, the delay added by ``tc ... netem`` (needs the kernel's ``sch_netem``);
* ``delayline``: TUN devices and a forwarding process that holds every packet the added delay (for
  kernels without ``sch_netem``; its own wake-up per packet is part of the measured alpha).

``--wait``: ``spin`` (MPICH's default: a rank waiting for a message polls) and ``sleep`` (MPICH's progress
loop sleeps every 100 polls: on a machine shared with other jobs a polling rank burns its share of a
core, and the scheduler may switch it out just when its message comes).  A row whose path cannot be
built (not root, no ``tc``, no ``sch_netem``, no ``/dev/net/tun``) prints what is missing and is
skipped; the other rows run.  In each row, ``--rounds`` times, interleaved: one job on
the path that measures the machine (``probe_round``: a ping-pong of float64 buffers through the counting
wrapper, ``targets.mpi.calibrate.pingpong``, then each rank's local CA-SGD work at the largest s without
communication), then one job running SGD and CA-SGD for every s on the same samples (order reversed every
other round).  Every figure is the least over the rounds (the quietest round; the range is printed):
alpha and beta are ``fit_alpha_beta`` of the ping-pong's mean one-way seconds by size, gamma the local
work's seconds per modelled flop (``casgd_run.flops_per_rank``; Python's per-step overhead at that s
included), the runs' seconds.  The model (``algorithms.casgd_run.best_s``) predicts the speedup of its
best s over SGD; the target is a measured speedup (SGD over the fastest CA-SGD) within 25% of it.

    python3 bench/casgd.py --quick
    python3 bench/casgd.py --results bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dataclasses import asdict  # noqa: E402

from algorithms import casgd_run as cr  # noqa: E402

TOLERANCE = 0.25  # measured speedup within this fraction of the model's
PINGPONG_WORDS = (1, 8, 64, 4096, 32768)
RANKS = 2  # one rank per namespace of the path
WAIT_ENV = {"spin": {},  # MPICH's default: a rank waiting for a message polls without pause
            "sleep": {"MPIR_CVAR_POLLS_BEFORE_YIELD": "100", "MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"}}
"""How a waiting rank spends its time: ``sleep`` makes MPICH's progress loop sleep (nanosleep) every 100
polls, so that a waiting rank leaves its core to the other jobs and is woken on time by the scheduler."""

SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"table": 0, "column": "meas/model", "label": ["path", "added us", "wait"],
     "what": "Measured speedup over the model's predicted speedup", "stats": ["min", "max"]},
    {"table": 0, "column": "within 25%", "what": "Rows within the target", "stats": ["equal:yes"]},
]


def probe_round(ranks, sizes: list, reps: int, config: dict) -> dict:
    """One round's measurements of the machine, on the ranks of the path: the ping-pong's mean one-way
    seconds by words (rank 0), then every rank's local CA-SGD work at ``config``'s s on its column block,
    without communication (``casgd`` with no communicator), as seconds per modelled flop."""
    from algorithms import casgd as ca
    from targets.mpi.calibrate import pingpong

    pp = pingpong(ranks, sizes, reps, stat="mean")
    cfg = cr.Config(**{**config, "synthetic": tuple(config["synthetic"])})
    data = cr.dataset(cfg)
    m, n = data.shape
    c0, c1 = ca.column_block(n, ranks.size, ranks.rank)
    a_loc = ca.local_block(data.a, c0, c1)
    batches = ca.batch_indices(m, cfg.b, cfg.iters, cfg.seed)
    ranks.barrier()
    t0 = time.perf_counter()
    ca.casgd(None, a_loc, data.y, np.zeros(c1 - c0), batches, cfg.eta, cfg.s, ca.Kernels("numpy"))
    seconds = time.perf_counter() - t0
    flops = cr.flops_per_rank("casgd", cfg.iters, cfg.b, cfg.s, c1 - c0, data.density)
    return {"pingpong": pp, "seconds_per_flop": seconds / flops}


def compare(sgd_seconds: float, casgd_seconds: dict, predicted: dict, tolerance: float = TOLERANCE) -> dict:
    """Measured against predicted: ``casgd_seconds`` {s: seconds}; ``predicted`` from ``casgd_run.best_s``.
    The measured best s is the fastest s (ties to the smaller), its speedup SGD's seconds over its seconds;
    ``ratio`` = measured / predicted speedup, ``within`` when |ratio - 1| <= ``tolerance``."""
    best = min(casgd_seconds, key=lambda s: (casgd_seconds[s], s))
    speedup = sgd_seconds / casgd_seconds[best]
    ratio = speedup / predicted["speedup"]
    return {"measured_best_s": best, "measured_speedup": speedup, "model_best_s": predicted["best_s"],
            "model_speedup": predicted["speedup"], "ratio": ratio, "within": abs(ratio - 1.0) <= tolerance}


def path_alpha_beta(rounds: list[dict]) -> tuple[float, float, dict]:
    """(alpha s, beta s/word, {words: one-way s}) from the ping-pong rounds ({words: one-way s} each; the
    benchmark's are means): per size the least over the rounds (the quietest round's view of the path),
    then ``fit_alpha_beta``."""
    from targets.mpi.calibrate import fit_alpha_beta

    best = {w: min(r[w] for r in rounds) for w in rounds[0]}
    alpha, beta = fit_alpha_beta(best)
    return alpha, beta, best


def run_row(kind: str, delay_s: float, wait: str, args, data_kw: dict, n: int, density: float) -> dict:
    """One (path, delay, wait) row: build the path, interleave ping-pong and SGD/CA-SGD rounds, model, compare.
    Raises ``netpath.PathUnavailable`` when the path cannot be built here."""
    from netpath import latency_path
    from targets.mpi import launch

    s_list = args.s_list
    base = dict(ranks=RANKS, b=args.b, eta=args.eta, iters=args.iters, seed=0, kernels="numpy", check=False,
                timeout_s=args.timeout, **data_kw)
    cfgs = [cr.Config(method="sgd", s=1, **base)] + [cr.Config(method="casgd", s=s, **base) for s in s_list]
    pings, gammas, times, xs, counts = [], [], {c: [] for c in range(len(cfgs))}, {}, {}
    probe_cfg = asdict(cfgs[-1])
    with latency_path(kind, delay_s) as path:
        path.launch_kw["extra_env"].update(WAIT_ENV[wait])
        for rnd in range(args.rounds):
            pr = launch("bench.casgd:probe_round", RANKS, {"sizes": list(PINGPONG_WORDS), "reps": args.reps,
                                                           "config": probe_cfg}, timeout_s=args.timeout,
                        **path.launch_kw)
            pings.append({int(w): t for w, t in pr[0]["pingpong"].items()})
            gammas.append(max(r["seconds_per_flop"] for r in pr))
            order = list(range(len(cfgs)))[::(-1 if rnd % 2 else 1)]
            res = cr.run_many([cfgs[i] for i in order], keep_x=True, launch_kw=path.launch_kw)
            for i, r in zip(order, res):
                times[i].append(r["seconds"])
                xs[i] = np.asarray(r["x"])
                counts[i] = (r["messages_per_rank"][0], r["words_per_rank"][0], r["counts_match"])
    alpha, beta, best_pp = path_alpha_beta(pings)
    gamma = min(gammas)
    machine = {"alpha": alpha, "beta": beta, "gamma": gamma}
    pred = cr.best_s(args.iters, args.b, RANKS, n, density, machine, candidates=tuple(s_list))
    t = {i: min(v) for i, v in times.items()}
    cmp = compare(t[0], {cfgs[i].s: t[i] for i in range(1, len(cfgs))}, pred)
    configs = []
    for i, c in enumerate(cfgs):
        model_t = cr.model_seconds(c.method, args.iters, args.b, c.s, RANKS, n, density, machine)
        diff = float(np.linalg.norm(xs[i] - xs[0]) / np.linalg.norm(xs[0]))
        configs.append({"method": c.method, "s": c.s, "msgs": counts[i][0], "words": counts[i][1],
                        "counts_match": counts[i][2], "iterate_diff": diff, "seconds": t[i],
                        "seconds_max": max(times[i]), "rounds": times[i], "speedup": t[0] / t[i],
                        "model_seconds": model_t, "model_speedup": pred["sgd_seconds"] / model_t})
    return {"path": kind, "added_s": delay_s, "wait": wait, "alpha_s": alpha, "beta_s_per_word": beta,
            "gamma_s_per_flop": gamma,
            "pingpong_s": {str(w): v for w, v in best_pp.items()}, "pingpong_rounds": pings,
            "gamma_rounds": gammas, **cmp,
            "sgd_seconds": t[0], "configs": configs}


def run_rows(plan: list, run_one, say=print) -> tuple[list, list, list]:
    """``run_one(kind, delay_s, wait)`` for each (kind, delay_s, wait) of ``plan``: (rows, skipped, failed).
    A row whose path cannot be built here (``PathUnavailable``) is skipped naming what is missing, a row whose MPI job
    fails (``MpiError``: a rank raised, died or hung) is recorded with its one line; the next rows run."""
    from netpath import PathUnavailable
    from targets.mpi.launch import MpiError

    rows, skipped, failed = [], [], []
    for kind, delay, wait in plan:
        label = f"{kind} +{delay * 1e6:g} us, ranks {wait}"
        try:
            row = run_one(kind, delay, wait)
        except PathUnavailable as exc:
            skipped.append({"path": kind, "added_s": delay, "wait": wait, "missing": exc.missing})
            say(f"row {label} skipped: missing {exc.missing}")
            continue
        except MpiError as exc:
            failed.append({"path": kind, "added_s": delay, "wait": wait, "error": str(exc)})
            say(f"row {label} failed: {exc}")
            continue
        rows.append(row)
        say(f"row {label}: ping-pong one-way seconds by words (mean, quietest round) "
            + ", ".join(f"{w}: {v * 1e6:.1f} us" for w, v in row["pingpong_s"].items()))
    return rows, skipped, failed


def parse_list(text: str, kind, field: str) -> list:
    try:
        out = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or any(v < 0 for v in out):
        print(f"bench/casgd.py: {field}: expected comma-separated non-negative numbers, got {text!r}", file=sys.stderr)
        sys.exit(2)
    return out


def main() -> int:
    from rich.console import Console
    from rich.table import Table

    from bench.results_section import run_stamp, save_outputs
    from netpath import KINDS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds, s up to 32, H = 128")
    ap.add_argument("--paths", default="netem,delayline", help=f"comma-separated path kinds ({', '.join(KINDS)})")
    ap.add_argument("--delays-us", default="0,200,500", help="comma-separated added one-way delays, microseconds")
    ap.add_argument("--synthetic", default="2048,1024,1", help="m,n,density of the seeded problem")
    ap.add_argument("--b", type=int, default=4)
    ap.add_argument("--s", default=None, help="comma-separated s (default 1,2,4,8,16,32,64; --quick to 32)")
    ap.add_argument("--iters", type=int, default=None, help="H (default 256; --quick 128)")
    ap.add_argument("--eta", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds per row (default 7; --quick 3)")
    ap.add_argument("--reps", type=int, default=30, help="ping-pong exchanges per size and round")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds before a hung job is ended")
    ap.add_argument("--wait", default="spin,sleep", help=f"comma-separated: how ranks wait ({', '.join(WAIT_ENV)})")
    ap.add_argument("--json", default=None)
    ap.add_argument("--results", default=None, help="record the tables in this results file")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.paths.split(",") if k.strip()]
    if not kinds or any(k not in KINDS for k in kinds):
        print(f"bench/casgd.py: --paths: expected some of {', '.join(KINDS)}, got {args.paths!r}", file=sys.stderr)
        return 2
    waits = [w.strip() for w in args.wait.split(",") if w.strip()]
    if not waits or any(w not in WAIT_ENV for w in waits):
        print(f"bench/casgd.py: --wait: expected some of {', '.join(WAIT_ENV)}, got {args.wait!r}", file=sys.stderr)
        return 2
    delays = [d * 1e-6 for d in parse_list(args.delays_us, float, "--delays-us")]
    args.s_list = parse_list(args.s or ("1,2,4,8,16,32" if args.quick else "1,2,4,8,16,32,64"), int, "--s")
    args.iters = args.iters or (128 if args.quick else 256)
    args.rounds = args.rounds or (3 if args.quick else 7)
    try:
        data_kw = {"synthetic": cr.parse_synthetic(args.synthetic)}
        cr.Config(**data_kw, ranks=RANKS, b=args.b, iters=args.iters, s=max(args.s_list)).validate()
        data = cr.dataset(cr.Config(**data_kw))
        cr.check_sizes(cr.Config(**data_kw, ranks=RANKS, b=args.b), data)
    except cr.CasgdError as exc:
        print(f"bench/casgd.py: {exc}", file=sys.stderr)
        return 2
    m, n = data.shape
    cores = os.cpu_count() or 1
    date, machine_text = run_stamp()
    console = Console(width=200, record=True)
    t0 = time.perf_counter()
    console.print(f"data {data.name} ({m} x {n}), b = {args.b}, H = {args.iters}, p = {RANKS} ranks on {cores} cores "
                  f"({'not ' if RANKS <= cores else ''}oversubscribed), {args.rounds} interleaved rounds per row; "
                  f"load average {os.getloadavg()[0]:.1f} at the start")
    rows, skipped, failed = run_rows([(k, d, w) for k in kinds for d in delays for w in waits],
                                     lambda k, d, w: run_row(k, d, w, args, data_kw, n, data.density), console.print)
    summary = Table(title="Per path and added delay: the path's alpha and beta, measured and modelled CA-SGD "
                          "over SGD (p = 2)")
    for col in ("path", "added us", "wait", "alpha us", "beta ns/word", "gamma ns/flop", "SGD s", "meas. best s",
                "meas. speedup", "model best s", "model speedup", "meas/model", "within 25%"):
        summary.add_column(col, justify="right")
    for r in rows:
        summary.add_row(r["path"], f"{r['added_s'] * 1e6:g}", r["wait"], f"{r['alpha_s'] * 1e6:.1f}",
                        f"{r['beta_s_per_word'] * 1e9:.2f}", f"{r['gamma_s_per_flop'] * 1e9:.4f}",
                        f"{r['sgd_seconds']:.4f}", str(r["measured_best_s"]), f"{r['measured_speedup']:.2f}",
                        str(r["model_best_s"]), f"{r['model_speedup']:.2f}", f"{r['ratio']:.2f}",
                        "yes" if r["within"] else "NO")
    for r in skipped + failed:
        summary.add_row(r["path"], f"{r['added_s'] * 1e6:g}", r["wait"], *["-"] * 9,
                        "skipped" if "missing" in r else "failed")
    console.print(summary)
    detail = Table(title="Per configuration: seconds (least of the rounds, and the most), speedup over SGD, "
                         "model seconds at the row's alpha, beta, gamma")
    for col in ("path", "added us", "wait", "method", "s", "msgs/rank", "words/rank", "counts=model", "iterate diff",
                "seconds", "max of rounds", "speedup", "model seconds", "model speedup"):
        detail.add_column(col, justify="right")
    for r in rows:
        for c in r["configs"]:
            detail.add_row(r["path"], f"{r['added_s'] * 1e6:g}", r["wait"], c["method"], str(c["s"]), f"{c['msgs']:,}",
                           f"{c['words']:,}", "yes" if c["counts_match"] else "NO", f"{c['iterate_diff']:.1e}",
                           f"{c['seconds']:.4f}", f"{c['seconds_max']:.4f}", f"{c['speedup']:.2f}",
                           f"{c['model_seconds']:.4f}", f"{c['model_speedup']:.2f}")
    console.print(detail)
    console.print(f"total {time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.1f} at the end")
    command = "python3 bench/casgd.py " + " ".join(sys.argv[1:])
    notes = ("Two ranks, one per network namespace, MPICH over TCP through the path the benchmark makes and removes. "
             "alpha and beta are the path's, from a ping-pong through the counting wrapper (mean one-way seconds); "
             "gamma is the ranks' local CA-SGD work at the largest s without communication, per modelled flop, so "
             "Python's per-step overhead at that s is in it and SGD's is not; every figure is the least over "
             "interleaved rounds.  \"wait\" says how a rank waits for a message: spin (MPICH's default, "
             "polling) or sleep (MPICH's progress loop sleeps between bursts of polls, leaving the core to other "
             "jobs).  \"netem\" rows need the kernel's sch_netem (a row that cannot be built says "
             "what is missing and is skipped); \"delayline\" rows delay packets in a forwarding process between "
             "TUN devices, whose wake-up per packet is part of the measured alpha.  The machine was shared with "
             "other jobs: the load average is printed, and with more runnable jobs than cores a rank waits for a "
             "core however few ranks there are; the ping-pong's alpha counts some of that wait, the model's SGD "
             "seconds leave out SGD's per-iteration Python work and the rest of it, so where the path's alpha is "
             "small (no added delay) the model's SGD is far faster than the measured one (compare the model "
             "seconds with the seconds of the sgd rows) and its predicted speedup far below the measured.")
    save_outputs(name="casgd", title="CA-SGD vs SGD over a delayed network path", command=command, date=date,
                 machine=machine_text, console=console,
                 data={"rows": rows, "skipped": skipped, "failed": failed,
                       "iters": args.iters, "b": args.b, "data": data.name, "tolerance": TOLERANCE},
                 json_path=args.json, results_path=args.results, notes=notes, summary=SUMMARY,
                 packages=("numpy", "scipy", "mpi4py", "mpich", "rich"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
