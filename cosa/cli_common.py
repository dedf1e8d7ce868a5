"""What every ``cosa`` subcommand shares: exit codes, name and file resolution, JSON output, the
scheduler options and the guard that turns a user error into one line."""

from __future__ import annotations

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


def _add_sched_opts(p, default_scheduler="cosa"):
    p.add_argument("--scheduler", default=default_scheduler,
                   choices=["cosa", "cosa-cold", "gemmini-default", "random", "exhaustive", "timeloop-mapper", "zigzag"],
                   help="cosa: the MIP started from the best baseline mapping (stated in the report); "
                        "cosa-cold: the MIP alone")
    p.add_argument("--objective", default="latency", choices=["latency", "energy", "edp", "cosa"])
    p.add_argument("--solver", default="highs", choices=["highs", "gurobi"])
    p.add_argument("--time-limit", type=float, default=30.0, help="solver time limit, seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--order-levels", choices=["outer", "all"], default="outer",
                   help="cosa: the levels whose loop order the MIP decides (all: a larger, slower model)")


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
