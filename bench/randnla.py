"""RandNLA drivers (``algorithms``) against LAPACK-based solvers, measured side by side in one run.

* Least squares on planted tall problems (x* exact, residual orthogonal to range(A), ||A||_2 = 1):
  sketch-and-precondition (SJLT and SRFT sketches, d = 4n; SJLT with d = 4n and 8n on the largest
  shape; LSQR with one refinement restart) against
  ``scipy.linalg.lstsq`` and ``numpy.linalg.lstsq`` (both LAPACK gelsd): seconds, error against x*,
  normwise backward error ||A^T r|| / (||A|| ||r||) (residual in extended precision); dense and 1% sparse
  A (the sparse one densified for LAPACK), condition numbers 1e2, 1e6, 1e10.
* Randomized SVD (rank k, q = 2, 10 oversampling) of an n x n matrix with singular values 0.9^i
  (floor 1e-6) against ``scipy.linalg.svd`` (full) and ``scipy.sparse.linalg.svds`` (k triplets):
  seconds and spectral error over the optimal sigma_{k+1}.
* The pencil eigensolver: backward errors ||A - S D T^-1||, ||B - S T^-1|| (relative) over the requested
  eps, against n and eps, eigenvalues against ``scipy.linalg.eig`` over the first-order prediction,
  splits, QZ fallbacks, seconds beside scipy.linalg.eig's.

* The m/n sweep ("least squares where sketching wins"): n = 256, cond 1e8, m/n = 16 .. 2048, one thread and
  all threads, sketch-and-precondition (fused passes and NumPy dgemv) against gelsd, gelsy and SciPy's LSQR
  without a preconditioner; interleaved rounds, min seconds, per-round ratio ranges, errors against x*
  relative to gelsd's, and the crossover m/n from which ours is faster (and 2x faster) than gelsd.

Threads: every solver outside the sweep runs with the machine's cores (BLAS and our kernels alike); the pencil solver's
small QRs run on one thread (``algorithms.pencil.diagonalize``'s default).  Sizes: ``--quick`` 2^14 x
2^7 least squares, 1024 rsvd, pencils n <= 128; default 2^16 x 2^8, 2048, n <= 256; ``--full`` adds
2^18 x 2^9, 4096 and n = 512 (the sizes of the RandNLA issue; minutes on two cores).

    python3 bench/randnla.py --quick
    python3 bench/randnla.py --results bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from algorithms import pencil as P  # noqa: E402
from algorithms import randnla as R  # noqa: E402


def _timed(fn, repeat: int = 1):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def lstsq_rows(shapes, conds, densities, repeat, sketches=(("sjlt", 4), ("srft", 4))):
    import scipy.linalg as sl
    import scipy.sparse as sp

    rows = []
    for m, n in shapes:
        for density in densities:
            for cond in conds:
                a, b, xs = R.synthetic_lstsq(m, n, cond, residual=1e-4, seed=1, density=density)
                dense = a.toarray() if sp.issparse(a) else a
                norm_a = 1.0 if density is None else None
                err = lambda x: float(np.linalg.norm(x - xs) / np.linalg.norm(xs))
                x_sc, t_sc = _timed(lambda: sl.lstsq(dense, b)[0], repeat)
                x_np, t_np = _timed(lambda: np.linalg.lstsq(dense, b, rcond=None)[0], repeat)
                be_sc = R.backward_error(a, b, x_sc, norm_a)
                for sketch, factor in sketches:
                    run = lambda: R.sketch_and_precondition(a, b, sketch=sketch, d=factor * n, seed=0)
                    run()                                                           # warm the kernels
                    out, t = _timed(run, repeat)
                    rows.append({"m": m, "n": n, "A": "dense" if density is None else f"{density:.0%} sparse",
                                 "cond": cond, "sketch": sketch, "d": out.d, "iterations": out.iterations,
                                 "seconds": t, "sketch_seconds": out.sketch_seconds, "scipy_s": t_sc, "numpy_s": t_np,
                                 "speedup_vs_scipy": t_sc / t, "speedup_vs_numpy": t_np / t,
                                 "err": err(out.x), "scipy_err": err(x_sc), "numpy_err": err(x_np),
                                 "err_over_scipy": err(out.x) / max(err(x_sc), 1e-300),
                                 "backward_error": R.backward_error(a, b, out.x, norm_a), "scipy_backward_error": be_sc})
    return rows


def blas_rows():
    """The BLAS libraries NumPy/SciPy loaded (threadpoolctl): kernel, version, threads, and the OpenBLAS
    variables that change the kernel or its blocking (unset here unless the row says so)."""
    import os

    import scipy.linalg  # noqa: F401  (loads SciPy's BLAS, so threadpoolctl lists it)
    from threadpoolctl import threadpool_info

    return [{"library": Path(i["filepath"]).name.split("-")[0], "api": i["user_api"], "version": i.get("version"),
             "kernel": i.get("architecture", "-"), "threads": i["num_threads"],
             "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "unset"),
             "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE", "unset")} for i in threadpool_info()]


def _solvers(a, b, lsqr_its):
    import scipy.linalg as sl
    from scipy.sparse.linalg import lsqr

    return {"ours": None,
            "ours_blas": None,
            "gelsd": lambda threads: sl.lstsq(a, b, lapack_driver="gelsd")[0],
            "gelsy": lambda threads: sl.lstsq(a, b, lapack_driver="gelsy")[0],
            "lsqr": lambda threads: lsqr(a, b, atol=1e-14, btol=1e-14, iter_lim=lsqr_its)[0]}


LSQR_ITS = 30


def sweep_rows(n, ratios, cond, thread_counts, rounds, lsqr_its=LSQR_ITS):
    """Least squares at n columns and m = ratio * n rows, condition ``cond``: per thread count (BLAS and our
    kernels alike), ``rounds`` interleaved rounds (the solvers' order rotates each round) of
    sketch-and-precondition (default sketch, d and kernel; and with NumPy's dgemv, ``kernel="blas"``),
    LAPACK gelsd and gelsy, and SciPy's LSQR without a preconditioner (``lsqr_its`` iterations).  Seconds
    are each solver's minimum; a ratio's range is over the rounds' own ratios."""
    from threadpoolctl import threadpool_limits

    rows = []
    a0, b0, _ = R.synthetic_lstsq(4 * n, n, cond, seed=1)
    R.sketch_and_precondition(a0, b0)                                  # build the kernels once
    for ratio in ratios:
        m = ratio * n
        a, b, xs = R.synthetic_lstsq(m, n, cond, residual=1e-4, seed=1)
        err = lambda x: float(np.linalg.norm(x - xs) / np.linalg.norm(xs))
        for threads in thread_counts:
            solvers = _solvers(a, b, lsqr_its)
            results = {}
            solvers["ours"] = lambda t: R.sketch_and_precondition(a, b, threads=t)
            solvers["ours_blas"] = lambda t: R.sketch_and_precondition(a, b, threads=t, kernel="blas")
            names = list(solvers)
            times = {k: [] for k in names}
            with threadpool_limits(threads):
                for rnd in range(rounds):
                    for k in names[rnd % len(names):] + names[:rnd % len(names)]:
                        t0 = time.perf_counter()
                        results[k] = solvers[k](threads)
                        times[k].append(time.perf_counter() - t0)
            ours = results["ours"]
            xs_of = {k: (v.x if hasattr(v, "x") else v) for k, v in results.items()}
            e = {k: err(x) for k, x in xs_of.items()}
            per = lambda k: [t / u for t, u in zip(times[k], times["ours"])]
            row = {"m/n": ratio, "m": m, "n": n, "cond": cond, "threads": threads, "d": ours.d,
                   "iterations": ours.iterations, "rounds": rounds,
                   **{f"{k}_s": min(v) for k, v in times.items()},
                   **{f"{k}_s_all": v for k, v in times.items()},
                   **{f"{k}_err": v for k, v in e.items()},
                   "backward_error": R.backward_error(a, b, ours.x, 1.0),
                   "gelsd_backward_error": R.backward_error(a, b, xs_of["gelsd"], 1.0),
                   "cond_estimate": ours.condition_estimate}
            for k in ("gelsd", "gelsy", "lsqr", "ours_blas"):
                row[f"x_{k}"] = min(times[k]) / min(times["ours"])
                row[f"x_{k}_range"] = f"{min(per(k)):.2f}-{max(per(k)):.2f}"
            row["err_over_gelsd"] = e["ours"] / max(e["gelsd"], 1e-300)
            row["gelsy_err_over_gelsd"] = e["gelsy"] / max(e["gelsd"], 1e-300)
            row["lsqr_err_over_gelsd"] = e["lsqr"] / max(e["gelsd"], 1e-300)
            rows.append(row)
        del a, b
    return rows


def crossover_rows(rows, target=2.0):
    """Per thread count: the smallest m/n from which sketch-and-precondition beats gelsd (x gelsd > 1) at
    every larger m/n of the sweep, the same for ``target`` x, and whether the target holds at m/n >= 256 with
    the error within 10x of gelsd's."""
    out = []
    for threads in sorted({r["threads"] for r in rows}):
        rs = sorted((r for r in rows if r["threads"] == threads), key=lambda r: r["m/n"])

        def start(ok):
            first = None
            for r in rs:
                first = (first or r["m/n"]) if ok(r) else None
            return first

        big = [r for r in rs if r["m/n"] >= 256]
        out.append({"threads": threads, "faster_from": start(lambda r: r["x_gelsd"] > 1),
                    "target_from": start(lambda r: r["x_gelsd"] >= target),
                    "target": target, "target_met": bool(big) and all(r["x_gelsd"] >= target and
                                                                      r["err_over_gelsd"] <= 10 for r in big),
                    "min_x_gelsd_256": min((r["x_gelsd"] for r in big), default=None),
                    "max_err_over_gelsd_256": max((r["err_over_gelsd"] for r in big), default=None)})
    return out


def rsvd_rows(sizes, rank, power):
    import scipy.linalg as sl
    from scipy.sparse.linalg import svds

    from cosa.cli_randnla import spectral_norm_of_difference

    rows = []
    for n in sizes:
        a, sigma = R.decaying_matrix(n, decay=0.9, seed=1)
        R.rsvd(a, rank, power=power, seed=0)                                   # warm the kernels
        (u, s, vt), t = _timed(lambda: R.rsvd(a, rank, power=power, seed=0))
        err = spectral_norm_of_difference(a, u, s, vt)
        (u2, s2, vt2), t_svds = _timed(lambda: svds(a, k=rank, random_state=0))
        err_svds = spectral_norm_of_difference(a, u2, s2, vt2)
        _, t_svd = _timed(lambda: sl.svd(a))
        rows.append({"n": n, "rank": rank, "power": power, "seconds": t, "svd_s": t_svd, "svds_s": t_svds,
                     "speedup_vs_svd": t_svd / t, "speedup_vs_svds": t_svds / t,
                     "err_over_opt": err / sigma[rank], "svds_err_over_opt": err_svds / sigma[rank]})
    return rows


def pencil_rows(cases, kernels, threshold):
    import scipy.linalg as sl

    rows = []
    for n, kind, eps in cases:
        a, b, _ = P.test_pencil(n, kind, seed=1)
        res = P.diagonalize(a, b, eps=eps, seed=2, kernels=kernels, threshold=threshold)
        ea, eb = P.backward_errors(a, b, res)
        _, t_eig = _timed(lambda: sl.eig(a, b))
        match = P.eig_match(a, b, res.eigenvalues, eps)
        st = res.stats
        rows.append({"n": n, "kind": kind, "eps": eps, "errA_over_eps": ea / eps, "errB_over_eps": eb / eps,
                     "eig_over_prediction": match["max_over_prediction"], "splits": len(st.splits),
                     "min_balance": min(min(s, 1 - s) for s in st.splits) if st.splits else None,
                     "qz_fallbacks": st.qz_fallbacks, "lines": st.lines_checked, "irs_steps": st.irs_steps,
                     "seconds": res.seconds, "scipy_eig_s": t_eig})
    return rows


def _table(console, title, rows, cols):
    from rich.table import Table

    table = Table(title=title)
    for c, _ in cols:
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(*("-" if r[k] is None else fmt(r[k]) for _, (k, fmt) in cols))
    console.print(table)


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"title": "where sketching wins", "column": "x gelsd", "label": ["m/n", "threads"],
     "what": "Least squares sweep, gelsd's seconds over ours", "stats": ["min", "max", "below:1", "below:2"]},
    {"title": "where sketching wins", "column": "err/gelsd", "label": ["m/n", "threads"],
     "what": "Least squares sweep, our error over gelsd's", "stats": ["max", "above:10"]},
    {"title": "where sketching wins", "column": "x dgemv", "label": ["m/n", "threads"],
     "what": "Fused pass over NumPy's two dgemv passes (their seconds over ours)", "stats": ["min", "max"]},
    {"title": "Crossover", "column": "faster from m/n", "label": ["threads"], "what": "Crossover m/n",
     "stats": ["min", "max"]},
    {"title": "sketch-and-precondition vs", "column": "x scipy", "label": ["m", "n", "A", "cond", "sketch"],
     "what": "Least squares, sparse A, SciPy's seconds over ours", "stats": ["geomean", "min", "max", "below:1"]},
    {"title": "sketch-and-precondition vs", "column": "err/scipy", "label": ["m", "n", "A", "cond", "sketch"],
     "what": "Least squares, sparse A, our error over SciPy's", "stats": ["max"]},
    {"title": "Randomized SVD", "column": "x svd", "what": "Randomized SVD, scipy.linalg.svd's seconds over ours",
     "stats": ["min", "max"]},
    {"title": "Pencil", "column": "errA/eps", "label": ["n", "kind"], "what": "Pencil eigensolver, error over eps",
     "stats": ["max"]},
]


def main(argv=None) -> int:
    from rich.console import Console

    from bench.results_section import run_stamp, save_outputs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    size.add_argument("--full", action="store_true", help="also the issue's largest sizes")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per solver (median)")
    ap.add_argument("--pencil-kernels", choices=["cosa", "numpy"], default="cosa")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: lstsq, sweep, rsvd, pencil")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the m/n sweep (min of them)")
    ap.add_argument("--ratios", default=None, help="m/n values of the sweep (default 16,32,...,2048)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--results", default=None, help="record the tables in this results file")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    if args.quick:
        shapes, sizes, ns, rank, sweep_n, ratios = [(2**14, 2**7)], [1024], [64, 128], 30, 64, [16, 64, 256]
    else:
        shapes, sizes, ns, rank = [(2**16, 2**8)], [2048], [64, 128, 256], 50
        sweep_n, ratios = 256, [2**i for i in range(4, 12)]
    if args.ratios:
        ratios = [int(x) for x in args.ratios.split(",")]
        if args.full:
            shapes, sizes, ns = shapes + [(2**18, 2**9)], sizes + [4096], ns + [512]
    console = Console(width=300, record=True)
    data = {}
    g = lambda v: f"{v:.3g}"
    e = lambda v: f"{v:.1e}"
    if "lstsq" not in skip:
        rows = lstsq_rows(shapes[:1], (1e2, 1e6, 1e10), (None, 0.01) if "sweep" in skip else (0.01,), args.repeat)
        if len(shapes) > 1:
            rows += lstsq_rows(shapes[1:], (1e2, 1e10), (None,), args.repeat, (("sjlt", 4), ("sjlt", 8)))
        data["lstsq"] = rows
        _table(console, "Least squares: sketch-and-precondition vs scipy.linalg.lstsq / numpy.linalg.lstsq "
               "(gelsd)", rows,
               [("m", ("m", str)), ("n", ("n", str)), ("A", ("A", str)), ("cond", ("cond", e)), ("sketch", ("sketch", str)),
                ("d", ("d", str)), ("iters", ("iterations", str)), ("ours s", ("seconds", g)), ("sketch s", ("sketch_seconds", g)),
                ("scipy s", ("scipy_s", g)), ("numpy s", ("numpy_s", g)), ("x scipy", ("speedup_vs_scipy", g)),
                ("x numpy", ("speedup_vs_numpy", g)), ("err", ("err", e)), ("scipy err", ("scipy_err", e)),
                ("err/scipy", ("err_over_scipy", g)), ("bwd err", ("backward_error", e)),
                ("scipy bwd", ("scipy_backward_error", e))])
    if "sweep" not in skip:
        import os

        data["blas"] = blas_rows()
        _table(console, "BLAS (threadpoolctl) while the sweep ran", data["blas"],
               [(c, (c, str)) for c in ("library", "api", "version", "kernel", "threads", "OPENBLAS_CORETYPE",
                                        "OPENBLAS_L2_SIZE")])
        rows = sweep_rows(sweep_n, ratios, 1e8, (1, os.cpu_count() or 1), args.rounds, LSQR_ITS)
        data["sweep"] = rows
        _table(console, f"Least squares where sketching wins: n = {sweep_n}, cond 1e8, m/n swept; seconds are the "
               f"min of {args.rounds} interleaved rounds, x = their seconds over ours (range over the rounds); lsqr: "
               f"SciPy's, no preconditioner, {LSQR_ITS} iterations; dgemv: ours with NumPy's two dgemv passes", rows,
               [("m/n", ("m/n", str)), ("m", ("m", str)), ("threads", ("threads", str)), ("d", ("d", str)),
                ("iters", ("iterations", str)), ("ours s", ("ours_s", g)), ("gelsd s", ("gelsd_s", g)),
                ("x gelsd", ("x_gelsd", g)), ("x gelsd range", ("x_gelsd_range", str)), ("gelsy s", ("gelsy_s", g)),
                ("x gelsy", ("x_gelsy", g)), ("x gelsy range", ("x_gelsy_range", str)),
                ("x lsqr", ("x_lsqr", g)), ("x dgemv", ("x_ours_blas", g)), ("x dgemv range", ("x_ours_blas_range", str)),
                ("err", ("ours_err", e)), ("gelsd err", ("gelsd_err", e)), ("err/gelsd", ("err_over_gelsd", g)),
                ("gelsy/gelsd", ("gelsy_err_over_gelsd", g)), ("lsqr/gelsd", ("lsqr_err_over_gelsd", g)),
                ("bwd err", ("backward_error", e)), ("gelsd bwd", ("gelsd_backward_error", e))])
        data["crossover"] = crossover_rows(rows)
        _table(console, "Crossover: the smallest m/n from which ours beats gelsd (and by 2x) at every larger m/n",
               data["crossover"],
               [("threads", ("threads", str)), ("faster from m/n", ("faster_from", str)),
                ("2x from m/n", ("target_from", str)), ("min x gelsd, m/n >= 256", ("min_x_gelsd_256", g)),
                ("max err/gelsd, m/n >= 256", ("max_err_over_gelsd_256", g)),
                ("2x and 10x error at m/n >= 256", ("target_met", lambda v: "met" if v else "NOT met"))])
    if "rsvd" not in skip:
        rows = rsvd_rows(sizes, rank, 2)
        data["rsvd"] = rows
        _table(console, "Randomized SVD (q = 2, oversampling 10) vs scipy.linalg.svd and scipy.sparse.linalg.svds",
               rows, [("n", ("n", str)), ("rank", ("rank", str)), ("ours s", ("seconds", g)), ("svd s", ("svd_s", g)),
                      ("svds s", ("svds_s", g)), ("x svd", ("speedup_vs_svd", g)), ("x svds", ("speedup_vs_svds", g)),
                      ("err/opt", ("err_over_opt", g)), ("svds err/opt", ("svds_err_over_opt", g))])
    if "pencil" not in skip:
        cases = [(n, "random", 1e-8) for n in ns]
        mid = ns[min(1, len(ns) - 1)]
        cases += [(mid, "random", eps) for eps in (1e-4, 1e-6, 1e-10, 1e-12)]
        cases += [(mid, "planted", 1e-8), (mid, "ill-conditioned", 1e-6)]
        rows = pencil_rows(cases, args.pencil_kernels, 16)
        data["pencil"] = rows
        _table(console, f"Pencil eigensolver (threshold 16, GEMMs: {args.pencil_kernels}) vs scipy.linalg.eig", rows,
               [("n", ("n", str)), ("kind", ("kind", str)), ("eps", ("eps", e)), ("errA/eps", ("errA_over_eps", g)),
                ("errB/eps", ("errB_over_eps", g)), ("eig/pred", ("eig_over_prediction", g)), ("splits", ("splits", str)),
                ("min bal", ("min_balance", g)), ("QZ fb", ("qz_fallbacks", str)), ("lines", ("lines", str)),
                ("IRS", ("irs_steps", str)), ("ours s", ("seconds", g)), ("eig s", ("scipy_eig_s", g))])
    date, machine = run_stamp()
    given = list(argv if argv is not None else sys.argv[1:])
    kept = [a for i, a in enumerate(given) if a not in ("--json", "--results")
            and (i == 0 or given[i - 1] not in ("--json", "--results")) and not a.startswith(("--json=", "--results="))]
    command = " ".join(["python3 bench/randnla.py", *kept, "--results bench/RESULTS.md"])
    save_outputs(name="randnla", title="RandNLA drivers", command=command, date=date, machine=machine,
                 console=console, data=data, json_path=args.json, results_path=args.results,
                 packages=("numpy", "scipy", "threadpoolctl", "rich"),
                 notes="Ours: sketch_and_precondition with its defaults (sparse sign sketch with 4 nonzeros per "
                       "column, d = m/16 clamped to 4n..16n rows, LSQR from the sketch-and-solve start plus one "
                       "restart, tol 1e-14); a sparse sketch of a dense A is one scatter pass, each LSQR iteration "
                       "one fused pass over A (a hand-written C kernel, not a scheduled one; the dgemv column runs "
                       "the same solver on NumPy's BLAS instead); dense sketches run the scheduled CPU kernels or "
                       "scipy.fft; QR and gelsd/gelsy from SciPy's LAPACK.  Threads: BLAS (threadpoolctl) and our "
                       "kernels alike, one or all cores; the machine is shared, so rounds interleave the solvers "
                       "and the tables give minimums and the ranges of the per-round ratios.  err: ||x - x*|| / "
                       "||x*|| against the planted solution; bwd err: ||A^T r|| / (||A||_2 ||r||).  The table of "
                       "sketch-and-precondition vs scipy/numpy lstsq covers the sparse A (densified for LAPACK) "
                       "when the sweep runs.", summary=SUMMARY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
