"""Which form of a layer to run: the layer as written or one of its rewrites (``codegen.lowering``).

``schedule(workload, arch, run_scheduler)`` schedules the layer and each rewrite and keeps the cheapest
whose tiles the generator can place (``fits``); a rewrite's image copy (``lowering.prologue``) is priced
on the timing model (``prologue_cycles``).  This module sits above both the rewrites and the generator
(``codegen.program``), which it calls; neither of them imports it.
"""

from __future__ import annotations

from .lowering import lowering_of, lowerings, prologue
from .program import Buffer, _config_of, choose_plan, expand
from .tiling import problem_of
from ..errors import CodegenError
from ..sim.timing import timing


def prologue_cycles(workload, config) -> float:
    """Cycles of ``prologue`` on the timing model (0 without one): what the image copy adds to the layer,
    which the cost model of the lowered nest does not see."""
    statements = prologue(workload, config)
    if not statements:
        return 0.0
    buffers, pos = {}, 0
    for name, (shape, dtype) in problem_of(workload).buffer_shapes().items():
        buffers[name] = Buffer(pos, tuple(shape), dtype)
        pos += -(-buffers[name].nbytes // 64) * 64
    return float(timing(expand(tuple(statements), buffers, config), config).cycles)


# --- scheduling ------------------------------------------------------------------------------------------


def fits(workload, mapping, arch) -> bool:
    """Whether the Gemmini generator can place ``mapping``'s tiles (scratchpad, accumulator, block strides)."""
    config, _, flow = _config_of(arch, None)
    try:
        choose_plan(problem_of(workload), mapping, config, flow, source=f"lowering {workload.name}",
                    double_buffer=bool(getattr(arch.levels[1], "double_buffered", False)),
                    acc_double_buffer=bool(getattr(arch.levels[2], "double_buffered", False)))
    except CodegenError:
        return False
    return True


def schedule(workload, arch, run_scheduler, *, lower: bool = True, **options):
    """Schedule ``workload`` as written and as each rewrite (``lowerings``) and return the Schedule with the
    fewest cycles -- the cost model's, plus the timing model's for a rewrite's image copy
    (``prologue_cycles``) -- among those whose tiles the generator can place (``Schedule.workload`` is the
    one to generate from; ``extra["lowering"]``: the rewrite's kind or None, ``extra["alternatives"]``:
    name -> cycles or the reason it was dropped).  The layer as written is always a candidate.

    ``run_scheduler(workload, arch, **options)`` is the scheduler to use (``cosa.scheduler.schedule``
    with its ``scheduler=`` name among the options); it is passed in so that the back end does not
    import the scheduler."""
    config = _config_of(arch, None)[0]
    dim = config.dim
    candidates = [workload] + (lowerings(workload, dim) if lower else [])
    best, best_cycles, notes, first_error = None, None, {}, None
    for cand in candidates:
        try:
            sched = run_scheduler(cand, arch, **options)
        except Exception as exc:  # a rewrite the scheduler cannot handle is dropped, the plain layer decides
            if cand is workload:
                first_error = exc
            notes[cand.name] = f"not scheduled: {exc}"
            continue
        if cand is not workload and not fits(cand, sched.mapping, arch):
            notes[cand.name] = "tiles do not fit the scratchpad/accumulator"
            continue
        cycles = float(sched.cost.cycles) + (prologue_cycles(cand, config) if cand is not workload else 0.0)
        notes[cand.name] = cycles
        if best is None or cycles < best_cycles:
            best, best_cycles = sched, cycles
    if best is None:
        raise first_error or CodegenError("no schedule", source=f"lowering {workload.name}")
    low = lowering_of(best.workload)
    best.extra["lowering"] = low.kind if low else None
    best.extra["alternatives"] = notes
    return best
