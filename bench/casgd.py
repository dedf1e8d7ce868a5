"""CA-SGD against SGD on mpiexec ranks with an injected per-message latency: messages, words, measured
seconds and the alpha-beta-gamma model's seconds over s, b and p.

For each p (ranks; more ranks than cores oversubscribe) and b, one mpiexec job runs SGD and CA-SGD for
every s on the same samples (H iterations, the shipped breast-cancer set by default), with
``--latency`` seconds slept after every message sent (``targets.mpi.ranks``: ``Ledger.latency_s``), so
that the latency-bound regime the paper targets shows on one machine.  Every CA-SGD iterate is
compared with SGD's; messages and words per rank are the wrapper's counts, checked against the model.

Modelled seconds at two machines: "measured": alpha = the seconds per message of the wrapper's ring
allreduce with the injected latency, measured on the same ranks just before (``probe``), beta and gamma
from ``cosa arch calibrate cluster`` (``targets.mpi.calibrate``, quick); "cluster": alpha = 1 us,
beta = 1 ns/word, gamma = 0.1 ns/flop.  Best s: the s of the sweep with the least seconds (measured) or
modelled seconds; speedups are over SGD.

    python3 bench/casgd.py --quick
    python3 bench/casgd.py --results bench/RESULTS.md --plot casgd.png
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from algorithms import casgd_run as cr  # noqa: E402
from algorithms.casgd import SHIPPED  # noqa: E402


def probe(ranks, latency_s: float, rounds: int = 200) -> dict:
    """Seconds per message of a 1-word ring allreduce with ``latency_s`` injected (median of 5 batches)."""
    ranks.ledger.latency_s = latency_s
    one = np.ones(1)
    per = []
    for _ in range(5):
        ranks.barrier()
        t0 = time.perf_counter()
        for _ in range(rounds):
            ranks.allreduce(one)
        per.append((time.perf_counter() - t0) / (rounds * 2 * (ranks.size - 1)))
    return {"seconds_per_message": statistics.median(per)}


def measured_machine(quick: bool) -> dict:
    from targets.mpi.calibrate import calibrate
    from targets.mpi.model import Machine

    m = Machine.from_arch(calibrate(ranks=2, quick=quick))
    return {"alpha": m.alpha, "beta": m.beta, "gamma": m.gamma}


def sweep(p: int, b: int, s_list: list, args, data_kw: dict) -> list:
    base = dict(ranks=p, b=b, eta=args.eta, iters=args.iters, seed=0, kernels=args.kernels, latency_s=args.latency,
                check=False, timeout_s=600, **data_kw)
    cfgs = [cr.Config(method="sgd", s=1, **base)] + [cr.Config(method="casgd", s=s, **base) for s in s_list]
    return cr.run_many(cfgs, keep_x=True)


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"table": 1, "column": "measured speedup", "label": ["p", "b"], "what": "Best CA-SGD over SGD, measured", "stats": ["min", "max"]},
    {"table": 1, "column": "model speedup", "label": ["p", "b"],
     "what": "Best CA-SGD over SGD, modelled at the measured machine",
     "stats": ["min", "max"]},
    {"table": 1, "column": "cluster-like speedup", "label": ["p", "b"],
     "what": "Best CA-SGD over SGD, modelled at the cluster-like one",
     "stats": ["min", "max"]},
]


def main() -> int:
    from rich.console import Console
    from rich.table import Table

    from bench.results_section import run_stamp, save_outputs
    from targets.mpi import launch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="p in {2, 4}, b = 4, H = 128")
    ap.add_argument("--ranks", default=None, help="comma-separated p (default 2,4,8)")
    ap.add_argument("--b", default=None, help="comma-separated batch sizes (default 4,16)")
    ap.add_argument("--s", default="1,2,4,8,16,32", help="comma-separated s")
    ap.add_argument("--iters", type=int, default=None, help="H (default 256; --quick 128)")
    ap.add_argument("--eta", type=float, default=1.0)
    ap.add_argument("--latency", type=float, default=50e-6, help="injected seconds per message sent")
    ap.add_argument("--data", default=str(SHIPPED), help="LIBSVM file (default: the shipped breast-cancer set)")
    ap.add_argument("--synthetic", default=None, help="m,n,density instead of --data")
    ap.add_argument("--kernels", choices=["numpy", "cosa"], default="numpy")
    ap.add_argument("--json", default=None)
    ap.add_argument("--results", default=None, help="record the tables in this results file")
    ap.add_argument("--plot", default=None, help="speedup over s (PNG)")
    args = ap.parse_args()
    p_list = [int(x) for x in (args.ranks or ("2,4" if args.quick else "2,4,8")).split(",")]
    b_list = [int(x) for x in (args.b or ("4" if args.quick else "4,16")).split(",")]
    s_list = [int(x) for x in args.s.split(",")]
    args.iters = args.iters or (128 if args.quick else 256)
    data_kw = {"synthetic": cr.parse_synthetic(args.synthetic)} if args.synthetic else {"data": args.data}
    data = cr.dataset(cr.Config(**data_kw))
    m, n = data.shape

    date, machine_text = run_stamp()
    import os
    load = os.getloadavg()[0]
    console = Console(width=200, record=True)
    t0 = time.perf_counter()
    meas = measured_machine(args.quick)
    cluster = dict(cr.CLUSTER_LIKE)
    console.print(f"data {data.name} ({m} x {n}, density {data.density:.3g}), H = {args.iters}, eta = {args.eta:g}, "
                  f"injected latency {args.latency * 1e6:g} us/message, {args.kernels} kernels; load average "
                  f"{load:.1f} on {os.cpu_count()} cores at the start")
    console.print(f"cosa arch calibrate cluster (quick, 2 ranks, no injection): alpha {meas['alpha'] * 1e6:.1f} us, "
                  f"beta {meas['beta'] * 1e9:.2f} ns/word, gamma {meas['gamma'] * 1e9:.3f} ns/flop")
    rows, summary, curves = [], [], {}
    table = Table(title="Per configuration (speedups over SGD; model times at the measured machine and at the "
                        "cluster-like one)")
    for col in ("p", "b", "method", "s", "msgs/rank", "words/rank", "counts=model", "iterate diff", "seconds",
                "speedup", "model s (meas.)", "speedup (meas.)", "model s (cluster)", "speedup (cluster)"):
        table.add_column(col, justify="right")
    for p in p_list:
        alpha_eff = launch("bench.casgd:probe", p, {"latency_s": args.latency}, timeout_s=300)[0]["seconds_per_message"]
        alpha_0 = launch("bench.casgd:probe", p, {"latency_s": 0.0}, timeout_s=300)[0]["seconds_per_message"]
        m_here = {**meas, "alpha": alpha_eff}
        console.print(f"p = {p}: seconds per message of the wrapper's 1-word ring allreduce: {alpha_eff * 1e6:.1f} us "
                      f"with the injected latency, {alpha_0 * 1e6:.1f} us without")
        for b in b_list:
            res = sweep(p, b, s_list, args, data_kw)
            x_sgd = np.asarray(res[0]["x"])
            t_sgd = res[0]["seconds"]
            mod = {k: cr.model_seconds("sgd", args.iters, b, 1, p, n, data.density, mach)
                   for k, mach in (("meas", m_here), ("cluster", cluster))}
            meas_t, mod_t = {}, {"meas": {}, "cluster": {}}
            for r in res:
                x = np.asarray(r["x"])
                diff = float(np.linalg.norm(x - x_sgd) / np.linalg.norm(x_sgd))
                s = r["s"] if r["method"] == "casgd" else 1
                ms = {k: cr.model_seconds(r["method"], args.iters, b, s, p, n, data.density, mach)
                      for k, mach in (("meas", m_here), ("cluster", cluster))}
                if r["method"] == "casgd":
                    meas_t[s] = r["seconds"]
                    for k in ms:
                        mod_t[k][s] = ms[k]
                row = {"p": p, "b": b, "method": r["method"], "s": s, "msgs": r["messages_per_rank"][0],
                       "words": r["words_per_rank"][0], "counts_match": r["counts_match"], "diff": diff,
                       "seconds": r["seconds"], "speedup": t_sgd / r["seconds"],
                       "model_meas": ms["meas"], "model_cluster": ms["cluster"]}
                rows.append(row)
                table.add_row(str(p), str(b), r["method"], str(s), f"{row['msgs']:,}", f"{row['words']:,}",
                              "yes" if row["counts_match"] else "NO", f"{diff:.1e}", f"{r['seconds']:.3f}",
                              f"{row['speedup']:.2f}", f"{ms['meas']:.3f}", f"{mod['meas'] / ms['meas']:.2f}",
                              f"{ms['cluster'] * 1e3:.3f} ms", f"{mod['cluster'] / ms['cluster']:.2f}")
            best_meas = min(meas_t, key=meas_t.get)
            best_mod = min(mod_t["meas"], key=mod_t["meas"].get)
            best_cl = min(mod_t["cluster"], key=mod_t["cluster"].get)
            summary.append({"p": p, "b": b, "alpha_eff_s": alpha_eff, "alpha_0_s": alpha_0, "measured_best_s": best_meas,
                            "measured_speedup": t_sgd / meas_t[best_meas], "model_best_s": best_mod,
                            "model_speedup": mod["meas"] / mod_t["meas"][best_mod],
                            "within_2x": max(best_meas, best_mod) / min(best_meas, best_mod) <= 2,
                            "cluster_best_s": best_cl, "cluster_speedup": mod["cluster"] / mod_t["cluster"][best_cl],
                            "max_iterate_diff": max(r["diff"] for r in rows if r["p"] == p and r["b"] == b),
                            "messages_s_fold": all(r["msgs"] * r["s"] == rows[-len(res)]["msgs"]
                                                   for r in rows[-len(res):] if args.iters % r["s"] == 0)})
            curves[(p, b)] = ({s: t_sgd / t for s, t in meas_t.items()},
                              {s: mod["meas"] / t for s, t in mod_t["meas"].items()})
    console.print(table)
    st = Table(title=f"Best s per (p, b): measured with {args.latency * 1e6:g} us injected, and modelled")
    for col in ("p", "b", "s/message (us)", "without injection", "measured best s", "measured speedup", "model best s", "model speedup",
                "within 2x", "cluster-like best s", "cluster-like speedup", "max iterate diff", "msgs s-fold"):
        st.add_column(col, justify="right")
    for d in summary:
        st.add_row(str(d["p"]), str(d["b"]), f"{d['alpha_eff_s'] * 1e6:.0f}", f"{d['alpha_0_s'] * 1e6:.0f}",
                   str(d["measured_best_s"]),
                   f"{d['measured_speedup']:.2f}", str(d["model_best_s"]), f"{d['model_speedup']:.2f}",
                   "yes" if d["within_2x"] else "NO", str(d["cluster_best_s"]), f"{d['cluster_speedup']:.2f}",
                   f"{d['max_iterate_diff']:.1e}", "yes" if d["messages_s_fold"] else "NO")
    console.print(st)
    console.print(f"total {time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.1f} at the end")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for (p, b), (meas_c, mod_c) in curves.items():
            line, = ax.plot(list(meas_c), list(meas_c.values()), "o-", label=f"p={p}, b={b} measured")
            ax.plot(list(mod_c), list(mod_c.values()), "--", color=line.get_color(), label=f"p={p}, b={b} model")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("s")
        ax.set_ylabel("speedup over SGD")
        ax.set_title(f"CA-SGD, {args.latency * 1e6:g} us injected per message")
        ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
    command = "python3 bench/casgd.py " + " ".join(sys.argv[1:])
    notes = ("Speedups are over SGD on the same samples; \"model\" uses the measured seconds per message (injected "
             "latency included) with beta and gamma from the calibration, and leaves out Python's per-step "
             "overhead.  The machine was shared with other jobs, and p ranks on fewer cores oversubscribe: where "
             "the seconds per message without injection are far above the injected latency, the run is latency-"
             "bound because of the machine's load (a rank's wake-up time), not because of the injection, and the "
             "cluster-like columns show the trade-off on a real network.")
    save_outputs(name="casgd", title="CA-SGD vs SGD with injected latency", command=command, date=date,
                 machine=machine_text, console=console,
                 data={"rows": rows, "summary": summary, "measured_machine": meas, "cluster_machine": cluster,
                       "latency_s": args.latency, "iters": args.iters, "data": data.name},
                 json_path=args.json, results_path=args.results, notes=notes, summary=SUMMARY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
