"""Timeloop's own mapper as a scheduler: ``timeloop-mapper`` run on the layer and arch, its best mapping read
back, validated and priced by our cost model.

The binary: the ``binary`` argument, else ``TIMELOOP_MAPPER``, else ``timeloop-mapper`` on PATH (it is not
part of this project).  The arch must have been read from a Timeloop/CoSA YAML file (the mapper reads that
file); the mapspace is CoSA's (each level keeps the tensors it may hold: ``mappings.timeloop
.mapspace_constraints``) unless a Timeloop mapspace file is given.  The search: random-pruned, stopped
after ``search_size`` valid mappings (default: 100 per second of ``time_limit_s``), within ``time_limit_s``
plus a minute of slack.  ``extra``: Timeloop's own cycles and energy for the mapping, its seconds, the
search size.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..schedule import Schedule, SchedulingError, SolverStats


def find_mapper(binary: str | None = None) -> str | None:
    """The timeloop-mapper binary to use, or None."""
    return binary or os.environ.get("TIMELOOP_MAPPER") or shutil.which("timeloop-mapper")


def timeloop_mapper(workload, arch, time_limit_s: float = 60.0, seed: int = 0, search_size: int | None = None,
                    binary: str | None = None, mapspace: str | None = None, workdir: str | None = None) -> Schedule:
    """Run timeloop-mapper on ``workload`` and ``arch`` and return its best mapping as a Schedule.

    ``seed`` is recorded only: timeloop-mapper's random-pruned search takes no seed from us."""
    from costmodel import evaluate
    from mappings import validate
    from mappings.timeloop import TimeloopRunError, run_timeloop_mapper

    src = f"timeloop-mapper on {workload.name}"
    found = find_mapper(binary)
    if not found:
        raise SchedulingError("no timeloop-mapper: set TIMELOOP_MAPPER to the binary or put it on PATH",
                              source=src, field="scheduler")
    params = arch.params or {}
    arch_file = Path(str(arch.source))
    if not str(params.get("format", "")).startswith("timeloop") or not arch_file.is_file():
        raise SchedulingError(f"arch {arch.name} was not read from a Timeloop/CoSA YAML file, which the mapper "
                              "needs (--arch FILE.yaml)", source=src, field="arch")
    size = int(search_size or max(100, 100 * time_limit_s))
    work = Path(workdir or tempfile.mkdtemp(prefix="cosa-timeloop-mapper-"))
    try:
        mapping, stats, seconds = run_timeloop_mapper(found, arch_file, workload, arch, work, size,
                                                      timeout_s=float(time_limit_s) + 60.0, mapspace_file=mapspace)
    except TimeloopRunError as err:
        raise SchedulingError(str(err), source=src, field="scheduler", exit_code=1) from None
    validate(mapping, workload, arch)
    cost = evaluate(workload, arch, mapping)
    stats_ = SolverStats(solver="timeloop-mapper", status="ok", solve_s=seconds, evaluated=size, seed=seed)
    extra = {"timeloop_cycles": stats.get("cycles"), "timeloop_energy_pj": stats.get("energy_pj"),
             "mapper_s": seconds, "search_size": size, "workdir": str(work)}
    return Schedule(workload, arch, mapping, cost, "timeloop-mapper", stats_, extra)
