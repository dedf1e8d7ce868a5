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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per process")
    args = ap.parse_args(argv)
    got = {s: [] for s in STATES}
    with tempfile.TemporaryDirectory(prefix="cosa-cache-bench-") as tmp:
        cache = Path(tmp) / "cache"
        for _ in range(args.repeat):
            for state in STATES:
                got[state].append(one(state, cache, args.n, args.timeout))
    print(f"GEMM {args.n}^3 float64 kernel in a fresh process; {args.repeat} processes per state, {os.cpu_count()} cores")
    print(f"{'cache':<17} {'get kernel s (min..max)':>24} {'first call s (min..max)':>24} {'verified':>9}")
    for state in STATES:
        g = [r["get_s"] for r in got[state]]
        c = [r["call_s"] for r in got[state]]
        ok = all(r["ok"] for r in got[state])
        print(f"{state:<17} {min(g):>11.3f}..{max(g):<11.3f} {min(c):>11.3f}..{max(c):<11.3f} {'yes' if ok else 'NO':>9}")
    cold, warm = min(r["get_s"] for r in got["cold"]), min(r["get_s"] for r in got["all cached"])
    comp = min(r["get_s"] for r in got["schedule cached"])
    print(f"cold / all cached (get kernel, min): {cold / warm:.0f}x; compile only / all cached: {comp / warm:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
