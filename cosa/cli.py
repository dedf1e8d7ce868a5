"""The ``cosa`` command line.

This is the only module of ``cosa`` that may import ``gemmini``, ``targets``
and ``algorithms``.  User errors (a FrameworkError) print one line and exit 2;
a run that fails (time-out without a schedule, a simulation mismatch) exits 1.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from workloads import FrameworkError

from . import cli_randnla, cli_serve, cli_targets

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]i?B?|B)?\s*$", re.IGNORECASE)


class RunFailed(Exception):
    """A run that completed but failed (mismatch, no schedule in time): exit 1."""


def parse_size(text: str) -> int:
    """'256KiB' / '64K' / '1MiB' / '4096' -> bytes."""
    m = _SIZE.match(text)
    if not m:
        raise FrameworkError(f"cannot parse memory size '{text}' (e.g. 256KiB, 1MiB, 65536)", field="--memory")
    value = float(m.group(1))
    unit = (m.group(2) or "B").upper().rstrip("B").rstrip("I")
    return int(value * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[unit])


# --- resolution of names and files ------------------------------------------------------------

def _workloads(sources: list[str]):
    from workloads import load

    nests = []
    for src in sources:
        nests.extend(load(src))
    return nests


def _workload(source: str):
    from workloads import load_one

    return load_one(source)


def _arch(name: str, dataflow: str | None = None):
    from costmodel import load_arch

    arch = load_arch(name)
    if dataflow and arch.params.get("dataflow") and arch.params["dataflow"] != dataflow:
        from costmodel import preset

        p = arch.params
        arch = preset("gemmini", dim=p["dim"], scratchpad_kib=p["scratchpad_kib"],
                      accumulator_kib=p["accumulator_kib"], dataflow=dataflow)
    return arch


def _console():
    from rich.console import Console

    # a pipe or CI log gets a wide, plain table instead of rich's 80-column default
    return Console() if sys.stdout.isatty() else Console(width=160, color_system=None)


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2, default=_json_default))


def _json_default(obj):
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


# --- commands ---------------------------------------------------------------------------------

def cmd_show(args) -> int:
    nests = _workloads([args.workload])
    if args.json:
        described = [n.describe() for n in nests]
        _print_json(described[0] if len(described) == 1 else described)
        return 0
    from rich.table import Table

    table = Table(title=args.workload)
    for col in ("layer", "dims", "MACs", "repeat", "tensors (bits, words)"):
        table.add_column(col)
    for n in nests:
        dims = " ".join(f"{d}={b}" for d, b in n.dims.items())
        tens = ", ".join(f"{t.name}[{t.bits}b] {n.size_words(t):,}" for t in n.tensors)
        table.add_row(n.name, dims, f"{n.macs:,}", str(n.repeat), tens)
    _console().print(table)
    return 0


def cmd_arch_show(args) -> int:
    from costmodel import arch_to_dict

    arch = _arch(args.arch)
    d = arch_to_dict(arch)
    if args.json:
        _print_json(d)
        return 0
    from rich.table import Table

    table = Table(title=f"{arch.name}: {arch.total_macs_per_cycle} MACs/cycle")
    for col in ("level", "capacity (B)", "holds", "word bits", "read B/cyc", "write B/cyc", "pJ/B (r/w)", "fanout"):
        table.add_column(col)
    for lv in arch.levels:
        table.add_row(lv.name, "unbounded" if lv.capacity_bytes is None else f"{lv.capacity_bytes:,}",
                      ",".join(sorted(lv.holds)), str(lv.word_bits or "tensor"),
                      str(lv.read_bandwidth or "-"), str(lv.write_bandwidth or "-"),
                      f"{lv.read_energy_pj_per_byte:.3g}/{lv.write_energy_pj_per_byte:.3g}",
                      str(lv.fanout) + (" (" + "x".join(f"{a.name}:{a.size}" for a in lv.spatial_axes) + ")"
                                        if lv.spatial_axes else ""))
    _console().print(table)
    return 0


def cmd_evaluate(args) -> int:
    from costmodel import evaluate
    from mappings import format_loopnest, load_mapping

    workload = _workload(args.workload)
    arch = _arch(args.arch)
    if args.energy_table:  # per-access energies (ours or Accelergy's ERT) replace the arch's per-byte ones
        import dataclasses

        from costmodel.energy import load_energy_table
        arch = dataclasses.replace(arch, params={**arch.params, "energy_table": load_energy_table(args.energy_table)})
    mapping = load_mapping(args.mapping, arch, workload)
    cost = evaluate(workload, arch, mapping)
    if args.json:
        _print_json(cost.to_dict())
        return 0
    console = _console()
    console.print(format_loopnest(mapping, workload, arch), markup=False, highlight=False)
    _print_cost(console, cost)
    return 0


def _print_cost(console, cost) -> None:
    d = cost.to_dict()
    console.print(f"cycles {d['cycles']:,.0f}  energy {d['energy_pj'] / 1e6:,.3f} uJ  "
                  f"utilization {d['utilization']:.1%}  DRAM {cost.dram_bytes:,.0f} B  bound by {d.get('bound_by', '?')}")


def _schedule_one(workload, arch, args):
    from cosa.scheduler import schedule

    extra = {"order_levels": args.order_levels} if getattr(args, "order_levels", "outer") != "outer" else {}
    return schedule(workload, arch, scheduler=args.scheduler, objective=args.objective, solver=args.solver,
                    time_limit_s=args.time_limit, seed=args.seed, **extra)


def schedule_to_dict(sched) -> dict:
    """JSON form of a Schedule, as printed by ``cosa schedule --json``."""
    from lowerbounds import roofline
    from mappings import mapping_to_dict

    out = {
        "workload": sched.workload.name,
        "arch": sched.arch.name,
        "scheduler": sched.scheduler,
        "mapping": mapping_to_dict(sched.mapping, sched.arch),
        "cost": sched.cost.to_dict(),
        "solver": sched.stats.to_dict(),
    }
    if sched.extra:
        out.update(sched.extra)
    roof = roofline(sched.workload, sched.arch)
    out.update(roof.to_dict())
    out["cycles_over_roofline"] = roof.over(sched.cost.cycles)
    if sched.bound is not None:
        b = sched.bound.to_dict()
        b["traffic_bytes"] = sched.cost.dram_bytes
        b["ratio"] = sched.cost.dram_bytes / b["bound_bytes"] if b.get("bound_bytes") else None
        out["bound"] = b
    return out


def cmd_schedule(args) -> int:
    from mappings import dump_mapping, format_loopnest

    workload = _workload(args.workload)
    arch = _arch(args.arch, args.dataflow)
    sched = _schedule_one(workload, arch, args)
    if args.output:
        if args.format == "timeloop":  # Timeloop's mapping format, for timeloop-model ARCH PROBLEM F.yaml
            from mappings import dump_timeloop
            Path(args.output).write_text(dump_timeloop(sched.mapping, workload, arch))
        else:
            Path(args.output).write_text(dump_mapping(sched.mapping, arch))
    if args.json:
        _print_json(schedule_to_dict(sched))
        return 0
    console = _console()
    s = sched.stats
    console.print(f"[bold]{workload.name}[/] on [bold]{arch.name}[/] by {sched.scheduler} "
                  f"({s.solver}, {s.status}, {s.total_s:.2f} s"
                  + (f", gap {s.gap:.2%}" if s.gap is not None else "") + ")")
    console.print(format_loopnest(sched.mapping, workload, arch), markup=False, highlight=False)
    _print_cost(console, sched.cost)
    if sched.bound is not None:
        b = sched.bound.to_dict()
        ratio = sched.cost.dram_bytes / b["bound_bytes"] if b.get("bound_bytes") else float("nan")
        console.print(f"lower bound {b['bound_bytes']:,.0f} B ({b['binding']}), traffic/bound {ratio:.3f}")
    from lowerbounds import roofline
    roof = roofline(workload, arch)
    console.print(f"roofline {roof.cycles:,.0f} cycles ({roof.bound_by}: compute {roof.compute_cycles:,.0f}, "
                  f"compulsory DRAM {roof.memory_cycles:,.0f}); cycles / roofline {roof.over(sched.cost.cycles):.3f}")
    if sched.extra.get("tile_args"):
        console.print(f"vendor tile arguments: {sched.extra['tile_args']}")
    warm = sched.extra.get("warm_start")
    if warm:
        console.print("MIP start: " + (f"the {warm['start']} mapping" if warm["start"] else "none")
                      + ("; returned that start (the MIP found nothing better)" if warm["returned_start"] else ""))
    if args.output:
        console.print(f"mapping written to {args.output}")
    return 0


def cmd_compare(args) -> int:
    from cosa.compare import compare
    from cosa import report

    nests = _workloads(args.workloads)
    arch = _arch(args.arch, args.dataflow)
    schedulers = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    measure = None
    if args.measure:
        if not arch.name.startswith("cpu"):
            raise FrameworkError(f"--measure runs the schedules with the CPU target; arch {arch.name!r} is not a "
                                 "CPU arch (--arch cpu or a file from cosa arch calibrate cpu)", field="--measure")
        measure = measure_cpu
    result = compare(nests, arch, schedulers, jobs=args.jobs, objective=args.objective,
                     time_limit_s=args.time_limit, seed=args.seed, random_samples=args.random_samples,
                     progress=sys.stdout.isatty() and not args.json, measure=measure)
    if args.csv:
        report.write_csv(result, args.csv)
    if args.plot:
        report.plot(result, args.plot)
    if args.json:
        _print_json(report.to_json(result))
    else:
        report.print_table(result)
    return 0


def measure_cpu(workload, arch, mapping) -> dict:
    """``cosa compare --measure``: build the mapping as C + OpenMP, run it on every core, verify against
    NumPy, median seconds of 3 calls (``targets.cpu.run``)."""
    from targets.cpu import run

    got = run(workload, mapping, arch, repeat=3).to_dict()
    return {"seconds": got["seconds"], "verified": got["verified"], "gflops": got.get("gflops"),
            "threads": got.get("threads")}


def cmd_bound(args) -> int:
    from lowerbounds import bound, bound_for_arch

    workload = _workload(args.workload)
    if args.memory:
        rep = bound(workload, parse_size(args.memory))
        arch = None
    else:
        arch = _arch(args.arch or "gemmini")
        rep = bound_for_arch(workload, arch)
    if args.plot:
        from cosa import report

        schedules = []
        if arch is not None:
            from cosa.scheduler import schedule

            for name in ("cosa", "gemmini-default") if arch.name.startswith("gemmini") else ("cosa",):
                schedules.append(schedule(workload, arch, scheduler=name, time_limit_s=args.time_limit))
        report.plot_bound_curve(workload, rep, schedules, args.plot)
    if args.json:
        _print_json(rep.to_dict())
        return 0
    d = rep.to_dict()
    console = _console()
    fmt = lambda v: "n/a" if v is None else f"{v:.4g}"  # None: unbounded memory or no finite exponent
    console.print(f"[bold]{workload.name}[/]: s_HBL = {fmt(d['s_hbl'])}, khat = {fmt(d['khat'])}")
    console.print(f"bound {d['bound_words']:,.0f} words / {d['bound_bytes']:,.0f} B "
                  f"(binding: {d['binding']}); compulsory {d['compulsory_bytes']:,.0f} B")
    console.print(f"tile: {d['tile']}")
    return 0


def _gemmini_schedule(args, workload, arch):
    if args.mapping:
        from mappings import load_mapping

        return load_mapping(args.mapping, arch, workload)
    from cosa.scheduler import schedule

    return schedule(workload, arch, scheduler=args.scheduler, objective=args.objective, solver=args.solver,
                    time_limit_s=args.time_limit, seed=args.seed, bound=False).mapping


def _gemmini_arch(args):
    from gemmini import GemminiConfig

    config = GemminiConfig(dim=args.dim) if args.dim else GemminiConfig()
    return config, config.arch(args.dataflow)


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

    workload = _workload(args.workload)
    config, arch = _gemmini_arch(args)
    if getattr(args, "lower", False) and not args.mapping:
        # the layer as written and its rewrites (im2col folding, packed groups), the cheapest kept
        from gemmini.lowering import schedule as schedule_lowered

        sched = schedule_lowered(workload, arch, scheduler=args.scheduler, objective=args.objective,
                                 solver=args.solver, time_limit_s=args.time_limit, seed=args.seed, bound=False)
        return codegen.generate(sched.workload, sched.mapping, arch, dataflow=args.dataflow, scale=args.scale)
    mapping = _gemmini_schedule(args, workload, arch)
    return codegen.generate(workload, mapping, arch, dataflow=args.dataflow, scale=args.scale)


def cmd_emit(args) -> int:
    if args.target in cli_targets.TARGETS:
        return cli_targets.cmd_emit(args)
    from gemmini.codegen_c import emit_c, emit_gemmini_h

    program = _gemmini_program(args)
    if args.style == "gemmini-h":
        source = emit_gemmini_h(program, with_main=args.main, seed=args.seed)
    else:
        source = emit_c(program, with_main=args.main, seed=args.seed)
    if args.output in (None, "-"):
        sys.stdout.write(source)
    else:
        Path(args.output).write_text(source)
        print(f"wrote {args.output} ({len(source.splitlines())} lines, {len(program.commands):,} commands)",
              file=sys.stderr)
    return 0


def cmd_build(args) -> int:
    from gemmini.build import build_elf

    program = _gemmini_program(args)
    elf = build_elf(program, args.output, style=args.style, seed=args.seed)
    what = f"{len(program.commands):,} commands" if args.style == "isa" else "one call of Gemmini's library"
    print(f"wrote {elf} and {Path(elf).with_suffix('.c')} ({args.style} style, {what}; exits 0 when its output "
          "matches the embedded expectation)", file=sys.stderr)
    return 0


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
    from gemmini.run import run_program

    status = cli_targets.integer_status(args)          # --exceptions: Gemmini's types are int8/int32
    if getattr(args, "lower", False) and args.sim not in ("isa", "rtl"):
        raise FrameworkError(f"--lower runs on --sim isa or rtl only: a lowered program has no C form yet "
                             f"(--sim {args.sim} builds C)", field="--lower")
    program = _gemmini_program(args)
    name = program.name
    if args.sim == "spike":
        from gemmini.build import check_line

        d = _run_on_spike(args, program)
        d["exception_status"] = status
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
    if args.json:
        _print_json(d)
    else:
        cycles = "n/a" if d["cycles"] is None else f"{d['cycles']:,.0f}"
        util = "n/a" if d["utilization"] is None else f"{d['utilization']:.1%}"
        units = ("load", "execute", "store")
        busy = (", busy load/execute/store " + "/".join(f"{d['busy'][u]:,}" for u in units) + " cycles"
                if d.get("busy") else "")
        print(f"{name}: {'verified bit-exact' if d['verified'] else 'MISMATCH'} "
              f"({d['mismatches']} mismatches), {cycles} cycles, ideal {d['ideal_cycles']:,.0f}, "
              f"utilization {util}, {d['instructions']:,} instructions, {d['dram_bytes']:,} DRAM bytes{busy} "
              f"[{args.sim}]")
    if not d["verified"]:
        raise RunFailed(f"{name}: output differs from the NumPy reference in {d['mismatches']} elements")
    return 0


# --- argument parsing -------------------------------------------------------------------------

def _add_sched_opts(p, default_scheduler="cosa"):
    p.add_argument("--scheduler", default=default_scheduler,
                   choices=["cosa", "cosa-cold", "gemmini-default", "random", "exhaustive", "timeloop-mapper"],
                   help="cosa: the MIP started from the best baseline mapping (stated in the report); "
                        "cosa-cold: the MIP alone")
    p.add_argument("--objective", default="latency", choices=["latency", "energy", "edp", "cosa"])
    p.add_argument("--solver", default="highs", choices=["highs", "gurobi"])
    p.add_argument("--time-limit", type=float, default=30.0, help="solver time limit, seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--order-levels", choices=["outer", "all"], default="outer",
                   help="cosa: the levels whose loop order the MIP decides (all: a larger, slower model)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cosa", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("show", help="describe a workload (file, zoo name, zoo network or ONNX model)")
    p.add_argument("workload")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("arch", help="architecture commands")
    asub = p.add_subparsers(dest="arch_command", required=True)
    q = asub.add_parser("show", help="describe an architecture (preset name or YAML file)")
    q.add_argument("arch")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_arch_show)
    cli_targets.add_arch_commands(asub)

    p = sub.add_parser("evaluate", help="cost of a mapping file")
    p.add_argument("workload")
    p.add_argument("--arch", required=True)
    p.add_argument("--mapping", required=True)
    p.add_argument("--energy-table", help="per-access energies: energy_table: {level: {read, write, update}} "
                   "or Accelergy's ERT")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("schedule", help="find a schedule (CoSA MIP or a baseline)")
    p.add_argument("workload")
    p.add_argument("--arch", default="gemmini")
    p.add_argument("--dataflow", choices=["ws", "os"], default=None)
    _add_sched_opts(p)
    p.add_argument("-o", "--output", help="write the mapping YAML here")
    p.add_argument("--format", choices=["yaml", "timeloop"], default="yaml",
                   help="-o file format: ours (yaml) or Timeloop's mapping (cosa evaluate reads both)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_schedule)

    p = sub.add_parser("compare", help="compare schedulers layer by layer")
    p.add_argument("workloads", nargs="+")
    p.add_argument("--arch", default="gemmini")
    p.add_argument("--dataflow", choices=["ws", "os"], default=None)
    p.add_argument("--schedulers", default="cosa,gemmini-default,random")
    p.add_argument("--objective", default="latency", choices=["latency", "energy", "edp", "cosa"])
    p.add_argument("--time-limit", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--random-samples", type=int, default=None,
                   help="budget of the random baseline in samples (default: 10x the MIP's seconds)")
    p.add_argument("--measure", action="store_true",
                   help="CPU archs: run every schedule as C + OpenMP (verified) and show its seconds")
    p.add_argument("--csv")
    p.add_argument("--plot")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_compare)

    sub.add_parser("serve", help="serving models with model-parallel swapping: simulate | real "
                   "(cosa serve simulate --help)", add_help=False)

    p = sub.add_parser("bound", help="communication lower bound of a workload")
    p.add_argument("workload")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--arch")
    g.add_argument("--memory", help="fast-memory size, e.g. 256KiB")
    p.add_argument("--time-limit", type=float, default=30.0)
    p.add_argument("--plot", help="draw the bound curve and the schedules' traffic (PNG)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_bound)

    for name, func, helptext in (("emit", cmd_emit, "emit C code for a target"),
                                 ("build", cmd_build, "build a self-checking bare-metal RISC-V ELF"),
                                 ("run", cmd_run, "generate, run and verify on a simulator")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("target", choices=["gemmini", *(cli_targets.TARGETS if name in ("emit", "run") else ()),
                                           *(cli_randnla.DRIVERS if name == "run" else ())])
        p.add_argument("workload")
        p.add_argument("--mapping", help="mapping YAML (default: schedule with --scheduler)")
        _add_sched_opts(p)
        p.add_argument("--dataflow", choices=["ws", "os"], default="ws")
        p.add_argument("--dim", type=int, default=None, help="systolic array size (default 16)")
        cli_targets.add_options(p, name)
        p.add_argument("--scale", type=_scale, default="auto",
                       help="output scale (float32), or 'auto': about 1%% of the example outputs saturate")
        p.add_argument("--style", choices=["isa", "gemmini-h"], default="isa",
                       help="isa: our header's RoCC instructions; gemmini-h: one call of Gemmini's library")
        if name == "run":
            p.add_argument("--lower", action="store_true",
                           help="also schedule the layer's rewrites (im2col folding of thin layers, packed "
                                "groups: gemmini.lowering) and run the cheapest (--sim isa or rtl)")
        if name == "emit":
            p.add_argument("--main", action="store_true", help="add a self-checking main() with test data")
            p.add_argument("-o", "--output", default="-")
        elif name == "build":
            p.add_argument("-o", "--output", required=True, help="the ELF to write (the C source goes beside it)")
        else:
            p.add_argument("--sim", choices=["isa", "rtl", "spike", "chipyard"], default="isa",
                           help="spike: build the ELF and run it on GEMMINI_SPIKE (Spike + libgemmini); "
                                "chipyard: on a Chipyard Verilator simulator of a Rocket + Gemmini SoC")
            p.add_argument("--simulator", help="the Chipyard simulator for --sim chipyard (default: CHIPYARD_SIM)")
            p.add_argument("--json", action="store_true")
        p.set_defaults(func=func)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["serve"]:                                                  # own parser
        args = argparse.Namespace(func=lambda _: cli_serve.main(argv[1:]))
    elif argv[:1] == ["run"] and argv[1:2] and argv[1] in cli_randnla.DRIVERS:   # no WORKLOAD: own parser
        args = argparse.Namespace(func=lambda _: cli_randnla.main(argv[1:]))
    elif argv[:1] == ["run"] and argv[1:2] and cli_targets.standalone(argv[1]):  # no WORKLOAD either
        args = argparse.Namespace(func=lambda _: cli_targets.TARGETS[argv[1]].command(argv[2:]))
    else:
        args = build_parser().parse_args(argv)
    return guarded(args.func, args)


def guarded(func, args) -> int:
    """Run one command: a user error prints one line and exits 2, a failed run one line and exits 1
    (no tracebacks); every subcommand module ends in here."""
    try:
        return func(args)
    except RunFailed as exc:
        print(f"cosa: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except FrameworkError as exc:
        print(f"cosa: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # output piped into `head`
        return 0
    except FileNotFoundError as exc:
        print(f"cosa: {exc.filename or exc}: no such file", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
