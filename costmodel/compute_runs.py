"""Compute commands at a level with ``compute_rows``: the runs of a concrete mapping, and compute cycles.

A level ``h`` whose ``compute_rows`` R is set issues compute commands that
each stream at most R iterations of its temporal loops, and each command
costs ``compute_overhead_cycles`` on top of the iterations it streams.  Which
loops merge into one command's run, and how runs round to commands, are the
rules of ``costmodel.run_rules`` (which the MIP linearises too); this module
evaluates them on a mapping:

* ``residencies`` = product of the temporal factors of the levels above ``h``
  (per instance, as compute cycles are).
* computes per residency = ceil(run_length / R) x the factors of the level's
  loops outside the run (``run_rules.computes_per_residency``).

Compute cycles (``compute_work``): innermost level first, the work of one
residency of level ``i`` is its temporal factors times the work of one
residency of level ``i+1``; a level with ``compute_rows`` replaces it by
``ComputeRuns.work`` over its residencies, a level with a ``compute_quantum``
rounds it up to a multiple of the quantum.  With neither field set anywhere
it is the product of all temporal factors.

``ComputeRuns.work``: the iterations plus ``compute_overhead_cycles`` per
compute command.  When the level is ``double_buffered`` and fills its held
tiles at a finite ``write_bandwidth`` (Gemmini WS: a weight block shifts into
the PEs in DIM cycles), the fill of the next tile is not hidden behind the
whole run: per change of the held tile (W iterations, c computes, the last of
them streaming r rows, F fill cycles) the array is busy
max(W + overhead c, W - r + F, W / 2 + F): the next fill overlaps only the
last compute before the change, and a buffer is refilled only after the tile
it held two changes back has drained from the array (as long as a fill).
These are the execute-pipeline rules of the timing model
(``gemmini.sim.timing``: a compute_preloaded's DIM-cycle weight shift
overlaps the previous compute only, into the PE buffer its predecessor but
one used).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from . import run_rules
from .run_rules import address_strides, last_compute_rows  # noqa: F401  (part of this module's interface)


@dataclass(frozen=True)
class ComputeRuns:
    """The compute commands of one level that sets ``compute_rows`` (counts per instance).

    level: the level index.  residencies: residencies of the level per
    instance (temporal factors above it).  run_dims: the level's loops merged
    into one run, innermost first (empty when the level has no nontrivial
    temporal loop).  run_length: iterations of the run.
    iterations_per_residency: temporal iterations of the level's loops and
    all loops below it in one residency.  computes_per_residency: compute
    commands one residency issues.  changes: loads of a new held tile at the
    level per instance (``held_tile_changes``).  last_rows: iterations the
    last compute of a residency streams.  fill_cycles: cycles to fill one
    instance's held tiles (0: unlimited write bandwidth).
    """

    level: int
    residencies: int
    run_dims: tuple[str, ...]
    run_length: int
    iterations_per_residency: int
    computes_per_residency: int
    changes: int = 1
    last_rows: int = 1
    fill_cycles: float = 0.0

    @property
    def computes(self) -> int:
        """Compute commands per instance over the whole nest."""
        return self.residencies * self.computes_per_residency

    def work(self, overhead_cycles: int, double_buffered: bool) -> Fraction:
        """Cycles of one MAC unit spent by this level's computes (before dividing by macs_per_cycle).

        Without fills to hide (``fill_cycles`` 0, or not ``double_buffered``):
        iterations + overhead per compute.  Otherwise per change of the held
        tile (``changes`` per instance, W iterations and c computes between
        two changes, the last of them streaming ``last_rows``): the next fill
        overlaps only the last compute before the change, and a buffer is
        refilled only after the tile it held two changes back has drained (as
        long as a fill): max(W + overhead c, W - last_rows + fill, W / 2 + fill).
        """
        iterations = self.residencies * self.iterations_per_residency
        base = Fraction(iterations + overhead_cycles * self.computes)
        if not double_buffered or not self.fill_cycles:
            return base
        per_change, fill = Fraction(iterations, self.changes), Fraction(self.fill_cycles)
        return self.changes * max(base / self.changes, per_change - self.last_rows + fill, per_change / 2 + fill)


def _holders(mapping, arch, tensor) -> list[int]:
    """Levels that keep ``tensor`` in ``mapping`` (level 0 always)."""
    return [i for i in range(len(arch.levels)) if i == 0 or mapping.stores(i, tensor, arch)]


def level_runs(workload, arch, mapping, level: int) -> ComputeRuns:
    """The runs and compute commands of ``level`` (which must set ``compute_rows``): the rules of
    ``run_rules`` on this mapping (its order at the level, or the cheapest where it leaves it free)."""
    lm = mapping.levels[level]
    dims = list(workload.dims)
    rows = arch.levels[level].compute_rows
    residencies = math.prod(math.prod(m.temporal.values()) for m in mapping.levels[:level])
    iterations = math.prod(math.prod(m.temporal.values()) for m in mapping.levels[level:])
    loops = run_rules.run_loops(lm, dims)
    changes, fill = held_tile_changes(workload, arch, mapping, level)
    if not loops:
        # nothing to stream: every compute streams one row, and the held tiles still change and refill
        return ComputeRuns(level, residencies, (), 1, iterations, 1, changes, 1, fill)
    strides = run_rules.loop_strides(mapping, level, loops)
    streams = []
    for t in workload.tensors:
        holders = _holders(mapping, arch, t)
        if not run_rules.is_streamed(holders, level) or not any(d in t.dims for d in loops):
            continue
        source = mapping.tile_extents(run_rules.source_level(holders, level), dims)
        streams.append(address_strides(t, source, loops, strides))
    run, length, computes = run_rules.cheapest_run(loops, lm.temporal, streams, rows,
                                                   run_rules.order_is_free(mapping, level))
    return ComputeRuns(level, residencies, run, length, iterations, computes, changes,
                       last_compute_rows(length, rows), fill)


def held_tile_changes(workload, arch, mapping, level: int) -> tuple[int, float]:
    """(changes, fill cycles per change) of the tiles held at ``level``, per instance.

    changes: loads of a new tile of any tensor held at ``level``: the product
    of the temporal factors above the level down to the innermost loop that
    one of them depends on (1 when there is none; the first load counts).
    fill cycles: the held tiles' bytes in one instance over the level's
    ``write_bandwidth`` (0 when unlimited).
    """
    lv = arch.levels[level]
    held = [t for t in workload.tensors if level > 0 and mapping.stores(level, t, arch)]
    dims = list(workload.dims)
    above = [lp for lp in mapping.loops(dims) if not lp.spatial and lp.level < level]
    relevant = [j for j, lp in enumerate(above) if any(lp.dim in t.dims for t in held)]
    changes = math.prod(lp.factor for lp in above[:relevant[-1] + 1]) if relevant else 1
    if not held or not lv.write_bandwidth:
        return changes, 0.0
    extents = mapping.tile_extents(level, dims)
    tile_bytes = sum(t.tile_words(extents) * lv.bytes_per_word(t) for t in held)
    return changes, tile_bytes / lv.write_bandwidth


def compute_runs(workload, arch, mapping) -> dict[int, ComputeRuns]:
    """Per level index that sets ``compute_rows``: its runs and compute commands."""
    return {i: level_runs(workload, arch, mapping, i) for i, lv in enumerate(arch.levels)
            if lv.compute_rows is not None}


def compute_work(arch, mapping, runs: dict[int, ComputeRuns] | None = None) -> Fraction:
    """Compute cycles of one MAC unit before dividing by ``macs_per_cycle`` (see the module docstring).

    ``runs``: ``compute_runs``'s result, needed when a level sets
    ``compute_rows`` (its commands and held-tile changes).
    """
    work = Fraction(1)
    for i in range(len(arch.levels) - 1, -1, -1):
        lv = arch.levels[i]
        work *= math.prod(mapping.levels[i].temporal.values())
        if lv.compute_rows is not None:
            r = runs[i]
            work = r.work(lv.compute_overhead_cycles, lv.double_buffered) / r.residencies  # per residency
        elif lv.compute_quantum > 1:
            work = math.ceil(work / lv.compute_quantum) * lv.compute_quantum
    return work
