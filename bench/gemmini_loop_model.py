"""The loop-tile MIP's cost model against the timing model, on random tiles of full-size layers.

Per layer: ``--samples`` seeded random tile arguments that the library accepts (``tiled_matmul``'s for the
1x1 and GEMM layers, ``tiled_conv``'s for the 3x3 ones), each priced by the model the MIP optimises
(``costmodel.gemmini_loops`` / ``costmodel.gemmini_conv_loops``) and timed on the timing model
(``gemmini.sim.timing``, the library's loop-instruction stream with those tiles, unrolled as Gemmini's
LoopMatmul / LoopConv do).  Printed: median and largest |model - timing| / timing, Kendall's tau between the
two rankings, and where the MIP's own choice ranks among the samples on the timing model.  Both columns are
models, neither is a measurement of the hardware; the timing model's error against the real RTL is
``bench/gemmini_chipyard.py``'s.  ``--soc`` names the machine the timing model describes
(``gemmini.config.SOCS``: ``ours``, our RTL in its harness, the default; ``chipyard-1.10``, Gemmini f13847e in
Chipyard 1.10.0's SoC, the configuration whose timing model the recorded real-RTL cycles confirm), and the
MIP's model describes the same machine (``gemmini.loop_schedule.loop_machine``) unless ``--mip-soc`` names
another.

    python bench/gemmini_loop_model.py [--samples 50] [--seed 0] [--soc ours] [--json out.json] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from results_section import run_stamp, save_outputs
from rich.console import Console
from rich.table import Table
from scipy.stats import kendalltau
from vendor_compare import fmt

from cosa.mip import choose_loop_tiles
from costmodel.gemmini_conv_loops import ConvLayer, conv_cycles, conv_fits
from costmodel.gemmini_loops import cdiv, fits, matmul_cycles
from gemmini import isa
from gemmini.config import SOCS, soc_config
from gemmini.loop_schedule import loop_machine, loop_problem
from gemmini.sim.timing import timing
from gemmini.vendor import stream
from gemmini.vendor.calls import from_workload
from workloads import zoo

LAYERS = ["resnet50/res2a_branch2a", "resnet50/res3a_branch2c", "resnet50/res4b_branch2b", "resnet50/res5a_branch2c",
          "resnet50/res5b_branch2b", "bert_base_128/qkv_projection", "bert_base_128/output_projection", "bert_base_128/ffn2"]

SUMMARY = [
    {"each": True, "column": "median |error|", "what": "Median |model - timing| / timing per layer",
     "stats": ["min", "max"]},
    {"each": True, "column": "tau", "what": "Kendall tau between the model's and the timing model's ranking",
     "stats": ["min", "max"]},
]


def _sample(problem, rng: random.Random, n: int, machine) -> list[tuple]:
    """``n`` distinct random tile arguments the library accepts."""
    out: set = set()
    for _ in range(200 * n):
        if len(out) == n:
            break
        if isinstance(problem, ConvLayer):
            L = problem
            ch = lambda c: rng.choice(sorted({min(c, 16 * k) for k in range(1, cdiv(c, 16) + 1)}))  # noqa: E731
            t = (1, rng.randint(1, L.P), rng.randint(1, L.Q), ch(L.K), rng.randint(1, L.R), rng.randint(1, L.R),
                 ch(L.C))
            ok = conv_fits(L, t, machine) is None
        else:
            t = tuple(rng.randint(1, cdiv(d, 16)) for d in problem)
            ok = fits(t, machine) is None
        if ok:
            out.add(t)
    return sorted(out)


def _model(problem, tiles, machine) -> float:
    if isinstance(problem, ConvLayer):
        return conv_cycles(problem, tiles, machine).cycles
    return matmul_cycles(problem, tiles, machine).cycles


def run_layer(qualified: str, args) -> dict:
    wl = zoo.layer(qualified)
    vendor = from_workload(wl)
    problem = loop_problem(vendor)
    config = soc_config(args.soc)
    machine = loop_machine(soc_config(args.mip_soc or args.soc))
    tiles = _sample(problem, random.Random(args.seed), args.samples, machine)
    mip = tuple(choose_loop_tiles(problem, machine))
    if mip not in tiles:
        tiles.append(mip)
    t0 = time.perf_counter()
    timed = {t: timing(isa.decode_stream(stream(vendor, tiles=t)), config).cycles for t in tiles}
    model = {t: _model(problem, t, machine) for t in tiles}
    errors = [abs(model[t] - timed[t]) / timed[t] for t in tiles]
    order = sorted(tiles, key=lambda t: timed[t])
    return {"layer": qualified, "samples": len(tiles), "median_error": statistics.median(errors),
            "max_error": max(errors), "tau": float(kendalltau([model[t] for t in tiles], [timed[t] for t in tiles])[0]),
            "mip_tiles": list(mip), "mip_rank": order.index(mip) + 1, "mip_over_best": timed[mip] / timed[order[0]],
            "seconds": time.perf_counter() - t0,
            "points": [{"tiles": list(t), "model": model[t], "timing": timed[t]} for t in tiles]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=50, help="random tile choices per layer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", default=",".join(LAYERS), help="network/layer names from the zoo")
    ap.add_argument("--soc", choices=list(SOCS), default="ours",
                    help="the machine the timing model describes (default ours: our RTL in its harness)")
    ap.add_argument("--mip-soc", choices=list(SOCS), default=None,
                    help="the machine the MIP's model describes (default: --soc's)")
    ap.add_argument("--section", default="gemmini_loop_model", help="the results section to write")
    ap.add_argument("--json")
    ap.add_argument("--results")
    args = ap.parse_args(argv)
    console = Console(record=True, width=140)
    date, machine = run_stamp()
    rows = []
    for name in args.layers.split(","):
        rows.append(run_layer(name, args))
        r = rows[-1]
        console.print(f"{name}: median |error| {r['median_error']:.1%}, tau {r['tau']:.2f}, the MIP's choice ranks "
                      f"{r['mip_rank']} of {r['samples']} ({r['seconds']:.0f} s)")
    table = Table(title="The loop-tile model against the timing model, random tiles per layer"
                        + (f", timing model of {args.soc}" if args.soc != "ours" else "")
                        + (f", the MIP's model of {args.mip_soc}" if args.mip_soc and args.mip_soc != args.soc else ""))
    for col in ("layer", "samples", "median |error|", "max |error|", "tau", "MIP tiles", "MIP rank",
                "MIP / best sampled"):
        table.add_column(col, justify="left" if col in ("layer", "MIP tiles") else "right")
    for r in rows:
        table.add_row(r["layer"], str(r["samples"]), fmt(r["median_error"], ".1%"), fmt(r["max_error"], ".1%"),
                      fmt(r["tau"], ".2f"), "x".join(map(str, r["mip_tiles"])), str(r["mip_rank"]),
                      fmt(r["mip_over_best"], ".3f"))
    console.print(table)
    command = f"python bench/gemmini_loop_model.py --samples {args.samples} --seed {args.seed}" + (
        f" --layers {args.layers}" if args.layers != ",".join(LAYERS) else "") + (
        f" --soc {args.soc}" if args.soc != "ours" else "") + (
        f" --mip-soc {args.mip_soc}" if args.mip_soc and args.mip_soc != args.soc else "") + (
        f" --section {args.section}" if args.section != "gemmini_loop_model" else "")
    notes = ("Model: what the loop-tile MIP optimises.  Timing: the timing model on the library's loop-instruction "
             "stream with the same tiles.  Both are models of Gemmini, not measurements.  MIP rank 1: the MIP's "
             "choice is the fastest of the sampled tiles on the timing model; MIP / best sampled > 1: a sampled "
             "tile ran faster there.")
    other = args.mip_soc and args.mip_soc != args.soc
    title = ("The loop-tile MIP's model" + (f" of {args.mip_soc}" if other else "") + " against the timing model"
             + (f" of {args.soc}" if args.soc != "ours" or other else "")
             + (" (`bench/gemmini_loop_model.py`)" if args.soc != "ours" or other else ""))
    save_outputs(name=args.section, title=title,
                 command=command, date=date, machine=machine, console=console, data={"layers": rows},
                 json_path=args.json, results_path=args.results, notes=notes, summary=SUMMARY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
