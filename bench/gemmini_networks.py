"""Whole networks on Gemmini: the library's own tiles against cosa's, layer by layer and in total.

ResNet-50 and MobileNet-V2 are written as float ONNX graphs (``bench/onnx_zoo.py``), made int8 by ONNX
Runtime's static quantization (``gemmini.onnx_quantize``, what ``cosa quantize`` runs) and planned as one
network (``gemmini.network``).  In the library column every Gemmini layer runs as the library call Gemmini's
own networks make for it (``resnet50.c``, ``mobilenet.c``) with the library's own tiles; cosa's column runs the
same calls with the loop-tile MIP's tiles (``cosa.mip.choose_loop_tiles``), or where the library's call takes
no tile arguments its own (``gemmini.network_run.cosa_layer_calls``: a depthwise layer as packed groups,
``tiled_conv_downsample`` through ``tiled_conv_auto``) when they are faster, for each distinct layer
(``gemmini.network_run.tiles_for``: only tiles whose stream passes the layer's NumPy check on the functional
model are kept; the library's own where the timing model finds them faster).  Cycles are our
timing model's (a model, not a measurement; deterministic, so one round); the roofline is
``lowerbounds.roofline`` (max of MACs at the array's peak and compulsory DRAM bytes at its bandwidth).
Host operators (residual additions, pooling) are not counted.  ``--execute`` also runs the network on the
functional model with both tile sets and compares the logits with ONNX Runtime (small resolutions: the
functional model runs ResNet-50 at 32x32 in about a minute and a half).

    python bench/gemmini_networks.py [--networks resnet50,mobilenet_v2] [--resolution 224] [--budget 0]
        [--time-limit 20] [--checks 2] [--execute] [--json out.json] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import onnx
from onnx_zoo import mobilenet_v2, resnet50
from results_section import run_stamp, save_outputs
from rich.console import Console
from rich.table import Table
from vendor_compare import fmt

from cosa.mip import choose_loop_tiles
from cosa.scheduler import schedule
from gemmini.config import DEFAULT_CONFIG
from gemmini.network import load_network, plan
from gemmini.network_run import (calls_summary, compare, compared_tensors, cosa_layer_calls, distinct_layers,
                                 gemmini_layers, library_calls, onnxruntime_values, run_network, tiles_for)
from gemmini.onnx_quantize import input_specs, quantize_model, synthetic_inputs
from lowerbounds import roofline


NETWORKS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2}
SUMMARY = [{"each": True, "column": "library / cosa",
            "what": "Library's tiles over cosa's, timing-model cycles of each distinct layer and of the network row",
            "stats": ["geomean", "min", "max"]}]


def network_rows(name: str, args, arch, console) -> tuple[list, dict]:
    with tempfile.TemporaryDirectory(prefix="cosa-net-") as tmp:
        float_path, int8_path = Path(tmp) / f"{name}.onnx", Path(tmp) / f"{name}.int8.onnx"
        onnx.save(NETWORKS[name](args.resolution, args.classes, args.seed), str(float_path))
        quantize_model(float_path, int8_path, calibration=args.calibration, seed=args.seed)
        net = load_network(int8_path)  # read whole: the model stays in memory once the directory is gone
    steps = plan(net)
    layers = gemmini_layers(net, steps)
    distinct = distinct_layers(layers)
    counts = {k: sum(layer.key == k for layer in layers) for k in distinct}
    rows, tiles = [], {}
    for key, layer in distinct.items():
        t0 = time.perf_counter()
        mapping = schedule(layer.workload, arch, scheduler="cosa", time_limit_s=args.time_limit, seed=args.seed,
                           bound=False).mapping
        lt = tiles_for(layer, mapping, arch, budget=args.budget, seed=args.seed, checks=args.checks,
                       chooser=choose_loop_tiles)
        tiles[key] = lt
        roof = roofline(layer.workload, arch)
        rows.append({"layer": layer.step.name, "count": counts[key], "library_cycles": lt.library_cycles,
                     "library_calls": calls_summary(library_calls(layer)),
                     "cosa_calls": calls_summary(cosa_layer_calls(layer) if lt.own_calls else library_calls(layer)),
                     "cycles": lt.cycles, "tiles": list(lt.tiles) if lt.tiles else None,
                     "rejected_tiles": [list(t) for t in lt.rejected], "roofline_cycles": roof.cycles,
                     "seconds": time.perf_counter() - t0})
        console.print(f"{name}/{layer.step.name} x{counts[key]}: library {lt.library_cycles:,.0f}, cosa "
                      f"{lt.cycles:,.0f} cycles ({rows[-1]['seconds']:.0f} s; cosa's calls {rows[-1]['cosa_calls']})")
    total = {"library_cycles": sum(r["count"] * r["library_cycles"] for r in rows),
             "cycles": sum(r["count"] * r["cycles"] for r in rows),
             "roofline_cycles": sum(r["count"] * r["roofline_cycles"] for r in rows),
             "gemmini_layers": len(layers), "distinct_layers": len(distinct)}
    if args.execute:
        feeds = synthetic_inputs(input_specs(net.model, net.source), 1, args.seed)[0]
        ref = onnxruntime_values(net, feeds, compared_tensors(net))
        for scheduler in ("gemmini-default", "cosa"):
            run = run_network(net, feeds, tiles, scheduler, steps)
            total[f"executed_{scheduler}"] = dict(compare(net, run, ref), cycles=run.cycles,
                                                  layers_verified=all(r.layer_verified is not False
                                                                      for r in run.layers))
    return rows, total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", default="resnet50,mobilenet_v2")
    ap.add_argument("--resolution", type=int, default=224, help="input height and width (default 224)")
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--calibration", type=int, default=2, help="seeded calibration inputs (default 2)")
    ap.add_argument("--budget", type=int, default=0,
                    help="streams timed per layer to polish the loop-tile MIP's tiles (0: the MIP's as chosen)")
    ap.add_argument("--checks", type=int, default=2, help="faster tiles checked on the functional model per layer")
    ap.add_argument("--time-limit", type=float, default=20.0, help="MIP seconds per layer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--execute", action="store_true", help="also run the network and compare with ONNX Runtime")
    ap.add_argument("--json")
    ap.add_argument("--results")
    args = ap.parse_args(argv)
    console = Console(record=True, width=180)
    date, machine = run_stamp()
    arch = DEFAULT_CONFIG.arch("ws")
    data = {"networks": {}}
    failed = False
    for name in args.networks.split(","):
        rows, total = network_rows(name, args, arch, console)
        table = Table(title=f"{name} at {args.resolution}x{args.resolution}: the library's own tiles against "
                            "cosa's, timing-model cycles per layer (x count)")
        for col in ("layer", "count", "library cycles", "cosa cycles", "library / cosa", "roofline / cosa",
                    "cosa tiles", "cosa's calls"):
            table.add_column(col, justify="left" if col in ("layer", "cosa tiles", "cosa's calls") else "right")
        for r in rows:
            table.add_row(r["layer"], str(r["count"]), fmt(r["library_cycles"], ",.0f"), fmt(r["cycles"], ",.0f"),
                          fmt(r["library_cycles"] / r["cycles"], ".3f"), fmt(r["roofline_cycles"] / r["cycles"], ".0%"),
                          "library's own" if r["tiles"] is None else "x".join(map(str, r["tiles"])),
                          "the library's" if r["cosa_calls"] == r["library_calls"] else r["cosa_calls"])
        table.add_row("network", str(total["gemmini_layers"]), fmt(total["library_cycles"], ",.0f"),
                      fmt(total["cycles"], ",.0f"), fmt(total["library_cycles"] / total["cycles"], ".3f"),
                      fmt(total["roofline_cycles"] / total["cycles"], ".0%"), "", "")
        console.print(table)
        for scheduler in ("gemmini-default", "cosa"):
            ex = total.get(f"executed_{scheduler}")
            if ex:
                ok = ex["max_abs_diff_vs_onnxruntime"] <= 1 and ex["top1_equal"] and ex["layers_verified"]
                failed |= not ok
                console.print(f"{name} executed with {scheduler} tiles: {ex['cycles']:,.0f} cycles, max |diff| vs "
                              f"ONNX Runtime {ex['max_abs_diff_vs_onnxruntime']} LSB, top-1 "
                              f"{'equal' if ex['top1_equal'] else 'differs'}")
        data["networks"][name] = {"layers": rows, "total": total}
    command = (f"python bench/gemmini_networks.py --networks {args.networks} --resolution {args.resolution} "
               f"--classes {args.classes} --calibration {args.calibration} --budget {args.budget} "
               f"--checks {args.checks} --time-limit {args.time_limit:g} --seed {args.seed}"
               + (" --execute" if args.execute else ""))
    notes = ("Both columns run every Gemmini layer of the int8 network on our timing model.  The library column "
             "runs the library's calls with its own tiles (tiled_conv_dw_auto for a depthwise layer, as "
             "mobilenet.c; tiled_conv_downsample for res3a/res4a_branch1, as resnet50.c).  cosa's column runs the "
             "same calls with the loop-tile MIP's tiles, except where the library's call takes no tile arguments: "
             "a depthwise layer then runs as packed groups (tiled_conv_stride_auto per group, block-diagonal "
             "weights laid out on the host from the model's constants), a tiled_conv_downsample layer through "
             "tiled_conv_auto, when that is faster; column cosa's calls names them.  Network rows weight each "
             "distinct layer by its count.  Host operators are not counted.  Timing-model cycles: a model, not a "
             "measurement.")
    save_outputs(name="gemmini_networks", title="Whole networks: the library's tiles against cosa's",
                 command=command, date=date, machine=machine, console=console, data=data, json_path=args.json,
                 results_path=args.results, notes=notes, summary=SUMMARY,
                 packages=("numpy", "scipy", "highspy", "rich", "onnx", "onnxruntime"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
