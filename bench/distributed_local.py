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
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cosa.cli_mpi import local_mappings  # noqa: E402
from targets.mpi.problem import Problem  # noqa: E402
from targets.mpi.run import run_batch  # noqa: E402
from workloads import fusedmm, sddmm, spmm  # noqa: E402

from results_section import run_stamp, save_outputs  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

BUILDERS = {"spmm": spmm, "sddmm": sddmm, "fusedmm": fusedmm}
CONFIGS = [("15d-dense", "none"), ("15d-sparse", "none")]
FUSED = {"15d-dense": "fusion", "15d-sparse": "reuse"}
SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed table (bench/results_section.py)
    {"table": 0, "column": "cosa/scipy", "what": "Scheduled local kernels' time over SciPy's (fastest of each)",
     "stats": ["geomean", "min", "max", "above:1.2"]},
]


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
    ap.add_argument("--results", help="write this benchmark's section of a results file (bench/RESULTS.md)")
    args = ap.parse_args(argv)

    date, machine = run_stamp()
    load = os.getloadavg()[0]
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
    console = Console(record=True, width=140)
    console.print(f"p = {args.ranks} ranks on {os.cpu_count()} cores, m = n = {args.m}, r = {args.r}, "
                  f"{args.nnz_per_row} nonzeros per row (Erdos-Renyi), c = 1; {args.rounds} interleaved rounds x "
                  f"{args.repeat} runs; cosa local kernels with {threads} thread(s) per rank; scheduling "
                  f"{sched_s:.1f} s (cached entries are read), launch {wall:.1f} s; load average {load:.1f} at the start")
    table = Table(title="Distributed kernels at p ranks: scheduled local kernels (cosa) against SciPy's")
    for col in ("kernel", "algorithm", "elide", "cosa ms", "scipy ms", "cosa/scipy", "per-round min",
                "per-round max", "verified", "= model"):
        table.add_column(col, justify="left" if col in ("kernel", "algorithm", "elide") else "right")
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
        table.add_row(prob.kernel, alg, elide, f"{min(per['cosa']) * 1e3:.2f}", f"{min(per['scipy']) * 1e3:.2f}",
                      f"{best:.3f}", f"{min(ratios):.3f}", f"{max(ratios):.3f}", "yes" if verified else "NO",
                      "yes" if counted else "NO")
    console.print(table)
    worst = max(r["ratio"] for r in rows)
    console.print(f"largest cosa / scipy ratio (of the fastest times): {worst:.3f} (target <= 1.2)")
    command = (f"python bench/distributed_local.py --ranks {args.ranks} --m {args.m} --r {args.r} "
               f"--nnz-per-row {args.nnz_per_row} --rounds {args.rounds} --repeat {args.repeat}")
    save_outputs(name="distributed_local", title="Distributed sparse kernels: scheduled local kernels against SciPy's",
                 date=date, machine=machine, console=console, command=command,
                 data={"args": vars(args), "rows": rows, "load_average": load}, json_path=args.json,
                 results_path=args.results, summary=SUMMARY,
                 packages=("numpy", "scipy", "highspy", "mpi4py", "mpich", "rich"))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
