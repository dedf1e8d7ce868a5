"""Gemmini's library with its own tiles against the same library calls with cosa's tiles, full-size layers.

Per layer: the loop-instruction stream Gemmini's library issues for the layer (``gemmini.vendor``, its
own tile choice) and the same calls with cosa's tile arguments: the loop-tile MIP's
(``cosa.mip.loop_tiles``) for matmul-form calls, a search from the MIP mapping's tile for convolutions
(``gemmini.loop_schedule.tune_tiles``; ``--budget`` > 0 also polishes the MIP's tiles), both timed on our timing model (``gemmini.sim.timing``) and the
tuned one run bit-exact on the functional model against NumPy.  Real-RTL cycles of the two need a
Chipyard simulator and small layers (``bench/gemmini_chipyard.py``); this benchmark covers the full-size
layers that only the timing model can run.  Cycles are the timing model's: a model, not a measurement.

    python bench/gemmini_loops.py [--quick] [--networks resnet50,bert_base_128] [--budget 0]
        [--time-limit 20] [--calls all|matmul] [--json out.json] [--results bench/RESULTS.md]

``--calls matmul`` keeps the layers whose library call is a single ``tiled_matmul`` (1x1 stride-1
convolutions, fully connected layers, GEMMs): the calls the loop-tile MIP chooses tiles for.
"""

from __future__ import annotations

import argparse
import sys
import time

from results_section import run_stamp, save_outputs
from rich.console import Console
from rich.table import Table
from vendor_compare import fmt, geomean

from cosa.mip import choose_loop_tiles
from cosa.scheduler import schedule
from gemmini.config import DEFAULT_CONFIG
from gemmini.errors import CodegenError
from gemmini.loop_schedule import tune_tiles
from gemmini.vendor.run import run_vendor
from workloads import zoo

#: The layers of the quick run: ResNet-50's kinds (3x3, 1x1 stride 1 and 2, 7x7 conv1, fc) and BERT's GEMMs.
QUICK = {"resnet50": ["conv1", "res2a_branch2b", "res3a_branch1", "res3a_branch2a", "res4b_branch2b",
                      "res5a_branch2c", "fc1000"],
         "bert_base_128": ["qkv_projection", "ffn1", "attention_scores"]}

SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"each": True, "column": "library / cosa", "what": "Library cycles over cosa-tiles cycles",
     "stats": ["geomean", "min", "max"]},
    {"each": True, "column": "cosa / roofline", "what": "cosa-tiles cycles over the roofline",
     "stats": ["min", "max"]},
]


def _matmul_call(wl) -> bool:
    from gemmini.loop_schedule import matmul_call_shape
    from gemmini.vendor.calls import from_workload

    try:
        return matmul_call_shape(from_workload(wl)) is not None
    except CodegenError:
        return False


def run_layer(wl, arch, args) -> dict:
    t0 = time.perf_counter()
    mapping = schedule(wl, arch, scheduler="cosa", time_limit_s=args.time_limit, seed=args.seed,
                       bound=False).mapping
    ls = tune_tiles(wl, mapping, arch, budget=args.budget, chooser=choose_loop_tiles)
    check = run_vendor(ls.vendor, tiles=ls.tiles, seed=args.seed) if args.verify else None
    from lowerbounds import roofline

    return {"layer": wl.name, "repeat": wl.repeat, "library_cycles": ls.library_cycles, "cycles": ls.cycles,
            "roofline": roofline(wl, arch).cycles,
            "tiles": list(ls.tiles) if ls.tiles else None, "start": list(ls.start) if ls.start else None,
            "evaluated": ls.evaluated, "found_from": ls.found_from, "tile_seconds": ls.tile_seconds,
            "verified": None if check is None else check.verified,
            "ideal": DEFAULT_CONFIG.ideal_cycles(wl.macs), "seconds": time.perf_counter() - t0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", default="resnet50,bert_base_128,bert_base_512,mobilenet_v2,shufflenet_v1")
    ap.add_argument("--quick", action="store_true", help="a few representative layers per network")
    ap.add_argument("--budget", type=int, default=0,
                    help="streams timed per layer to polish the tiles (0: the MIP's tiles for matmul-form calls, a "
                         "16-stream search for convolutions)")
    ap.add_argument("--time-limit", type=float, default=20.0, help="MIP seconds per layer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calls", choices=["all", "matmul"], default="all",
                    help="matmul: only the layers the library runs as one tiled_matmul call")
    ap.add_argument("--no-verify", dest="verify", action="store_false",
                    help="skip the functional-model check of the tuned streams")
    ap.add_argument("--json")
    ap.add_argument("--results")
    args = ap.parse_args(argv)
    console = Console(record=True, width=150)
    date, machine = run_stamp()
    arch = DEFAULT_CONFIG.arch("ws")
    data = {"networks": {}}
    for network in args.networks.split(","):
        layers = [w for w in zoo.network(network) if not args.quick or w.name in QUICK.get(network, ())]
        if args.calls == "matmul":
            layers = [w for w in layers if _matmul_call(w)]
        rows = []
        for wl in layers:
            try:
                rows.append(run_layer(wl, arch, args))
            except CodegenError as exc:  # a layer the library has no call for
                rows.append({"layer": wl.name, "error": str(exc)})
            r = rows[-1]
            console.print(f"{network}/{wl.name}: " + (r.get("error") or
                          f"library {r['library_cycles']:,.0f}, cosa tiles {r['cycles']:,.0f} cycles "
                          f"({r['found_from']}, {r['evaluated']} streams, tiles in {r['tile_seconds']:.1f} s)"))
        table = Table(title=f"{network}: the library's own tiles against cosa's, timing-model cycles")
        for col in ("layer", "repeat", "library cycles", "cosa-tiles cycles", "library / cosa", "cosa / roofline",
                    "cosa tiles", "util", "verified"):
            table.add_column(col, justify="left" if col in ("layer", "cosa tiles") else "right")
        ratios, totals = [], {"library_cycles": 0.0, "cycles": 0.0, "roofline": 0.0}
        for r in rows:
            if "error" in r:
                table.add_row(r["layer"], "-", "-", "-", "-", "-", r["error"][:40], "-", "-")
                continue
            ratio = r["library_cycles"] / r["cycles"]
            ratios.append(ratio)
            for k in totals:
                totals[k] += r["repeat"] * r[k]
            tiles = "library's own" if r["tiles"] is None else "x".join(map(str, r["tiles"]))
            table.add_row(r["layer"], str(r["repeat"]), fmt(r["library_cycles"], ",.0f"), fmt(r["cycles"], ",.0f"),
                          fmt(ratio, ".3f"), fmt(r["cycles"] / r["roofline"], ".3f"), tiles,
                          fmt(r["ideal"] / r["cycles"], ".0%"),
                          "-" if r["verified"] is None else ("yes" if r["verified"] else "NO"))
        table.add_row("geomean", "", "", "", fmt(geomean(ratios), ".3f"), "", "", "", "")
        if totals["cycles"]:
            table.add_row("total (repeat-weighted)", "", fmt(totals["library_cycles"], ",.0f"),
                          fmt(totals["cycles"], ",.0f"), fmt(totals["library_cycles"] / totals["cycles"], ".3f"),
                          fmt(totals["cycles"] / totals["roofline"], ".3f"), "", "", "")
        console.print(table)
        data["networks"][network] = rows
    command = (f"python bench/gemmini_loops.py --networks {args.networks} --budget {args.budget} "
               f"--time-limit {args.time_limit:g} --calls {args.calls}" + (" --quick" if args.quick else ""))
    notes = ("Both columns run Gemmini's library calls for the layer (loop instructions) on our timing model at "
             "its default configuration; they differ only in the tile arguments.  library / cosa > 1: cosa's "
             "tiles are faster.  The search times at most the budget's streams per layer and keeps the library's "
             "own tiles when nothing it times is faster; the MIP's tiles give way to the library's own when the timing "
             "model finds the library's faster (found_from says which).")
    save_outputs(name="gemmini_loops", title="Gemmini's library with its own tiles and with cosa's",
                 command=command, date=date, machine=machine, console=console, data=data, json_path=args.json,
                 results_path=args.results, notes=notes, summary=SUMMARY)
    failed = [r["layer"] for rows in data["networks"].values() for r in rows if r.get("verified") is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
