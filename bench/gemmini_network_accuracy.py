"""Whole int8 networks against ONNX Runtime on many seeded inputs: how far Gemmini's integer semantics land
from ONNX Runtime's, and which operator puts them there.

For each network (written as a float ONNX graph by ``bench/onnx_zoo.py``, quantized by ``cosa quantize``'s
code) and each of ``--inputs`` seeded standard-normal inputs, every step runs as the network program runs it
(``gemmini.network_run.run_network``): the Gemmini layers by the NumPy reference of the library's calls
(``compute="reference"``: the integer semantics that the functional model and Spike reproduce bit for bit;
on the first input the bench also runs every layer on the functional model and requires every tensor to be
equal), the host operators with ``gemmini.network_ops``.  The compared int8 tensor (the logits before the
final DequantizeLinear) is checked against ONNX Runtime running the same int8 model on the host, as
``cosa run gemmini`` does: the largest difference in int8 LSBs and whether the top-1 class is the same.

To name where differences come from, a second ONNX Runtime session returns every intermediate tensor too (extra graph outputs can keep ONNX Runtime from fusing nodes, so this session is for attribution only),
and a step *introduces* a difference when its output differs from ONNX Runtime's while every input it reads
was equal.

    python bench/gemmini_network_accuracy.py [--networks resnet50,mobilenet_v2] [--inputs 20] \\
        [--resolution 224] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx_zoo import mobilenet_v2, resnet50  # noqa: E402
from results_section import run_stamp, save_outputs  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from gemmini.network import load_network, plan  # noqa: E402
from gemmini.network_run import compare, compared_tensors, onnxruntime_values, run_network  # noqa: E402
from gemmini.onnx_quantize import input_specs, quantize_model, synthetic_inputs  # noqa: E402

NETWORKS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2}
SUMMARY = [
    {"table": 0, "column": "max |diff| LSB", "stats": ["max"], "what": "Largest int8 difference from ONNX Runtime"},
    {"table": 0, "column": "top-1 equal", "stats": ["min"], "what": "Inputs with ONNX Runtime's top-1 class"},
]


def _graph_step_outputs(net, steps) -> list[str]:
    """Step outputs that are tensors of the ONNX graph (not names the planner made, such as x/relu): int8 and
    the float tensors the quantizer left between them."""
    graph_tensors = {o for n in net.graph.nodes for o in net.graph.nodes[n]["outputs"]}
    return [s.output for s in steps if s.output in graph_tensors]


def _introduced(net, steps, values: dict, ort: dict) -> dict:
    """op (name) -> largest difference of the steps whose output differs from ONNX Runtime's (bit for bit)
    while every tensor they read equals it; a tensor ONNX Runtime was not asked for counts as equal when
    everything its step read was."""
    out: dict = {}
    equal = {t: True for t in net.inputs}
    for s in steps:
        reads = [i for i in s.inputs if i in equal]
        inputs_equal = all(equal[i] for i in reads)
        if s.output not in ort:
            equal[s.output] = inputs_equal
            continue
        equal[s.output] = bool(np.array_equal(values[s.output], ort[s.output]))
        if not equal[s.output] and inputs_equal:
            diff = np.abs(values[s.output].astype(np.float64) - ort[s.output].astype(np.float64))
            key = f"{s.op} ({s.name})" if s.op not in ("QLinearConv", "QGemm") else s.op
            out[key] = max(out.get(key, 0.0), float(np.max(diff)))
    return out


def accuracy(name: str, args, console) -> dict:
    with tempfile.TemporaryDirectory(prefix="cosa-acc-") as tmp:
        float_path, int8_path = Path(tmp) / f"{name}.onnx", Path(tmp) / f"{name}.int8.onnx"
        onnx.save(NETWORKS[name](args.resolution, args.classes, args.seed), str(float_path))
        quantize_model(float_path, int8_path, calibration=args.calibration, seed=args.seed)
        net = load_network(int8_path)
    steps = plan(net)
    compared = compared_tensors(net)
    inner = _graph_step_outputs(net, steps)
    feeds_all = synthetic_inputs(input_specs(net.model, net.source), args.inputs, args.seed)
    diffs, top1, introduced, mismatching = [], [], defaultdict(lambda: [0, 0]), []
    simulated_equal, simulate_s, reference_s = None, None, 0.0
    for i, feeds in enumerate(feeds_all):
        t0 = time.perf_counter()
        run = run_network(net, feeds, {}, "gemmini-default", steps, compute="reference")
        reference_s += time.perf_counter() - t0
        if i == 0 and args.simulate_first:
            t0 = time.perf_counter()
            sim = run_network(net, feeds, {}, "gemmini-default", steps)
            simulate_s = time.perf_counter() - t0
            simulated_equal = all(np.array_equal(sim.values[t], run.values[t]) for t in run.values) and all(
                r.layer_verified for r in sim.layers if r.on == "gemmini")
        ort = onnxruntime_values(net, feeds, compared)
        c = compare(net, run, ort)
        diffs.append(c["max_abs_diff_vs_onnxruntime"])
        top1.append(c["top1_equal"])
        ours = run.values[compared[0]]
        mismatching.append(int(np.count_nonzero(ours != ort[compared[0]])))
        every = onnxruntime_values(net, feeds, sorted(set(inner) | set(compared)))
        for op, d in _introduced(net, steps, run.values, every).items():
            introduced[op][0] += 1
            introduced[op][1] = max(introduced[op][1], d)
        console.print(f"{name} input {i}: max |diff| {diffs[-1]} LSB, top-1 {'equal' if top1[-1] else 'differs'}, "
                      f"{mismatching[-1]} of {ours.size} elements differ")
    return {"network": name, "inputs": args.inputs, "max_diff": max(diffs), "diffs": diffs,
            "top1_equal": sum(top1), "elements": int(np.prod(net.shapes[compared[0]])),
            "mismatching_max": max(mismatching), "introduced": {k: list(v) for k, v in introduced.items()},
            "simulated_equal": simulated_equal, "simulate_s": simulate_s, "reference_s_per_input":
            reference_s / args.inputs, "attributed_tensors": len(inner)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", default="resnet50,mobilenet_v2")
    ap.add_argument("--inputs", type=int, default=20)
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--calibration", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-simulate-first", dest="simulate_first", action="store_false",
                    help="skip running the first input's Gemmini layers on the functional model")
    ap.add_argument("--json")
    ap.add_argument("--results")
    args = ap.parse_args(argv)
    console = Console(record=True, width=200)
    date, machine = run_stamp()
    rows = [accuracy(name, args, console) for name in args.networks.split(",")]
    table = Table(title=f"Int8 networks at {args.resolution}x{args.resolution} against ONNX Runtime, "
                        f"{args.inputs} seeded inputs each")
    for col in ("network", "inputs", "max |diff| LSB", "top-1 equal", "most differing elements",
                "first input equal on the functional model", "s per input (reference)"):
        table.add_column(col, justify="left" if col == "network" else "right")
    for r in rows:
        table.add_row(r["network"], str(r["inputs"]), str(r["max_diff"]), str(r["top1_equal"]),
                      f"{r['mismatching_max']} of {r['elements']}",
                      {None: "not run", True: "yes", False: "NO"}[r["simulated_equal"]],
                      f"{r['reference_s_per_input']:.1f}")
    console.print(table)
    where = Table(title="Steps that introduce a difference from ONNX Runtime (every input they read equal)")
    for col in ("network", "operator", "inputs where it does", "largest difference (LSB, or float)"):
        where.add_column(col, justify="left" if col in ("network", "operator") else "right")
    for r in rows:
        for op, (count, d) in sorted(r["introduced"].items()):
            where.add_row(r["network"], op, str(count), f"{d:.3g}")
        if not r["introduced"]:
            where.add_row(r["network"], "none", "0", "0")
    console.print(where)
    command = (f"python bench/gemmini_network_accuracy.py --networks {args.networks} --inputs {args.inputs} "
               f"--resolution {args.resolution} --classes {args.classes} --calibration {args.calibration} "
               f"--seed {args.seed}")
    notes = ("Each network is quantized by `cosa quantize`'s code and run on seeded standard-normal inputs.  "
             "Gemmini layers are computed by the NumPy reference of the library's calls (the integer semantics "
             "the functional model and Spike reproduce bit for bit); `first input equal on the functional "
             "model`: every tensor of the first input equal when every layer runs on the functional model "
             "instead.  `max |diff| LSB`: the compared int8 tensor (the logits before the final "
             "DequantizeLinear) against ONNX Runtime on the same int8 model.  The second table attributes "
             "differences with an ONNX Runtime session that also returns every intermediate tensor (int8, "
             "and float where the quantizer left float operators), compared bit for bit.")
    save_outputs(name="gemmini_network_accuracy", title="Whole int8 networks against ONNX Runtime on many inputs",
                 command=command, date=date, machine=machine, console=console, data={"rows": rows},
                 json_path=args.json, results_path=args.results, notes=notes, summary=SUMMARY,
                 packages=("numpy", "onnx", "onnxruntime"))
    ok = all(r["max_diff"] <= 1 and r["top1_equal"] == r["inputs"] and r["simulated_equal"] is not False
             for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
