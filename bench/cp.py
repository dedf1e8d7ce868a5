"""CP decomposition: fit against time of CP-ALS, CP-ARLS-LEV and STS-CP on a planted sparse tensor;
draws per second of the exact Khatri-Rao leverage sampler over the mode size and the rank; words per
rank of distributed STS-CP (accumulator- and tensor-stationary) over I_n and J on 4 ranks; CP-ALS on a
dense tensor (the MTTKRP loop nest scheduled on the cpu arch and compiled) beside TensorLy's parafac.

Every method starts from the same SVD initialisation (not timed); seconds are the ALS sweeps only, the
fit is evaluated outside the timing.  The sampler's predicted scaling (Bharadwaj et al., NeurIPS 2023):
time per draw ~ R^2 sum_k log I_k, so draws per second ~ 1 / (R^2 log I); the table gives the measured
ratio to the smallest case beside the predicted one.

    python3 bench/cp.py --quick
    python3 bench/cp.py --results bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from algorithms.cp.als import cp, svd_init  # noqa: E402
from algorithms.cp.sampler import KrpSampler  # noqa: E402
from algorithms.cp.tensors import density_for_nnz, planted_sparse  # noqa: E402


def fit_vs_time(shape, nnz: int, ranks, iters: int, noise: float, samples_per_rank: int) -> list[dict]:
    rows = []
    for r in ranks:
        t, _ = planted_sparse(shape, r, density=density_for_nnz(shape, nnz, r), noise=noise, seed=0)
        init = svd_init(t, r, 0)
        j = samples_per_rank * r
        for method, samples in (("als", None), ("arls-lev", j), ("sts-cp", j)):
            res = cp(t, r, method=method, iters=iters, samples=samples, seed=0, init=[u.copy() for u in init])
            rows.append({"rank": r, "nnz": t.nnz, "method": method, "samples": samples, "fit": res.fit,
                         "seconds": res.seconds, "fit_per_iter": res.fit_per_iter,
                         "seconds_per_iter": res.seconds_per_iter})
    return rows


def sampler_rate(sizes, ranks, draws: int, modes: int = 3) -> list[dict]:
    rng = np.random.default_rng(0)
    out = []
    for r in ranks:
        for size in sizes:
            factors = [rng.standard_normal((size, r)) for _ in range(modes)]
            s = KrpSampler(factors)
            s.draw(min(draws, 256), rng)  # warm up
            best = np.inf
            for _ in range(3):
                t0 = time.perf_counter()
                s.draw(draws, rng)
                best = min(best, time.perf_counter() - t0)
            out.append({"rank": r, "size": size, "draws_per_s": draws / best})
    return out


def dense_vs_tensorly(shape, rank: int, iters: int, noise: float) -> dict:
    import tensorly as tl
    from tensorly.cp_tensor import CPTensor
    from tensorly.decomposition import parafac

    t, _ = planted_sparse(shape, rank, density=0.5, noise=noise, seed=1)
    x = t.to_dense()
    init = svd_init(x, rank, 0)
    ours = cp(x, rank, iters=iters, init=[u.copy() for u in init], backend="cpu")
    numpy_ = cp(x, rank, iters=iters, init=[u.copy() for u in init], backend="numpy")
    t0 = time.perf_counter()
    _, errs = parafac(tl.tensor(x), rank, n_iter_max=iters, tol=0, init=CPTensor((np.ones(rank), init)),
                      return_errors=True)
    tl_s = time.perf_counter() - t0
    return {"shape": list(shape), "rank": rank, "fit": ours.fit, "fit_numpy": numpy_.fit, "fit_tensorly": 1 - errs[-1],
            "s_per_iter": ours.seconds / iters, "s_per_iter_numpy": numpy_.seconds / iters,
            "s_per_iter_tensorly": tl_s / iters, "setup_s": ours.setup_seconds, "tensorly": tl.__version__}


def dist_words(sizes, js, ranks: int = 4, rank: int = 8) -> list[dict]:
    """Words received per rank over 2 STS-CP sweeps on ``ranks`` mpiexec ranks, both schedules."""
    from algorithms.cp.dist import run

    out = []
    for size in sizes:
        for j in js:
            for sched in ("accumulator", "tensor"):
                d = run({"ranks": ranks, "shape": [size] * 3, "nnz": 20_000, "planted_rank": rank, "rank": rank,
                         "samples": j, "iters": 2, "noise": 0.01, "seed": 0, "schedule": sched, "method": "sts-cp"})
                out.append({"I": size, "J": j, "schedule": sched, "words": float(np.mean(d["words_per_rank"])),
                            "model": float(np.mean(d["model_words"])), "match": d["counts_match"], "fit": d["fit"]})
    return out


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"table": 0, "column": "fit / ALS", "label": ["R", "method"], "what": "Final fit over ALS's", "stats": ["min", "max"]},
    {"table": 0, "column": "time / ALS", "label": ["R", "method"], "what": "Sweep time over ALS's", "stats": ["min", "max"]},
    {"table": 2, "column": "vs TensorLy", "what": "Seconds per sweep over TensorLy's", "stats": ["min", "max"]},
    {"table": 3, "column": "equal", "what": "STS-CP words equal to the model", "stats": ["equal:yes"]},
]


def main(argv=None) -> int:
    from rich.console import Console
    from rich.table import Table

    from bench.results_section import run_stamp, save_outputs

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1e5 nonzeros, ranks 8 and 32, fewer sampler cases")
    p.add_argument("--iters", type=int, default=15)
    p.add_argument("--samples-per-rank", type=int, default=64, help="J = this x R")
    p.add_argument("--json", default=None)
    p.add_argument("--results", default=None)
    args = p.parse_args(argv)
    date, machine = run_stamp()
    console = Console(width=160, record=True)
    t_start = time.perf_counter()

    shape, nnz, ranks = ((1000,) * 3, 100_000, (8, 32)) if args.quick else ((2000,) * 3, 1_000_000, (8, 16, 32))
    noise = 0.01
    rows = fit_vs_time(shape, nnz, ranks, args.iters, noise, args.samples_per_rank)
    tab = Table(title=f"planted sparse {'x'.join(map(str, shape))}, ~{nnz:.0e} nonzeros, noise {noise}, "
                      f"{args.iters} sweeps, SVD init (same for all)")
    for c in ("R", "nnz", "method", "J", "final fit", "fit / ALS", "fit after 5", "sweep seconds", "time / ALS"):
        tab.add_column(c, justify="right")
    als = {}
    for r in rows:
        if r["method"] == "als":
            als[r["rank"]] = r
        a = als[r["rank"]]
        tab.add_row(str(r["rank"]), str(r["nnz"]), r["method"], str(r["samples"] or "-"), f"{r['fit']:.4f}",
                    f"{r['fit'] / a['fit']:.4f}", f"{r['fit_per_iter'][min(4, len(r['fit_per_iter']) - 1)]:.4f}",
                    f"{r['seconds']:.2f}", f"{r['seconds'] / a['seconds']:.2f}")
    console.print(tab)

    sizes, sranks = ((1000, 8000, 64000), (8, 16, 32)) if args.quick else ((1000, 8000, 64000), (8, 16, 32, 64))
    draws = 4000
    srows = sampler_rate(sizes, sranks, draws)
    base = srows[0]
    st = Table(title=f"exact KRP leverage sampler, 3 factors of I rows, {draws} draws per call (best of 3)")
    for c in ("R", "I", "draws/s", "slowdown vs first", "predicted R^2 log I", "measured / predicted"):
        st.add_column(c, justify="right")
    for s in srows:
        slow = base["draws_per_s"] / s["draws_per_s"]
        pred = (s["rank"] / base["rank"]) ** 2 * np.log2(s["size"]) / np.log2(base["size"])
        st.add_row(str(s["rank"]), str(s["size"]), f"{s['draws_per_s']:.0f}", f"{slow:.2f}", f"{pred:.2f}",
                   f"{slow / pred:.2f}")
    console.print(st)

    dshape, drank = ((60, 50, 40), 8) if args.quick else ((200, 150, 120), 16)
    d = dense_vs_tensorly(dshape, drank, args.iters, noise)
    dt = Table(title=f"dense {'x'.join(map(str, dshape))} rank {drank}, {args.iters} sweeps: CP-ALS vs TensorLy "
                     f"{d['tensorly']} parafac from the same start")
    for c in ("implementation", "fit", "s per sweep", "vs TensorLy"):
        dt.add_column(c, justify="right")
    dt.add_row("ours, scheduled MTTKRP (cpu target)", f"{d['fit']:.6f}", f"{d['s_per_iter'] * 1e3:.2f} ms",
               f"{d['s_per_iter'] / d['s_per_iter_tensorly']:.2f}")
    dt.add_row("ours, NumPy MTTKRP", f"{d['fit_numpy']:.6f}", f"{d['s_per_iter_numpy'] * 1e3:.2f} ms",
               f"{d['s_per_iter_numpy'] / d['s_per_iter_tensorly']:.2f}")
    dt.add_row("TensorLy parafac", f"{d['fit_tensorly']:.6f}", f"{d['s_per_iter_tensorly'] * 1e3:.2f} ms", "1.00")
    console.print(dt)
    drows = dist_words((64, 512), (256, 2048))
    wt = Table(title="STS-CP on 4 mpiexec ranks, rank 8, 2 sweeps: words received per rank (mean), measured by "
                     "the rank wrapper and from the model")
    for c in ("I_n", "J", "schedule", "words", "model", "equal", "vs I_n = 64"):
        wt.add_column(c, justify="right")
    first = {}
    for w in drows:
        key = (w["J"], w["schedule"])
        first.setdefault(key, w["words"])
        wt.add_row(str(w["I"]), str(w["J"]), w["schedule"], f"{w['words']:.0f}", f"{w['model']:.0f}",
                   "yes" if w["match"] else "NO", f"{w['words'] / first[key]:.3f}")
    console.print(wt)
    console.print(f"kernel scheduling and build (once per shape, not in the sweeps): {d['setup_s']:.1f} s.  "
                  f"total {time.perf_counter() - t_start:.0f} s, "
                  f"load average {os.getloadavg()[0]:.1f}")
    command = "python3 bench/cp.py" + (" --quick" if args.quick else "") + (
        f" --iters {args.iters}" if args.iters != 15 else "") + (
        f" --samples-per-rank {args.samples_per_rank}" if args.samples_per_rank != 64 else "") + (
        f" --results {args.results}" if args.results else "")
    save_outputs(name="cp", title="CP decomposition: ALS, ARLS-LEV, STS-CP; KRP leverage sampler", command=command,
                 date=date, machine=machine, console=console,
                 data={"fit_vs_time": rows, "sampler": srows, "dense": d, "distributed": drows}, json_path=args.json,
                 results_path=args.results, summary=SUMMARY)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
