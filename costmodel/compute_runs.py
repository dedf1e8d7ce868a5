"""Compute commands at a level with ``compute_rows``: how a residency's loops stream as runs.

A level ``h`` whose ``compute_rows`` R is set issues compute commands that
each stream at most R iterations of its temporal loops (Gemmini WS: the
Registers level, one compute per run of at most DIM pixel rows under one
weight block), and each command costs ``compute_overhead_cycles`` on top of
the iterations it streams.  How many commands a residency needs depends on
which of the level's loops can be merged into one stream:

* ``residencies`` = product of the temporal factors of the levels above ``h``
  (per instance, as compute cycles are).
* In one residency the level's nontrivial temporal loops, innermost first,
  form a *run*: it starts with the innermost loop and extends over the next
  outer loop ``d`` while the stream stays an arithmetic progression in the
  storage of every *streamed* tensor: a tensor not held at ``h`` or below
  whose index depends on a loop of ``h``, read from (or written to) its
  *source tile*, its tile at its innermost holder above ``h``.
* The source tile is laid out densely, row-major over the tensor's index
  positions (in index order) that depend on a nontrivial loop of ``h``.
  Position ``j`` stores the distinct values of its affine expression over
  the source tile's extents on the lattice of step ``g_j`` = gcd of its
  coefficients over dims with extent > 1 (1 if none): stored extent
  ``E_j = sum_d |c_jd| (ext_d - 1) / g_j + 1``, position stride
  ``S_j = prod_{j' after j} E_j'``, and loop ``d`` steps the address by
  ``addr_stride(d) = loop_stride(d) * sum_j (c_jd / g_j) S_j``, where
  ``loop_stride(d)`` is how far one iteration of the level-``h`` loop moves
  dim ``d`` (the product of ``d``'s factors inside that loop: 1 at the
  innermost level).
* The run extends over ``d`` iff ``addr_stride(d) == run_length *
  addr_stride(innermost loop of the run)`` for every streamed tensor; the
  first loop that fails ends the run.
* computes per residency = ceil(run_length / R) x the factors of the level's
  loops outside the run.
* The loops run in the mapping's order at ``h``; where the mapping leaves the
  order of the innermost level unspecified (it changes no traffic there), in
  the order with the fewest compute commands, as the code generator may pick.

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

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction


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


def _held_at_or_below(mapping, arch, tensor, level: int) -> bool:
    return any(mapping.stores(i, tensor, arch) for i in range(level, len(arch.levels)))


def _source_level(mapping, arch, tensor, level: int) -> int:
    """The innermost holder of ``tensor`` above ``level`` (level 0 always holds it)."""
    return max([0] + [i for i in range(1, level) if mapping.stores(i, tensor, arch)])


def address_strides(tensor, source_extents: dict[str, int], loop_dims, loop_strides: dict[str, int]) -> dict[str, int]:
    """Address step (in words of the source tile) of one iteration of each loop in ``loop_dims``.

    ``source_extents``: loop extents of the source tile.  ``loop_strides``:
    how far one iteration of each loop moves its dim.  The tile is laid out
    densely and row-major over the index positions that depend on some dim of
    ``loop_dims``, each compressed to the lattice of its coefficients (see the
    module docstring).
    """
    loop_dims = tuple(loop_dims)
    positions = [e for e in tensor.indices if any(e.coef(d) for d in loop_dims)]
    steps, extents = [], []
    for expr in positions:
        live = [abs(c) for d, c in expr.terms if source_extents.get(d, 1) > 1]
        step = math.gcd(*live) if live else 1
        steps.append(step)
        extents.append(sum(abs(c) * (source_extents.get(d, 1) - 1) for d, c in expr.terms) // step + 1)
    strides = [math.prod(extents[j + 1:]) for j in range(len(positions))]
    return {d: loop_strides.get(d, 1) * sum(expr.coef(d) // step * stride
                                             for expr, step, stride in zip(positions, steps, strides))
            for d in loop_dims}


def _run(loops: list[str], factors: dict[str, int], streams: list[dict[str, int]]) -> tuple[tuple[str, ...], int]:
    """(run dims, run length) of ``loops`` (innermost first): the longest prefix streamed as one progression."""
    run, length = [loops[0]], factors[loops[0]]
    for d in loops[1:]:
        if not all(s[d] == length * s[loops[0]] for s in streams):
            break
        run.append(d)
        length *= factors[d]
    return tuple(run), length


def level_runs(workload, arch, mapping, level: int) -> ComputeRuns:
    """The runs and compute commands of ``level`` (which must set ``compute_rows``).

    The level's loops run in the mapping's order; where the mapping leaves the
    innermost level's order unspecified (``order`` empty: it changes no
    traffic), in the order that needs the fewest compute commands, as a code
    generator free to choose it would (ties: the default order).
    """
    lv, lm = arch.levels[level], mapping.levels[level]
    dims = list(workload.dims)
    rows = lv.compute_rows
    residencies = math.prod(math.prod(m.temporal.values()) for m in mapping.levels[:level])
    iterations = math.prod(math.prod(m.temporal.values()) for m in mapping.levels[level:])
    loops = [d for d in reversed(lm.loop_order(dims)) if lm.temporal_factor(d) > 1]  # innermost first
    if not loops:
        # nothing to stream: every compute streams one row, and the held tiles still change and refill
        changes, fill = held_tile_changes(workload, arch, mapping, level)
        return ComputeRuns(level, residencies, (), 1, iterations, 1, changes, 1, fill)
    # one iteration of a level's temporal loop of d moves d by its factors inside that loop
    inside = mapping.tile_extents(level + 1, dims)
    loop_strides = {d: lm.spatial_factor(d) * inside[d] for d in loops}
    streams = []
    for t in workload.tensors:
        if _held_at_or_below(mapping, arch, t, level) or not any(d in t.dims for d in loops):
            continue
        source = mapping.tile_extents(_source_level(mapping, arch, t, level), dims)
        streams.append(address_strides(t, source, loops, loop_strides))
    free = not lm.order and level == len(arch.levels) - 1
    best = None
    for candidate in (itertools.permutations(loops) if free else [loops]):
        run, length = _run(list(candidate), lm.temporal, streams)
        computes = -(-length // rows) * math.prod(lm.temporal_factor(d) for d in candidate[len(run):])
        if best is None or computes < best[2]:
            best = (run, length, computes)
    run, length, computes = best
    last_rows = last_compute_rows(length, rows)
    changes, fill = held_tile_changes(workload, arch, mapping, level)
    return ComputeRuns(level, residencies, run, length, iterations, computes, changes, last_rows, fill)


def last_compute_rows(run_length: int, rows: int) -> int:
    """Rows the last compute of a run streams: a run of ``run_length`` iterations is cut into commands of
    at most ``rows`` with the short one first (as the code generator does), so that a fill of new held
    tiles, which overlaps only the compute before it, overlaps a full one."""
    return min(run_length, rows)


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
