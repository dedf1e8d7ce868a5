"""Whole int8 networks as one bare-metal program each, on Spike + libgemmini (Gemmini's own functional model).

For each network (written as a float ONNX graph by ``bench/onnx_zoo.py``, quantized by ``cosa quantize``'s
code) and each scheduler (cosa's loop-tile MIP, the library's own tiles): the network runs on our functional
and timing models (``gemmini.network_run``: its output and each Gemmini layer's timing-model cycles), then
``gemmini.network_program`` writes the whole-network program (every Gemmini layer its library calls' stream
with that scheduler's tiles, the host operators in C, one activation arena), the RISC-V compiler builds it
and Spike runs it (``GEMMINI_SPIKE``).  The program checks its output against the functional model's
itself; the bench compares the int8 output it printed with ONNX Runtime's on the same input.  Spike is
not cycle-accurate: its ``rdcycle`` counts instructions, so the host steps' counts are the core's
instructions and the Gemmini steps' are the instructions that issue their commands, not Gemmini's cycles.

    GEMMINI_SPIKE=/path/to/spike python bench/gemmini_network_spike.py [--networks resnet50,mobilenet_v2] \\
        [--resolution 224] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx_zoo import mobilenet_v2, resnet50  # noqa: E402
from results_section import run_stamp, save_outputs  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from cosa.cli_network import schedule_network  # noqa: E402
from gemmini import GemminiConfig  # noqa: E402
from gemmini.build import run_spike  # noqa: E402
from gemmini.network import load_network, plan  # noqa: E402
from gemmini.network_program import build_network_elf, network_program, nhwc, parse_output  # noqa: E402
from gemmini.network_run import (compared_tensors, distinct_layers, gemmini_layers, onnxruntime_values,  # noqa: E402
                                 run_network)
from gemmini.onnx_quantize import input_specs, quantize_model, synthetic_inputs  # noqa: E402

NETWORKS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2}
SCHEDULERS = ("cosa", "gemmini-default")
SUMMARY = [
    {"table": 0, "column": "Spike s", "stats": ["max", "sum"], "what": "Spike seconds per whole-network run"},
    {"table": 0, "column": "program's check", "stats": ["equal:PASS"], "what": "Programs whose own check passed"},
    {"table": 0, "column": "max |diff| vs ORT", "stats": ["max"], "what": "Largest int8 difference from ONNX Runtime"},
]


def run_network_on_spike(name: str, args, console) -> list[dict]:
    """Every scheduler's whole-network program for ``name`` on Spike: one row each."""
    with tempfile.TemporaryDirectory(prefix="cosa-net-") as tmp:
        float_path, int8_path = Path(tmp) / f"{name}.onnx", Path(tmp) / f"{name}.int8.onnx"
        onnx.save(NETWORKS[name](args.resolution, args.classes, args.seed), str(float_path))
        quantize_model(float_path, int8_path, calibration=args.calibration, seed=args.seed)
        net = load_network(int8_path)
    arch = GemminiConfig().arch("ws")
    feeds = synthetic_inputs(input_specs(net.model, net.source), 1, args.seed)[0]
    reference = onnxruntime_values(net, feeds, compared_tensors(net))
    rows = []
    for scheduler, style in runs(args):
        steps = plan(net, store_pool=style == "loops")
        distinct = distinct_layers(gemmini_layers(net, steps))
        t0 = time.perf_counter()
        options = {"objective": "latency", "solver": "highs", "time_limit": args.time_limit, "seed": args.seed,
                   "budget": 0, "style": style}
        tiles = schedule_network(distinct, arch, options, 1) if scheduler == "cosa" else {}
        run = run_network(net, feeds, tiles, scheduler, steps, style=style)
        program = network_program(net, steps, run.values, tiles, scheduler, name=f"{name}_{scheduler}_{style}",
                                  isa_layers=run.isa_layers)
        with tempfile.TemporaryDirectory(prefix="cosa-net-") as tmp:
            elf = build_network_elf(program, Path(tmp) / f"{name}.elf")
            build_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            result = run_spike(elf, timeout_s=args.timeout)
            spike_s = time.perf_counter() - t1
        out = parse_output(result.output, program.expected)
        ref = nhwc(reference[program.compared])
        same_shape = out.output is not None and out.output.shape == ref.shape
        diff = int(np.max(np.abs(out.output.astype(np.int64) - ref.astype(np.int64)))) if same_shape else None
        top1 = same_shape and bool(np.array_equal(out.output.reshape(ref.shape[0], -1).argmax(-1),
                                                  ref.reshape(ref.shape[0], -1).argmax(-1)))
        host = sum(c for _, on, c in out.steps if on == "host")
        rows.append({"network": name, "scheduler": scheduler, "style": style, "steps": len(program.steps),
                     "gemmini_steps": sum(on == "gemmini" for _, on in program.steps), "distinct": len(distinct),
                     "build_s": build_s, "spike_s": spike_s, "passed": out.passed, "mismatches": out.mismatches,
                     "max_diff": diff, "top1_equal": top1, "timing_cycles": run.cycles, "host_instructions": host,
                     "constant_bytes": program.constant_bytes, "arena_bytes": program.arena_bytes,
                     "checksum": out.checksum})
        console.print(f"{name} {scheduler} {style}: {'PASS' if out.passed else 'FAIL'} on Spike in {spike_s:.1f} s "
                      f"(built in {build_s:.0f} s), max |diff| vs ONNX Runtime {diff}, top-1 "
                      f"{'equal' if top1 else 'differs'}")
    return rows


def runs(args) -> list[tuple]:
    """(scheduler, style) pairs to run: every scheduler in the loops style, and cosa's mappings as explicit
    commands when ``--styles`` names isa (the library's own tiles exist only as its loop instructions)."""
    schedulers, out = args.schedulers.split(","), []
    for style in args.styles.split(","):      # in the order given
        out += [(s, "loops") for s in schedulers] if style == "loops" else [("cosa", "isa")] if "cosa" in schedulers \
            else []
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", default="resnet50,mobilenet_v2")
    ap.add_argument("--schedulers", default=",".join(SCHEDULERS))
    ap.add_argument("--styles", default="loops,isa",
                    help="loops: the library's loop-instruction calls; isa: cosa's mappings as explicit commands")
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--calibration", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=20.0, help="MIP seconds per distinct layer")
    ap.add_argument("--timeout", type=float, default=1800.0, help="Spike seconds per program")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spike-version", default="", help="the Spike and libgemmini commits, for the report")
    ap.add_argument("--json")
    ap.add_argument("--results")
    ap.add_argument("--section", default="gemmini_network_spike",
                    help="the results section's name (one per set of styles recorded apart)")
    args = ap.parse_args(argv)
    if not os.environ.get("GEMMINI_SPIKE"):
        print("gemmini_network_spike: set GEMMINI_SPIKE to a Spike built with the libgemmini extension",
              file=sys.stderr)
        return 2
    console = Console(record=True, width=200)
    date, machine = run_stamp()
    rows = [r for name in args.networks.split(",") for r in run_network_on_spike(name, args, console)]
    table = Table(title=f"Whole networks at {args.resolution}x{args.resolution} on Spike + libgemmini, one program each")
    for col in ("network", "scheduler", "style", "steps (Gemmini)", "constants B", "arena B", "build s", "Spike s",
                "program's check", "max |diff| vs ORT", "top-1", "host instr", "model cycles"):
        table.add_column(col, justify="left" if col in ("network", "scheduler", "style") else "right")
    for r in rows:
        table.add_row(r["network"], r["scheduler"], r["style"], f"{r['steps']} ({r['gemmini_steps']})", f"{r['constant_bytes']:,}",
                      f"{r['arena_bytes']:,}", f"{r['build_s']:.0f}", f"{r['spike_s']:.1f}",
                      "PASS" if r["passed"] else "FAIL", "-" if r["max_diff"] is None else str(r["max_diff"]),
                      "equal" if r["top1_equal"] else "differs", f"{r['host_instructions']:,}",
                      f"{r['timing_cycles']:,.0f}")
    console.print(table)
    command = (f"GEMMINI_SPIKE=... python bench/gemmini_network_spike.py --networks {args.networks} --schedulers "
               f"{args.schedulers} --styles {args.styles} --section {args.section} --resolution {args.resolution} --classes {args.classes} --calibration "
               f"{args.calibration} --seed {args.seed}")
    notes = ("Each row is one bare-metal program for the whole network (`cosa build gemmini MODEL.int8.onnx`), "
             "run once on Spike + libgemmini" + (f" ({args.spike_version})" if args.spike_version else "") + ".  "
             "`style`: loops, every Gemmini layer the library's loop-instruction calls with the scheduler's tiles; "
             "isa, every Gemmini layer the explicit-command program generated from cosa's mapping (max-pools on "
             "the core, as that program has no store-side pooler).  "
             "`program's check`: its output equals our functional model's bit for bit.  `max |diff| vs ORT`: its "
             "printed int8 output against ONNX Runtime on the same input.  `constants B` / `arena B`: the program's constants blob and activation arena, bytes.  `build s`: scheduling, the functional and "
             "timing models' run of the network and the RISC-V build, on a machine shared with other jobs.  "
             "`host instr`: Spike's rdcycle (instructions) summed over the steps the core runs.  "
             "`model cycles`: our timing model's Gemmini cycles for the same tiles (a model, not a measurement).")
    title = "Whole networks, one program each, on Spike + libgemmini" + (
        f" ({args.styles.replace(',', ' and ')} style)" if args.section != "gemmini_network_spike" else "")
    save_outputs(name=args.section, title=f"{title} (`bench/gemmini_network_spike.py`)",
                 command=command, date=date, machine=machine, console=console, data={"rows": rows},
                 json_path=args.json, results_path=args.results, notes=notes, summary=SUMMARY,
                 packages=("numpy", "onnx", "onnxruntime", "highspy"))
    return 0 if all(r["passed"] and r["top1_equal"] and (r["max_diff"] or 0) <= 1 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
