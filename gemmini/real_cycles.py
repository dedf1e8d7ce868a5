"""Cycles measured on Gemmini's real RTL, kept as test data, and our timing model beside them.

A recording (``tests/data/chipyard/real_cycles.json``, written from a ``bench/gemmini_chipyard.py`` run on a
Chipyard Verilator simulator) says where the cycles came from (``simulator``: Chipyard and Gemmini commits,
SoC, Verilator, memory model; ``recorded``: date, command, code), the timing-model configuration they are
compared at (``config``: fields of ``GemminiConfig``) and, per program, the layer (our short workload form),
the style (``loops``: Gemmini's library calls with the recorded tile arguments; ``vendor``: the same calls
with the library's own tiles), the cycles the program measured with rdcycle and its PASS line.

``load`` refuses a recording made at another configuration than the model's, naming the field; ``compare``
rebuilds each program's command stream (``gemmini.vendor``: the library's calls, loop instructions
included) and runs the timing model on it, so CI checks the model against the real machine without the
simulator.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, fields, replace
from pathlib import Path

from .config import DEFAULT_CONFIG, GemminiConfig
from .errors import SimulationError

STYLES = ("loops", "vendor")


@dataclass(frozen=True)
class RecordedProgram:
    """One program measured on the real RTL: ``layer`` (label), ``workload`` (a LoopNest), ``style``,
    ``tiles`` (the library call's tile arguments; None: the library's own), ``real_cycles``, ``check``."""

    layer: str
    workload: object
    style: str
    tiles: tuple | None
    real_cycles: int
    check: str


@dataclass(frozen=True)
class Recording:
    """``simulator`` / ``recorded``: provenance (dicts as stored); ``config``: the configuration the model
    runs at; ``programs``."""

    simulator: dict
    recorded: dict
    config: GemminiConfig
    programs: tuple[RecordedProgram, ...]


@dataclass(frozen=True)
class ModelError:
    """A recorded program beside the timing model: ``model_cycles``; ``error`` = (model - real) / real."""

    program: RecordedProgram
    model_cycles: float

    @property
    def error(self) -> float:
        return (self.model_cycles - self.program.real_cycles) / self.program.real_cycles


def load(path: str | Path, config: GemminiConfig | None = None) -> Recording:
    """The recording at ``path``; ``config`` (default: the recording's own fields over ``DEFAULT_CONFIG``)
    must agree with every configuration field the recording states, else SimulationError names the first
    that differs."""
    from workloads.loaders import parse_document

    src = str(path)
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise SimulationError(f"cannot read the recording: {exc}", source=src) from None
    for key in ("simulator", "recorded", "config", "programs"):
        if key not in doc:
            raise SimulationError("missing", source=src, field=key)
    known = {f.name for f in fields(GemminiConfig)}
    stated = doc["config"]
    for name in stated:
        if name not in known:
            raise SimulationError(f"not a GemminiConfig field (one of {', '.join(sorted(known))})", source=src,
                                  field=f"config.{name}")
    own = replace(DEFAULT_CONFIG, **stated)
    config = config or own
    for name, value in stated.items():
        if getattr(config, name) != value:
            raise SimulationError(f"recorded at {value!r}, the model runs at {getattr(config, name)!r}",
                                  source=src, field=f"config.{name}")
    programs = []
    for i, p in enumerate(doc["programs"]):
        where = f"programs[{i}]"
        if p.get("style") not in STYLES:
            raise SimulationError(f"style must be one of {', '.join(STYLES)}", source=src, field=f"{where}.style")
        wl = parse_document(p["workload"], p["workload"].get("name", where), f"{src}:{where}")[0]
        tiles = tuple(p["tiles"]) if p.get("tiles") else None
        programs.append(RecordedProgram(p["layer"], wl, p["style"], tiles, int(p["real_cycles"]), p.get("check", "")))
    return Recording(doc["simulator"], doc["recorded"], config, tuple(programs))


def compare(recording: Recording) -> list[ModelError]:
    """The timing model's cycles for every recorded program, at the recording's configuration."""
    from .sim.timing import timing
    from .vendor import stream
    from .vendor.calls import from_workload

    out = []
    for p in recording.programs:
        vendor = from_workload(p.workload, bias=True, relu=False)
        commands = stream(vendor, tiles=p.tiles) if p.tiles else stream(vendor)
        out.append(ModelError(p, timing(commands, recording.config).cycles))
    return out


def summary(errors: list[ModelError]) -> dict:
    """Median and largest |error| over ``errors`` and per style (fractions)."""
    def stats(sel):
        values = [abs(e.error) for e in sel]
        return {"n": len(values), "median": statistics.median(values), "max": max(values)} if values else {"n": 0}

    return {"all": stats(errors), **{s: stats([e for e in errors if e.program.style == s]) for s in STYLES}}
