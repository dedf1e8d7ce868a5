"""Compare schedulers layer by layer: one row per (layer, scheduler).

Each layer is scheduled by every requested scheduler through
``cosa.scheduler.schedule``.  The random baseline's budget is a number of
samples (``random_samples``, default ``random_search.DEFAULT_SAMPLES``), so the
same seed gives the same rows on every run; a budget of ``random_time_factor``
times the MIP's wall time is opt-in (it stops wherever the clock says, so it is
not reproducible).  Layers run
in local processes for ``jobs > 1``, or on MPI ranks through ``mpi4py.futures``
when the program runs under mpiexec with more than one rank:
``mpiexec -n N python -m mpi4py.futures -m cosa.cli compare ...`` (rank 0 runs
the program, the other N - 1 ranks schedule layers), or plainly
``mpiexec -n N python -m cosa.cli compare ...`` (every rank starts the program;
inside ``compare`` ranks 1..N-1 become workers and exit when the layers are
done, so only rank 0 prints).  Rows come back in layer order whatever rank
finished first, so the table equals the serial one (timings aside, and the
random baseline's row when an opt-in time budget rather than its sample budget ends it).

Ratios: ``ratio`` is a row's objective value over the best row of its layer
(1.0 = best; latency: cycles, energy: pJ, edp: cycles*pJ; the MIP's own
objective "cosa" compares cycles).  ``bound_ratio`` is DRAM traffic over the
communication lower bound at the level DRAM feeds, when one is available.
``cycles_over_roofline``: cycles over ``lowerbounds.roofline``.

Measurement (``measure``): a callable ``(workload, arch, mapping) -> dict``
with ``seconds`` and ``verified`` (the CLI passes ``targets.cpu``'s runner for
``--arch cpu --measure``; this module does not import targets).  Every
scheduled mapping is run once scheduling is done, one at a time in this
process (never side by side with other runs), and its measured seconds sit
beside the model's cycles (``measured_s``, ``measured_verified``).

Measured peers (``peers``, ``cosa.compare_peers``): a tool that tunes and compiles a kernel of its own
(TVM) is a callable ``(workload) -> dict``; its rows come after the schedulers' rows are measured, with
its tuning seconds and its kernel's measured seconds and no cost-model figures.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import replace

from workloads import FrameworkError, LoopNest

from .baselines.objective import objective_value
from .compare_peers import PEERS, add_peer_rows
from .compare_progress import Progress, progress_form
from .compare_rows import CompareResult, CompareRow
from .schedule import SchedulingError

RANDOM_TIME_FACTOR = 10.0
"""A time-matched random baseline (opt-in, not reproducible) gets this many times the MIP's wall time."""

_MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE")


# --- one layer ------------------------------------------------------------------------------------

def _run(workload: LoopNest, arch, name: str, objective: str, time_limit_s: float | None, seed: int,
         random_seconds: float | None, random_samples: int | None, exhaustive_limit: int | None = None,
         pad: float | None = None, mip_options: dict | None = None):
    """One scheduler through ``cosa.scheduler.schedule``.  Baselines take the MIP's own
    objective "cosa" as latency; the random and exhaustive baselines get their budgets when given;
    the MIP gets ``mip_options`` too (a target's own: the CPU's ragged last tiles)."""
    from .scheduler import schedule

    options = {}
    if name == "exhaustive" and exhaustive_limit is not None:
        options["limit"] = exhaustive_limit
    if time_limit_s is not None:
        options["time_limit_s"] = time_limit_s
    if name == "random" and random_seconds:
        options["seconds"] = random_seconds
    if name == "random" and random_samples:
        options["samples"] = random_samples
    if name in ("cosa", "cosa-cold") and pad:
        options["pad"] = pad
    if name in ("cosa", "cosa-cold"):
        options.update(mip_options or {})
    if objective == "cosa" and name not in ("cosa", "cosa-cold"):
        objective = "latency"
    return schedule(workload, arch, scheduler=name, objective=objective, seed=seed, **options)


def _bound_bytes(workload: LoopNest, arch, schedules) -> float | None:
    """The lower bound on DRAM traffic in bytes: from a schedule's report, else computed here."""
    for s in schedules:
        if getattr(s, "bound", None) is not None:
            value = s.bound.to_dict().get("bound_bytes")
            if value:
                return float(value)
    try:
        from lowerbounds import bound_for_arch
    except ImportError:
        return None
    try:
        value = bound_for_arch(workload, arch).to_dict().get("bound_bytes")
    except FrameworkError:
        return None
    return float(value) if value else None


def _repeat_safe_name(workload: LoopNest, seen: dict[str, int]) -> str:
    n = seen.get(workload.name, 0)
    seen[workload.name] = n + 1
    return workload.name if n == 0 else f"{workload.name}#{n + 1}"


def schedule_layer(workload: LoopNest, arch, schedulers: tuple[str, ...], objective: str = "latency",
                   time_limit_s: float | None = None, seed: int = 0,
                   random_time_factor: float | None = None, layer: str | None = None,
                   random_samples: int | None = None, keep_mapping: bool = False,
                   exhaustive_limit: int | None = None, pad: float | None = None,
                   mip_options: dict | None = None, on_done=None) -> list[CompareRow]:
    """Run every scheduler on one layer; failures become rows with ``error`` set (never raised).
    ``on_done(name, ok)``: called as each scheduler finishes (progress in this process).

    The random baseline's budget: ``random_samples`` samples (the random baseline's default
    sample count when None): the same seed draws the same mappings on every run and in every
    process.  ``random_time_factor`` (opt-in) also stops it after that many times the MIP's
    seconds when "cosa" ran on the layer (whichever ends first; not reproducible)."""
    layer = layer or workload.name
    order = sorted(schedulers, key=lambda s: s != "cosa")  # the MIP first: it sets the random budget
    results: dict[str, tuple] = {}
    mip_seconds = None
    for name in order:
        random_seconds = (random_time_factor * mip_seconds
                          if name == "random" and mip_seconds and random_time_factor else None)
        start = time.perf_counter()
        try:
            sched = _run(workload, arch, name, objective, time_limit_s, seed, random_seconds, random_samples,
                         exhaustive_limit, pad, mip_options)
            # time to solution: the scheduler's own build + solve time (the bound report is not part of it)
            seconds = sched.stats.total_s or (time.perf_counter() - start)
            results[name] = (sched, seconds, None)
            if name == "cosa":
                mip_seconds = seconds
        except FrameworkError as err:
            results[name] = (None, time.perf_counter() - start, str(err))
        if on_done is not None:
            on_done(name, results[name][0] is not None)
    done = [s for s, _, _ in results.values() if s is not None]
    bound = _bound_bytes(workload, arch, done) if done else None
    from lowerbounds import roofline  # here: importing lowerbounds loads SciPy's optimizers

    roof = roofline(workload, arch).cycles
    rows = []
    for name in schedulers:
        sched, seconds, error = results[name]
        if sched is None:
            rows.append(CompareRow(layer, name, workload.repeat, workload.macs, seconds=seconds,
                                   status="failed", error=error))
            continue
        cost = sched.cost
        extra = dict(sched.extra or {})
        extra["solver"] = sched.stats.to_dict()
        if "zigzag" in schedulers and name != "zigzag":  # every other mapping priced by ZigZag's model beside it
            from .baselines.zigzag_mapper import zigzag_price_extra

            extra.update(zigzag_price_extra(sched.workload, sched.arch, sched.mapping))
        if keep_mapping:  # taken out again by ``compare`` once measured
            extra["_mapping"] = sched.mapping
        rows.append(CompareRow(
            layer, name, workload.repeat, workload.macs, cycles=float(cost.cycles), energy_pj=float(cost.energy_pj),
            utilization=float(cost.utilization), dram_bytes=float(cost.dram_bytes), seconds=seconds,
            objective_value=objective_value(cost, objective), bound_bytes=bound,
            bound_ratio=float(cost.dram_bytes) / bound if bound else None, roofline_cycles=roof,
            cycles_over_roofline=float(cost.cycles) / roof if roof else None, status=sched.stats.status,
            extra=extra, claim=sched.claim()))
    best = min((r.objective_value for r in rows if r.ok), default=None)
    return [_checked_claim(replace(r, ratio=r.objective_value / best) if r.ok and best else r, rows, objective)
            for r in rows]


def _checked_claim(row: CompareRow, rows: list[CompareRow], objective: str) -> CompareRow:
    """``row`` whose claim of optimality is qualified where another scheduler's schedule of the layer is better
    in the cost model (the MIP is optimal in its linearised model, exhaustive search in its mapspace only)."""
    if not row.ok or not row.claim.startswith("optimal"):
        return row
    better = sorted((r for r in rows if r.ok and r.objective_value < row.objective_value), key=lambda r: r.objective_value)
    if not better:
        return row
    what = "cycles" if objective in ("latency", "cosa") else objective
    beaten = ", ".join(f"{r.scheduler} {1 - r.objective_value / row.objective_value:.1%}" for r in better)
    return replace(row, claim=f"{row.claim}; not optimal in the cost model, where {beaten} lower {what}")


# --- executors ------------------------------------------------------------------------------------

def _measured(row: CompareRow, workload: LoopNest, arch, measure) -> CompareRow:
    """``row`` with its mapping run by ``measure`` (seconds and verification; an error is noted, not raised)."""
    extra = dict(row.extra)
    mapping = extra.pop("_mapping", None)
    if not row.ok or mapping is None:
        return replace(row, extra=extra)
    try:
        got = measure(workload, arch, mapping)
    except FrameworkError as err:
        extra["measure_error"] = str(err)
        return replace(row, extra=extra)
    extra["measured"] = {k: v for k, v in got.items() if k not in ("seconds", "verified")}
    return replace(row, measured_s=float(got["seconds"]), measured_verified=bool(got["verified"]), extra=extra)


def under_mpi() -> bool:
    """True when running under mpiexec with more than one rank and mpi4py importable.

    ``COSA_MPI=1`` forces the MPI executor (``0`` forbids it); otherwise the
    launcher's environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, ...) must say more
    than one rank before mpi4py is even imported.
    """
    forced = os.environ.get("COSA_MPI", "").strip().lower()
    if forced in ("0", "false", "no"):
        return False
    if forced not in ("1", "true", "yes"):
        sizes = []
        for var in _MPI_ENV:
            try:
                sizes.append(int(os.environ.get(var, "1")))
            except ValueError:
                continue
        if max(sizes, default=1) <= 1:
            return False
    try:
        from mpi4py import MPI
    except ImportError:
        return False
    return forced in ("1", "true", "yes") or MPI.COMM_WORLD.Get_size() > 1


def _mpi_executor():
    """The MPI pool's context manager: at rank 0 it gives an executor over the other ranks, at
    those ranks it serves layers until rank 0 is done and then gives None.

    ``MPICommExecutor`` covers both launches: under ``python -m mpi4py.futures`` (only rank 0
    runs this code; it uses the shared pool of the other ranks) and under plain mpiexec (every
    rank runs this code; COMM_WORLD is split into rank 0 and its workers).
    """
    from mpi4py import MPI
    from mpi4py.futures import MPICommExecutor

    return MPICommExecutor(MPI.COMM_WORLD, root=0)


def _run_pool(executor: Executor, layer_args, layers, report) -> dict[int, list[CompareRow]]:
    """Submit every layer, collect the rows by layer index (completion order does not matter)."""
    from concurrent.futures import as_completed

    per_layer: dict[int, list[CompareRow]] = {}
    futures = {executor.submit(schedule_layer, *layer_args(k)): k for k in range(len(layers))}
    for fut in as_completed(futures):
        k = futures[fut]
        per_layer[k] = fut.result()
        if report is not None:
            report.layer_started(k)
            report.layer_done(k, per_layer[k])
    return per_layer


def _stop_workers(executor: ProcessPoolExecutor) -> None:
    """Kill the pool's worker processes now (shutdown alone waits for the layers they are scheduling)."""
    terminate = getattr(executor, "terminate_workers", None)  # Python >= 3.14
    if terminate is not None:
        terminate()
        return
    for proc in list((getattr(executor, "_processes", None) or {}).values()):
        proc.kill()


def _resolve(workloads, arch):
    nests = []
    for w in workloads:
        if isinstance(w, LoopNest):
            nests.append(w)
        else:
            from workloads import load

            nests.extend(load(w))
    if isinstance(arch, str):
        from costmodel import load_arch

        arch = load_arch(arch)
    return nests, arch


def compare(workloads, arch, schedulers=("cosa", "gemmini-default", "random"), jobs: int = 1,
            objective: str = "latency", time_limit_s: float | None = None, progress: bool | None = None,
            seed: int = 0, random_time_factor: float | None = None,
            random_samples: int | None = None, measure=None, exhaustive_limit: int | None = None,
            peers: dict | None = None, arch_view=None, pad: float | None = None, nest_view=None,
            mip_options: dict | None = None) -> CompareResult:
    """Schedule every layer with every scheduler and collect the rows.

    ``workloads``: LoopNests, or sources ``workloads.load`` understands (files,
    zoo names, networks, ONNX).  ``arch``: an Arch or a preset name / YAML file.
    ``progress``: "bar" (or True): rich bars on standard error, one for the layers and one per
    scheduler; "lines": a line per finished layer on standard error; False: nothing; None (the
    default): "bar" when standard error is a terminal, else nothing (``cosa.compare_progress``).
    ``random_time_factor``, ``random_samples``: the random baseline's budget (see ``schedule_layer``).
    ``exhaustive_limit``: the most mappings the exhaustive baseline may enumerate (None: its default).
    ``pad``: the MIP's ``pad`` option (``cosa.mip.padding``; analysis only: refused with ``measure``).
    ``measure``: run every scheduled mapping and record its seconds (see the module docstring).
    ``peers``: name -> callable for the measured peers among ``schedulers`` (``cosa.compare_peers``: TVM).
    ``arch_view``: ``(workload, arch) -> arch`` each layer is scheduled (and measured) on instead of ``arch``
    (beside TVM the command line passes the CPU target's view, which adds the register file, as ``cosa run
    cpu`` schedules); the result keeps ``arch``'s name.  ``nest_view``: ``workload -> workload`` each layer is
    scheduled and measured as (the CPU target's fused dims, which read the same memory in the same order);
    the rows keep the layer's name and MACs and the peers get the layer as given.  ``mip_options``: options
    the MIP schedulers get (the CPU target's ragged last tiles).
    ``jobs``: local processes; ignored under mpiexec with more than one rank, where the layers go
    to the MPI ranks (see the module docstring; under a plain mpiexec launch the worker ranks
    leave through ``SystemExit(0)`` once the layers are done, and only rank 0 returns).
    """
    schedulers = tuple(schedulers)
    src = "compare"
    if not schedulers:
        raise SchedulingError("no schedulers given", source=src, field="schedulers")
    from .scheduler import SCHEDULERS

    unknown = [s for s in schedulers if s not in SCHEDULERS + PEERS]
    if unknown:
        raise SchedulingError(f"unknown scheduler(s) {unknown}; choose from {list(SCHEDULERS + PEERS)}", source=src,
                              field="schedulers")
    peers = dict(peers or {})
    for name in schedulers:
        if name in PEERS and name not in peers:
            raise SchedulingError(f"'{name}' tunes and runs a kernel of its own: it needs a CPU arch (--arch cpu)",
                                  source=src, field="schedulers")
    mapped = tuple(s for s in schedulers if s not in PEERS)  # the schedulers that give a mapping
    if "zigzag" in schedulers:  # a missing optional peer is bad input (exit 2), not a failed row per layer
        from .baselines.zigzag_mapper import require_zigzag

        require_zigzag(src)
    if len(set(schedulers)) != len(schedulers):
        raise SchedulingError(f"schedulers repeat: {list(schedulers)}", source=src, field="schedulers")
    if pad is not None and measure is not None:
        raise SchedulingError("a padded schedule is for analysis: --pad and --measure do not go together",
                              source=src, field="pad")
    if not isinstance(jobs, int) or jobs < 1:
        raise SchedulingError(f"jobs must be a positive integer, got {jobs!r}", source=src, field="jobs")
    nests, arch = _resolve(workloads, arch)
    views = [nest_view(w) if nest_view is not None else w for w in nests]  # what our schedulers map and run
    arches = [arch_view(v, arch) if arch_view is not None else arch for v in views]
    if not nests:
        raise SchedulingError("no workloads given", source=src, field="workloads")
    seen: dict[str, int] = {}
    layers = [_repeat_safe_name(w, seen) for w in nests]
    form = progress_form(("bar" if sys.stderr.isatty() else None) if progress is None else progress)
    start = time.perf_counter()
    # under MPI every launch goes through the pool, even for one layer: worker ranks must not go on
    mode = "mpi" if under_mpi() else ("processes" if jobs > 1 and len(nests) > 1 else "serial")
    per_layer: dict[int, list[CompareRow]] = {}
    mpi_workers = None
    worker_rank = False
    if mode == "mpi":
        from mpi4py import MPI

        form = form if MPI.COMM_WORLD.Get_rank() == 0 else None  # one report, at the rank that reports
    report = Progress(form, layers, mapped) if form else None
    try:
        if report is not None:
            report.start()
        args = lambda k: (views[k], arches[k], mapped, objective, time_limit_s, seed, random_time_factor, layers[k],
                          random_samples, measure is not None, exhaustive_limit, pad, mip_options)
        if mode == "serial":
            for k in range(len(nests)):
                done = None
                if report is not None:
                    report.layer_started(k)
                    done = lambda name, ok, k=k: report.scheduler_done(k, name, ok)
                per_layer[k] = schedule_layer(*args(k), on_done=done)
                if report is not None:
                    report.layer_done(k, per_layer[k])
        elif mode == "mpi":
            with _mpi_executor() as executor:
                if executor is not None:
                    # both launches: every other rank works (None: workers spawned, COSA_MPI=1 without mpiexec)
                    mpi_workers = MPI.COMM_WORLD.Get_size() - 1 or None
                    per_layer = _run_pool(executor, args, layers, report)
            worker_rank = executor is None
        else:
            executor = ProcessPoolExecutor(max_workers=jobs)
            try:
                per_layer = _run_pool(executor, args, layers, report)
            except BaseException:  # the deadline or Ctrl-C: stop the workers, do not wait for their layers
                _stop_workers(executor)
                raise
            finally:
                executor.shutdown(wait=True, cancel_futures=True)
    finally:
        if report is not None:
            report.stop()
    if worker_rank:
        # a worker rank of a plain mpiexec launch: rank 0 has the rows and reports them
        raise SystemExit(0)
    rows = tuple(r for k in range(len(nests)) for r in per_layer[k])
    if measure is not None:
        rows = tuple(_measured(r, views[layers.index(r.layer)], arches[layers.index(r.layer)], measure) for r in rows)
    if mapped != schedulers:
        rows = add_peer_rows(rows, nests, layers, schedulers, peers, progress=form is not None)
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "seed": seed, "jobs": jobs, "executor": mode, "mpi_workers": mpi_workers, "time_limit_s": time_limit_s,
        "random_time_factor": random_time_factor, "random_samples": random_samples, "wall_s": time.perf_counter() - start,
    }
    return CompareResult(rows, tuple(layers), schedulers, getattr(arch, "name", str(arch)), objective, meta)
