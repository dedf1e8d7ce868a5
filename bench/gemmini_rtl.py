"""Gemmini RTL cycles: CoSA's schedule against the stream Gemmini's own library issues, on our Verilated RTL.

Per layer of ResNet-50 and of the BERT-base GEMMs (sequence 128), on the
default Gemmini (DIM 16, 256 KiB scratchpad, 64 KiB accumulator, weight
stationary), three programs: ``cosa`` (the MIP's mapping through
``gemmini.codegen``), ``vendor`` (the command stream gemmini.h issues for the
layer, ``gemmini.vendor``, whose loop instructions ``gemmini.sim.rtl``
expands on the host: our RTL has no loop unroller) and ``approx`` (the
``gemmini-default`` Mapping through ``gemmini.codegen``, the old stand-in
for the vendor).  Each runs on the RTL co-simulation (output checked bit
for bit against NumPy, bias, ReLU, 1/256 output scale).  Beside the RTL
cycles: the timing model (same main-memory latency) and the cost model's
estimate, each with its relative error per layer; utilization (MACs / DIM^2
over RTL cycles), per-unit busy cycles and the simulation speed (simulated
cycles per host second).  vendor / cosa per layer and its geomean.  The
roofline (``lowerbounds.roofline``: max(MACs / DIM^2, compulsory DRAM bytes
through the DMA port)) per layer, each program's cycles over it, and the
repeat-weighted network sums of cosa, vendor and roofline cycles.

    python bench/gemmini_rtl.py [--quick] [--networks resnet50,bert_base_128] [--layers a,b|all]
                                [--jobs N] [--time-limit 30] [--mem-latency 16] [--mappings DIR]
                                [--json out.json] [--results bench/RESULTS.md]

``--mappings DIR`` takes each layer's mapping from ``DIR/LAYER.SCHEDULER.yaml``
(``mappings.io`` format; SCHEDULER is ``cosa`` or ``gemmini-default``) instead
of scheduling, so that a measurement can be repeated on fixed mappings; the
cost-model column is then ``costmodel.evaluate`` of that mapping.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

from results_section import run_stamp, save_outputs
from rich.console import Console
from rich.table import Table
from vendor_compare import summarize, vendor_rtl_row

from cosa.scheduler import schedule
from costmodel.evaluate import evaluate
from mappings.io import load_mapping
from gemmini.codegen import generate
from gemmini.config import DEFAULT_CONFIG
from gemmini.errors import CodegenError, SimulationError
from gemmini import run_rtl
from gemmini.sim import rtl
from gemmini.sim.timing import timing
from lowerbounds import roofline
from workloads import zoo

NETWORKS = {"resnet50": "ResNet-50", "bert_base_128": "BERT-base GEMMs (seq 128)"}
DEFAULT_LAYERS = {
    "resnet50": ["res2a_branch2a", "res2a_branch2b", "res3a_branch2a", "res3b_branch2b", "res4a_branch2b",
                 "res4a_branch1", "res5a_branch2b", "res5a_branch2c"],
    "bert_base_128": ["qkv_projection", "output_projection", "ffn1", "ffn2"],
}
QUICK_LAYERS = {"resnet50": ["res2a_branch2b", "res4a_branch2b"], "bert_base_128": ["output_projection"]}
COLUMNS = ("cosa", "vendor", "approx")
SCALE = 1.0 / 256


def _geo(values) -> float:
    vals = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else math.nan


def _fmt(x, spec: str) -> str:
    return format(x, spec) if isinstance(x, (int, float)) and x is not None and math.isfinite(x) else "-"


def r_util(row: dict, cycles: float) -> float:
    """Array utilization at ``cycles`` (MACs / DIM^2 / cycles) of the layer of ``row``."""
    return row["macs"] / (DEFAULT_CONFIG.dim ** 2) / cycles if cycles else math.nan


def run_layer(network: str, name: str, column: str, args) -> dict:
    """One program of one layer on the RTL (and the timing model): cosa, vendor or approx."""
    wl = next(w for w in zoo.network(network) if w.name == name)
    row = {"network": network, "layer": name, "column": column, "repeat": wl.repeat, "macs": wl.macs,
           "roofline_cycles": roofline(wl, DEFAULT_CONFIG.arch("ws")).cycles}
    if column == "vendor":
        row.update(vendor_rtl_row(wl, scale=SCALE, mem_latency=args.mem_latency, seed=args.seed))
        return row
    scheduler = "cosa" if column == "cosa" else "gemmini-default"
    arch = DEFAULT_CONFIG.arch("ws")
    t0 = time.perf_counter()
    try:
        if args.mappings:
            mapping = load_mapping(Path(args.mappings) / f"{name}.{scheduler}.yaml", arch, wl)
            estimate = float(evaluate(wl, arch, mapping).cycles)
        else:
            sched = schedule(wl, arch, scheduler=scheduler, time_limit_s=args.time_limit, seed=args.seed) \
                if scheduler == "cosa" else schedule(wl, arch, scheduler=scheduler)
            mapping, estimate = sched.mapping, float(sched.cost.cycles)
        program = generate(wl, mapping, arch, bias=True, relu=True, scale=SCALE)
    except (CodegenError, Exception) as exc:  # a failure is a row, not a crash of the benchmark
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    t1 = time.perf_counter()
    try:
        run = run_rtl.run_program_rtl(program, mode=args.mode, seed=args.seed, mem_latency=args.mem_latency)
    except SimulationError as exc:
        row["error"] = f"rtl: {exc}"
        return row
    t2 = time.perf_counter()
    timed_config = dataclasses.replace(program.config, dma_latency_cycles=args.mem_latency)
    model = timing(program.commands, timed_config)
    t3 = time.perf_counter()
    cycles = run.report.cycles
    row.update(verified=run.result.verified, mismatches=run.result.mismatches, rtl_cycles=cycles,
               ideal_cycles=run.result.ideal_cycles, utilization=run.result.utilization,
               instructions=run.report.instructions, busy=run.report.busy, sim_seconds=run.report.sim_seconds,
               cycles_per_second=run.report.cycles_per_second, timing_cycles=model.cycles,
               timing_busy=model.busy, timing_error=(model.cycles - cycles) / cycles,
               costmodel_cycles=estimate, costmodel_error=(estimate - cycles) / cycles,
               schedule_s=t1 - t0, rtl_s=t2 - t1, timing_s=t3 - t2,
               mapping=[{"temporal": lm.temporal, "spatial": lm.spatial, "order": list(lm.order)}
                        for lm in mapping.levels])
    return row


def run_network(network: str, args, console: Console) -> dict:
    known = [w.name for w in zoo.network(network)]
    if args.layers == "all":
        names = known
    elif args.layers:
        names = [x.strip() for x in args.layers.split(",") if x.strip()]
    else:
        names = (QUICK_LAYERS if args.quick else DEFAULT_LAYERS)[network]
    names = [n for n in names if n in known]
    jobs = [(n, s) for n in names for s in COLUMNS]
    if args.jobs > 1:
        # each run is a Verilated simulation of its own: layers run side by side in processes
        with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
            results = pool.map(run_layer, *zip(*[(network, n, s, args) for n, s in jobs]))
            rows = dict(zip(jobs, results))
    else:
        rows = {(n, s): run_layer(network, n, s, args) for n, s in jobs}
    table = Table(title=f"{NETWORKS.get(network, network)} on the Gemmini RTL (DIM 16, WS, memory latency "
                        f"{args.mem_latency} cycles)")
    for col in ("layer", "program", "RTL cycles", "util", "vendor/x", "x/roofline", "ok", "timing model", "err",
                "cost model", "err", "busy ld/ex/st %", "Mcyc/s"):
        table.add_column(col, justify="left" if col in ("layer", "program") else "right")

    t_err = {s: [] for s in COLUMNS}
    c_err, speeds, cyc = [], [], []
    all_verified = True
    sums = {s: 0.0 for s in COLUMNS + ("roofline",)}
    for n in names:
        v = rows[(n, "vendor")]
        roof = v["roofline_cycles"]
        cyc.append({"layer": n, "repeat": 1, **{s: rows[(n, s)].get("rtl_cycles") for s in COLUMNS}})
        rep = v["repeat"]
        sums["roofline"] += rep * roof
        for s in COLUMNS:
            sums[s] += rep * (rows[(n, s)].get("rtl_cycles") or math.nan)
        for s in COLUMNS:
            r = rows[(n, s)]
            all_verified &= bool(r.get("verified"))
            if "error" in r:
                table.add_row(n if s == "cosa" else "", s, "-", "-", "-", "-", "ERR", "-", "-", "-", "-", "-", "-")
                continue
            ratio = v["rtl_cycles"] / r["rtl_cycles"] if v.get("rtl_cycles") and s != "vendor" else None
            t_err[s].append(abs(r["timing_error"]))
            if r.get("costmodel_error") is not None:
                c_err.append(abs(r["costmodel_error"]))
            speeds.append(r["cycles_per_second"])
            busy = "/".join(f"{100 * r['busy'][u] / r['rtl_cycles']:.0f}" for u in ("load", "execute", "store"))
            table.add_row(n if s == "cosa" else "", s, _fmt(r["rtl_cycles"], ",.0f"), _fmt(r["utilization"], ".0%"),
                          _fmt(ratio, ".2f") + (" SLOWER" if s == "cosa" and ratio is not None and ratio < 1 else ""),
                          _fmt(r["rtl_cycles"] / roof, ".2f"), "yes" if r["verified"] else "NO",
                          _fmt(r["timing_cycles"], ",.0f"), _fmt(r["timing_error"], "+.0%"),
                          _fmt(r.get("costmodel_cycles"), ",.0f"), _fmt(r.get("costmodel_error"), "+.0%"), busy,
                          _fmt(r["cycles_per_second"] / 1e6, ".2f"))
        table.add_row("", "roofline", _fmt(roof, ",.0f"), _fmt(r_util(v, roof), ".0%"), "-", "1.00", "", "", "", "",
                      "", "", "")
    console.print(table)
    for key, r in rows.items():
        if "error" in r:
            console.print(f"  {key[0]} {key[1]}: {r['error']}")
    vs_vendor = summarize(cyc, base="vendor", new="cosa")
    approx = summarize(cyc, base="approx", new="cosa")
    summary = {"geomean_speedup_vs_vendor": vs_vendor["geomean"], "slower_than_vendor": vs_vendor["slower"],
               "speedups_vs_vendor": vs_vendor["speedups"], "geomean_speedup_vs_approx": approx["geomean"],
               **{f"median_abs_timing_error_{s}": statistics.median(t_err[s]) if t_err[s] else None
                  for s in COLUMNS},
               "median_abs_costmodel_error": statistics.median(c_err) if c_err else None,
               "median_cycles_per_second": statistics.median(speeds) if speeds else None,
               "all_verified": all_verified, "sum_cycles": sums,
               **{f"sum_{s}_over_roofline": sums[s] / sums["roofline"] if sums["roofline"] else None
                  for s in COLUMNS}}
    name = NETWORKS.get(network, network)
    console.print(f"{name}: RTL cycles, cosa over the vendor's stream: geomean {_fmt(vs_vendor['geomean'], '.3f')}x "
                  f"over {vs_vendor['compared']} layers; layers where cosa is SLOWER than the vendor: "
                  f"{', '.join(vs_vendor['slower']) or 'none'}; cosa over the old approximation: geomean "
                  f"{_fmt(approx['geomean'], '.3f')}x")
    console.print(f"  sums over these layers (x repeats): roofline {sums['roofline']:,.0f} cycles; cosa "
                  f"{sums['cosa']:,.0f} ({_fmt(summary['sum_cosa_over_roofline'], '.2f')}x the roofline), vendor "
                  f"{sums['vendor']:,.0f} ({_fmt(summary['sum_vendor_over_roofline'], '.2f')}x), approx "
                  f"{sums['approx']:,.0f} ({_fmt(summary['sum_approx_over_roofline'], '.2f')}x)")
    console.print(f"  median |timing model error| against the RTL: cosa "
                  f"{_fmt(summary['median_abs_timing_error_cosa'], '.1%')}, vendor (loop instructions) "
                  f"{_fmt(summary['median_abs_timing_error_vendor'], '.1%')}, approx "
                  f"{_fmt(summary['median_abs_timing_error_approx'], '.1%')}; median |cost model error| "
                  f"{_fmt(summary['median_abs_costmodel_error'], '.1%')}; simulation "
                  f"{_fmt((summary['median_cycles_per_second'] or math.nan) / 1e6, '.2f')} M cycles/s; "
                  f"every run bit-exact: {'yes' if all_verified else 'NO'}")
    return {"network": network, "rows": [rows[k] for k in sorted(rows)], "summary": summary}


NOTES = (
    "Three programs per layer, each run on the RTL and checked bit for bit against NumPy: `cosa` (the MIP's "
    "mapping through our code generator), `vendor` (the command stream Gemmini's own C library issues for the "
    "call resnet50.c makes for the layer, `gemmini.vendor`, loop instructions included) and `approx` (the old "
    "stand-in, the gemmini-default Mapping through our code generator).  `vendor/x` = vendor RTL cycles over "
    "the row's (> 1: that program is faster than the vendor's).  The timing-model column times the same "
    "command stream at the same memory latency; `cost model` is the cost model's estimate for the row's "
    "mapping (none for the vendor's stream).\n\nOur RTL has no loop unroller: the vendor's LOOP_WS / "
    "LOOP_CONV_WS instructions are expanded on the host into the command sequence our model of Gemmini's "
    "LoopMatmul / LoopConv issues (two loops in flight, queues never full) and the RTL runs that flat "
    "sequence through its decoupled load / execute / store queues.  The vendor's RTL cycles are therefore "
    "those of the unrolled order on our hardware, without an unroller's own issue limits or backpressure; "
    "they are not a measurement of Gemmini's LoopMatmul / LoopConv hardware.\n")


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"each": True, "column": "vendor/x", "rows": {"program": "cosa"}, "what": "The vendor's RTL cycles over cosa's",
     "stats": ["geomean", "min", "max", "below:1"]},
    {"each": True, "column": "err", "rows": {"program": "cosa"},
     "what": "Timing model error against the RTL, cosa's programs", "stats": ["absmedian", "absmax"]},
    {"each": True, "column": "err", "rows": {"program": "vendor"},
     "what": "Timing model error against the RTL, the vendor's streams", "stats": ["absmedian", "absmax"]},
    {"each": True, "column": "ok", "what": "Runs bit-exact", "stats": ["equal:yes"]},
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--networks", default="resnet50,bert_base_128")
    ap.add_argument("--layers", help="comma-separated layer names, or all (default: a representative set)")
    ap.add_argument("--jobs", type=int, default=1, help="runs side by side in this many processes")
    ap.add_argument("--quick", action="store_true", help="two ResNet-50 layers and one BERT GEMM")
    ap.add_argument("--time-limit", type=float, default=30.0, help="MIP time limit per layer (s)")
    ap.add_argument("--mem-latency", type=int, default=rtl.DEFAULT_MEM_LATENCY,
                    help="main-memory latency of a DMA read (cycles), RTL and timing model alike")
    ap.add_argument("--mode", choices=("trace", "c"), default="trace",
                    help="trace: the command stream on a memory image; c: the emitted C compiled natively")
    ap.add_argument("--seed", type=int, default=0, help="MIP seed and input data seed")
    ap.add_argument("--mappings", metavar="DIR",
                    help="take the mappings from DIR/LAYER.SCHEDULER.yaml instead of scheduling")
    ap.add_argument("--json", help="write every number here")
    ap.add_argument("--results", help="write the printed tables, date and machine into this Markdown file")
    args = ap.parse_args(argv)
    console = Console(width=200, record=True)
    date, machine = run_stamp()
    t0 = time.perf_counter()
    build = rtl.build(DEFAULT_CONFIG)
    console.print(f"gemmini RTL, {date}; {machine}; {rtl.verilator_version()}; build "
                  f"{build.build_seconds:.0f} s (cached: {time.perf_counter() - t0 < 5}); seed {args.seed}, MIP "
                  f"limit {args.time_limit:g} s, mode {args.mode}, jobs {args.jobs}"
                  + (", quick subset" if args.quick else ""))
    runs = [run_network(n.strip(), args, console) for n in args.networks.split(",") if n.strip()]
    save_outputs(name="gemmini_rtl", title="Gemmini RTL cycles", date=date, machine=machine, console=console,
                 command="python bench/gemmini_rtl.py " + " ".join(sys.argv[1:] if argv is None else argv),
                 data={"args": vars(args), "runs": runs}, json_path=args.json, results_path=args.results,
                 notes=NOTES, summary=SUMMARY)
    return 0 if all(r["summary"]["all_verified"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
