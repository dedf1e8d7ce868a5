"""Distributed FusedMM on MPI ranks: every algorithm x replication factor c x eliding, measured and modelled.

For each rank count (default 4, and 8 oversubscribed on a smaller machine) and every configuration
that can run there (algorithm in 15d-dense, 15d-sparse, 25d-dense, 25d-sparse; c in {1, 2, 4};
eliding none, reuse, fusion), one mpiexec launch runs the kernel on the paper's reference problem
(m = n = 4096, r = 32, 8 nonzeros per row, Erdos-Renyi) and prints: the most words and messages a
rank receives (measured, and whether every rank and phase equals the model), the modelled seconds
at this machine's measured alpha / beta / gamma (``cosa arch calibrate cluster``) and at a Cori-like
network, and the measured seconds (the slowest rank, best of --repeat).  The configuration the
scheduler picks (``targets.mpi.choose`` with the measured machine) is marked; it must be the cheapest
modelled row.  A last table compares the local SpMM kernel (one thread) with SciPy CSR @ dense.

    python bench/distributed_sparse.py [--quick] [--ranks 4,8] [--repeat 3] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lowerbounds.sparse import sparse_parallel_bound  # noqa: E402
from targets.mpi import model  # noqa: E402
from targets.mpi.choose import candidates, choose  # noqa: E402
from targets.mpi.problem import Problem, sparse  # noqa: E402
from targets.mpi.run import run_batch  # noqa: E402
from workloads import fusedmm  # noqa: E402

CS = (1, 2, 4)


def configurations(prob: Problem, p: int) -> tuple[list, list]:
    """(runnable (algorithm, c, elide), [(algorithm, c, elide, why not)])."""
    ok, skipped = [], []
    for alg in model.ALGORITHMS:
        for c in CS:
            for elide in model.ELIDES:
                why = model.check(alg, prob.kernel, elide, prob.m, prob.n, prob.r, p, c)
                (skipped.append((alg, c, elide, why)) if why else ok.append((alg, c, elide)))
    return ok, skipped


def local_kernel_rows(prob: Problem, p: int, repeat: int) -> list[dict]:
    """One thread: SciPy CSR @ dense on the 1.5D local block against the CPU target's SpMM kernel when it
    can be built here (else only SciPy)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    s = sparse(prob)
    rows = prob.m // p
    block = s[:rows].tocsr()
    b = np.random.default_rng(0).random((prob.n, prob.r))
    out = []
    with threadpool_limits(1):
        best = min(_timed(lambda: block @ b) for _ in range(repeat))
    flops = 2.0 * block.nnz * prob.r
    out.append({"kernel": "scipy csr @ dense", "rows": rows, "nnz": int(block.nnz), "gflops": flops / best / 1e9,
                "ratio": 1.0})
    try:
        from cosa.scheduler import schedule
        from costmodel import preset
        from targets.cpu import run as cpu_run
        from workloads import spmm

        nest = spmm("local", m=rows, n=prob.n, r=prob.r, density=block.nnz / (rows * prob.n))
        arch = preset("cpu")
        mapping = schedule(nest, arch, scheduler="cosa", time_limit_s=20, seed=0, bound=False).mapping
        res = cpu_run(nest, mapping, arch, threads=1, repeat=repeat)
        out.append({"kernel": "targets.cpu SpMM (1 thread)", "rows": rows, "nnz": int(block.nnz),
                    "gflops": res.gflops, "ratio": res.gflops / out[0]["gflops"], "verified": res.verified})
    except Exception as exc:  # noqa: BLE001 - the comparison is optional; say why it is missing
        out.append({"kernel": f"targets.cpu SpMM: not run ({type(exc).__name__}: {str(exc)[:80]})", "rows": rows,
                    "nnz": int(block.nnz), "gflops": None, "ratio": None})
    return out


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"each": True, "column": "= model", "what": "Words and messages equal to the model", "stats": ["equal:yes"]},
    {"each": True, "column": "verified", "what": "Results verified", "stats": ["equal:yes"]},
    {"each": True, "column": "over SciPy", "what": "Local kernel over SciPy's", "stats": ["min", "max"]},
]


def main(argv=None) -> int:
    from rich.console import Console
    from rich.table import Table

    from bench.results_section import run_stamp, save_outputs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="m = n = 1024, r = 16")
    ap.add_argument("--ranks", default="4,8", help="rank counts, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--arch", default=None, help="cluster arch YAML (default: cosa arch calibrate cluster now)")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--results", default=None, help="record the tables in this results file")
    args = ap.parse_args(argv)

    size, r = (1024, 16) if args.quick else (4096, 32)
    prob = Problem.from_nest(fusedmm(m=size, n=size, r=r, nnz_per_row=8, seed=0))
    s = sparse(prob)
    rank_counts = [int(x) for x in args.ranks.split(",")]
    if args.arch:
        from costmodel import load_arch

        arch = load_arch(args.arch)
    else:
        from targets.mpi.calibrate import calibrate

        arch = calibrate(ranks=rank_counts[0])
    measured = model.Machine.from_arch(arch)
    console = Console(width=200, record=True)
    console.print(f"FusedMM m = n = {size}, r = {r}, nnz = {s.nnz} (8 per row, Erdos-Renyi); measured alpha "
                  f"{measured.alpha:.3g} s, beta {measured.beta:.3g} s/word, gamma {measured.gamma:.3g} s/flop; "
                  f"Cori-like alpha {model.CORI_LIKE.alpha:.3g} s, beta {model.CORI_LIKE.beta:.3g} s/word, "
                  f"gamma {model.CORI_LIKE.gamma:.3g} s/flop; {os.cpu_count()} cores")
    data = {"problem": prob.to_dict(), "machine": measured.to_dict(), "runs": []}
    for p in rank_counts:
        ok, skipped = configurations(prob, p)
        t0 = time.perf_counter()
        results = run_batch([(prob, *cfg) for cfg in ok], p, repeat=args.repeat, timeout_s=args.timeout,
                            machine=measured)
        wall = time.perf_counter() - t0
        cori = {(cd.algorithm, cd.c, cd.elide): cd
                for cd in candidates(prob.kernel, prob.m, prob.n, prob.r, s.nnz, p, model.CORI_LIKE, s, cs=list(CS))}
        auto = choose(prob.kernel, prob.m, prob.n, prob.r, s.nnz, p, measured, s, cs=list(CS))
        best_key = (auto.best.algorithm, auto.best.c, auto.best.elide)
        bound_words = sparse_parallel_bound(prob.kernel, prob.m, prob.n, prob.r, s.nnz, p).memory_independent_words
        cheapest = min(results, key=lambda d: d["model_seconds"])
        table = Table(title=f"p = {p}{' (oversubscribed: ' + str(os.cpu_count()) + ' cores)' if p > (os.cpu_count() or 1) else ''}"
                            f": words and messages are the most a rank receives; * = the scheduler's choice "
                            f"(launch {wall:.1f} s)")
        for col in ("algorithm", "c", "elide", "words", "messages", "= model", "verified", "model s (measured)",
                    "model s (Cori-like)", "measured s", "auto"):
            table.add_column(col, justify="left" if col in ("algorithm", "elide") else "right")
        for d in results:
            key = (d["algorithm"], d["c"], d["elide"])
            table.add_row(d["algorithm"], str(d["c"]), d["elide"], f"{max(d['words_per_rank']):,}",
                          str(max(d["messages_per_rank"])), "yes" if d["counts_match"] else "NO",
                          "yes" if d["verified"] else "NO", f"{d['model_seconds']:.3e}",
                          f"{cori[key].seconds:.3e}", f"{d['seconds']:.3e}", "*" if key == best_key else "")
            data["runs"].append({**{k: v for k, v in d.items() if k != "phases"}, "cori_model_seconds": cori[key].seconds,
                                 "auto": key == best_key})
        console.print(table)
        by = {(d["algorithm"], d["c"], d["elide"]): d for d in results}
        if ("15d-dense", 2, "none") in by and ("15d-dense", 2, "fusion") in by:
            ratio = max(by[("15d-dense", 2, "none")]["words_per_rank"]) / max(by[("15d-dense", 2, "fusion")]["words_per_rank"])
            console.print(f"  15d-dense c = 2: SDDMM then SpMM moves {ratio:.2f}x the words of FusedMM with local fusion")
        console.print(f"  auto choice {best_key}: cheapest modelled row is "
                      f"{(cheapest['algorithm'], cheapest['c'], cheapest['elide'])} "
                      f"({'the same' if auto.best.seconds == cheapest['model_seconds'] else 'DIFFERENT'}); "
                      f"parallel lower bound {bound_words:,.0f} words")
        reasons = {}
        for a, c, e, why in skipped:
            reasons.setdefault(why.split(": ", 1)[1].split(" (")[0], []).append(f"{a} c={c} {e}")
        for why, which in reasons.items():
            console.print(f"  not runnable: {why}: {len(which)} configuration(s)" +
                          (f" ({', '.join(which)})" if len(which) <= 4 else ""))
    local = local_kernel_rows(prob, rank_counts[0], max(3, args.repeat))
    lt = Table(title=f"Local SpMM, one thread, on one rank's block ({local[0]['rows']} rows, {local[0]['nnz']} nonzeros)")
    for col in ("kernel", "GFLOP/s", "over SciPy"):
        lt.add_column(col)
    for row in local:
        lt.add_row(row["kernel"], "-" if row["gflops"] is None else f"{row['gflops']:.2f}",
                   "-" if row["ratio"] is None else f"{row['ratio']:.2f}x")
    console.print(lt)
    data["local"] = local
    date, machine = run_stamp()
    command = "python bench/distributed_sparse.py" + (" --quick" if args.quick else "") + f" --ranks {args.ranks}" + \
        f" --repeat {args.repeat}" + (f" --arch {args.arch}" if args.arch else "")
    save_outputs(name="distributed_sparse", title="Distributed sparse kernels on MPI ranks", command=command,
                 date=date, machine=machine, console=console, data=data, json_path=args.json,
                 results_path=args.results,
                 notes="Local kernels are SciPy's (one process per rank).  The measured machine's figures come from "
                       "a ping-pong on this machine, whose ranks share its cores with each other and with other jobs; "
                       f"with {args.ranks} ranks on {os.cpu_count()} cores the measured seconds (the slowest rank's "
                       "kernel, best of --repeat) are dominated by ranks waiting for a core and by Python overhead, "
                       "so they rank the configurations only roughly, while words and messages are exact.  The CPU "
                       "target's SpMM row times its own random matrix of the block's shape and density.",
                 summary=SUMMARY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
