"""Ragged last tiles on a CPU: the vector dim's bound rounded up to whole register blocks.

A CPU micro-kernel (``costmodel.microkernel``) runs ``nv`` vectors of ``lanes`` along the output's
contiguous dim ``j``.  When ``j``'s bound has no divisor that fills the vectors (196 pixels of a 14 x 14
image, 2^2 x 7^2: tiles of 49 issue 4 vectors for 49 words, 77 % of their lanes), the MIP, which takes
divisors, cannot keep the lanes busy.  The CPU code generator runs a *ragged* last tile instead
(``targets.cpu.plan.ragged_nest``): the factors of ``j`` multiply to a padded bound (256 = 4 tiles of 64),
and the last kernel tile is cut to the real bound (4 words: one partial vector), so the padded
iterations are never run.

``candidates`` gives the padded bounds worth a solve: ``j``'s bound rounded up to a multiple of the
register level's fan-out (the widest block) and of two vectors; ``ragged_schedule`` (what
``cosa.scheduler.schedule`` runs with ``ragged``) solves the MIP on the nest and on each padded nest, and
keeps the cheapest by ``ragged_cycles``.  The padded nest's cost model charges the padded iterations; the
cut tile runs only the vectors the real bound needs, so its cycles are estimated as the padded nest's
scaled by that share (``ceil(bound / lanes) * lanes / padded``), an estimate that ignores the cut
tile's narrower register block (it is ``1 / tiles`` of the work).
"""

from __future__ import annotations

import dataclasses
import math

from costmodel.microkernel import contiguous_dim, kernel_level, spec_of


def candidates(workload, arch) -> list[int]:
    """Padded bounds of the vector dim ``j`` (``costmodel.microkernel.contiguous_dim``) worth a solve on a
    CPU arch with a register level (``costmodel.microkernel.spec_of``): the bound rounded up to a multiple
    of the register level's fan-out (``nv`` x lanes: the widest block) and of two vectors, where that
    differs from the bound, when the bound spans more than the widest block (a row within one block
    runs as one partial tile already)."""
    spec = spec_of(arch)
    j = contiguous_dim(workload)
    if spec is None or spec.lanes <= 1 or j is None:
        return []
    bound, block = workload.dims[j], arch.levels[-1].fanout
    if bound <= block:
        return []
    out = []
    for width in (block, 2 * spec.lanes):
        padded = -(-bound // width) * width
        if width >= spec.lanes and padded != bound and padded not in out:
            out.append(padded)
    return out


def lane_share(bound: int, padded: int, lanes: int) -> float:
    """The share of the padded nest's vector work a ragged run does: ``ceil(bound / lanes) * lanes / padded``."""
    return math.ceil(bound / lanes) * lanes / padded


def ragged_cycles(schedule, bound: int, padded: int, lanes: int) -> float:
    """Estimated cycles of ``schedule`` (of the nest padded to ``padded``) run with its last tile cut to
    ``bound``: its cycles times ``lane_share``."""
    return schedule.cost.cycles * lane_share(bound, padded, lanes)


def ragged_schedule(workload, arch, **mip_options):
    """The MIP's schedule of ``workload`` and of its padded nests (``candidates``), the fastest by
    ``ragged_cycles`` (ties: the nest as written).  Only the latency objective pads.  A padded winner
    is a Schedule of the padded nest (its ``workload``), valid there, whose mapping the CPU code generator
    runs on ``workload`` with a ragged last tile; ``extra["ragged"]`` {dim: [bound, padded bound]} and
    ``extra["ragged_cycles"]``, its estimate; its cost is the padded nest's (an upper bound).
    ``extra["ragged_tried"]`` lists every padded bound solved, its estimate and seconds; the Schedule's
    ``stats`` count every solve's seconds."""
    from .driver import mip_schedule

    best = mip_schedule(workload, arch, **mip_options)
    spec = spec_of(arch)
    if mip_options.get("objective", "latency") != "latency" or spec is None:
        return best
    j = contiguous_dim(workload)
    bound = workload.dims.get(j)
    best_cycles = best.cost.cycles
    build_s, solve_s = best.stats.build_s, best.stats.solve_s
    tried, winner = [], None
    kernel = kernel_level(arch)
    for padded in candidates(workload, arch):
        got = mip_schedule(workload.with_dims(**{j: padded}), arch, **mip_options)
        build_s, solve_s = build_s + got.stats.build_s, solve_s + got.stats.solve_s
        extent = got.mapping.tile_extents(kernel, [j])[j]
        cut = padded - bound < extent  # only the last kernel tile reaches past the bound
        cycles = ragged_cycles(got, bound, padded, spec.lanes)
        tried.append({"padded": padded, "cycles": cycles if cut else None, "seconds": got.stats.total_s})
        if cut and cycles < best_cycles * (1 - 1e-9):
            best_cycles, winner = cycles, (got, padded)
    if not tried:
        return best
    if winner is not None:
        best = dataclasses.replace(winner[0], extra={**winner[0].extra, "ragged": {j: [bound, winner[1]]},
                                                     "ragged_cycles": best_cycles})
    stats = dataclasses.replace(best.stats, build_s=build_s, solve_s=solve_s)
    return dataclasses.replace(best, stats=stats, extra={**best.extra, "ragged_tried": tried})
