"""MIP speed: seconds (wall and CPU) and schedule cycles of the CoSA MIP per ResNet-50 layer, before and after.

"before" is the ``cosa/mip`` package at a git revision (``--before``, default: the MIP before its speed-up),
loaded from ``git show`` into a temporary package beside the current one; "after" is the working tree's.
Both run in this process, layer by layer, one after the other, with the same arch, time limit and seed, so
a varying machine load hits both alike.  CPU seconds are ``time.process_time`` (HiGHS runs in this
process) plus the children's CPU time; wall seconds include waiting for a shared CPU.  Cycles are the cost
model's (``costmodel.evaluate``) of the returned mapping, which ``mappings.validate`` accepts.

    python bench/mip_speed.py [--arch gemmini,simba.yaml] [--layers res3a_branch2b,...] [--before REV | --no-before]
                              [--time-limit 60] [--mip-gap 0.01]
                              [--json out.json] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results_section import run_stamp, save_outputs
from rich.console import Console
from rich.table import Table

from mappings import validate
from workloads import zoo

REPO = Path(__file__).resolve().parent.parent
BEFORE = "0f9c7da"
"""The last revision before the MIP's speed-up."""


def load_before(rev: str, into: Path):
    """``cosa/mip`` at ``rev`` as the package ``cosa._mip_before`` (its relative imports reach the current
    ``cosa`` package, so only the MIP differs)."""
    files = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", f"{rev}:cosa/mip"], check=True,
                           capture_output=True, text=True).stdout.split()
    pkg = into / "_mip_before"
    pkg.mkdir()
    for name in files:
        if name.endswith(".py"):
            text = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:cosa/mip/{name}"], check=True,
                                  capture_output=True, text=True).stdout
            (pkg / name).write_text(text)
    spec = importlib.util.spec_from_file_location("cosa._mip_before", pkg / "__init__.py",
                                                  submodule_search_locations=[str(pkg)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["cosa._mip_before"] = module
    spec.loader.exec_module(module)
    return module.mip_schedule


def cpu_seconds() -> float:
    """CPU seconds of this process (all threads) and its finished children."""
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + child.ru_utime + child.ru_stime


def timed(fn, workload, arch, args) -> dict:
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    try:
        gap = {} if args.mip_gap is None else {"mip_gap": args.mip_gap}
        s = fn(workload, arch, time_limit_s=args.time_limit, seed=args.seed, **gap)
    except Exception as exc:  # noqa: BLE001  (a failed layer is a row of the table, not the end of the run)
        return {"error": f"{type(exc).__name__}: {exc}", "wall_s": time.perf_counter() - wall0,
                "cpu_s": cpu_seconds() - cpu0}
    wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
    validate(s.mapping, workload, arch)
    return {"wall_s": wall, "cpu_s": cpu, "cycles": float(s.cost.cycles), "status": s.stats.status,
            "returned": s.extra.get("returned"), "mapping": str(s.mapping)}


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def run_arch(arch, label: str, layers, before, after, args, console) -> dict:
    """Time both versions layer by layer on ``arch``; print the table; return the rows and totals."""
    rows = []
    for w in layers:
        row = {"layer": w.name}
        if before is not None:
            row["before"] = timed(before, w, arch, args)
        row["after"] = timed(after, w, arch, args)
        rows.append(row)
        if console.is_terminal:
            console.print(w.name, {k: {kk: vv for kk, vv in v.items() if kk != "mapping"}
                                   for k, v in row.items() if k != "layer"})
    sides = (["before"] if before is not None else []) + ["after"]
    table = Table(title=f"CoSA MIP on {label}, {args.network}: seconds and cost-model cycles per layer "
                        f"(time limit {args.time_limit:g} s)")
    table.add_column("layer", justify="left")
    for side in sides:
        for col in ("wall s", "CPU s", "cycles", "status"):
            table.add_column(f"{col} {side}", justify="right")
    if before is not None:
        table.add_column("CPU after/before", justify="right")
        table.add_column("cycles after/before", justify="right")
    totals = {s: {"wall_s": 0.0, "cpu_s": 0.0} for s in sides}
    for row in rows:
        cells = [row["layer"]]
        for side in sides:
            r = row[side]
            totals[side]["wall_s"] += r["wall_s"]
            totals[side]["cpu_s"] += r["cpu_s"]
            cells += [_f(r["wall_s"], ".2f"), _f(r["cpu_s"], ".2f"), _f(r.get("cycles"), ",.0f"),
                      r.get("status", r.get("error", ""))[:24]]
        if before is not None:
            b, a = row["before"], row["after"]
            cells.append(_f(a["cpu_s"] / b["cpu_s"] if b["cpu_s"] else None, ".3f"))
            ratio = a["cycles"] / b["cycles"] if a.get("cycles") and b.get("cycles") else None
            row["cycles_ratio"] = ratio
            cells.append(_f(ratio, ".4f"))
        table.add_row(*cells)
    table.add_section()
    cells = ["total"]
    for side in sides:
        cells += [_f(totals[side]["wall_s"], ".1f"), _f(totals[side]["cpu_s"], ".1f"), "", ""]
    if before is not None:
        cells.append(_f(totals["after"]["cpu_s"] / totals["before"]["cpu_s"], ".3f"))
        ratios = [r["cycles_ratio"] for r in rows if r.get("cycles_ratio")]
        worse = sum(1 for x in ratios if x > 1 + 1e-9)
        better = sum(1 for x in ratios if x < 1 - 1e-9)
        cells.append(f"{better} better, {worse} worse")
    table.add_row(*cells)
    console.print(table)
    slowest = max(rows, key=lambda r: r["after"]["wall_s"])
    console.print(f"after on {label}: slowest layer {slowest['layer']} {slowest['after']['wall_s']:.2f} s wall, "
                  f"{slowest['after']['cpu_s']:.2f} s CPU; total {totals['after']['wall_s']:.1f} s wall, "
                  f"{totals['after']['cpu_s']:.1f} s CPU over {len(rows)} layers")
    return {"rows": rows, "totals": totals}


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"each": True, "column": "CPU after/before", "what": "MIP CPU seconds after over before",
     "stats": ["geomean", "min", "max", "above:1"]},
    {"each": True, "column": "cycles after/before", "what": "Cost-model cycles after over before",
     "stats": ["min", "max", "above:1"]},
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="gemmini", help="comma-separated preset names or arch YAML files")
    ap.add_argument("--network", default="resnet50")
    ap.add_argument("--layers", default="", help="comma-separated layer names (default: every distinct layer)")
    ap.add_argument("--before", default=BEFORE, help="git revision of the MIP to compare against")
    ap.add_argument("--no-before", action="store_true", help="time the current MIP only")
    ap.add_argument("--time-limit", type=float, default=60.0, help="MIP time limit per layer (s)")
    ap.add_argument("--mip-gap", type=float, default=None, help="relative MIP gap (default: each version's own)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write every number here")
    ap.add_argument("--results", help="write the table, date, machine and command to this Markdown file")
    args = ap.parse_args(argv)

    from costmodel.archio import load_arch
    from cosa.mip import mip_schedule

    layers = zoo.network(args.network)
    if args.layers:
        keep = [x.strip() for x in args.layers.split(",") if x.strip()]
        layers = [w for w in layers if w.name in keep]
    console = Console(width=200, record=True)
    date, machine = run_stamp()
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        before = None if args.no_before else load_before(args.before, Path(tmp))
        for arch_name in [a.strip() for a in args.arch.split(",") if a.strip()]:
            arch = load_arch(arch_name)
            runs[arch_name] = run_arch(arch, Path(arch_name).name, layers, before, mip_schedule, args, console)

    command = (f"python bench/mip_speed.py --arch {args.arch} --time-limit {args.time_limit:g}"
               + (f" --mip-gap {args.mip_gap:g}" if args.mip_gap is not None else "")
               + (f" --layers {args.layers}" if args.layers else "")
               + (" --no-before" if args.no_before else f" --before {args.before}"))
    save_outputs(name="mip_speed", title="MIP speed", date=date, machine=machine, console=console, command=command,
                 data={"args": vars(args), "runs": runs}, json_path=args.json,
                 results_path=args.results,
                 notes="CPU s: process time of the solver process and its children; wall s includes waiting "
                       "for a CPU on the shared machine.", summary=SUMMARY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
