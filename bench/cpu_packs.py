"""Where the generated CPU kernels' time goes: the share of each call spent in its packing copies,
measured by counters in the kernel, beside the share the cost model gives them.

For each case (the ResNet-50 3x3 and 1x1 convolutions and GEMM 1024 of ``bench/cpu_kernels.py``), the
CoSA MIP's mapping as ``cosa run cpu`` schedules it on one core of this machine's arch (``cosa arch
calibrate cpu --quick`` now, or ``--arch``; the register file as a level) is built twice: plain and with
counters (``targets.cpu.profile``: the time-stamp counter read around every call and every packing copy
that runs).  Both are checked against NumPy.  The plain and the profiled kernel are timed in interleaved
rounds (the fastest of each: what the counters cost), then the profiled one reports, over the faster
half of ``--repeat`` calls, the share of the calls' time each packed input's copies took.  The model's
share is the input's copy cycles (``costmodel.packing``, at the arch's ``pack_cycles_per_word``) over its
cycles of the mapping (``costmodel.evaluate``).  "model - measured" > 0: the model prices the copies
higher than they run.

    python3 bench/cpu_packs.py --cases res5a_branch2b,res4a_branch2b
    python3 bench/cpu_packs.py --repeat 30 --results bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import costmodel  # noqa: E402

from bench.cpu_kernels import cases, interleaved, mip_mapping, tile_text  # noqa: E402
from bench.cpu_rank import on_cores, register_arch  # noqa: E402
from targets.cpu import compile_kernel, kernel_nest  # noqa: E402
from targets.cpu.profile import profile_packs  # noqa: E402
from targets.cpu.reference import random_inputs  # noqa: E402

SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed table
    {"table": 0, "column": "measured", "what": "Share of the call in packing copies, measured",
     "stats": ["min", "max", "median"]},
    {"table": 0, "column": "model - measured", "what": "The model's share minus the measured one",
     "stats": ["min", "max", "absmedian"]},
    {"table": 0, "column": "profiled / plain", "what": "The profiled kernel's time over the plain one's",
     "stats": ["min", "max", "median"]},
]


def measure(w, base, repeat: int, time_limit: float) -> dict:
    """One case: its packing shares, measured and modelled, and what the counters cost."""
    kw = kernel_nest(w)
    arch = register_arch(kw, base)
    mapping = mip_mapping(kw, arch, time_limit)
    plain = compile_kernel(kw, mapping, arch)
    prof = profile_packs(kw, mapping, arch, threads=1, repeat=repeat)  # verifies the profiled kernel
    profiled = compile_kernel(kw, mapping, arch, profile=True)
    arrays = random_inputs(kw, plain.plan.dtypes, plain.plan.input_shapes, 0)
    out, out2 = plain(arrays, threads=1), profiled(arrays, threads=1)
    times = interleaved({"plain": lambda: plain(arrays, out, 1), "profiled": lambda: profiled(arrays, out2, 1)},
                        repeat, 1)
    return {"case": w.name, "tile": tile_text(plain), "packs": list(prof.measured),
            "measured": prof.measured, "model": prof.model, "gflops": 2 * w.macs / min(times["plain"]) / 1e9,
            "overhead": min(times["profiled"]) / min(times["plain"])}


def table(rows: list):
    from rich.table import Table

    t = Table(title="Packing copies: share of the kernel's time, measured by counters and in the cost model")
    for col in ("case", "tile / block", "GF/s", "packed", "measured", "model", "model - measured", "per input",
                "profiled / plain"):
        t.add_column(col, justify="left" if col in ("case", "tile / block", "packed", "per input") else "right")
    for r in rows:
        meas, model = sum(r["measured"].values()), sum(r["model"].values())
        per = "; ".join(f"{n} {100 * r['measured'][n]:.1f} / {100 * r['model'].get(n, 0.0):.1f}"
                        for n in r["packs"]) or "-"
        t.add_row(r["case"], r["tile"], f"{r['gflops']:.1f}", ", ".join(r["packs"]) or "none",
                  f"{100 * meas:.1f}%", f"{100 * model:.1f}%", f"{100 * (model - meas):+.1f}%", per,
                  f"{r['overhead']:.3f}")
    return t


def main(argv=None) -> int:
    from rich.console import Console

    from bench.results_section import run_stamp, save_outputs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=None, help="comma-separated case names (default: the convolutions and "
                                                  "gemm1024_32)")
    ap.add_argument("--arch", default=None, help="arch YAML (default: cosa arch calibrate cpu --quick now)")
    ap.add_argument("--repeat", type=int, default=20, help="profiled calls and interleaved rounds per case")
    ap.add_argument("--time-limit", type=float, default=20.0, help="MIP seconds per case")
    ap.add_argument("--json", default=None)
    ap.add_argument("--results", default=None, help="record the table in this results file")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        raise SystemExit("cpu_packs: --repeat must be >= 1")
    known = cases(False)
    names = [c.strip() for c in args.cases.split(",")] if args.cases else \
        [w.name for w in known if w.name.startswith("res") or w.name == "gemm1024_32"]
    unknown = sorted(set(names) - {w.name for w in known})
    if unknown:
        raise SystemExit(f"cpu_packs: --cases: unknown {unknown}; known {[w.name for w in known]}")
    if args.arch:
        base = costmodel.load_arch(args.arch)
    else:
        from targets.cpu.calibrate import calibrate

        base = calibrate(quick=True)
    base = on_cores(base, 1)
    load_before = os.getloadavg()
    console = Console(width=220, record=True)
    console.print(f"arch {base.name}: pack_cycles_per_word {base.params.get('pack_cycles_per_word')}; one thread; "
                  f"{args.repeat} profiled calls (shares from the faster half) and interleaved rounds per case")
    rows = []
    for w in (w for w in known if w.name in names):
        rows.append(measure(w, base, args.repeat, args.time_limit))
        console.print(f"  {w.name}: measured", style="dim")
    console.print(table(rows))
    load_after = os.getloadavg()
    date, machine = run_stamp()
    command = "python bench/cpu_packs.py" + (f" --cases {args.cases}" if args.cases else "") + \
        f" --repeat {args.repeat}" + (f" --arch {args.arch}" if args.arch else "")
    save_outputs(name="cpu_packs", title="Packing copies in the CPU kernels, measured and modelled "
                                         "(`bench/cpu_packs.py`)",
                 command=command, date=date, machine=machine, console=console,
                 data={"args": vars(args), "rows": rows, "arch": base.params,
                       "load_average": {"before": load_before, "after": load_after}},
                 json_path=args.json, results_path=args.results,
                 notes=f"Shares are of the kernel's whole call, in percent; 'per input' gives measured / model.  "
                       f"Load average (1, 5, 15 min) before {tuple(round(x, 1) for x in load_before)}, after "
                       f"{tuple(round(x, 1) for x in load_after)} on {os.cpu_count()} cores.",
                 summary=SUMMARY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
