"""The ``cosa`` command line.

This is the only module of ``cosa`` that may import ``gemmini``, ``targets``
and ``algorithms``.  User errors (a FrameworkError) print one line and exit 2;
a run that fails (time-out without a schedule, a simulation mismatch) exits 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workloads import FrameworkError

from . import cli_gemmini, cli_network, cli_randnla, cli_serve, cli_targets
from .cli_common import (DATAFLOW_HELP, JSON_HELP, LAYER_HELP, OBJECTIVE_HELP, SEED_HELP, WORKLOAD_HELP, RunFailed,
                         _add_sched_opts, _arch, _console, _print_json, _workload, _workloads, arch_help, guarded)
from .cli_common import add_workload_opts, word_size_note
from .cli_common import add_deadline_option, add_exhaustive_limit_option, scheduler_options, split_deadline
from .cli_common import parse_size  # noqa: F401  (part of the command line's interface)
from .baselines.objective import TIE_TOLERANCE
from .scheduler import SCHEDULERS

# --- commands ---------------------------------------------------------------------------------

def cmd_show(args) -> int:
    nests = _workloads([args.workload], args.bits)
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
    from costmodel import describe_arch

    arch = _arch(args.arch)
    if args.json:
        _print_json(describe_arch(arch))
        return 0
    from rich.table import Table

    pes = arch.instances(len(arch.levels))
    table = Table(title=f"{arch.name}: {arch.total_macs_per_cycle:,} MACs/cycle in total ({pes:,} PEs x "
                        f"{arch.macs_per_cycle} MAC{'' if arch.macs_per_cycle == 1 else 's'}/cycle per PE)")
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

    workload = _workload(args.workload, args.bits)
    arch = _arch(args.arch)
    if args.energy_table:  # per-access energies (ours or Accelergy's ERT) replace the arch's per-byte ones
        import dataclasses

        from costmodel.energy import load_energy_table
        arch = dataclasses.replace(arch, params={**arch.params, "energy_table": load_energy_table(args.energy_table)})
    mapping = load_mapping(args.mapping, arch, workload)
    cost = evaluate(workload, arch, mapping)
    note = _note(args, [workload], arch)
    if args.json:
        _print_json({**cost.to_dict(), **({"note": note} if note else {})})
        return 0
    console = _console()
    console.print(format_loopnest(mapping, workload, arch), markup=False, highlight=False)
    _print_cost(console, cost)
    if note:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    return 0


def _note(args, nests, arch) -> str | None:
    """The word-size note (``cli_common.word_size_note``) unless ``--bits`` set the words."""
    return None if args.bits is not None else word_size_note(nests, arch)


def _print_cost(console, cost) -> None:
    d = cost.to_dict()
    console.print(f"cycles {d['cycles']:,.0f}  energy {d['energy_pj'] / 1e6:,.3f} uJ  "
                  f"utilization {d['utilization']:.1%}  DRAM {cost.dram_bytes:,.0f} B  bound by {d.get('bound_by', '?')}")


def _schedule_one(workload, arch, args):
    from cosa.scheduler import schedule

    extra = {"order_levels": args.order_levels} if getattr(args, "order_levels", "outer") != "outer" else {}
    extra.update(scheduler_options(args))
    if getattr(args, "pad", None) is not None:
        if args.scheduler not in ("cosa", "cosa-cold"):
            from cosa.schedule import SchedulingError

            raise SchedulingError(f"--pad is an option of the cosa scheduler, not of {args.scheduler}",
                                  source="cosa schedule", field="pad")
        extra["pad"] = args.pad
    if getattr(args, "no_tie_breaks", False):
        if args.scheduler not in ("cosa", "cosa-cold"):
            from cosa.schedule import SchedulingError

            raise SchedulingError(f"--no-tie-breaks is an option of the cosa scheduler, not of {args.scheduler}",
                                  source="cosa schedule", field="no-tie-breaks")
        extra["tie_breaks"] = False
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
    padded = sched.extra.get("padded") or {}
    real = sched.workload.with_dims(**{d: b for d, (b, _) in padded.items()}) if padded else sched.workload
    out["workload"] = real.name
    roof = roofline(real, sched.arch)
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

    workload = _workload(args.workload, args.bits)
    arch = _arch(args.arch, args.dataflow)
    sched = _schedule_one(workload, arch, args)
    note = _note(args, [workload], arch)
    if args.output:
        if args.format == "timeloop":  # Timeloop's mapping format, for timeloop-model ARCH PROBLEM F.yaml
            from mappings import dump_timeloop
            Path(args.output).write_text(dump_timeloop(sched.mapping, sched.workload, sched.arch))
        else:
            Path(args.output).write_text(dump_mapping(sched.mapping, sched.arch))
    loops = _loops_program(workload, arch, args)
    if args.json:
        _print_json({**schedule_to_dict(sched), **({"loops": loops} if loops else {}), **({"note": note} if note else {})})
        return 0
    from rich.markup import escape

    console = _console()
    s = sched.stats
    console.print(f"[bold]{workload.name}[/] on [bold]{arch.name}[/] by {sched.scheduler} "
                  f"({s.solver}, {s.total_s:.2f} s): {escape(sched.claim())}")
    console.print(format_loopnest(sched.mapping, sched.workload, sched.arch), markup=False, highlight=False)
    if sched.extra.get("padded"):
        console.print("padded: " + ", ".join(f"{d} {b} -> {p}" for d, (b, p) in sched.extra["padded"].items())
                      + " (extra iterations on idle units)", markup=False, highlight=False)
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
    if loops and "error" in loops:
        console.print(f"loops program: {loops['error']}", markup=False, highlight=False)
    elif loops:
        console.print(f"loops program (as `cosa run gemmini` runs it): tiles "
                      f"{tuple(loops['tiles'])} chosen in {loops['tile_seconds']:.2f} s, {loops['model_cycles']:,.0f} "
                      f"cycles in the loop-unroller model" + (f" (the library's own tiles: "
                      f"{loops['library_model_cycles']:,.0f})" if loops["library_model_cycles"] else
                      f" ({', '.join(loops['calls'])}: cosa's calls, the library's take no tiles)"),
                      markup=False, highlight=False)
    if note:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    if args.output:
        console.print(f"mapping written to {args.output}")
    return 0


def _loops_program(workload, arch, args) -> dict | None:
    """On Gemmini (WS): the loop-instruction program ``cosa run gemmini`` runs by default, its tile arguments from
    the loop-tile MIP and its cycles in the model the MIP optimises (None where the library has no tiled call
    for the layer or the arch is not Gemmini's)."""
    if not arch.name.startswith("gemmini") or (getattr(args, "dataflow", None) or "ws") != "ws":
        return None
    import time

    from cosa.mip import choose_loop_tiles
    from cosa.schedule import SchedulingError
    from costmodel.gemmini_conv_loops import ConvLayer, conv_cycles
    from costmodel.gemmini_loops import matmul_cycles
    from gemmini import GemminiConfig
    from gemmini.errors import CodegenError
    from gemmini.loop_schedule import cosa_calls, library_tiles, loop_machine, loop_problem
    from gemmini.vendor.calls import from_workload

    try:
        config = GemminiConfig.from_arch(arch)
        library = from_workload(workload)
    except (CodegenError, ValueError):
        return None
    vendor = cosa_calls(workload, library) or library
    problem = loop_problem(vendor)
    if problem is None or config.dim != 16:
        return None
    machine = loop_machine(config)
    t0 = time.perf_counter()
    try:
        tiles = tuple(choose_loop_tiles(problem, machine, time_limit_s=args.time_limit))
    except SchedulingError as exc:
        return {"style": "loops", "error": str(exc)}
    seconds = time.perf_counter() - t0
    calls = len(vendor.calls)  # one model per call (a grouped layer, the downsample rows): all the same shape
    price = (lambda t: calls * conv_cycles(problem, t, machine).cycles) if isinstance(problem, ConvLayer) else \
        (lambda t: calls * matmul_cycles(problem, t, machine).cycles)
    own = library_tiles(vendor) if vendor is library else None
    return {"style": "loops", "calls": sorted({c.fn for c in vendor.calls}), "tiles": list(tiles),
            "tile_seconds": round(seconds, 3), "model_cycles": price(tiles),
            "library_tiles": list(own) if own else None, "library_model_cycles": price(own) if own else None,
            "cycles_source": "loop-unroller model (costmodel.gemmini_loops / gemmini_conv_loops)"}


def cmd_compare(args) -> int:
    from cosa.compare import compare
    from cosa import report

    nests = _workloads(args.workloads, args.bits)
    arch = _arch(args.arch, args.dataflow)
    schedulers = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    measure, peers, view = None, None, {}
    if args.measure:
        if not arch.name.startswith("cpu"):
            raise FrameworkError(f"--measure runs the schedules with the CPU target; arch {arch.name!r} is not a "
                                 "CPU arch (--arch cpu or a file from cosa arch calibrate cpu)", field="--measure")
        measure = measure_cpu
    if "tvm" in schedulers:
        measure, peers = tvm_peers(arch, args.tvm_trials, args.seed)
        cpu = cli_targets.TARGETS["cpu"]  # our kernel as cosa run cpu schedules and builds it
        view = {"arch_view": cpu.schedule_arch, "nest_view": cpu.schedule_nest, "mip_options": cpu.mip_options}
    if args.no_tie_breaks:  # the MIP's option, beside a target's own
        view["mip_options"] = {**(view.get("mip_options") or {}), "tie_breaks": False}
    progress = None if args.quiet else ("bar" if sys.stderr.isatty() else "lines")  # both on standard error
    result = compare(nests, arch, schedulers, jobs=args.jobs, objective=args.objective,
                     time_limit_s=args.time_limit, seed=args.seed, random_samples=args.random_samples,
                     progress=progress, measure=measure, exhaustive_limit=args.exhaustive_limit, peers=peers,
                     pad=args.pad, **view)
    note = _note(args, nests, arch)
    if note:
        result.meta["note"] = note
    if args.csv:
        report.write_csv(result, args.csv)
    if args.plot:
        report.plot(result, args.plot)
    if args.json:
        _print_json(report.to_json(result))
        for line in report.failure_summary(result):  # standard output holds the JSON
            print(line, file=sys.stderr)
    else:
        report.print_table(result)  # the failure summary follows the table
        if peers:
            from cosa.compare_peers import print_measured

            print_measured(result, "tvm")
        if note:
            print(note)
    failed = [r for r in result.rows if not r.ok]
    if failed:
        counts = {name: sum(1 for r in failed if r.scheduler == name) for name in result.schedulers}
        raise RunFailed(f"compare: {len(failed)} of {len(result.rows)} runs failed ("
                        + ", ".join(f"{name} on {n} of {len(result.layers)} layers" for name, n in counts.items() if n)
                        + "); causes " + ("above and in the JSON's 'failures'" if args.json else "after the table"))
    return 0


def measure_cpu(workload, arch, mapping) -> dict:
    """``cosa compare --measure``: build the mapping as C + OpenMP, run it on every core, verify against
    NumPy, median seconds of 3 calls (``targets.cpu.run``)."""
    from targets.cpu import run

    got = run(workload, mapping, arch, repeat=3).to_dict()
    return {"seconds": got["seconds"], "verified": got["verified"], "gflops": got.get("gflops"),
            "threads": got.get("threads")}


def tvm_peers(arch, trials: int, seed: int):
    """``cosa compare --schedulers ...,tvm``: (measure, peers): every mapping (scheduled on the CPU target's
    view of the layer and the arch, fused dims and register file innermost, as ``cosa run cpu`` does: the
    caller passes ``cli_targets.TARGETS["cpu"]``'s views to ``compare``) built and run on one thread (median
    of 5 calls), and TVM's MetaSchedule tuned for ``trials`` candidates, its kernel run on the same inputs
    (``targets.cpu.tvm_peer``).  Bad input (exit 2): not a CPU arch, TVM not installed, trials < 1."""
    if not arch.name.startswith("cpu"):
        raise FrameworkError(f"scheduler 'tvm' runs on this CPU; arch {arch.name!r} is not a CPU arch (--arch cpu "
                             "or a file from cosa arch calibrate cpu)", field="--schedulers")
    if trials < 1:
        raise FrameworkError(f"--tvm-trials must be >= 1, got {trials}", field="--tvm-trials")
    from targets.cpu import tvm_peer

    tvm_peer.require_tvm("compare")

    def tvm(workload) -> dict:
        return tvm_peer.measure(workload, trials=trials, seed=seed).to_dict()

    return measure_cpu_one_thread, {"tvm": tvm}


def measure_cpu_one_thread(workload, arch, mapping) -> dict:
    """Beside TVM: the mapping as C + OpenMP on one thread, verified, median seconds of 5 calls."""
    from targets.cpu import run

    got = run(workload, mapping, arch, threads=1, repeat=5).to_dict()
    return {"seconds": got["seconds"], "verified": got["verified"], "gflops": got.get("gflops"), "threads": 1,
            "levels": [lv.name for lv in arch.levels]}


def cmd_bound(args) -> int:
    from lowerbounds import bound, bound_for_arch

    workload = _workload(args.workload, args.bits)
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
    note = _note(args, [workload], arch) if arch is not None else None
    if args.json:
        _print_json({**rep.to_dict(), **({"note": note} if note else {})})
        return 0
    console = _console()
    _print_bound(console, workload, rep.to_dict())
    if note:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    return 0


def _print_bound(console, workload, d: dict) -> None:
    """``cosa bound``'s text: the bounds (words and bytes, the binding one marked) and, per loop
    dimension, its bound, the tile that attains the LP bound and the LP's exponent."""
    from rich.table import Table

    fmt = lambda v, spec=",.0f": "n/a" if v is None else format(v, spec)  # None: unbounded or no finite value
    memory = d.get("memory_bytes")
    where = "unbounded fast memory" if memory is None else f"fast memory of {memory:,.0f} B"
    console.print(f"[bold]{workload.name}[/]: {where}; s_HBL = {fmt(d['s_hbl'], '.4g')}, "
                  f"khat = {fmt(d['khat'], '.4g')}, {d['iterations']:,} iterations")
    bounds = Table(title="DRAM traffic lower bounds")
    for col in ("bound", "words", "bytes"):
        bounds.add_column(col, justify="left" if col == "bound" else "right")
    for name, key in (("tile LP", "lp"), ("HBL", "hbl"), ("compulsory", "compulsory")):
        binding = " (binding)" if d.get("binding") == key else ""
        bounds.add_row(name + binding, fmt(d.get(f"{key}_words")), fmt(d.get(f"{key}_bytes")))
    bounds.add_row("[bold]bound[/]", fmt(d["bound_words"]), fmt(d["bound_bytes"]))
    bounds.caption = "the bound is the largest; words: every element one word"
    console.print(bounds)
    dims = Table(title="per loop dimension")
    for col in ("dim", "loop bound", "LP tile", "LP exponent"):
        dims.add_column(col, justify="left" if col == "dim" else "right")
    lambdas = d.get("lambdas") or {}
    for dim, size in workload.dims.items():
        tile = (d.get("tile") or {}).get(dim)
        dims.add_row(dim, f"{size:,}", "-" if tile is None else f"{tile:,}", fmt(lambdas.get(dim), ".3f"))
    console.print(dims)
    for note in d.get("notes") or []:
        console.print(f"note: {note}", markup=False)


# --- argument parsing -------------------------------------------------------------------------

DESCRIPTION = ("Schedule loop nests (convolutions, matmuls, tensor kernels) on accelerators and processors: "
               "the CoSA mixed-integer program and baselines, their cost, the communication lower bound, and "
               "programs generated, run and verified. 'cosa COMMAND --help' describes a command.")
EPILOG = "exit status: 0 done, 1 a run failed (e.g. a scheduler failed, a result mismatched), 2 bad input"


NO_TIE_BREAKS_HELP = (f"cosa: skip the solves that pick, among schedules within {TIE_TOLERANCE:.0%}% of the best "
                      "objective, the fewest DRAM bytes and then the least energy (most of the search time on "
                      "Eyeriss and Simba)")  # {:.0%} then "%": argparse shows "2%"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cosa", description=DESCRIPTION, epilog=EPILOG)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("show", help="describe a workload (file, zoo name, zoo network or ONNX model)")
    p.add_argument("workload", help=WORKLOAD_HELP)
    add_workload_opts(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("arch", help="architecture commands")
    asub = p.add_subparsers(dest="arch_command", required=True)
    q = asub.add_parser("show", help="describe an architecture (preset name or YAML file)")
    q.add_argument("arch", help=arch_help())
    q.add_argument("--json", action="store_true",
                   help="print the arch file's fields as JSON, with pes, macs_per_cycle_per_pe and the total "
                        "macs_per_cycle, and each level's instances")
    q.set_defaults(func=cmd_arch_show)
    cli_targets.add_arch_commands(asub)

    p = sub.add_parser("evaluate", help="cost of a mapping file")
    p.add_argument("workload", help=LAYER_HELP)
    add_workload_opts(p)
    p.add_argument("--arch", required=True, help=arch_help())
    p.add_argument("--mapping", required=True, help="the mapping: our YAML or Timeloop's mapping format")
    p.add_argument("--energy-table", help="per-access energies: energy_table: {level: {read, write, update}} "
                   "or Accelergy's ERT")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("schedule", help="find a schedule (CoSA MIP or a baseline)")
    p.add_argument("workload", help=LAYER_HELP)
    add_workload_opts(p)
    p.add_argument("--arch", default="gemmini", help=arch_help("gemmini"))
    p.add_argument("--dataflow", choices=["ws", "os"], default=None, help=DATAFLOW_HELP + "; default: the arch's")
    _add_sched_opts(p)
    p.add_argument("--pad", type=float, default=None, metavar="FRACTION",
                   help="cosa: a dim may grow by up to this fraction where its factors then fill the spatial "
                        "fan-out better (the schedule is then of the padded layer: analysis only, as ZigZag pads)")
    p.add_argument("--no-tie-breaks", action="store_true", help=NO_TIE_BREAKS_HELP)
    p.add_argument("-o", "--output", help="write the mapping YAML here")
    p.add_argument("--format", choices=["yaml", "timeloop"], default="yaml",
                   help="-o file format: ours (yaml) or Timeloop's mapping (cosa evaluate reads both)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_schedule)

    p = sub.add_parser("compare", help="compare schedulers layer by layer (exit 1 when any of them fails)",
                       description="Schedule every layer with every scheduler and print a table: a row per "
                                   "layer and scheduler, then total and geomean rows per scheduler. A progress "
                                   "bar on a terminal, a line per finished layer otherwise (standard error). "
                                   "Exit status 1 when a scheduler failed on a layer, after a summary of the "
                                   "failures by cause.")
    p.add_argument("workloads", nargs="+", help=WORKLOAD_HELP + "; several may be given")
    add_workload_opts(p)
    p.add_argument("--arch", default="gemmini", help=arch_help("gemmini"))
    p.add_argument("--dataflow", choices=["ws", "os"], default=None, help=DATAFLOW_HELP + "; default: the arch's")
    p.add_argument("--schedulers", default="cosa,gemmini-default,random",
                   help=f"comma-separated, from {', '.join(SCHEDULERS)}, tvm (default cosa,gemmini-default,random); "
                        "tvm (the tvm extra, CPU archs): TVM's MetaSchedule tunes and runs its own kernel, and "
                        "every schedule is run on one thread beside it")
    p.add_argument("--tvm-trials", type=int, default=64,
                   help="with tvm: MetaSchedule's measured candidates per layer (default 64)")
    p.add_argument("--objective", default="latency", choices=["latency", "energy", "edp", "cosa"],
                   help=OBJECTIVE_HELP)
    p.add_argument("--time-limit", type=float, default=30.0, help="solver time limit per layer, seconds (default 30)")
    p.add_argument("--seed", type=int, default=0, help=SEED_HELP)
    p.add_argument("--jobs", type=int, default=1,
                   help="layers scheduled side by side in local processes (default 1); under mpiexec the MPI "
                        "ranks are used instead")
    add_exhaustive_limit_option(p)
    p.add_argument("--pad", type=float, default=None, metavar="FRACTION",
                   help="cosa: a dim may grow by up to this fraction where its factors then fill the spatial "
                        "fan-out better (as ZigZag's mapper pads; analysis only)")
    p.add_argument("--no-tie-breaks", action="store_true", help=NO_TIE_BREAKS_HELP)
    p.add_argument("--random-samples", type=int, default=None,
                   help="budget of the random baseline in samples (default 1000; a sample budget makes "
                        "the same --seed give the same rows on every run)")
    p.add_argument("--measure", action="store_true",
                   help="CPU archs: run every schedule as C + OpenMP (verified) and show its seconds "
                        "(on every core; on one thread with tvm among the schedulers)")
    p.add_argument("--csv", metavar="FILE", help="also write the rows as CSV (one line per layer and scheduler)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also draw cycles over each layer's best as grouped bars (PNG; failed runs hatched; "
                        "long networks in panels)")
    p.add_argument("--json", action="store_true", help=JSON_HELP + " (failures under 'failures')")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or progress lines")
    p.set_defaults(func=cmd_compare)

    sub.add_parser("serve", help="serving models with model-parallel swapping: simulate | real "
                   "(cosa serve simulate --help)", add_help=False)

    p = sub.add_parser("bound", help="communication lower bound of a workload")
    p.add_argument("workload", help=LAYER_HELP)
    add_workload_opts(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--arch", help=arch_help("gemmini") + "; the bound is at the memory that DRAM feeds")
    g.add_argument("--memory", help="fast-memory size, e.g. 256KiB")
    p.add_argument("--time-limit", type=float, default=30.0,
                   help="--plot: solver time limit of the schedules drawn beside the bound, seconds")
    p.add_argument("--plot", help="draw the bound curve and the schedules' traffic (PNG)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_bound)

    cli_network.add_quantize_command(sub)
    cli_gemmini.add_commands(sub)
    _add_deadline_everywhere(ap)
    return ap


def _add_deadline_everywhere(parser) -> None:
    """``--deadline`` in the help of the top-level parser and of every subcommand below it."""
    add_deadline_option(parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases share a parser
                if not any("--deadline" in a.option_strings for a in child._actions):
                    _add_deadline_everywhere(child)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:  # --deadline S: every command's wall-time limit, taken out before any parser sees the line
        deadline_s, argv = split_deadline(argv)
    except FrameworkError as exc:
        print(f"cosa: {exc}", file=sys.stderr)
        return exc.exit_code
    if argv[:1] == ["serve"]:                                                  # own parser
        args = argparse.Namespace(func=lambda _: cli_serve.main(argv[1:]))
    elif argv[:1] == ["run"] and argv[1:2] and argv[1] in cli_randnla.DRIVERS:   # no WORKLOAD: own parser
        args = argparse.Namespace(func=lambda _: cli_randnla.main(argv[1:]))
    elif argv[:1] == ["run"] and argv[1:2] and cli_targets.standalone(argv[1]):  # no WORKLOAD either
        args = argparse.Namespace(func=lambda _: cli_targets.TARGETS[argv[1]].command(argv[2:]))
    else:
        args = build_parser().parse_args(argv)
    return guarded(args.func, args, deadline_s)


if __name__ == "__main__":
    sys.exit(main())
