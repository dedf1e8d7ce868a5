"""Distributed SpMM / SDDMM / FusedMM at p ranks with the scheduled CPU kernels as the ranks' local kernels
(``--local-kernel cosa``) against SciPy's (``scipy``): the ratio of their times, measured side by side.

One mpiexec launch runs every configuration (kernel x algorithm, c = 1 and the eliding given) with both
local kernels, interleaved: round 1 runs cosa then scipy for each configuration, round 2 the same, and
so on for ``--rounds`` rounds; in each round a run is timed ``--repeat`` times and keeps its fastest
(the slowest rank's wall time of the whole distributed kernel, communication included).  Printed per
configuration: the fastest time of each local kernel over all rounds, their ratio (cosa / scipy; below
1 means the scheduled kernels are faster) and the range of the per-round ratios.  Every run is verified
against SciPy's product and its words against the model.  The local kernels are scheduled first (the
CoSA MIP on the ``cpu`` preset, cached on disk) and built before the clock starts; each rank runs them
with --threads OpenMP threads (default: the cores divided among the ranks), SciPy with one.

    python bench/distributed_local.py [--ranks 2] [--m 8192] [--r 32] [--nnz-per-row 16]
                                      [--rounds 7] [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cosa.cli_mpi import local_mappings  # noqa: E402
from targets.mpi.problem import Problem  # noqa: E402
from targets.mpi.run import run_batch  # noqa: E402
from workloads import fusedmm, sddmm, spmm  # noqa: E402

BUILDERS = {"spmm": spmm, "sddmm": sddmm, "fusedmm": fusedmm}
CONFIGS = [("15d-dense", "none"), ("15d-sparse", "none")]
FUSED = {"15d-dense": "fusion", "15d-sparse": "reuse"}


def configurations(args) -> list:
    """(problem, algorithm, c, elide) of every row."""
    out = []
    for kernel, build in BUILDERS.items():
        prob = Problem.from_nest(build(m=args.m, n=args.m, r=args.r, nnz_per_row=args.nnz_per_row, seed=args.seed))
        for alg, elide in CONFIGS:
            out.append((prob, alg, 1, FUSED[alg] if kernel == "fusedmm" else elide))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--m", type=int, default=8192, help="rows and columns of S")
    ap.add_argument("--r", type=int, default=32, help="columns of the dense operands")
    ap.add_argument("--nnz-per-row", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="OpenMP threads per rank (default: cores / ranks)")
    ap.add_argument("--timeout", type=float, default=1200.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    configs = configurations(args)
    t0 = time.perf_counter()
    maps = {}
    for prob, alg, c, elide in configs:
        maps.update(local_mappings(prob, args.ranks, alg, c, elide))
    sched_s = time.perf_counter() - t0
    runs = [cfg + (lk,) for _ in range(args.rounds) for cfg in configs for lk in ("cosa", "scipy")]
    t0 = time.perf_counter()
    results = run_batch(runs, ranks=args.ranks, repeat=args.repeat, timeout_s=args.timeout, mappings=maps,
                        threads=args.threads)
    wall = time.perf_counter() - t0
    threads = args.threads or max(1, (os.cpu_count() or 1) // args.ranks)
    print(f"p = {args.ranks} ranks on {os.cpu_count()} cores, m = n = {args.m}, r = {args.r}, {args.nnz_per_row} "
          f"nonzeros per row (Erdos-Renyi), c = 1; {args.rounds} interleaved rounds x {args.repeat} runs; cosa local "
          f"kernels with {threads} thread(s) per rank; scheduling {sched_s:.1f} s (cached entries are read), "
          f"launch {wall:.1f} s")
    print(f"{'kernel':<8} {'algorithm':<11} {'elide':<7} {'cosa ms':>9} {'scipy ms':>9} {'cosa/scipy':>11} "
          f"{'per-round range':>17} {'verified':>9} {'= model':>8}")
    rows = []
    for k, (prob, alg, c, elide) in enumerate(configs):
        per = {"cosa": [], "scipy": []}
        verified = counted = True
        for rnd in range(args.rounds):
            for j, lk in enumerate(("cosa", "scipy")):
                d = results[(rnd * len(configs) + k) * 2 + j]
                per[lk].append(d["seconds"])
                verified, counted = verified and d["verified"], counted and d["counts_match"]
        ok = verified and counted
        ratios = [a / b for a, b in zip(per["cosa"], per["scipy"])]
        best = min(per["cosa"]) / min(per["scipy"])
        rows.append({"kernel": prob.kernel, "algorithm": alg, "c": c, "elide": elide, "cosa_s": per["cosa"],
                     "scipy_s": per["scipy"], "ratio": best, "ratio_range": [min(ratios), max(ratios)], "ok": ok})
        print(f"{prob.kernel:<8} {alg:<11} {elide:<7} {min(per['cosa']) * 1e3:>9.2f} {min(per['scipy']) * 1e3:>9.2f} "
              f"{best:>11.3f} {min(ratios):>8.3f}..{max(ratios):<8.3f} {'yes' if verified else 'NO':>9} "
              f"{'yes' if counted else 'NO':>8}")
    worst = max(r["ratio"] for r in rows)
    print(f"largest cosa / scipy ratio (of the fastest times): {worst:.3f} (target <= 1.2)")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
