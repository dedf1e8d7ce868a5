"""What the on-disk caches save: getting a scheduled 1024^2 GEMM kernel in a fresh process, cold and cached.

Each row is a fresh Python process (its imports done before the clock starts) that asks for
``algorithms.sketch.gemm_kernel(N, N, N)`` (float64, scheduled by the CoSA MIP on the cpu preset and built
by ``targets.cpu``) and then calls it once on N x N operands, with a cache directory in one of three states:

* cold: empty (the MIP solves, gcc compiles);
* schedule cached: the mapping on disk, no shared object (gcc compiles);
* all cached: mapping and shared object on disk (nothing is solved or compiled).

It prints the seconds to get the kernel and to run its first call, the minimum and maximum over
``--repeat`` processes per state (interleaved: cold, schedule cached, all cached, cold, ...), and the
ratio of the cold to the cached time.

    python bench/kernel_cache.py [--n 1024] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time
import numpy as np
import algorithms.sketch as sk
import cosa.schedule_cache, costmodel, mappings, targets.cpu, targets.cpu.plan  # imports are not timed
n = int(sys.argv[1])
t0 = time.perf_counter()
kern = sk.gemm_kernel(n, n, n)
t1 = time.perf_counter()
a = np.random.default_rng(0).random((n, n)); b = np.random.default_rng(1).random((n, n))
out = kern({"A": a, "B": b})
t2 = time.perf_counter()
ok = bool(np.allclose(out, a @ b))
print(json.dumps({"get_s": t1 - t0, "call_s": t2 - t1, "ok": ok}))
"""

STATES = ("cold", "schedule cached", "all cached")
# the table's row labels ("all ..." would read as an aggregate row to bench/results_section.py)
LABELS = {"cold": "cold", "schedule cached": "schedule cached", "all cached": "schedule and kernel cached"}


def one(state: str, cache: Path, n: int, timeout_s: float) -> dict:
    """One fresh process asking for the kernel with the cache in ``state``."""
    if state == "cold":
        shutil.rmtree(cache, ignore_errors=True)
    elif state == "schedule cached":
        shutil.rmtree(cache / "cpu", ignore_errors=True)
    env = {**os.environ, "COSA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(n)], capture_output=True, text=True, env=env,
                          timeout=timeout_s)
    if proc.returncode != 0:
        raise SystemExit(f"bench/kernel_cache.py: the {state} run failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed table (bench/results_section.py)
    {"table": 0, "column": "get kernel s, max", "what": "Seconds to get the kernel in a fresh process, slowest of "
     "the processes per cache state", "stats": ["max", "below:5", "below:0.2"]},
]


def main(argv=None) -> int:
    from results_section import run_stamp, save_outputs
    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per process")
    ap.add_argument("--json", help="write the numbers as JSON here")
    ap.add_argument("--results", help="write this benchmark's section of a results file (bench/RESULTS.md)")
    args = ap.parse_args(argv)
    date, machine = run_stamp()
    load = os.getloadavg()[0]
    got = {s: [] for s in STATES}
    with tempfile.TemporaryDirectory(prefix="cosa-cache-bench-") as tmp:
        cache = Path(tmp) / "cache"
        for _ in range(args.repeat):
            for state in STATES:
                got[state].append(one(state, cache, args.n, args.timeout))
    console = Console(record=True, width=120)
    table = Table(title=f"GEMM {args.n}^3 float64 kernel in a fresh process; {args.repeat} processes per state "
                        f"(interleaved), {os.cpu_count()} cores, load average {load:.1f} at the start")
    for col in ("cache", "get kernel s, min", "get kernel s, max", "first call s, min", "first call s, max",
                "verified"):
        table.add_column(col, justify="left" if col == "cache" else "right")
    rows = []
    for state in STATES:
        g = [r["get_s"] for r in got[state]]
        c = [r["call_s"] for r in got[state]]
        ok = all(r["ok"] for r in got[state])
        table.add_row(LABELS[state], f"{min(g):.3f}", f"{max(g):.3f}", f"{min(c):.3f}", f"{max(c):.3f}", "yes" if ok else "NO")
        rows.append({"state": state, "get_s": g, "call_s": c, "verified": ok})
    console.print(table)
    cold, warm = min(r["get_s"] for r in got["cold"]), min(r["get_s"] for r in got["all cached"])
    comp = min(r["get_s"] for r in got["schedule cached"])
    console.print(f"cold / all cached (get kernel, min): {cold / warm:.0f}x; compile only / all cached: {comp / warm:.0f}x")
    save_outputs(name="kernel_cache", title="Scheduled-kernel caches", date=date, machine=machine, console=console,
                 command=f"python bench/kernel_cache.py --n {args.n} --repeat {args.repeat}",
                 notes="cold: the MIP solves and gcc compiles; schedule cached: gcc only; schedule and kernel "
                       "cached: nothing is solved or compiled.  Imports are done before the clock starts in each process.",
                 data={"args": vars(args), "rows": rows, "load_average": load}, json_path=args.json,
                 results_path=args.results, summary=SUMMARY)
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
