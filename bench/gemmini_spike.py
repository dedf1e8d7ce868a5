"""Our Gemmini programs on Gemmini's own functional model: Spike with the libgemmini extension.

Each case is a layer scheduled by ``cosa`` (the MIP) or ``gemmini-default`` (the vendor heuristic's tiles),
generated as a self-checking C program (``isa`` style: our header's RoCC instructions; ``gemmini-h``
style: one call of Gemmini's own library with the schedule's tiles, built against the user's
gemmini-rocc-tests checkout), built into a bare-metal ELF with our runtime (``cosa build gemmini``) and
run on the user's Spike (``GEMMINI_SPIKE``; ``--extension=gemmini``).  A program passes when its output
equals the NumPy-computed expectation embedded in it (it prints PASS and exits 0).  Our functional model
runs the same isa-style program for comparison (bit-exact against NumPy as well).

``--loops`` runs the loops-style programs instead, into a section of their own (``gemmini_spike_loops``):
what ``cosa run gemmini --style loops`` runs, the library's loop-instruction streams with the loop-tile
MIP's tile arguments, and the same layers with the library's own tiles (``bench/gemmini_spike_loops.py``).

    GEMMINI_SPIKE=/path/to/spike [GEMMINI_ROCC_TESTS=/path/to/gemmini-rocc-tests] \\
        python bench/gemmini_spike.py [--quick] [--loops] [--spike-version TEXT] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from results_section import run_stamp, save_outputs
from rich.console import Console
from rich.table import Table

import workloads
from cosa.scheduler import schedule
from gemmini import GemminiConfig, codegen, run_program
from gemmini.build import build_elf, check_line, run_spike
from gemmini.errors import SimulationError

SMALL = {
    "matmul 64x48x80": workloads.matmul("mm", M=64, N=48, K=80),
    "matmul 37x21x45 (ragged)": workloads.matmul("mm_ragged", M=37, N=21, K=45),
    "batched matmul 3x24x40x16": workloads.matmul("bmm", M=24, N=40, K=16, batch=3),
    "conv 3x3 32->32 10x10": workloads.conv2d("c3", C=32, K=32, H=10, W=10, R=3, S=3, padding=1),
    "conv 3x3 stride 2": workloads.conv2d("c3s2", C=16, K=32, H=12, W=12, R=3, S=3, stride=2, padding=1),
    "conv 1x1 64->48": workloads.conv2d("c1", C=64, K=48, H=8, W=8, R=1, S=1),
    "conv 1x1 stride 2": workloads.conv2d("c1s2", C=32, K=64, H=14, W=14, R=1, S=1, stride=2),
    "depthwise 3x3 32 ch": workloads.depthwise_conv2d("dw", C=32, H=10, W=10, R=3, S=3, padding=1),
    "grouped 3x3 4 groups": workloads.conv2d("g4", C=32, K=32, H=8, W=8, R=3, S=3, padding=1, groups=4),
}
REAL = ("resnet50/conv1", "resnet50/res2a_branch2b", "resnet50/res3a_branch1", "resnet50/res4a_branch2a",
        "resnet50/fc1000", "bert_base_128/qkv_projection", "mobilenet_v2/b2_dw", "mobilenet_v2/b2_project")


def _cases(quick: bool):
    layers = dict(SMALL)
    if not quick:
        layers.update({name: workloads.load_one(name) for name in REAL})
    for label, wl in layers.items():
        matmul = wl.name.startswith(("mm", "bmm")) or label.startswith(("bert", "matmul", "batched"))
        grouped = "depthwise" in label or "grouped" in label or label.endswith("_dw")
        for scheduler in ("cosa", "gemmini-default"):
            if scheduler == "gemmini-default" and grouped:
                continue  # the Mapping baseline has no rule for grouped layers (the vendor streams do)
            for flow in ("ws", "os") if matmul else ("ws",):
                yield label, wl, scheduler, flow


def run(args, console: Console) -> dict:
    rocc = os.environ.get("GEMMINI_ROCC_TESTS")
    styles = ["isa"] + (["gemmini-h"] if rocc else [])
    table = Table(title="Programs on Spike + libgemmini (Gemmini's functional model)")
    for col in ("layer", "scheduler", "dataflow", "style", "Spike", "program's check", "s", "our model"):
        table.add_column(col, justify="left" if col in ("layer", "program's check") else "right")
    rows, passed, total = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for label, wl, scheduler, flow in _cases(args.quick):
            arch = GemminiConfig().arch(flow)
            try:
                mapping = schedule(wl, arch, scheduler=scheduler, time_limit_s=args.time_limit, bound=False).mapping
                program = codegen.generate(wl, mapping, arch, dataflow=flow, scale="auto")
            except Exception as err:  # a case our generator cannot emit is reported, not hidden
                table.add_row(label, scheduler, flow, "-", "n/a", str(err).splitlines()[0][:60], "", "")
                rows.append({"layer": label, "scheduler": scheduler, "dataflow": flow, "error": str(err)})
                continue
            ours = run_program(program, with_timing=False)
            for style in styles:
                if style == "gemmini-h" and (flow == "os" and program.kind != "matmul" or program.problem.grouped
                                             and program.kind != "matmul"):
                    continue  # the library's tiled_conv is WS only and has no groups
                start = time.perf_counter()
                try:
                    elf = build_elf(program, Path(tmp) / f"{wl.name}_{scheduler}_{flow}_{style}.elf", style=style)
                    result = run_spike(elf, timeout_s=args.spike_timeout)
                    verified, line = result.verified, check_line(result.output)
                except SimulationError as err:
                    verified, line = False, str(err).splitlines()[0][:80]
                seconds = time.perf_counter() - start
                total += 1
                passed += verified
                table.add_row(label, scheduler, flow, style, "PASS" if verified else "FAIL", line[-60:],
                              f"{seconds:.1f}", "bit-exact" if ours.verified else "MISMATCH")
                rows.append({"layer": label, "scheduler": scheduler, "dataflow": flow, "style": style,
                             "verified": verified, "line": line, "seconds": seconds,
                             "our_model_verified": ours.verified, "commands": len(program.commands)})
    table.caption = (f"{passed} of {total} programs pass on Spike + libgemmini"
                     + ("" if rocc else "; gemmini-h style not run (GEMMINI_ROCC_TESTS unset)"))
    console.print(table)
    return {"rows": rows, "passed": passed, "total": total, "styles": styles}


def run_loops(args, console: Console) -> dict:
    """The loops-style programs (``bench/gemmini_spike_loops.py``) on Spike and on our functional model."""
    import gemmini_spike_loops as loops

    table = Table(title="Loops-style programs on Spike + libgemmini: the loop-tile MIP's tiles and the library's own")
    for col in ("layer", "tiles", "tile arguments", "library calls", "CLI runs", "Spike", "program's check",
                "Spike s", "our model"):
        table.add_column(col, justify="left" if col in ("layer", "program's check", "library calls") else "right")
    rows, passed, total = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for label, wl in loops.layers(SMALL, args.quick).items():
            try:
                cases = loops.loop_cases(label, wl, time_limit=args.time_limit)
            except Exception as err:  # a layer the loops style cannot run is reported, not hidden
                table.add_row(label, "-", "", "", "", "n/a", str(err).splitlines()[0][:60], "", "")
                rows.append({"layer": label, "error": str(err)})
                continue
            for case in cases:
                row = loops.run_case(case, Path(tmp), spike_timeout=args.spike_timeout)
                total += 1
                passed += row["verified"]
                tiles = ",".join(map(str, case.tiles)) if case.tiles else "own"
                table.add_row(label, case.choice, tiles, row["calls"], "yes" if case.runs else "", row["spike"],
                              row["line"].split(": ", 1)[-1][:60], f"{row['spike_s']:.2f}",
                              "bit-exact" if row["our_model_verified"] else f"MISMATCH ({row['our_model_mismatches']})")
                rows.append(row)
                print(f"{label} [{case.choice}]: {row['spike']} on Spike in {row['spike_s']:.1f} s", file=sys.stderr)
    timeouts = sum(r.get("spike") == "TIMEOUT" for r in rows)
    table.caption = (f"{passed} of {total} loops-style programs pass on Spike + libgemmini"
                     + (f"; {timeouts} did not finish within the {args.spike_timeout:.0f} s Spike time-out"
                        if timeouts else ""))
    console.print(table)
    return {"rows": rows, "passed": passed, "total": total, "style": "loops"}


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"table": 0, "column": "Spike", "what": "Programs on Spike", "stats": ["equal:PASS"]},
    {"table": 0, "column": "our model", "what": "Our functional model against Spike", "stats": ["equal:bit-exact"]},
]

LOOPS_SUMMARY = [  # the --loops section's summary (section gemmini_spike_loops)
    {"table": 0, "column": "Spike", "what": "Loops-style programs on Spike", "stats": ["equal:PASS"]},
    {"table": 0, "column": "our model", "what": "Our functional model on the same streams",
     "stats": ["equal:bit-exact"]},
    {"table": 0, "column": "Spike s", "what": "Seconds per Spike run", "stats": ["median", "max", "sum"]},
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small layers only (--loops: one layer of each kind)")
    ap.add_argument("--loops", action="store_true", help="the loops-style programs (cosa run gemmini --style loops)")
    ap.add_argument("--time-limit", type=float, default=20.0, help="MIP seconds per layer")
    ap.add_argument("--spike-timeout", type=float, default=600.0)
    ap.add_argument("--spike-version", default="", help="versions of Spike and libgemmini, for the record")
    ap.add_argument("--json")
    ap.add_argument("--results")
    args = ap.parse_args(argv)
    if not os.environ.get("GEMMINI_SPIKE"):
        print("gemmini_spike: set GEMMINI_SPIKE to a Spike built with the libgemmini extension", file=sys.stderr)
        return 2
    console = Console(record=True, width=190 if args.loops else 170)
    date, machine = run_stamp()
    console.print(f"gemmini on spike, {date}; {machine}; {args.spike_version or 'Spike/libgemmini versions not given'}")
    data = (run_loops if args.loops else run)(args, console)
    flags = (" --loops" if args.loops else "") + (" --quick" if args.quick else "")
    rocc = "" if args.loops else " GEMMINI_ROCC_TESTS=..."
    command = f"GEMMINI_SPIKE=...{rocc} python bench/gemmini_spike.py{flags}"
    notes = (f"Spike and libgemmini: {args.spike_version}.  " if args.spike_version else "") + \
        "Each program embeds its inputs and the NumPy-computed output and checks itself; PASS = exit 0 and a PASS line."
    if args.loops:
        notes += ("  Tiles: mip = cosa's calls with the loop-tile MIP's tile arguments (depthwise layers as packed "
                  "groups, the downsample path through tiled_conv_auto), run even where the timing model prefers "
                  "the library's; own = the library's calls and tiles; CLI runs = what `cosa run gemmini --style "
                  "loops` runs.  Spike s = wall seconds of the Spike run alone; our model = the same stream on "
                  "our functional model against the same reference.")
    save_outputs(name="gemmini_spike_loops" if args.loops else "gemmini_spike",
                 title=("Loops-style programs on Spike + libgemmini (`bench/gemmini_spike.py --loops`)" if args.loops
                        else "Gemmini programs on Spike + libgemmini"),
                 command=command, date=date, machine=machine, console=console, data=data, json_path=args.json,
                 results_path=args.results, notes=notes, summary=LOOPS_SUMMARY if args.loops else SUMMARY)
    return 0 if data["passed"] == data["total"] else 1


if __name__ == "__main__":
    sys.exit(main())
