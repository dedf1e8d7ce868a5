"""``cosa emit|build|run gemmini``: generate a Gemmini program from a schedule, build it as a RISC-V ELF,
or run it on a simulator (our functional and timing models, our RTL, Spike + libgemmini, Chipyard).

Like ``cosa/cli.py`` this module may import ``gemmini``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from workloads import FrameworkError

from . import cli_network, cli_randnla, cli_targets
from .cli_common import (DATAFLOW_HELP, JSON_HELP, LAYER_HELP, RunFailed, _add_sched_opts, _print_json, _workload,
                         add_workload_opts, gemmini_config, gemmini_soc, scheduler_options,
                         write_text_output)


def _gemmini_schedule(args, workload, arch):
    if args.mapping:
        from mappings import load_mapping

        return load_mapping(args.mapping, arch, workload)
    from cosa.scheduler import schedule

    return schedule(workload, arch, scheduler=args.scheduler, objective=args.objective, solver=args.solver,
                    time_limit_s=args.time_limit, seed=args.seed, bound=False, **scheduler_options(args)).mapping


def _gemmini_workload(args):
    """The WORKLOAD of a Gemmini command; Gemmini computes on int8 words, so a wider workload (a float32
    ONNX model) is refused with the option that converts it, never run as something else silently."""
    workload = _workload(args.workload, args.bits)
    wide = sorted({(t.bits, t.dtype or "") for t in workload.tensors if t.bits != 8})
    if wide:
        words = " and ".join(f"{b}-bit" + (f" {d}" if d else "") for b, d in wide)
        raise FrameworkError(f"{workload.name} has {words} words; Gemmini runs int8: pass --bits 8 to run it as "
                             "the int8 layer it would be", source=args.workload, field="--bits")
    return workload


def _timing_model_source(args) -> str:
    """What gave a --sim isa run's cycles: "timing model" (of our RTL, the default machine), or the timing model of
    the machine --soc names; a model's figure, never a measurement."""
    from gemmini.config import SOC_DESCRIPTIONS

    soc = gemmini_soc(args)
    return "timing model" if soc == "ours" else f"timing model of {soc} ({SOC_DESCRIPTIONS[soc]})"


def _gemmini_arch(args):
    config = gemmini_config(args)
    return config, config.arch(args.dataflow)


def _non_negative_int(text: str) -> int:
    """--tile-budget: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, not {text!r}")
    return value


def _scale(text: str):
    """--scale: "auto" (few example outputs saturate) or a positive float32 output scale."""
    if text == "auto":
        return "auto"
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--scale must be 'auto' or a positive number, not {text!r}")
    return value


def _gemmini_program(args):
    from gemmini import codegen

    workload = _gemmini_workload(args)
    config, arch = _gemmini_arch(args)
    if getattr(args, "lower", False) and not args.mapping:
        # the layer as written and its rewrites (im2col folding, packed groups), the cheapest kept
        from cosa.scheduler import schedule as run_scheduler
        from gemmini.codegen.choose_lowering import schedule as schedule_lowered

        sched = schedule_lowered(workload, arch, run_scheduler, scheduler=args.scheduler, objective=args.objective,
                                 solver=args.solver, time_limit_s=args.time_limit, seed=args.seed, bound=False)
        program = codegen.generate(sched.workload, sched.mapping, arch, dataflow=args.dataflow, scale=args.scale)
    else:
        mapping = _gemmini_schedule(args, workload, arch)
        program = codegen.generate(workload, mapping, arch, dataflow=args.dataflow, scale=args.scale)
    # the same commands, timed on the machine --soc names (its units and memory change no command)
    return dataclasses.replace(program, config=config)


# --- --style loops: the library's loop-instruction calls with cosa's tile arguments (gemmini.loop_schedule) --
def _loop_schedule(args):
    from gemmini.loop_schedule import tune_tiles

    if args.dataflow != "ws":
        raise FrameworkError("--style loops runs weight-stationary (the library's convolutions are WS only)",
                             field="--dataflow")
    workload = _gemmini_workload(args)
    config, arch = _gemmini_arch(args)
    mapping = _gemmini_schedule(args, workload, arch)
    return tune_tiles(workload, mapping, arch, config=config, scale=args.scale, budget=args.tile_budget,
                      chooser=_mip_tiles(args))


def _mip_tiles(args):
    """The loop-instruction tile chooser (``cosa.mip.choose_loop_tiles``)."""
    from cosa.mip import choose_loop_tiles

    def choose(problem, machine):
        return choose_loop_tiles(problem, machine, time_limit_s=args.time_limit, source=f"workload {args.workload}")
    return choose


def _loops_text(ls) -> str:
    tiles = "the library's own tiles" if ls.tiles is None else f"tiles {tuple(ls.tiles)}"
    how = ("chosen by the loop-tile MIP" if ls.found_from == "mip" and ls.evaluated <= 2
           else f"{ls.evaluated} streams timed, from the {ls.found_from}")
    return (f"{tiles} ({how} in {ls.tile_seconds:.2f} s; timing model {ls.cycles:,.0f} cycles, the library's own "
            f"{ls.library_cycles:,.0f})")


def _loops_elf(args, ls, output):
    from gemmini.chipyard import loop_conv_layout, vendor_elf

    layout = loop_conv_layout() if getattr(args, "sim", None) == "chipyard" else "180c468"  # what it decodes
    return vendor_elf(ls.vendor, output, seed=args.seed, tiles=ls.tiles, layout=layout)


def _run_loops(args, status=None) -> int:
    import tempfile

    ls = _loop_schedule(args)
    name = ls.vendor.name
    if args.sim == "isa":
        from gemmini.vendor.run import run_vendor

        run = run_vendor(ls.vendor, tiles=ls.tiles, with_timing=True, seed=args.seed, config=gemmini_config(args))
        d = {"sim": "isa", "style": "loops", "verified": run.verified, "mismatches": run.mismatches,
             "instructions": run.instructions, "cycles": run.cycles, "cycles_source": _timing_model_source(args),
             **ls.to_dict()}
        line = f"{'verified bit-exact' if run.verified else 'MISMATCH'} ({run.mismatches} mismatches) [isa]"
    elif args.sim in ("spike", "chipyard"):
        with tempfile.TemporaryDirectory(prefix="cosa-loops-") as tmp:
            elf = _loops_elf(args, ls, Path(tmp) / f"{name}_loops.elf")
            if args.sim == "spike":
                from gemmini.build import check_line, run_spike

                r = run_spike(elf)
                d = {"sim": "spike", "style": "loops", "verified": r.verified, "exit_code": r.exit_code,
                     "cycles": None, "cycles_source": "none (Spike is not cycle-accurate)", **ls.to_dict()}
                line = f"{'verified by its own check' if r.verified else 'FAILED'} on Spike: {check_line(r.output)}"
            else:
                from gemmini.chipyard import run_chipyard

                r = run_chipyard(elf, simulator=args.simulator)
                # cycles: what the program measured on the simulated RTL; the tile search's timing-model
                # figures keep their own keys (model_cycles, library_model_cycles)
                d = {"sim": "chipyard", "style": "loops", **ls.to_dict(), **r.to_dict(),
                     "cycles_source": "rdcycle on the Chipyard simulator"}
                line = (f"{'verified by its own check' if r.verified else 'FAILED'} on the Chipyard simulator, "
                        f"{r.cycles or 0:,} cycles (rdcycle): {r.check}")
    else:
        raise FrameworkError(f"--style loops runs on --sim isa, spike or chipyard (not {args.sim})", field="--sim")
    if status is not None:
        d["exception_status"] = status
    if args.json:
        _print_json(d)
    else:
        print(f"{name}: {line}; {_loops_text(ls)}")
    if not d["verified"]:
        raise RunFailed(f"{name}: the loop-instruction program's check failed on {args.sim}")
    return 0


def _resolve_style(args) -> str:
    """--style auto: "loops" (Gemmini's library calls, tiles by the loop-tile MIP) where the layer runs that
    way, else "isa" (explicit commands from the mapping): a mapping given with --mapping, --dataflow os,
    --lower, --sim rtl, --main (emit), a size other than the library's (--dim) or a layer the library has no
    call for keep the explicit program."""
    if args.style != "auto":
        return args.style
    reason = None
    if args.mapping:
        reason = "--mapping runs the given mapping"
    elif args.dataflow != "ws":
        reason = "the library's loop instructions are weight-stationary"
    elif getattr(args, "lower", False):
        reason = "--lower runs the rewrites as explicit programs"
    elif getattr(args, "sim", "isa") == "rtl":
        reason = "our RTL runs explicit commands"
    elif getattr(args, "main", False):
        reason = "--main adds its main() to the explicit program"
    elif args.dim not in (None, 16):
        reason = "the library's streams are reproduced for DIM 16"
    else:
        from gemmini.errors import CodegenError
        from gemmini.vendor.calls import from_workload

        try:
            from_workload(_gemmini_workload(args))
        except CodegenError as exc:
            reason = f"the library has no call for this layer ({exc})"
    args.style = "isa" if reason else "loops"
    args.style_reason = reason
    return args.style


def cmd_emit(args) -> int:
    if args.target in cli_targets.TARGETS:
        return cli_targets.cmd_emit(args)
    if _resolve_style(args) == "loops":
        from gemmini.chipyard import vendor_c

        ls = _loop_schedule(args)
        source = vendor_c(ls.vendor, seed=args.seed, tiles=ls.tiles)
        write_text_output(args.output, source, f"wrote {args.output} ({len(source.splitlines())} lines; loops style, "
                                               f"{ls.vendor.name}: {_loops_text(ls)})")
        return 0
    from gemmini.codegen.c import emit_c, emit_gemmini_h

    program = _gemmini_program(args)
    if args.style == "gemmini-h":
        source = emit_gemmini_h(program, with_main=args.main, seed=args.seed)
    else:
        source = emit_c(program, with_main=args.main, seed=args.seed)
    write_text_output(args.output, source,
                      f"wrote {args.output} ({len(source.splitlines())} lines, {len(program.commands):,} commands)")
    return 0


def _tools_first(args, command: str) -> None:
    """The outside tools the command will need, looked up before any scheduling (a missing one is a one-line
    error in a second, not after minutes of work): the RISC-V compiler for an ELF, Spike for --sim spike,
    the user's gemmini-rocc-tests for --style gemmini-h."""
    from gemmini.build import find_gcc, find_spike, rocc_tests_dir

    sim = getattr(args, "sim", None)
    if command == "build" or sim in ("spike", "chipyard"):
        find_gcc()
    if sim == "spike":
        find_spike()
    if getattr(args, "style", None) == "gemmini-h" and (command == "build" or sim in ("spike", "chipyard")):
        rocc_tests_dir(getattr(args, "rocc_tests", None))


def cmd_build(args) -> int:
    from gemmini.build import build_elf

    if cli_network.is_network(args.workload):
        return cli_network.cmd_build_network(args)
    cli_network.refuse_float_network(args)
    _tools_first(args, "build")
    if _resolve_style(args) == "loops":
        ls = _loop_schedule(args)
        elf = _loops_elf(args, ls, args.output)
        print(f"wrote {elf} and {Path(elf).with_suffix('.c')} (loops style: {_loops_text(ls)}; exits 0 when its "
              "output matches the embedded expectation)", file=sys.stderr)
        return 0
    program = _gemmini_program(args)
    elf = build_elf(program, args.output, style=args.style, seed=args.seed)
    what = f"{len(program.commands):,} commands" if args.style == "isa" else "one call of Gemmini's library"
    print(f"wrote {elf} and {Path(elf).with_suffix('.c')} ({args.style} style, {what}; exits 0 when its output "
          "matches the embedded expectation)", file=sys.stderr)
    return 0


def _lowering_kind(program):
    """The rewrite the program runs ("fold", "pack"), None for the layer as written."""
    from gemmini.codegen.lowering import lowering_of

    low = lowering_of(program.workload)
    return low.kind if low is not None else None


def _run_on_spike(args, program) -> dict:
    import tempfile

    from gemmini.build import build_elf, run_spike

    with tempfile.TemporaryDirectory() as tmp:
        elf = build_elf(program, Path(tmp) / f"{program.name}.elf", style=args.style, seed=args.seed)
        result = run_spike(elf)
    return {"verified": result.verified, "exit_code": result.exit_code, "sim": "spike", "style": args.style,
            "spike": result.spike, "output": result.output.strip()}


def _run_on_chipyard(args, program) -> int:
    from gemmini.chipyard import run_program_chipyard

    r = run_program_chipyard(program, style=args.style, seed=args.seed, simulator=args.simulator)
    if args.json:
        _print_json({"sim": "chipyard", "style": args.style, **r.to_dict()})
    else:
        speed = f"{r.cycles_per_s:,.0f}" if r.cycles_per_s else "n/a"
        print(f"{program.name}: {'verified by its own check' if r.verified else 'FAILED'} on the Chipyard "
              f"simulator ({args.style} style), {r.cycles or 0:,} cycles (rdcycle), simulator {r.wall_s:.1f} s at "
              f"{speed} cycles/s: {r.check}")
    if not r.verified:
        raise RunFailed(f"{program.name}: the program's check failed on the Chipyard simulator "
                        f"(exit {r.exit_code}); log: {r.log}")
    return 0


def cmd_run(args) -> int:
    if args.target in cli_targets.TARGETS:
        return cli_targets.cmd_run(args)
    if cli_network.is_network(args.workload):
        return cli_network.cmd_run_network(args)
    from gemmini.run import run_program

    status = cli_targets.integer_status(args)          # --exceptions: Gemmini's types are int8/int32
    _tools_first(args, "run")
    if _resolve_style(args) == "loops":
        return _run_loops(args, status)
    program = _gemmini_program(args)
    name = program.name
    if args.sim == "spike":
        from gemmini.build import check_line

        d = _run_on_spike(args, program)
        d["exception_status"] = status
        d["lowering"] = _lowering_kind(program)
        if args.json:
            _print_json(d)
        else:
            print(f"{name}: {'verified by its own check' if d['verified'] else 'FAILED'} on Spike + libgemmini "
                  f"(exit {d['exit_code']}, {args.style} style): {check_line(d['output'])}")
        if not d["verified"]:
            raise RunFailed(f"{name}: the program's check failed on Spike (exit {d['exit_code']})")
        return 0
    if args.sim == "chipyard":
        return _run_on_chipyard(args, program)
    d = run_program(program, sim=args.sim, seed=args.seed).to_dict()
    d["exception_status"] = status
    d["lowering"] = _lowering_kind(program)
    # what the cycles are: our timing model's on the functional model, our own RTL's (not Gemmini's) on rtl
    d["cycles_source"] = {"isa": _timing_model_source(args), "rtl": "our RTL (not Gemmini's)"}.get(args.sim, args.sim)
    if args.json:
        _print_json(d)
    else:
        cycles = "n/a" if d["cycles"] is None else f"{d['cycles']:,.0f}"
        util = "n/a" if d["utilization"] is None else f"{d['utilization']:.1%}"
        units = ("load", "execute", "store")
        busy = (", busy load/execute/store " + "/".join(f"{d['busy'][u]:,}" for u in units) + " cycles"
                if d.get("busy") else "")
        print(f"{name}: {'verified bit-exact' if d['verified'] else 'MISMATCH'} "
              f"({d['mismatches']} mismatches), {cycles} cycles ({d['cycles_source']}), ideal {d['ideal_cycles']:,.0f}, "
              f"utilization {util}, {d['instructions']:,} instructions, {d['dram_bytes']:,} DRAM bytes{busy} "
              f"[{args.sim}]")
    if not d["verified"]:
        raise RunFailed(f"{name}: output differs from the NumPy reference in {d['mismatches']} elements")
    return 0


COMMANDS = (("emit", "emit C code for a target"),
            ("build", "build a self-checking bare-metal RISC-V ELF"),
            ("run", "generate, run and verify on a simulator or this machine"))

GEMMINI_HELP = {"emit": "C for Gemmini: our header's RoCC instructions, or calls of Gemmini's library",
                "build": "a self-checking bare-metal RISC-V ELF for Gemmini (Spike, Chipyard)",
                "run": "a Gemmini program on our functional model, our RTL, Spike or a Chipyard simulator, "
                       "verified bit-exact"}


def add_commands(sub) -> None:
    """The ``emit``, ``build`` and ``run`` subcommands, each with one subcommand per target (Gemmini,
    the targets of ``cli_targets``, the RandNLA drivers of ``cli_randnla``), so that
    ``cosa run TARGET --help`` shows that target's options only.  Targets with their own command line
    (``Target.command``, the drivers) are dispatched by ``cosa.cli.main`` before this parser; they are
    listed here for ``cosa run --help``."""
    funcs = {"emit": cmd_emit, "build": cmd_build, "run": cmd_run}
    for name, helptext in COMMANDS:
        p = sub.add_parser(name, help=helptext, description=f"{helptext[0].upper()}{helptext[1:]}. "
                           f"'cosa {name} TARGET --help' shows the options of a target.")
        targets = p.add_subparsers(dest="target", required=True, metavar="TARGET", title="targets")
        _add_gemmini_parser(targets, name, funcs[name])
        if name == "build":
            continue
        cli_targets.add_target_parsers(targets, name, funcs[name])
        if name == "run":
            for driver, summary in cli_randnla.DRIVER_HELP.items():
                targets.add_parser(driver, help=f"{summary} (its own options: cosa run {driver} --help)",
                                   add_help=False)


def _add_gemmini_parser(targets, name: str, func) -> None:
    p = targets.add_parser("gemmini", help=GEMMINI_HELP[name], description=GEMMINI_HELP[name])
    p.add_argument("workload", help=LAYER_HELP + ("; or a whole int8 ONNX network made by 'cosa quantize' (--sim isa)"
                                                  if name == "run" else ""))
    add_workload_opts(p)
    p.add_argument("--mapping", help="mapping YAML (default: schedule with --scheduler)")
    _add_sched_opts(p)
    p.add_argument("--dataflow", choices=["ws", "os"], default="ws", help=DATAFLOW_HELP + "; default ws")
    p.add_argument("--dim", type=int, default=None, help="systolic array size (default 16)")
    p.add_argument("--soc", choices=["ours", "chipyard-1.10"], default=None,
                   help="the machine the timing model describes (its cycles, and the --tile-budget polish): ours, our "
                        "RTL in its harness (default), or chipyard-1.10, Gemmini f13847e in Chipyard 1.10.0's SoC "
                        "(Gemmini's own units, cold lines over an 8-byte memory bus; the default with "
                        "--sim chipyard)")
    p.add_argument("--scale", type=_scale, default="auto",
                   help="output scale (float32), or 'auto': about 1%% of the example outputs saturate")
    p.add_argument("--style", choices=["auto", "isa", "gemmini-h", "loops"], default="auto",
                   help="auto (default): loops where the layer runs that way, else isa; "
                        "isa: our header's RoCC instructions from the mapping; gemmini-h: one call of Gemmini's library with "
                        "the mapping's tiles; loops: the library's loop-instruction stream with tile "
                        "arguments chosen by cosa's loop-tile MIP (self-checking C, no main option)")
    p.add_argument("--tile-budget", type=_non_negative_int, default=0,
                   help="--style loops: the most loop-instruction streams timed to polish the tiles (each "
                        "costs one timing-model run of the layer); default 0: the MIP's tiles as chosen "
                        "(16 for a convolution with pooling fused, which the MIP does not model)")
    if name == "emit":
        p.add_argument("--main", action="store_true", help="add a self-checking main() with test data")
        p.add_argument("-o", "--output", default="-", help="the C file to write (default: standard output)")
    elif name == "build":
        p.add_argument("-o", "--output", required=True, help="the ELF to write (the C source goes beside it)")
        p.add_argument("--jobs", type=int, default=1,
                       help="a network: its distinct layers scheduled side by side in local processes (default 1)")
    else:
        p.add_argument("--lower", action="store_true",
                       help="also schedule the layer's rewrites (im2col folding of thin layers, packed "
                            "groups: gemmini.codegen.lowering) and run the cheapest as explicit commands")
        p.add_argument("--sim", choices=["isa", "rtl", "spike", "chipyard"], default="isa",
                       help="isa: our functional and timing model (default); rtl: our RTL under Verilator; "
                            "spike: build the ELF and run it on GEMMINI_SPIKE (Spike + libgemmini); "
                            "chipyard: on a Chipyard Verilator simulator of a Rocket + Gemmini SoC")
        p.add_argument("--simulator", help="the Chipyard simulator for --sim chipyard (default: CHIPYARD_SIM)")
        cli_targets.add_exceptions_option(p)
        cli_network.add_network_run_options(p)
        p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=func)
