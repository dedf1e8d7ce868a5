"""Schedules kept on disk: a process that needs the mapping of a (workload, arch, options) that any
process solved before reads it instead of solving the MIP again.

``cached_mapping(workload, arch, **options)`` -> ``Mapping``: ``cosa.schedule(workload, arch,
bound=False, **options).mapping``, stored as JSON under ``schedules`` in the framework's cache
(``workloads.cachedir``).  The entry's name is the SHA-256 of

* the workload's description (dims, repeat, every tensor's indices, role, bits, dtype, density and
  shape, and the builder's ``op`` record; not its name, which does not change the schedule),
* the arch (``costmodel.arch_to_dict``: levels, capacities, bandwidths, fan-outs, spatial axes),
* the options (scheduler, objective, solver, time limit, gap, seed, and the rest), and
* the scheduler's code (the sources of ``cosa.mip``, ``cosa.baselines``, ``cosa.scheduler`` and
  ``cosa.schedule``, and of ``costmodel``, ``mappings`` and ``workloads``, which they read), so an
  edited scheduler or cost model solves again instead of returning an old answer (an edit elsewhere,
  e.g. to the command line, keeps the entries).

A stored mapping is validated against the workload and arch when read; an unreadable or invalid entry is
solved again and replaced.  Processes that want one entry at once (MPI ranks) take a lock on it: the first
solves, the others wait and read its answer; writes are atomic (``write_atomic``), so a reader never sees
a partial file.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import time
from pathlib import Path

from workloads.cachedir import cache_dir, write_atomic

from .schedule import SchedulingError

_CODE = ("cosa/mip", "cosa/baselines", "cosa/scheduler.py", "cosa/schedule.py", "costmodel", "mappings", "workloads")


def workload_doc(workload) -> dict:
    """What decides a workload's schedule, as plain JSON data (see the module docstring)."""
    return {
        "dims": dict(workload.dims),
        "repeat": workload.repeat,
        "tensors": [{"name": t.name, "indices": [str(e) for e in t.indices], "role": t.role, "bits": t.bits,
                     "dtype": t.dtype, "density": float(t.density),
                     "shape": list(t.shape) if t.shape is not None else None} for t in workload.tensors],
        "op": workload.op,
    }


@functools.lru_cache(maxsize=None)
def code_hash() -> str:
    """SHA-256 of the scheduler's sources (the files and packages in ``_CODE``, in sorted order)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for part in _CODE:
        where = root / part
        for path in sorted(where.rglob("*.py")) if where.is_dir() else [where]:
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def schedule_key(workload, arch, options: dict) -> str:
    """The entry name of a schedule: 32 hex digits of the SHA-256 of its description."""
    from costmodel import arch_to_dict

    doc = {"workload": workload_doc(workload), "arch": arch_to_dict(arch), "options": options, "code": code_hash()}
    text = json.dumps(doc, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def entry_path(workload, arch, **options) -> Path:
    """Where the schedule of (workload, arch, options) is stored."""
    return cache_dir("schedules") / f"{schedule_key(workload, arch, options)}.json"


def cached_mapping(workload, arch, **options):
    """The mapping ``cosa.schedule(workload, arch, bound=False, **options)`` returns, solved once for all
    processes (see the module docstring).  ``options`` must be JSON-able (weights objects are not)."""
    from mappings import mapping_to_dict

    from .scheduler import schedule

    path = entry_path(workload, arch, **options)
    found = _read(path, workload, arch)
    if found is not None:
        return found
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process solves; the others wait (at most the solve's time limit)
        found = _read(path, workload, arch)
        if found is not None:
            return found
        t0 = time.perf_counter()
        result = schedule(workload, arch, bound=False, **options)
        doc = {"mapping": mapping_to_dict(result.mapping, arch), "workload": workload.name, "arch": arch.name,
               "options": options, "solve_s": time.perf_counter() - t0}
        write_atomic(path, json.dumps(doc, sort_keys=True, default=repr))
    return result.mapping


def _read(path: Path, workload, arch):
    """The valid mapping stored at ``path``, or None (missing, unreadable or invalid)."""
    from mappings import mapping_from_dict, validate
    from mappings.mapping import MappingError

    if not path.exists():
        return None
    try:
        mapping = mapping_from_dict(json.loads(path.read_text())["mapping"], arch, source=str(path))
        validate(mapping, workload, arch)
        return mapping
    except (MappingError, SchedulingError, ValueError, KeyError, TypeError):
        return None
