"""Gemmini cycles: CoSA's schedule against the command stream Gemmini's own library issues, on our Gemmini model.

Per layer of ResNet-50 (convolutions and the FC layer) and of the BERT-base
GEMMs (sequence 128), on the default Gemmini (DIM 16, 256 KiB scratchpad,
64 KiB accumulator, weight-stationary), three programs side by side, each
executed by the functional model (output checked bit for bit against NumPy,
with a 32-bit bias, ReLU and a 1/256 output scale) and timed by the timing
model:

* ``cosa``: the MIP's mapping (warm-started from the vendor approximation's
  mapping, as ``cosa schedule`` runs it) turned into commands by our code
  generator (``gemmini.codegen``);
* ``vendor``: the stream gemmini.h itself issues for the call resnet50.c /
  mobilenet.c make for the layer (``gemmini.vendor``: 1x1 stride-1 convs
  and the FC layer through ``tiled_matmul_nn_auto``, other convs through
  ``tiled_conv_auto``, GEMMs through ``tiled_matmul_auto``, depthwise
  through ``tiled_conv_dw_auto``), with its ragged last tiles, a_reuse /
  b_reuse and loop instructions (LOOP_WS, LOOP_CONV_WS), which the timing
  model unrolls with two loops in flight as Gemmini's LoopMatmul / LoopConv;
* ``cosa lib``: cosa's mapping executed by the library instead of our code
  generator (the ``gemmini-h`` style: the layer's library call with the
  mapping's scratchpad tile as tile arguments, ``gemmini.vendor.run.
  run_through_library``), so both sides use the same loop instructions;
  ``vendor/best`` compares the vendor with the faster of ``cosa`` and
  ``cosa lib`` per layer (the MIP still optimises for our code generator,
  not for the library's loop unrollers);
* ``approx``: the older stand-in for the vendor, the ``gemmini-default``
  Mapping (the library's tile sizes rounded to divisors) through our code
  generator.

Speedup = vendor cycles / cosa cycles (> 1: cosa faster); geomeans over
layers, totals weighted by each layer's repeat count.  ``cm`` is the cost
model's estimate for cosa's mapping, ``err`` = (cm - model) / model.
``roofline``: ``lowerbounds.roofline`` (max of MACs / DIM^2 and the compulsory
DRAM bytes through the DMA port), cosa over it, and the repeat-weighted sums.

    python bench/gemmini_cycles.py [--quick] [--networks resnet50,bert_base_128[,mobilenet_v2,shufflenet_v1]] [--layers a,b]
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
from vendor_compare import fmt, geomean, summarize, vendor_row

from gemmini.vendor.run import run_through_library

from cosa.scheduler import schedule
from gemmini import DEFAULT_CONFIG, generate, run_program
from gemmini.errors import CodegenError
from lowerbounds import roofline
from workloads import zoo

NETWORKS = {"resnet50": "ResNet-50", "bert_base_128": "BERT-base GEMMs (seq 128)", "mobilenet_v2": "MobileNet-V2",
            "shufflenet_v1": "ShuffleNet v1 (g 3, from its ONNX graph)"}
QUICK_LAYERS = {"resnet50": ["res2a_branch2b", "res3a_branch2a", "res3a_branch2c", "res4b_branch2a",
                             "res5a_branch2b", "fc1000"],
                "bert_base_128": ["output_projection", "attention_scores"],
                "mobilenet_v2": ["b14_dw", "b14_project", "b15_expand"],
                "shufflenet_v1": ["stage3.unit2.gconv1", "stage3.unit2.dwconv", "stage3.unit2.gconv2"]}
COLUMNS = ("cosa", "vendor", "approx")
#: --lower: the cosa column also schedules the layer's rewrites (gemmini.codegen.lowering: im2col folding of thin
#: layers, packed groups) and keeps whichever has the fewest cost-model cycles
LOWER = False
SCALE = 1.0 / 256  # output requantization scale used for every layer


def _mapping_row(wl, scheduler: str, time_limit_s: float, seed: int) -> dict:
    """Schedule with ``scheduler``, generate, run on the functional + timing models and verify."""
    arch = DEFAULT_CONFIG.arch("ws")
    t0 = time.perf_counter()
    try:
        if scheduler == "cosa" and LOWER:
            from gemmini.codegen.choose_lowering import schedule as schedule_lowered

            sched = schedule_lowered(wl, arch, schedule, scheduler="cosa", time_limit_s=time_limit_s, seed=seed,
                                     bound=False)
        else:
            sched = schedule(wl, arch, scheduler=scheduler, time_limit_s=time_limit_s, seed=seed, bound=False) \
                if scheduler == "cosa" else schedule(wl, arch, scheduler=scheduler, bound=False)
    except Exception as exc:  # a scheduler failure is a row, not a crash of the whole benchmark
        return {"error": f"schedule: {exc}"}
    t1 = time.perf_counter()
    try:
        program = generate(sched.workload, sched.mapping, arch, bias=True, relu=True, scale=SCALE)
    except CodegenError as exc:
        return {"error": f"codegen: {exc}"}
    result = run_program(program, seed=seed)
    t2 = time.perf_counter()
    model, estimate = result.cycles, float(sched.cost.cycles)
    lib = {}
    # the same tiles executed by the library's loop instructions (the gemmini-h style); a lowered workload is
    # another computation for the library (its rewrite of the arrays is ours), so it has no such column
    if scheduler == "cosa" and not sched.extra.get("lowering"):
        try:
            through = run_through_library(program, seed=seed)
            lib = {"lib_cycles": through.cycles, "lib_verified": through.verified}
        except Exception as exc:  # a layer the library cannot take these tiles for is reported, not hidden
            lib = {"lib_error": f"{type(exc).__name__}: {exc}"}
    return {**lib, "verified": result.verified, "mismatches": result.mismatches, "cycles": model,
            "utilization": result.utilization, "instructions": result.instructions, "busy": result.busy,
            "dram_bytes": result.dram_bytes, "costmodel_cycles": estimate,
            "costmodel_error": (estimate - model) / model if model else None,
            "warm_start": sched.extra.get("warm_start"), "schedule_s": t1 - t0, "simulate_s": t2 - t1,
            "lowering": sched.extra.get("lowering"),
            "mapping": [{"temporal": lm.temporal, "spatial": lm.spatial, "order": list(lm.order)}
                        for lm in sched.mapping.levels]}


def run_layer(network: str, name: str, column: str, time_limit_s: float, seed: int) -> dict:
    """One column of one layer's row."""
    wl = next(w for w in zoo.network(network) if w.name == name)
    row = {"network": network, "layer": name, "column": column, "repeat": wl.repeat, "macs": wl.macs}
    if column == "vendor":
        row.update(vendor_row(wl, scale=SCALE, relu=True, seed=seed))
    else:
        row.update(_mapping_row(wl, "cosa" if column == "cosa" else "gemmini-default", time_limit_s, seed))
    return row


def _layers(network: str, quick: bool, only: set[str] | None):
    return [w for w in zoo.network(network)
            if (not only or w.name in only) and (not quick or w.name in QUICK_LAYERS[network])]


def _progress(row: dict, done: int, total: int) -> None:
    """One line on stderr per finished program (not part of the recorded table)."""
    print(f"[{done}/{total}] {row['layer']} {row['column']}: "
          f"{row.get('error') or fmt(row.get('cycles'), ',.0f') + ' cycles'}", file=sys.stderr, flush=True)


def _ok(r: dict) -> str:
    return "ERR" if "error" in r else ("yes" if r.get("verified") else "NO")


def run_network(network: str, args, console: Console) -> dict:
    only = {x.strip() for x in args.layers.split(",")} if args.layers else None
    layers = _layers(network, args.quick, only)
    # the slow ones (vendor streams of big layers, MIP solves) first, so that two processes finish together
    jobs = [(network, w.name, col, args.time_limit, args.seed) for col in ("vendor", "cosa", "approx")
            for w in sorted(layers, key=lambda w: -w.macs)]
    rows = {}
    if args.jobs > 1:
        with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
            futures = {pool.submit(run_layer, *job): job for job in jobs}
            for fut in concurrent.futures.as_completed(futures):
                job = futures[fut]
                rows[(job[1], job[2])] = fut.result()
                _progress(rows[(job[1], job[2])], len(rows), len(jobs))
    else:
        for job in jobs:
            rows[(job[1], job[2])] = run_layer(*job)
            _progress(rows[(job[1], job[2])], len(rows), len(jobs))
    title = f"{NETWORKS.get(network, network)} on Gemmini (DIM 16, WS): timing-model cycles"
    table = Table(title=title)
    for col in ("layer", "x", "cosa", "util", "vendor", "util", "vendor/cosa", "cosa lib", "vendor/best", "approx",
                "approx/vendor", "roofline", "cosa/roof", "verified c/v/a/l", "cm cosa", "err", "vendor path"):
        table.add_column(col, justify="left" if col in ("layer", "vendor path") else "right")
    cyc = []
    errors, busiest, all_verified, refused = [], [], True, 0
    arch = DEFAULT_CONFIG.arch("ws")
    sums = {"cosa": 0.0, "vendor": 0.0, "best": 0.0, "roofline": 0.0}
    for w in layers:
        roof = roofline(w, arch).cycles
        c, v, a = (rows[(w.name, col)] for col in COLUMNS)
        all_verified &= all(r.get("verified") for r in (c, v, a) if "error" not in r)
        refused += sum("error" in r for r in (c, v, a))
        lib = c.get("lib_cycles") if c.get("lib_verified") else None
        best = min(x for x in (c.get("cycles"), lib) if x) if (c.get("cycles") or lib) else None
        all_verified &= c.get("lib_verified", True)
        cyc.append({"layer": w.name, "repeat": w.repeat, "cosa": c.get("cycles"), "vendor": v.get("cycles"),
                    "approx": a.get("cycles"), "lib": lib, "best": best})
        for key, value in (("cosa", c.get("cycles")), ("vendor", v.get("cycles")), ("best", best), ("roofline", roof)):
            sums[key] += w.repeat * (value or math.nan)
        speed = v["cycles"] / c["cycles"] if c.get("cycles") and v.get("cycles") else None
        if speed:
            busiest.append(max(v["busy"].values()) / max(c["busy"].values()))
        if c.get("costmodel_error") is not None:
            errors.append(abs(c["costmodel_error"]))
        av = a["cycles"] / v["cycles"] if a.get("cycles") and v.get("cycles") else None
        table.add_row(w.name, str(w.repeat), fmt(c.get("cycles"), ",.0f"), fmt(c.get("utilization"), ".2f"),
                      fmt(v.get("cycles"), ",.0f"), fmt(v.get("utilization"), ".2f"),
                      fmt(speed, ".2f") + (" SLOWER" if speed is not None and speed < 1 else ""),
                      fmt(lib, ",.0f"), fmt(v["cycles"] / best if best and v.get("cycles") else None, ".2f"),
                      fmt(a.get("cycles"), ",.0f"), fmt(av, ".2f"), fmt(roof, ",.0f"),
                      fmt(c["cycles"] / roof if c.get("cycles") else None, ".2f"),
                      "/".join(_ok(r) for r in (c, v, a)) + "/" + ("yes" if c.get("lib_verified") else
                                                                  "n/a" if "lib_error" in c else "NO"),
                      fmt(c.get("costmodel_cycles"), ",.0f"), fmt(c.get("costmodel_error"), "+.0%"),
                      v.get("path", "-"))
    console.print(table)
    for w in layers:
        for col in COLUMNS:
            if "error" in rows[(w.name, col)]:
                console.print(f"  {w.name} {col}: {rows[(w.name, col)]['error']}")
    vs_vendor = summarize(cyc, base="vendor", new="cosa")
    vs_vendor_best = summarize(cyc, base="vendor", new="best")
    vs_approx = summarize(cyc, base="approx", new="cosa")
    approx_vendor = summarize(cyc, base="approx", new="vendor")
    returned = [w.name for w in layers if (rows[(w.name, "cosa")].get("warm_start") or {}).get("returned_start")]
    summary = {"geomean_speedup_vs_vendor": vs_vendor["geomean"], "total_speedup_vs_vendor": vs_vendor["weighted"],
               "slower_than_vendor": vs_vendor["slower"], "layers_compared": vs_vendor["compared"],
               "geomean_speedup_vs_approx": vs_approx["geomean"], "total_speedup_vs_approx": vs_approx["weighted"],
               "geomean_approx_over_vendor": approx_vendor["geomean"],
               "median_abs_costmodel_error": statistics.median(errors) if errors else None,
               "geomean_busiest_unit_ratio": geomean(busiest), "cosa_returned_warm_start": returned,
               "all_verified": all_verified, "refused": refused,
               "geomean_best_vs_vendor": vs_vendor_best["geomean"], "total_best_vs_vendor": vs_vendor_best["weighted"],
               "best_slower_than_vendor": vs_vendor_best["slower"], "sum_cycles": sums,
               **{f"sum_{k}_over_roofline": sums[k] / sums["roofline"] for k in ("cosa", "vendor", "best")}}
    name = NETWORKS.get(network, network)
    console.print(f"{name}: cosa over the vendor's stream: geomean {fmt(vs_vendor['geomean'], '.3f')}x over "
                  f"{vs_vendor['compared']} layers, repeat-weighted total {fmt(vs_vendor['weighted'], '.3f')}x; "
                  f"layers where cosa is SLOWER than the vendor: "
                  f"{', '.join(vs_vendor['slower']) or 'none'}")
    console.print(f"  cosa's tiles through the library's loop instructions (`cosa lib`, the gemmini-h style), best of the two "
                  f"per layer: geomean {fmt(vs_vendor_best['geomean'], '.3f')}x, weighted "
                  f"{fmt(vs_vendor_best['weighted'], '.3f')}x; still SLOWER than the vendor: "
                  f"{', '.join(vs_vendor_best['slower']) or 'none'}")
    console.print(f"  against the old approximation (gemmini-default Mapping through our generator): geomean "
                  f"{fmt(vs_approx['geomean'], '.3f')}x, weighted {fmt(vs_approx['weighted'], '.3f')}x; the "
                  f"approximation over the real stream: geomean {fmt(approx_vendor['geomean'], '.3f')}x")
    console.print(f"  median |cost model error| (cosa) {fmt(summary['median_abs_costmodel_error'], '.1%')}; "
                  f"every program run verified bit-exact: {'yes' if all_verified else 'NO'}"
                  + (f"; {refused} program(s) not run (see above)" if refused else "")
                  + f"; cosa returned its warm start (the approximation's mapping) on: {', '.join(returned) or 'none'}")
    console.print(f"  sums (x repeats): roofline {sums['roofline']:,.0f} cycles (max of MACs / DIM^2 and compulsory "
                  f"DRAM bytes / DMA bandwidth); cosa {fmt(summary['sum_cosa_over_roofline'], '.2f')}x, vendor "
                  f"{fmt(summary['sum_vendor_over_roofline'], '.2f')}x, best of cosa and cosa lib "
                  f"{fmt(summary['sum_best_over_roofline'], '.2f')}x the roofline")
    console.print(f"  busiest unit's busy cycles, vendor over cosa (the ratio if every program overlapped its "
                  f"transfers with compute perfectly): geomean {fmt(summary['geomean_busiest_unit_ratio'], '.2f')}x")
    return {"network": network, "rows": [rows[k] for k in sorted(rows)], "summary": summary}


NOTES = (
    "Every program is simulated by the functional model (output compared bit for bit with NumPy) and timed "
    "by the timing model.  `cosa`: the MIP's mapping (warm-started from the approximation's mapping, as `cosa "
    "schedule` runs it) through our code generator.  `vendor`: the command stream gemmini.h issues for the "
    "call Gemmini's resnet50.c makes for the layer (`gemmini.vendor`, checked instruction for instruction "
    "against recorded streams of the real library): 1x1 stride-1 convolutions and fc1000 through "
    "`tiled_matmul_nn_auto`, the other convolutions through `tiled_conv_auto`, BERT GEMMs through "
    "`tiled_matmul_auto` (one call per head for the batched attention GEMMs); the three 1x1 stride-2 "
    "branches through `tiled_conv_auto` and the hardware downsample path (resnet50.c calls "
    "`tiled_conv_downsample` for res3a_branch1 and res4a_branch1: not this stream); ragged last tiles, "
    "a_reuse/b_reuse and the loop instructions LOOP_WS / LOOP_CONV_WS included.  `approx`: the "
    "gemmini-default Mapping (the library's tiles rounded down to divisors) through our code generator, the "
    "stand-in used before the real stream could run.  `cosa lib`: cosa's tiles executed by the library's own "
    "calls and loop instructions (the gemmini-h style); `vendor/best`: the vendor over the faster of cosa and "
    "cosa lib.  `vendor/cosa` > 1 means cosa is faster; SLOWER marks "
    "a layer where it is not.  `cm`: the cost model's cycles for cosa's mapping, `err` = (cm - model) / "
    "model.\n\nHow the comparison may be biased.  First, these are our timing model's cycles; on the real "
    "Gemmini RTL (`bench/gemmini_chipyard.py`, its section below) the core issues each of cosa's explicit "
    "commands itself while the vendor's loop instructions issue in hardware, and there the ratio goes the "
    "other way (that section's `vendor / cosa`).  The timing model charges one cycle per issued command, so it "
    "favours cosa's programs here.  Second, the vendor's loop instructions are unrolled by our model of "
    "LoopMatmul / LoopConv (two loops in flight); cosa's programs are software-pipelined by our code "
    "generator (the next tiles' mvins and the previous tile's mvouts spread among the current tile's "
    "computes; the timing model against our RTL on them: `bench/gemmini_rtl.py`).  Third, the MIP optimises "
    "our cost model, which charges max(load, compute) for the pipelined code but not its prologue and "
    "epilogue.  Both use the same bias path (the int32 bias moved into the output's accumulator rows first), "
    "inputs with "
    "the same seed and the same requantization.\n")


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"each": True, "column": "vendor/cosa", "what": "The vendor's timing-model cycles over cosa's",
     "stats": ["geomean", "min", "max", "below:1"]},
    {"each": True, "column": "vendor/best", "what": "The vendor over the faster of cosa and cosa lib",
     "stats": ["geomean", "below:1"]},
    {"each": True, "column": "cosa/roof", "what": "cosa over the roofline", "stats": ["geomean", "max"]},
    {"each": True, "column": "err", "what": "Cost model error on cosa's programs", "stats": ["absmedian", "absmax"]},
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--networks", default="resnet50,bert_base_128")
    ap.add_argument("--layers", help="comma-separated layer names (default: all)")
    ap.add_argument("--quick", action="store_true", help="a few representative layers")
    ap.add_argument("--time-limit", type=float, default=60.0, help="MIP time limit per layer (s)")
    ap.add_argument("--seed", type=int, default=0, help="MIP seed and input data seed")
    ap.add_argument("--lower", action="store_true", help="cosa also schedules each layer's rewrites "
                    "(gemmini.codegen.lowering: im2col folding, packed groups) and keeps the cheapest")
    ap.add_argument("--jobs", type=int, default=1, help="programs run in this many processes")
    ap.add_argument("--json", help="write every number here")
    ap.add_argument("--results", help="write the printed tables, date and machine to this Markdown file")
    args = ap.parse_args(argv)
    global LOWER
    LOWER = args.lower
    console = Console(width=200, record=True)
    date, machine = run_stamp()
    console.print(f"gemmini cycles, {date}; {machine}; seed {args.seed}, MIP limit {args.time_limit:g} s, "
                  f"jobs {args.jobs}" + (", quick subset" if args.quick else ""))
    t0 = time.perf_counter()
    runs = [run_network(n.strip(), args, console) for n in args.networks.split(",") if n.strip()]
    console.print(f"wall time {time.perf_counter() - t0:.0f} s")
    save_outputs(name="gemmini_cycles", title="Gemmini cycles", date=date, machine=machine, console=console,
                 command="python bench/gemmini_cycles.py " + " ".join(sys.argv[1:] if argv is None else argv),
                 data={"args": vars(args), "runs": runs}, json_path=args.json, results_path=args.results,
                 notes=NOTES, summary=SUMMARY)
    ok = all(r["summary"]["all_verified"] for r in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
