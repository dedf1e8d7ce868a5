"""``schedule``: one entry point for the CoSA MIP and the baselines."""

from __future__ import annotations

import dataclasses

from .schedule import Schedule, SchedulingError

SCHEDULERS = ("cosa", "cosa-cold", "gemmini-default", "random", "exhaustive", "timeloop-mapper", "zigzag")


def _attach_bound(result: Schedule) -> Schedule:
    """Fill ``Schedule.bound`` from ``lowerbounds.bound_for_arch`` when that package provides it.

    Only a missing package or function is tolerated; errors inside the bound
    computation propagate (they are bugs to fix, not conditions to hide).
    """
    try:
        import lowerbounds
        bound_for_arch = lowerbounds.bound_for_arch
    except (ImportError, AttributeError):
        return result
    return dataclasses.replace(result, bound=bound_for_arch(result.workload, result.arch))


def schedule(workload, arch, objective: str = "latency", solver: str = "highs", time_limit_s: float = 60.0,
             mip_gap: float = 0.001, seed: int = 0, scheduler: str = "cosa", bound: bool = True,
             **options) -> Schedule:
    """Schedule ``workload`` (a LoopNest) on ``arch`` (an Arch); the mapping is validated exactly.

    scheduler: "cosa" (the MIP; ``solver`` "highs" or "gurobi", ``time_limit_s``,
    ``mip_gap`` relative, ``seed``; options: ``weights`` (CosaWeights for
    objective "cosa"), ``order_levels`` ("outer", the default: the loop order
    is a decision at the DRAM level only, as in CoSA; "all"; or level indices),
    ``polish`` (loop-order refinement by the cost model, default True),
    ``min_utilization``, ``pad`` (a fraction: a dim may be padded by up to this much where its factors then
    fill the spatial fan-out better, ``cosa.mip.padding``; the Schedule is then of the padded layer, with
    ``extra["padded"]``: analysis only, the code generators take unpadded schedules), ``ragged`` (True: on a
    CPU arch with a register level, the vector dim may also be tiled past its bound, the last tile cut
    to it, ``cosa.mip.ragged``; the Schedule is then of the padded nest, with ``extra["ragged"]``, and the
    CPU code generator runs its mapping on the nest as written), ``warm_start``:
    default True, every solve starts from the best valid mapping known, at first a baseline's (the vendor's on a Gemmini preset); ``extra["warm_start"]`` says which
    start was used and whether the schedule returned is that start), "cosa-cold" (the MIP without a
    start: what it finds on its own), "gemmini-default" (the vendor's tiling),
    "random" (options ``samples``/``seconds``), "exhaustive" (option ``limit``), "timeloop-mapper"
    (Timeloop's mapper when a binary is available; options ``search_size``, ``binary``, ``mapspace``,
    ``workdir``: ``cosa.baselines.timeloop_mapper``), "zigzag" (ZigZag's LOMA mapper when the ``zigzag`` extra
    is installed; option ``setting``: "default" or "large": ``cosa.baselines.zigzag_mapper``).  "cosa",
    "random" and "exhaustive" also take ``tie_tolerance``: objective values within this fraction of the best
    tie and are then ranked by DRAM bytes and energy (``cosa.baselines.objective``, default 2 %); "cosa" finds
    those ties with more solves, which ``tie_breaks=False`` skips (``cosa.mip.driver.mip_schedule``).
    objective: "latency" (cycles), "energy" (pJ), "edp" (cycles * pJ), or for
    the MIP also "cosa" (CoSA's weighted log-domain objective).
    bound: attach ``lowerbounds.bound_for_arch`` as ``Schedule.bound`` (False
    skips it, e.g. when timing schedulers).
    Raises SchedulingError for unknown names, infeasible problems and
    time-outs without an incumbent.
    """
    src = f"schedule of {getattr(workload, 'name', '?')} on {getattr(arch, 'name', '?')}"
    if scheduler == "cosa-cold":  # the MIP with no start: what it finds on its own
        options = {**options, "warm_start": False}
        scheduler = "cosa"
    if scheduler == "cosa":
        from .mip import mip_schedule

        allowed = {"weights", "order_levels", "polish", "min_utilization", "warm_start", "tie_tolerance", "pad",
                   "ragged", "tie_breaks"}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise SchedulingError(f"unknown option(s) {unknown} for scheduler 'cosa'; known: {sorted(allowed)}",
                                  source=src, field="options")
        pad = options.pop("pad", None)
        if pad is not None and (isinstance(pad, bool) or not isinstance(pad, (int, float)) or not 0 <= pad <= 1):
            raise SchedulingError(f"pad must be a fraction in [0, 1] (how much a dim may grow), got {pad!r}",
                                  source=src, field="pad")
        ragged = options.pop("ragged", False)
        if not isinstance(ragged, bool) or (ragged and pad):
            raise SchedulingError(f"ragged must be True or False, and not given with pad; got {ragged!r}",
                                  source=src, field="ragged")
        mip_options = dict(objective=objective, solver=solver, time_limit_s=time_limit_s, mip_gap=mip_gap,
                           seed=seed, **options)
        if ragged:
            from .mip.ragged import ragged_schedule

            result = ragged_schedule(workload, arch, **mip_options)
        elif pad:
            from .mip.padding import padded_schedule

            result = padded_schedule(workload, arch, pad, **mip_options)
        else:
            result = mip_schedule(workload, arch, **mip_options)
    elif scheduler == "gemmini-default":
        from .baselines import gemmini_default

        _no_options(options, scheduler, src)
        result = gemmini_default(workload, arch)
    elif scheduler == "random":
        from .baselines import random_search

        allowed = {"samples", "seconds", "tie_tolerance"}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise SchedulingError(f"unknown option(s) {unknown} for scheduler 'random'; known: {sorted(allowed)}",
                                  source=src, field="options")
        result = random_search(workload, arch, seed=seed, objective=objective, **options)
    elif scheduler == "exhaustive":
        from .baselines import exhaustive

        allowed = {"limit", "tie_tolerance"}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise SchedulingError(f"unknown option(s) {unknown} for scheduler 'exhaustive'; known: {sorted(allowed)}",
                                  source=src, field="options")
        result = exhaustive(workload, arch, objective=objective, **options)
    elif scheduler == "timeloop-mapper":
        from .baselines.timeloop_mapper import timeloop_mapper

        allowed = {"search_size", "binary", "mapspace", "workdir"}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise SchedulingError(f"unknown option(s) {unknown} for scheduler 'timeloop-mapper'; known: "
                                  f"{sorted(allowed)}", source=src, field="options")
        result = timeloop_mapper(workload, arch, time_limit_s=time_limit_s, seed=seed, **options)
    elif scheduler == "zigzag":
        from .baselines.zigzag_mapper import zigzag_schedule

        unknown = sorted(set(options) - {"setting"})
        if unknown:
            raise SchedulingError(f"unknown option(s) {unknown} for scheduler 'zigzag'; known: ['setting']",
                                  source=src, field="options")
        result = zigzag_schedule(workload, arch, objective=objective, time_limit_s=time_limit_s, seed=seed,
                                 **options)
    else:
        raise SchedulingError(f"unknown scheduler '{scheduler}'; choose one of {list(SCHEDULERS)}", source=src,
                              field="scheduler")
    return _attach_bound(result) if bound else result


def _no_options(options: dict, scheduler: str, src: str) -> None:
    if options:
        raise SchedulingError(f"scheduler '{scheduler}' takes no options, got {sorted(options)}", source=src,
                              field="options")
