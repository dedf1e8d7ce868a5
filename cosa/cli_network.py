"""``cosa quantize`` and ``cosa run gemmini MODEL.int8.onnx``: a whole int8 ONNX network on Gemmini.

``quantize`` makes the int8 model (``gemmini.onnx_quantize``); ``run`` schedules every distinct Gemmini
layer of it (cosa's MIP then the tile search of ``gemmini.loop_schedule``, or the library's own tiles),
side by side in ``--jobs`` local processes, runs the network on the functional and timing models
(``gemmini.network_run``) for ``--inputs`` seeded inputs and compares each result with ONNX Runtime's.

Like ``cosa/cli.py`` this module may import ``gemmini``.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from workloads import FrameworkError

from .cli_common import JSON_HELP, SEED_HELP, RunFailed, _print_json, gemmini_config

#: largest difference (int8 LSBs) from ONNX Runtime that still counts as verified (the issue's target)
TOLERANCE_LSB = 1
#: a whole network on Spike (seconds; ResNet-50 is the issue's 30-minute case)
SPIKE_TIMEOUT_S = 1800.0
QUANTIZED_OPS = ("QLinearConv", "QGemm", "QLinearMatMul")


def is_network(source: str) -> bool:
    """True for an existing ``.onnx`` file (no ``:LAYER``) that holds quantized Gemmini operators."""
    path = Path(source)
    if path.suffix.lower() != ".onnx" or not path.is_file():
        return False
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # not readable: the single-layer path names the problem
        return False
    return any(n.op_type in QUANTIZED_OPS for n in model.graph.node)


# --- cosa quantize ---------------------------------------------------------------------------------------
def _calibration(values: list[str]):
    if len(values) == 1 and not values[0].lower().endswith(".npy"):
        try:
            return int(values[0])
        except ValueError:
            raise FrameworkError(f"must be a number of inputs or .npy files, not {values[0]!r}",
                                 field="--calibration") from None
    return values


def cmd_quantize(args) -> int:
    from gemmini.onnx_quantize import quantize_model

    summary = quantize_model(args.model, args.output, calibration=_calibration(args.calibration), seed=args.seed,
                             fmt=args.format, fuse_relu=not args.no_fuse_relu)
    if args.json:
        _print_json(summary)
    else:
        nodes = ", ".join(f"{k} {v}" for k, v in summary["nodes"].items())
        print(f"wrote {summary['output']} ({summary['format']}, calibrated on {summary['calibration_inputs']} "
              f"inputs; ReLUs fusable into their producer: {len(summary['relu_fusable'])}; nodes: {nodes})")
    return 0


def add_quantize_command(sub) -> None:
    p = sub.add_parser("quantize", help="make an int8 ONNX model Gemmini can run (ONNX Runtime's static "
                                        "quantization)",
                       description="Quantize a float ONNX model with ONNX Runtime's static quantization: int8 "
                                   "activations and weights with per-tensor symmetric scales (zero points 0, "
                                   "as Gemmini computes), an int32 bias, and each ReLU's producer given the "
                                   "ReLU's scale so the ReLU fuses into its mvout exactly. Needs the "
                                   "onnxruntime extra.")
    p.add_argument("model", help="the float ONNX model")
    p.add_argument("-o", "--output", required=True, help="the int8 ONNX model to write")
    p.add_argument("--calibration", nargs="+", default=["8"], metavar="N|FILE.npy",
                   help="calibration data: a number of seeded standard-normal inputs (default 8) or .npy files "
                        "(each one input, or a batch of them along axis 0)")
    p.add_argument("--format", choices=["qoperator", "qdq"], default="qoperator",
                   help="qoperator: QLinearConv, QGemm, ... nodes (default; what 'cosa run gemmini' runs); "
                        "qdq: QuantizeLinear/DequantizeLinear pairs around float operators")
    p.add_argument("--no-fuse-relu", action="store_true",
                   help="keep each ReLU's input and output calibrated apart (the ReLU then runs on the host, "
                        "unless the two scales happen to agree)")
    p.add_argument("--seed", type=int, default=0, help=SEED_HELP)
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_quantize)


# --- cosa run gemmini MODEL.int8.onnx --------------------------------------------------------------------
def _layer_tiles(layer, arch, options: dict):
    """One distinct layer's schedule (runs in a worker process for --jobs > 1): its tiles (``LayerTiles``), or
    for --style isa its mapping (``LayerMapping``)."""
    from cosa.scheduler import schedule
    from gemmini.network_run import tiles_for

    mip = {"objective": options["objective"], "solver": options["solver"], "time_limit_s": options["time_limit"],
           "seed": options["seed"], "bound": False}
    if options.get("style") == "isa":   # the layer or its cheaper rewrite (im2col fold, packed groups)
        from gemmini.codegen.choose_lowering import schedule as schedule_lowered
        from gemmini.network_isa import LayerMapping

        sched = schedule_lowered(layer.workload, arch, schedule, scheduler="cosa", **mip)
        return LayerMapping(sched.mapping, arch, None if sched.workload is layer.workload else sched.workload)
    mapping = schedule(layer.workload, arch, scheduler="cosa", **mip).mapping
    from cosa.mip import choose_loop_tiles

    return tiles_for(layer, mapping, arch, budget=options["budget"], seed=options["seed"], chooser=choose_loop_tiles)


def schedule_network(layers: dict, arch, options: dict, jobs: int) -> dict:
    """key -> ``LayerTiles`` for every distinct layer, in ``jobs`` local processes when more than one."""
    keys = list(layers)
    if jobs > 1 and len(keys) > 1:
        with ProcessPoolExecutor(max_workers=min(jobs, len(keys))) as executor:
            done = list(executor.map(_layer_tiles, [layers[k] for k in keys], [arch] * len(keys),
                                     [options] * len(keys)))
    else:
        done = [_layer_tiles(layers[k], arch, options) for k in keys]
    return dict(zip(keys, done))


def _prepare(args):
    """Check the options, load and plan the network and schedule its distinct layers: (net, steps,
    distinct layers, tiles by layer key)."""
    from gemmini.network import load_network, plan
    from gemmini.network_run import distinct_layers, gemmini_layers
    from gemmini.onnx_quantize import require_onnxruntime

    if args.scheduler not in ("cosa", "gemmini-default"):
        raise FrameworkError(f"a network is scheduled by cosa or gemmini-default, not {args.scheduler}",
                             field="--scheduler")
    if args.dataflow != "ws":
        raise FrameworkError("a network runs weight-stationary through the library's loop instructions",
                             field="--dataflow")
    if args.style == "auto":
        args.style = "loops"
    if args.style not in ("loops", "isa"):
        raise FrameworkError(f"a network runs its layers as loop instructions (--style loops) or explicit commands "
                             f"(--style isa); --style {args.style} takes one layer", field="--style")
    if args.style == "isa" and args.scheduler != "cosa":
        raise FrameworkError("--style isa runs cosa's mappings as explicit commands; the library's own tiles run "
                             "as its loop instructions (--style loops)", field="--scheduler")
    for flag, given in (("--mapping", args.mapping), ("--lower", getattr(args, "lower", False)),
                        ("--bits", args.bits)):
        if given:
            raise FrameworkError("takes one layer; a network's layers are scheduled per distinct shape",
                                 source=args.workload, field=flag)
    for name in ("jobs", "inputs"):
        if getattr(args, name, 1) < 1:
            raise FrameworkError(f"must be a positive integer, got {getattr(args, name)}", field=f"--{name}")
    require_onnxruntime()
    net = load_network(args.workload)
    steps = plan(net, store_pool=args.style == "loops")   # explicit-command programs have no pooler
    distinct = distinct_layers(gemmini_layers(net, steps))
    config = gemmini_config(args)
    arch = config.arch("ws")
    options = {"objective": args.objective, "solver": args.solver, "time_limit": args.time_limit,
               "seed": args.seed, "budget": args.tile_budget, "style": args.style}
    tiles = schedule_network(distinct, arch, options, args.jobs) if args.scheduler == "cosa" else {}
    return net, steps, distinct, tiles


def _network_elf(net, steps, run, tiles, scheduler, output):
    """Build the whole-network program for the graph inputs of ``run`` (a ``NetworkRun``) into ``output``."""
    from gemmini.network_program import build_network_elf, network_program

    program = network_program(net, steps, run.values, tiles, scheduler, isa_layers=run.isa_layers)
    return program, build_network_elf(program, output)


def cmd_build_network(args) -> int:
    """``cosa build gemmini MODEL.int8.onnx -o net.elf``: one bare-metal program for the whole network, on
    the first seeded input (its expected output computed on the functional model)."""
    from gemmini.network_run import run_network
    from gemmini.onnx_quantize import input_specs, synthetic_inputs

    from gemmini.build import find_gcc

    find_gcc()   # before scheduling
    net, steps, distinct, tiles = _prepare(args)
    feeds = next(iter(synthetic_inputs(input_specs(net.model, net.source), 1, args.seed)))
    run = run_network(net, feeds, tiles, args.scheduler, steps, style=args.style)
    program, elf = _network_elf(net, steps, run, tiles, args.scheduler, args.output)
    gem = sum(1 for _, on in program.steps if on == "gemmini")
    how = (f"with {args.scheduler}'s tiles (loop instructions)" if args.style == "loops" else
           "as explicit commands from cosa's mappings")
    print(f"wrote {elf}, {Path(elf).with_suffix('.c')} and {Path(elf).with_suffix('.bin')} ({len(program.steps)} "
          f"steps, {gem} on Gemmini {how}, {len(distinct)} distinct; constants "
          f"{program.constant_bytes:,} bytes, arena {program.arena_bytes:,} bytes; exits 0 when its output "
          "matches the functional model's)", file=sys.stderr)
    return 0


def _spike_run(net, steps, feeds, tiles, args, run):
    """Build the program for ``feeds`` and run it on Spike: (NetworkOutput, seconds)."""
    import tempfile
    import time

    from gemmini.build import run_spike
    from gemmini.network_program import parse_output

    with tempfile.TemporaryDirectory(prefix="cosa-net-") as tmp:
        program, elf = _network_elf(net, steps, run, tiles, args.scheduler, Path(tmp) / "net.elf")
        start = time.perf_counter()
        result = run_spike(elf, timeout_s=SPIKE_TIMEOUT_S)
        seconds = time.perf_counter() - start
    return program, parse_output(result.output, program.expected), seconds


def cmd_run_network(args) -> int:
    from gemmini.network_program import nhwc
    from gemmini.network_run import compare, compared_tensors, onnxruntime_values, run_network
    from gemmini.onnx_quantize import input_specs, synthetic_inputs

    if args.sim not in ("isa", "spike"):
        raise FrameworkError(f"a whole network runs on --sim isa (our functional and timing models) or spike "
                             f"(one program on Spike + libgemmini); --sim {args.sim} takes one layer", field="--sim")
    if args.sim == "spike":
        from gemmini.build import find_gcc, find_spike

        find_gcc(), find_spike()  # before scheduling
    net, steps, distinct, tiles = _prepare(args)
    specs = input_specs(net.model, net.source)
    tensors = compared_tensors(net)
    diff, top1, layers_ok, run, spike = 0, True, True, None, []
    for i, feeds in enumerate(synthetic_inputs(specs, args.inputs, args.seed)):
        run = run_network(net, feeds, tiles, args.scheduler, steps, style=args.style)
        reference = onnxruntime_values(net, feeds, tensors)
        c = compare(net, run, reference)
        layers_ok &= all(layer.layer_verified is not False for layer in run.layers)
        if args.sim == "spike":
            program, out, seconds = _spike_run(net, steps, feeds, tiles, args, run)
            ref = nhwc(reference[program.compared])
            got_diff = (int(abs(out.output.astype(int) - ref.astype(int)).max()) if out.output is not None
                        and out.output.shape == ref.shape else 1 << 8)
            got_top1 = (out.output is not None and out.output.shape == ref.shape and bool(
                (out.output.reshape(ref.shape[0], -1).argmax(-1) == ref.reshape(ref.shape[0], -1).argmax(-1)).all()))
            c = {"max_abs_diff_vs_onnxruntime": got_diff, "top1_equal": got_top1}
            layers_ok &= out.passed
            spike.append({"input": i, "passed": out.passed, "mismatches": out.mismatches, "checksum": out.checksum,
                          "spike_s": seconds, "steps": out.steps})
        diff = max(diff, c["max_abs_diff_vs_onnxruntime"])
        top1 &= c["top1_equal"]
    verified = layers_ok and top1 and diff <= TOLERANCE_LSB
    gem = [layer for layer in run.layers if layer.on == "gemmini"]
    library = [r.library_cycles for r in gem]
    d = {"model": net.source, "sim": args.sim, "style": args.style, "scheduler": args.scheduler,
         "layers": [r.to_dict() for r in run.layers],
         "cycles": run.cycles, "cycles_source": "timing model (Gemmini steps; host steps not counted)",
         "library_cycles": (run.cycles if args.scheduler != "cosa" else
                            sum(library) if None not in library else None),
         "gemmini_layers": len(gem), "distinct_layers": len(distinct), "inputs": args.inputs, "seed": args.seed,
         "compared": tensors, "max_abs_diff_vs_onnxruntime": diff, "tolerance_lsb": TOLERANCE_LSB,
         "top1_equal": top1, "layers_verified": layers_ok, "verified": verified, "arena": run.arena.to_dict()}
    if spike:
        d["spike"] = spike
        d["spike_cycles_source"] = "rdcycle on Spike (instruction-level: not Gemmini's cycles)"
    if args.json:
        _print_json(d)
    else:
        for r in run.layers:
            cyc = f"{r.cycles:>12,.0f}" if r.cycles is not None else f"{'host':>12}"
            fused = f" (+{', '.join(r.fused)})" if r.fused else ""
            print(f"{r.name:<28} {r.op:<26} {cyc}{fused}")
        a = run.arena
        where = ("the functional model" if args.sim == "isa" else
                 f"Spike + libgemmini (one program per input, {sum(x['spike_s'] for x in spike):.1f} s)")
        print(f"{Path(net.source).name}: {'verified' if verified else 'MISMATCH'} on {where} against ONNX Runtime "
              f"on {args.inputs} input(s): max |diff| {diff} int8 LSB, top-1 {'equal' if top1 else 'differs'}; "
              f"{run.cycles:,.0f} Gemmini cycles (timing model, {args.scheduler}, {args.style}, {len(gem)} layers, "
              f"{len(distinct)} distinct); arena {a.size_bytes:,} bytes (peak live {a.peak_bytes:,}, "
              f"sum {a.sum_bytes:,})")
    if not verified:
        raise RunFailed(f"{net.source}: differs from ONNX Runtime (max {diff} LSB, top-1 "
                        f"{'equal' if top1 else 'differs'}, layers verified: {layers_ok})")
    return 0


def add_network_run_options(p: argparse.ArgumentParser) -> None:
    """Options of ``cosa run gemmini`` that only a whole network uses."""
    p.add_argument("--jobs", type=int, default=1,
                   help="a network's distinct layers scheduled side by side in local processes (default 1)")
    p.add_argument("--inputs", type=int, default=1,
                   help="a network: seeded standard-normal inputs run and compared with ONNX Runtime (default 1)")


def refuse_float_network(args) -> None:
    """``cosa build gemmini MODEL.onnx`` of a model with no int8 Gemmini operators (a float or QDQ model):
    one line pointing at ``cosa quantize`` (exit 2).  ``MODEL.onnx:LAYER`` still builds one layer."""
    path = Path(args.workload)
    if path.suffix.lower() == ".onnx" and path.is_file() and not is_network(args.workload):
        raise FrameworkError("a whole network is built from its int8 model: run 'cosa quantize "
                             f"{args.workload} -o {path.with_suffix('').name}.int8.onnx' and build that (or name "
                             f"one layer, {args.workload}:LAYER)", source=args.workload, field="workload")
