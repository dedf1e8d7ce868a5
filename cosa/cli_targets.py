"""``cosa emit|run <target>`` for the code-generation targets beside Gemmini, and ``cosa arch calibrate``.

A target is one entry of ``TARGETS``: how it emits source and how it runs, verifies and times a
mapping; ``cosa/cli.py`` offers every name here next to ``gemmini``.  Like ``cosa/cli.py`` this
module may import ``targets``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import Callable

from .cli_common import write_text_output


@dataclass(frozen=True)
class Target:
    """``emit(workload, mapping, arch, args) -> source text``; ``run(workload, mapping, arch, args) ->
    dict`` with the keys verified, max_abs_err, reference, seconds, gflops, threads, mapping;
    ``default_arch``: the arch when ``--arch`` is not given; ``schedule_arch(workload, arch)``: the arch
    the scheduler sees (the target's constraints added; None = ``arch``); ``schedule_nest(workload)``:
    the nest the scheduler maps and the target runs when no ``--mapping`` is given (None = ``workload``);
    ``mip_options``: options the MIP scheduler gets for this target; ``command``: a target that
    takes no WORKLOAD, ``command(argv after the target's name) -> exit code`` (``cosa run NAME ...`` goes
    straight to it); ``summary``: one line of help per command ("emit", "run")."""

    emit: Callable
    run: Callable
    default_arch: str
    suffix: str = ".c"
    schedule_arch: Callable | None = None
    schedule_nest: Callable | None = None
    mip_options: dict = field(default_factory=dict)
    command: Callable | None = None
    summary: dict = field(default_factory=dict)


def _say_if_portable() -> None:
    """``targets.cpu.build.portable_note`` on stderr, once per process."""
    global _SAID
    from targets.cpu.build import portable_note

    note = None if _SAID else portable_note()
    if note:
        _SAID = True
        print(f"cosa: {note}", file=sys.stderr)


_SAID = False  # the portable note was printed


def _cpu_emit(workload, mapping, arch, args) -> str:
    from targets.cpu import emit

    _say_if_portable()
    return emit(workload, mapping, arch)


def _cpu_run(workload, mapping, arch, args) -> dict:
    """The run's record, with ``rewrites`` where the nest that ran is the target's view of the layer
    (``targets.cpu.kernel_nest``): its dims, the dims fused and the inputs read as a strided copy."""
    from targets.cpu import run

    _say_if_portable()
    got = run(workload, mapping, arch, threads=args.threads, repeat=args.repeat, seed=args.seed,
              exceptions=args.exceptions).to_dict()
    if getattr(args, "profile", False):
        from targets.cpu.profile import profile_packs

        if any(t.density < 1.0 for t in workload.tensors):
            from workloads import FrameworkError

            raise FrameworkError("a sparse nest has no packing copies to profile", field="--profile")
        prof = profile_packs(workload, mapping, arch, threads=got["threads"], repeat=max(args.repeat, 10),
                             seed=args.seed)
        got["packing"] = {"measured": prof.measured, "model": prof.model}
    done = {k: workload.op[k] for k in ("fused_dims", "subsampled") if k in workload.op}
    if done:
        got["rewrites"] = {"dims": dict(workload.dims), **done}
    return got


def cpu_schedule_arch(workload, arch):
    """The CPU target's view of ``arch`` for ``workload``: its register file as the innermost level."""
    from targets.cpu.build import isa
    from targets.cpu.plan import arch_for

    regs = isa()
    return arch_for(workload, arch, registers=(regs.registers, regs.vector_bytes))


def _gpu_target(language: str) -> Target:
    """``cuda`` or ``opencl``: one kernel description of a mapping on a gpu arch (``targets.gpu``)."""

    def emit(workload, mapping, arch, args) -> str:
        from targets.gpu import emit

        return emit(workload, arch, mapping, language)[1]

    def run(workload, mapping, arch, args) -> dict:
        from targets.gpu import run

        return run(workload, arch, mapping, language, repeat=args.repeat, seed=args.seed,
                   exceptions=args.exceptions).to_dict()

    name = "a CUDA C" if language == "cuda" else "an OpenCL C"
    where = "nvcc and the driver API, where a GPU exists" if language == "cuda" else "pyopencl (PoCL on a CPU)"
    return Target(emit, run, "gpu", ".cu" if language == "cuda" else ".cl",
                  summary={"emit": f"{name} kernel from the mapping (gpu arch)",
                           "run": f"{name} kernel built and run through {where}, verified against NumPy"})


def _mpi_emit(workload, mapping, arch, args) -> str:
    from targets import TargetError

    raise TargetError("the mpi target runs distributed kernels and emits no source; use cosa run mpi "
                      "spmm|sddmm|fusedmm --m M --n N --r R --density D --ranks P", field="target")


def _casgd_target() -> Target:
    """``cosa run casgd``: SGD / CA-SGD for logistic regression on MPI ranks (``cosa.cli_casgd``)."""

    def command(argv):
        from .cli_casgd import main

        return main(argv)

    def nothing(*_):
        from workloads import FrameworkError

        raise FrameworkError("casgd has no source to emit: cosa run casgd --data F.svm ...", field="target")

    return Target(nothing, nothing, "cluster", command=command,
                  summary={"run": "logistic regression by SGD or s-step CA-SGD on MPI ranks"})


def _cp_target() -> Target:
    """``cosa run cp``: CP-ALS / CP-ARLS-LEV / STS-CP of a tensor (``algorithms.cp.cli``)."""

    def command(argv):
        from algorithms.cp.cli import main

        return main(argv)

    def nothing(*_):
        from workloads import FrameworkError

        raise FrameworkError("cp has no source to emit: cosa run cp --synthetic I,J,K:nnz:rank --rank R ...",
                             field="target")

    return Target(nothing, nothing, "cpu", command=command,
                  summary={"run": "CP decomposition (CP-ALS, CP-ARLS-LEV, STS-CP) of a sparse or dense tensor"})


def _mpi_command(argv) -> int:
    """``cosa run mpi spmm|sddmm|fusedmm ...``: a distributed sparse kernel (``cosa.cli_mpi``)."""
    from .cli_mpi import main

    return main(argv)


_CPU_SUMMARY = {"emit": "C + OpenMP from the mapping (cpu arch)",
                "run": "C + OpenMP built with gcc and run on this machine, verified against NumPy"}
_MPI_SUMMARY = {"run": "a distributed SpMM, SDDMM or FusedMM on MPI ranks"}

def cpu_schedule_nest(workload):
    """The CPU target's view of ``workload``: dims fused where the memory allows (``targets.cpu.kernel_nest``)."""
    from targets.cpu import kernel_nest

    return kernel_nest(workload)


TARGETS: dict[str, Target] = {"cpu": Target(_cpu_emit, _cpu_run, "cpu", schedule_arch=cpu_schedule_arch,
                                            schedule_nest=cpu_schedule_nest, mip_options={"ragged": True},
                                            summary=_CPU_SUMMARY),
                              "cuda": _gpu_target("cuda"),
                              "opencl": _gpu_target("opencl"),
                              "mpi": Target(_mpi_emit, None, "cluster", command=_mpi_command,  # cosa.cli_mpi
                                            summary=_MPI_SUMMARY),
                              "casgd": _casgd_target(),  # run: cosa.cli_casgd (its own options, no WORKLOAD)
                              "cp": _cp_target()}  # run: algorithms.cp.cli


def standalone(name: str) -> bool:
    """True for a target that takes no WORKLOAD (its ``command`` parses the rest of the line)."""
    return name in TARGETS and TARGETS[name].command is not None


def add_exceptions_option(parser) -> None:
    """``--exceptions`` of every ``cosa run`` target that takes a WORKLOAD."""
    parser.add_argument("--exceptions", default="ieee",
                        help="NaN/Inf handling (targets/exceptions.py): ieee (propagate, default) or check "
                             "(scan inputs and output; the JSON's exception_status names the argument)")


def add_target_parsers(targets, command: str, func) -> None:
    """One parser per target of ``TARGETS`` under ``cosa emit`` or ``cosa run`` (``targets``: that
    command's subparsers), with the options that target reads.  A target with its own command line
    (``Target.command``) is listed only: ``cosa run NAME`` goes to it before this parser, and
    ``cosa emit NAME`` says it has no source."""
    from .cli_common import JSON_HELP, LAYER_HELP, _add_sched_opts, add_workload_opts, arch_help

    for name, target in TARGETS.items():
        summary = target.summary.get(command, target.summary.get("run", name))
        if target.command is not None:
            if command == "run":
                targets.add_parser(name, help=f"{summary} (its own options: cosa run {name} --help)", add_help=False)
            else:
                p = targets.add_parser(name, help="(no source to emit: " + f"cosa run {name} --help)")
                p.add_argument("rest", nargs=argparse.REMAINDER, help="ignored")
                p.set_defaults(func=lambda args, t=target: t.emit(None, None, None, args))
            continue
        p = targets.add_parser(name, help=summary, description=summary)
        p.add_argument("workload", help=LAYER_HELP)
        add_workload_opts(p)
        p.add_argument("--mapping", help="mapping YAML (default: schedule with --scheduler)")
        _add_sched_opts(p)
        p.add_argument("--arch", default=None, help=arch_help(target.default_arch))
        if command == "emit":
            p.add_argument("-o", "--output", default="-", help="the source file to write (default: standard output)")
        else:
            if name == "cpu":
                p.add_argument("--threads", type=int, default=None, help="threads (default: all cores)")
                p.add_argument("--profile", action="store_true",
                               help="also build the kernel with counters and report the share of its time in "
                                    "each packing copy, beside the cost model's (targets.cpu.profile)")
            else:
                p.set_defaults(threads=None)
            p.add_argument("--repeat", type=int, default=5, help="timed runs; seconds is their median (default 5)")
            add_exceptions_option(p)
            p.add_argument("--json", action="store_true", help=JSON_HELP)
        p.set_defaults(func=func)


def _mapping(args, workload, arch, target):
    """(workload, mapping, the arch it maps onto): the ``--mapping`` file on ``arch``, else the scheduler's
    mapping of the target's view of the nest (``Target.schedule_nest``; the CPU's fuses dims) on its view
    of ``arch`` (``Target.schedule_arch``; the CPU's adds its register file)."""
    if args.mapping:
        from mappings import load_mapping

        return workload, load_mapping(args.mapping, arch, workload), arch
    from cosa.scheduler import schedule

    if target.schedule_nest is not None:
        workload = target.schedule_nest(workload)
    if target.schedule_arch is not None:
        arch = target.schedule_arch(workload, arch)
    options = target.mip_options if args.scheduler in ("cosa", "cosa-cold") else {}
    return workload, schedule(workload, arch, scheduler=args.scheduler, objective=args.objective,
                              solver=args.solver, time_limit_s=args.time_limit, seed=args.seed, bound=False,
                              **options).mapping, arch


def _setup(args):
    from costmodel import load_arch

    from .cli_common import _workload

    target = TARGETS[args.target]
    workload = _workload(args.workload, args.bits)
    arch = load_arch(args.arch or target.default_arch)
    workload, mapping, arch = _mapping(args, workload, arch, target)
    return target, workload, arch, mapping


def cmd_emit(args) -> int:
    target, workload, arch, mapping = _setup(args)
    source = target.emit(workload, mapping, arch, args)
    write_text_output(args.output, source, f"wrote {args.output} ({len(source.splitlines())} lines)")
    return 0


def cmd_run(args) -> int:
    from workloads import FrameworkError

    from .cli_common import RunFailed, _print_json

    if args.threads is not None and args.threads < 1:
        raise FrameworkError(f"must be >= 1, got {args.threads}", field="--threads")
    if args.repeat < 1:
        raise FrameworkError(f"must be >= 1, got {args.repeat}", field="--repeat")
    check_exceptions(args)
    target, workload, arch, mapping = _setup(args)
    d = target.run(workload, mapping, arch, args)
    if args.json:
        _print_json(d)
    else:
        print(f"{workload.name} on {args.target} ({arch.name}): "
              f"{'verified' if d['verified'] else 'MISMATCH'} against {d['reference']} "
              f"(max abs err {d['max_abs_err']:.3g}), {d['seconds'] * 1e3:.3f} ms, {d['gflops']:.2f} GFLOP/s, "
              f"{d['threads']} thread(s)" + (f"; exceptions: {d['exception_status']['message']}"
                                              if args.exceptions == "check" else ""))
        if "packing" in d:
            pk = d["packing"]
            per = lambda shares: ", ".join(f"{n} {100 * v:.1f}%" for n, v in shares.items())  # noqa: E731
            print(f"packing copies: {100 * sum(pk['measured'].values()):.1f}% of the time measured"
                  + (f" ({per(pk['measured'])})" if pk["measured"] else " (none packed)")
                  + (f"; the cost model: {100 * sum(pk['model'].values()):.1f}% ({per(pk['model'])})"
                     if pk["model"] else ""))
    if not d["verified"]:
        raise RunFailed(f"{workload.name}: output differs from the {d['reference']} reference "
                        f"(max abs err {d['max_abs_err']:.3g})")
    return 0


def check_exceptions(args) -> str:
    """``--exceptions``: ieee or check, else one line (exit 2) naming the option."""
    from targets.exceptions import check_mode

    return check_mode(getattr(args, "exceptions", "ieee"), field="--exceptions")


def integer_status(args) -> dict:
    """``exception_status`` of a run on integer types only (Gemmini: int8 into int32): nothing to find."""
    from targets.exceptions import ExceptionStatus

    mode = check_exceptions(args)
    return {**ExceptionStatus(mode, 0 if mode == "check" else None).to_dict(),
            "message": "integer types (int8/int32) have no NaN or Inf"}


def cmd_calibrate(args) -> int:
    from costmodel import arch_to_dict, dump_arch

    if args.kind == "cluster":  # alpha, beta (ping-pong) and gamma (local SpMM) of MPI ranks
        from targets.mpi.calibrate import calibrate as calibrate_cluster

        arch = calibrate_cluster(ranks=args.ranks, quick=args.quick)
    else:
        from targets.cpu.calibrate import calibrate

        arch = calibrate(quick=args.quick)
    text = dump_arch(arch, args.output) if args.output else dump_arch(arch)
    if args.output:
        print(f"wrote {args.output}: {arch.params}", file=sys.stderr)
    elif args.json:
        from .cli_common import _print_json

        _print_json(arch_to_dict(arch))
    else:
        sys.stdout.write(text)
    return 0


def add_arch_commands(asub) -> None:
    """``cosa arch calibrate cpu [-o cpu.yaml]``, ``cosa arch calibrate cluster --ranks 4``."""
    q = asub.add_parser("calibrate", help="measure this machine and write its arch YAML")
    q.add_argument("kind", choices=["cpu", "cluster"],
                   help="cpu: this machine's caches, cores, SIMD and bandwidths; cluster: MPI alpha, beta, gamma")
    q.add_argument("--ranks", type=int, default=4, help="cluster: MPI ranks of the ping-pong job")
    q.add_argument("-o", "--output", help="write the YAML here (default: print it)")
    q.add_argument("--quick", action="store_true", help="shorter probes")
    q.add_argument("--json", action="store_true", help="print the arch as JSON (instead of YAML)")
    q.set_defaults(func=cmd_calibrate)
