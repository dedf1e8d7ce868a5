"""What every ``cosa`` subcommand shares: exit codes, name and file resolution, JSON output, the
scheduler options and the guard that turns a user error into one line."""

from __future__ import annotations

import argparse
import json
import re
import sys

from workloads import FrameworkError

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

def _workloads(sources: list[str], bits: int | None = None):
    """Every layer of each WORKLOAD (``workloads.load``: files, ``model.onnx:LAYER``, zoo names); ``bits``:
    the ``--bits`` word size for every tensor (None: the source's own)."""
    from workloads import load

    nests = []
    for src in sources:
        nests.extend(load(src, bits))
    return nests


def _workload(source: str, bits: int | None = None):
    """The only layer of WORKLOAD (``workloads.load_one``); ``bits`` as for ``_workloads``."""
    from workloads import load_one

    return load_one(source, bits)


def add_workload_opts(p) -> None:
    """``--bits``: the options of every command that reads a WORKLOAD."""
    p.add_argument("--bits", type=_word_bits, default=None, metavar="N",
                   help="word size of every tensor in bits (default: the workload's own, e.g. 32 for a float32 "
                        "ONNX model); --bits 8 prices a float model as the int8 network it would run as")


def _word_bits(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"--bits must be an integer from 1 to 64, not {text!r}")
    return value


def word_size_note(nests, arch) -> str | None:
    """One line when ``arch`` stores inputs or weights in narrower words than the workload's (a float32
    model on int8 Gemmini): its DRAM traffic is then priced at the workload's width, and ``--bits`` would
    price it as the network the arch runs.  None when the widths agree."""
    narrow = {}  # level name -> its word bits, for the levels that narrow some input or weight
    wide = set()
    for n in nests:
        for t in n.inputs:
            for lv in arch.levels:
                if lv.word_bits and t.role in lv.holds and lv.word_bits < t.bits:
                    narrow[lv.name] = lv.word_bits
                    wide.add((t.bits, t.dtype))
    if not narrow:
        return None
    bits = min(narrow.values())
    dtypes = sorted({d for _, d in wide if d})
    what = f"{'/'.join(dtypes)} model's" if dtypes else "workload's"
    widths = "/".join(str(b) for b in sorted({b for b, _ in wide}))
    return (f"note: this {what} {widths}-bit inputs and weights are priced as {widths}-bit DRAM words, but "
            f"{arch.name} stores {bits}-bit words ({', '.join(narrow)}); --bits {bits} prices it as the "
            f"{bits}-bit network it would run as")


def gemmini_soc(args) -> str:
    """The machine (``gemmini.config.SOCS``) a command's Gemmini timing describes: ``--soc``, by default
    Chipyard 1.10.0's SoC with ``--sim chipyard``, else our RTL's ("ours")."""
    return getattr(args, "soc", None) or ("chipyard-1.10" if getattr(args, "sim", None) == "chipyard" else "ours")


def gemmini_config(args):
    """The Gemmini configuration of a command: the machine ``gemmini_soc`` names, with ``--dim``."""
    from gemmini.config import soc_config

    return soc_config(gemmini_soc(args), getattr(args, "dim", None))


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


def write_text_output(output: str | None, text: str, note: str) -> None:
    """Write ``text`` to the file ``output`` (stdout for None or "-"); ``note`` goes to stderr after a file."""
    if output in (None, "-"):
        sys.stdout.write(text)
    else:
        from pathlib import Path

        Path(output).write_text(text)
        print(note, file=sys.stderr)


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


# --- help texts the subcommands share (plain text: argparse prints them as they are) ----------

JSON_HELP = "print the result as JSON"
SEED_HELP = "seed of every random choice (default 0); the same seed gives the same result"
OBJECTIVE_HELP = ("what the schedule minimizes: latency (cycles), energy (pJ), edp (cycles x pJ) or cosa "
                  "(the MIP's weighted log-domain objective of the CoSA paper; baselines use latency)")
WORKLOAD_HELP = ("a workload: a YAML file (Timeloop's problem or our short form), an ONNX model, a zoo layer "
                 "(e.g. resnet50/res2a_branch2b) or a zoo network (e.g. resnet50)")
LAYER_HELP = ("one layer: a YAML file holding one (Timeloop's problem or our short form), an ONNX model with one "
              "Conv/Gemm/MatMul node, or a zoo layer (e.g. resnet50/res2a_branch2b)")
DATAFLOW_HELP = "Gemmini dataflow: ws = weight-stationary, os = output-stationary"


def arch_help(default: str | None = None) -> str:
    """Help of an ``--arch`` option: the presets by name (``costmodel.list_presets``) or a file."""
    from costmodel import list_presets

    return (f"architecture: a preset ({', '.join(list_presets())}) or an arch YAML file (ours or "
            "CoSA/Timeloop v0.2)" + (f"; default {default}" if default else ""))


def _add_sched_opts(p, default_scheduler="cosa"):
    p.add_argument("--scheduler", default=default_scheduler,
                   choices=["cosa", "cosa-cold", "gemmini-default", "random", "exhaustive", "timeloop-mapper", "zigzag"],
                   help="cosa: the MIP started from the best baseline mapping (stated in the report); "
                        "cosa-cold: the MIP alone; gemmini-default: the tiles of Gemmini's library; random, "
                        "exhaustive: searches of the mapspace; timeloop-mapper: Timeloop's mapper (TIMELOOP_MAPPER "
                        "or PATH)")
    p.add_argument("--objective", default="latency", choices=["latency", "energy", "edp", "cosa"],
                   help=OBJECTIVE_HELP)
    p.add_argument("--solver", default="highs", choices=["highs", "gurobi"],
                   help="MIP solver: highs (default, bundled) or gurobi (needs a licence)")
    p.add_argument("--time-limit", type=float, default=30.0, help="solver time limit, seconds")
    p.add_argument("--seed", type=int, default=0, help=SEED_HELP)
    p.add_argument("--order-levels", choices=["outer", "all"], default="outer",
                   help="cosa: the levels whose loop order the MIP decides (all: a larger, slower model)")
    add_exhaustive_limit_option(p)


def add_exhaustive_limit_option(p) -> None:
    from .baselines.exhaustive import DEFAULT_LIMIT

    p.add_argument("--exhaustive-limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                   help="exhaustive: the most mappings it may enumerate; a larger mapspace is refused before "
                        "the search starts (default: %(default)s)")


def scheduler_options(args) -> dict:
    """The scheduler's own options from the command line (``cosa.scheduler.schedule``'s ``**options``)."""
    limit = getattr(args, "exhaustive_limit", None)
    if getattr(args, "scheduler", None) == "exhaustive" and limit is not None:
        return {"limit": limit}
    return {}


# --- the deadline every command has ---------------------------------------------------------------

DEADLINE_HELP = ("wall-time limit of the whole command in seconds (reading, scheduling, pricing, baselines, "
                 "runs); reaching it stops the run with one line and exit 1 (default: %(default)s)")


def add_deadline_option(parser) -> None:
    """``--deadline S`` in a parser's help (``split_deadline`` takes it out of argv before any parser runs,
    so every command, those with their own parsers included, accepts it anywhere on its line)."""
    from .deadline import DEFAULT_DEADLINE_S

    parser.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE_S, metavar="S", help=DEADLINE_HELP)


def split_deadline(argv: list[str]) -> tuple[float, list[str]]:
    """(seconds, argv without ``--deadline S`` / ``--deadline=S``); the last one given wins."""
    import math

    from .deadline import DEFAULT_DEADLINE_S

    seconds, rest, k = DEFAULT_DEADLINE_S, [], 0
    while k < len(argv):
        arg = argv[k]
        if arg == "--":  # everything after belongs to a program the command runs
            rest.extend(argv[k:])
            break
        if arg == "--deadline" or arg.startswith("--deadline="):
            if "=" in arg:
                text = arg.split("=", 1)[1]
            elif k + 1 < len(argv):
                text, k = argv[k + 1], k + 1
            else:
                raise FrameworkError("expected a number of seconds after it", field="--deadline")
            try:
                seconds = float(text)
            except ValueError:
                seconds = math.nan
            if not (math.isfinite(seconds) and seconds > 0):
                raise FrameworkError(f"expected a positive number of seconds, got {text!r}", field="--deadline")
        else:
            rest.append(arg)
        k += 1
    return seconds, rest


def guarded(func, args, deadline_s: float | None = None) -> int:
    """Run one command: a user error prints one line and exits 2, a failed run one line and exits 1
    (no tracebacks); every subcommand module ends in here.  ``deadline_s``: the command's wall-time
    limit (``cosa.deadline``); reaching it is a failed run."""
    import contextlib

    from .deadline import DeadlineExceeded, deadline

    try:
        with deadline(deadline_s) if deadline_s is not None else contextlib.nullcontext():
            return func(args)
    except DeadlineExceeded as exc:
        print(f"cosa: {exc}", file=sys.stderr)
        return EXIT_FAILED
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
