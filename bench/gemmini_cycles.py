"""Gemmini cycles: CoSA's schedule against the vendor heuristic, run on our Gemmini model.

Per layer of ResNet-50 (convolutions and the FC layer) and of the BERT-base
GEMMs (sequence 128), on the default Gemmini (DIM 16, 256 KiB scratchpad,
64 KiB accumulator, weight-stationary): each schedule (``cosa`` MIP and
``gemmini-default``) is turned into a command program by ``gemmini.codegen``,
executed by the functional model (output checked bit for bit against NumPy,
with bias, ReLU and a 1/256 output scale) and timed by the timing model.
Columns: model cycles, utilization (MACs / DIM^2 over cycles), speedup of
cosa over gemmini-default, and the cost model's cycle estimate next to the
model's cycles (relative error).  Geomeans over layers; network totals weight
each layer by its repeat count.  The BERT attention GEMMs are batched over the
12 heads (the generator's group dim: each head is a GEMM with its own weights).

MobileNet-V2 (``--networks mobilenet_v2``, not run by default) adds the
depthwise layers; the vendor heuristic has no rule for them (no default column).

    python bench/gemmini_cycles.py [--quick] [--networks resnet50,bert_base_128] [--layers a,b]
                                   [--time-limit 60] [--jobs N] [--json out.json] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import statistics
import sys
import time

from results_section import run_stamp, save_outputs
from rich.console import Console
from rich.table import Table

from cosa.scheduler import schedule
from gemmini import DEFAULT_CONFIG, generate, run_program
from gemmini.errors import CodegenError
from workloads import zoo

NETWORKS = {"resnet50": "ResNet-50", "bert_base_128": "BERT-base GEMMs (seq 128)", "mobilenet_v2": "MobileNet-V2"}
QUICK_LAYERS = {"resnet50": ["res2a_branch2b", "res3a_branch2c", "res4b_branch2a", "res5a_branch2b", "fc1000"],
                "bert_base_128": ["output_projection", "attention_scores"],
                "mobilenet_v2": ["b14_dw", "b14_project", "b15_expand"]}
SCHEDULERS = ("cosa", "gemmini-default")
SCALE = 1.0 / 256  # output requantization scale used for every layer


def _geo(values) -> float:
    vals = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else math.nan


def _fmt(x, spec: str) -> str:
    return format(x, spec) if isinstance(x, (int, float)) and x is not None and math.isfinite(x) else "-"


def run_layer(network: str, name: str, scheduler: str, time_limit_s: float, seed: int) -> dict:
    """Schedule, generate, run and verify one layer; every number of one table row."""
    wl = next(w for w in zoo.network(network) if w.name == name)
    arch = DEFAULT_CONFIG.arch("ws")
    row = {"network": network, "layer": name, "scheduler": scheduler, "repeat": wl.repeat, "macs": wl.macs}
    t0 = time.perf_counter()
    try:
        sched = schedule(wl, arch, scheduler=scheduler, time_limit_s=time_limit_s, seed=seed) \
            if scheduler == "cosa" else schedule(wl, arch, scheduler=scheduler)
    except Exception as exc:  # a scheduler failure is a row, not a crash of the whole benchmark
        row["error"] = f"schedule: {exc}"
        return row
    t1 = time.perf_counter()
    try:
        program = generate(wl, sched.mapping, arch, bias=True, relu=True, scale=SCALE)
    except CodegenError as exc:
        row["error"] = f"codegen: {exc}"
        return row
    t2 = time.perf_counter()
    result = run_program(program, seed=seed)
    t3 = time.perf_counter()
    model = result.cycles
    estimate = float(sched.cost.cycles)
    row.update(verified=result.verified, mismatches=result.mismatches, cycles=model,
               ideal_cycles=result.ideal_cycles, utilization=result.utilization, instructions=result.instructions,
               dram_bytes=result.dram_bytes, busy=result.busy, costmodel_cycles=estimate,
               costmodel_error=(estimate - model) / model if model else None,
               schedule_s=t1 - t0, generate_s=t2 - t1, simulate_s=t3 - t2, notes=list(program.plan.notes),
               mapping=[{"temporal": lm.temporal, "spatial": lm.spatial, "order": list(lm.order)}
                        for lm in sched.mapping.levels])
    return row


def _layers(network: str, quick: bool, only: set[str] | None):
    out = []
    for wl in zoo.network(network):
        if only and wl.name not in only:
            continue
        if quick and wl.name not in QUICK_LAYERS[network]:
            continue
        out.append(wl)
    return out


def run_network(network: str, args, console: Console) -> dict:
    only = {x.strip() for x in args.layers.split(",")} if args.layers else None
    layers = _layers(network, args.quick, only)
    jobs = [(network, w.name, s, args.time_limit, args.seed) for w in layers for s in SCHEDULERS]
    rows = {}
    if args.jobs > 1:
        with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
            futures = {pool.submit(run_layer, *job): job for job in jobs}
            for fut in concurrent.futures.as_completed(futures):
                job = futures[fut]
                rows[(job[1], job[2])] = fut.result()
    else:
        for job in jobs:
            rows[(job[1], job[2])] = run_layer(*job)
    table = Table(title=f"{NETWORKS.get(network, network)} on Gemmini (DIM 16, WS): model cycles")
    for col in ("layer", "x", "cosa cycles", "util", "default cycles", "util", "speedup", "verified",
                "cm cosa", "err", "cm default", "err"):
        table.add_column(col, justify="left" if col == "layer" else "right")
    speedups, errors, totals, busiest = [], [], {s: 0.0 for s in SCHEDULERS}, []
    all_verified, refused = True, 0
    for w in layers:
        c, d = rows[(w.name, "cosa")], rows[(w.name, "gemmini-default")]
        all_verified &= all(r.get("verified") for r in (c, d) if "error" not in r)
        refused += sum("error" in r for r in (c, d))
        speed = d["cycles"] / c["cycles"] if c.get("cycles") and d.get("cycles") else None
        if speed:
            speedups.append(speed)
            busiest.append(max(d["busy"].values()) / max(c["busy"].values()))
            for s, r in (("cosa", c), ("gemmini-default", d)):
                totals[s] += r["cycles"] * w.repeat
        for r in (c, d):
            if r.get("costmodel_error") is not None:
                errors.append(abs(r["costmodel_error"]))
        table.add_row(w.name, str(w.repeat), _fmt(c.get("cycles"), ",.0f"), _fmt(c.get("utilization"), ".2f"),
                      _fmt(d.get("cycles"), ",.0f"), _fmt(d.get("utilization"), ".2f"), _fmt(speed, ".2f"),
                      "/".join("yes" if r.get("verified") else ("ERR" if "error" in r else "NO") for r in (c, d)),
                      _fmt(c.get("costmodel_cycles"), ",.0f"), _fmt(c.get("costmodel_error"), "+.0%"),
                      _fmt(d.get("costmodel_cycles"), ",.0f"), _fmt(d.get("costmodel_error"), "+.0%"))
    console.print(table)
    for w in layers:
        for s in SCHEDULERS:
            if "error" in rows[(w.name, s)]:
                console.print(f"  {w.name} {s}: {rows[(w.name, s)]['error']}")
    summary = {"geomean_speedup": _geo(speedups),
               "total_speedup": totals["gemmini-default"] / totals["cosa"] if totals["cosa"] else None,
               "median_abs_costmodel_error": statistics.median(errors) if errors else None,
               "geomean_busiest_unit_ratio": _geo(busiest),
               "all_verified": all_verified, "refused": refused}
    console.print(f"{NETWORKS.get(network, network)}: geomean speedup of cosa over gemmini-default "
                  f"{_fmt(summary['geomean_speedup'], '.2f')}x; total (repeat-weighted) "
                  f"{_fmt(summary['total_speedup'], '.2f')}x; median |cost model error| "
                  f"{_fmt(summary['median_abs_costmodel_error'], '.1%')}; every program run verified bit-exact: "
                  f"{'yes' if all_verified else 'NO'}"
                  + (f"; {refused} schedule(s) not run (see above)" if refused else ""))
    console.print(f"  if main-memory transfers overlapped compute perfectly (cycles = the busiest unit's busy "
                  f"cycles): geomean speedup {_fmt(summary['geomean_busiest_unit_ratio'], '.2f')}x")
    return {"network": network, "rows": [rows[k] for k in sorted(rows)], "summary": summary}


NOTES = (
    "Every program is simulated by the functional model (output compared bit for bit with NumPy) and "
    "timed by the timing model; `cm` is the cost model's cycle estimate for the same mapping, `err` = (cm "
    "- model) / model.\n\nThe timing model follows our RTL command by command (within 1% of its cycles, "
    "`bench/gemmini_rtl.py`): a compute streams its rows, new weights take DIM cycles to shift in and overlap "
    "only the last compute before them, every DMA row costs its 16-byte beats plus one cycle.  A layer's "
    "utilization is therefore bounded by the rows one weight block streams: the image width when the "
    "scratchpad input tile keeps the kernel halo (7 rows per compute on the 7x7 layers), one row for a "
    "batch-1 FC layer (a run's short compute goes first, so that the next weights' shift overlaps a full "
    "one).  Mappings that leave an output tile before its reduction ends also move int32 partial sums "
    "through DRAM.  A tile's loads follow the previous tile's computes in program order and the queues hold "
    "8 commands, so main-memory transfers overlap compute only around tile changes; the line under each "
    "summary gives the speedup if they overlapped it perfectly (each program at its busiest unit's busy "
    "cycles), which a software-pipelined code generator could approach.\n")



def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--networks", default="resnet50,bert_base_128")
    ap.add_argument("--layers", help="comma-separated layer names (default: all)")
    ap.add_argument("--quick", action="store_true", help="a few representative layers")
    ap.add_argument("--time-limit", type=float, default=60.0, help="MIP time limit per layer (s)")
    ap.add_argument("--seed", type=int, default=0, help="MIP seed and input data seed")
    ap.add_argument("--jobs", type=int, default=1, help="layers run in this many processes")
    ap.add_argument("--json", help="write every number here")
    ap.add_argument("--results", help="write the printed tables, date and machine to this Markdown file")
    args = ap.parse_args(argv)
    console = Console(width=200, record=True)
    date, machine = run_stamp()
    console.print(f"gemmini cycles, {date}; {machine}; seed {args.seed}, MIP limit {args.time_limit:g} s, "
                  f"jobs {args.jobs}" + (", quick subset" if args.quick else ""))
    runs = [run_network(n.strip(), args, console) for n in args.networks.split(",") if n.strip()]
    save_outputs(name="gemmini_cycles", title="Gemmini cycles", date=date, machine=machine, console=console,
                 command="python bench/gemmini_cycles.py " + " ".join(sys.argv[1:] if argv is None else argv),
                 data={"args": vars(args), "runs": runs}, json_path=args.json, results_path=args.results,
                 notes=NOTES)
    ok = all(r["summary"]["all_verified"] for r in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
