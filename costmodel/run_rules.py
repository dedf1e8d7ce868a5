"""The rules of compute runs: the one statement the cost model evaluates and the MIP linearises.

A level ``h`` whose ``compute_rows`` R is set issues compute commands that
each stream at most R iterations of its temporal loops (Gemmini WS: the
Registers level, one compute per run of at most DIM pixel rows under one
weight block).  ``costmodel.compute_runs`` evaluates these rules on a
concrete mapping; ``cosa.mip.runs`` builds its run variables from them.

* *Loops*: the level's nontrivial temporal loops, innermost first
  (``run_loops``), in the mapping's order at ``h``.  Where the mapping leaves
  the order of the innermost level unspecified (it changes no traffic there),
  they run in the order with the fewest compute commands, as a code
  generator free to choose it would (``order_is_free``, ``cheapest_run``).
* *Streamed tensors*: a tensor with no holder at ``h`` or below
  (``is_streamed``) whose index depends on a loop of ``h``, read from (or
  written to) its *source tile*, its tile at its innermost holder above ``h``
  (``source_level``; level 0 always holds it).
* *Addresses*: the source tile is laid out densely, row-major over the
  tensor's index positions (in index order) that depend on a nontrivial loop
  of ``h``.  Position ``j`` stores the distinct values of its affine
  expression over the source tile's extents on the lattice of step ``g_j`` =
  gcd of its coefficients over dims with extent > 1 (1 if none): stored
  extent ``E_j = sum_d |c_jd| (ext_d - 1) / g_j + 1``, position stride
  ``S_j = prod_{j' after j} E_j'``, and loop ``d`` steps the address by
  ``addr(d) = loop_stride(d) * sum_j (c_jd / g_j) S_j`` (``address_strides``),
  where ``loop_stride(d)`` is how far one iteration of the level-``h`` loop
  moves dim ``d``: its spatial factor at ``h`` times its factors below ``h``
  (``loop_strides``).
* *Runs*: the innermost loop starts the run; loop ``d`` directly outside run
  member ``prev`` extends it iff ``addr(d) == f_prev * addr(prev)`` for every
  streamed tensor (``extends_run``; along a run this is ``addr(d) ==
  run_length * addr(first member)``); the first loop that fails ends the run
  (``run_of``).
* *Commands*: a run of L iterations takes ``ceil(L / R)`` commands
  (``commands_per_run``), cut with the short one first, so the last streams
  ``min(L, R)`` rows (``last_compute_rows``); a residency issues that times
  the factors of the level's loops outside the run
  (``computes_per_residency``).

Exact merge conditions (``merge_conditions``), per streamed tensor ``t``:
strides ``addr(x) = loop_stride(x) * (c_x / g) * S`` in its row-major source
tile.  Both strides are 0 when ``t`` ignores both dims (no condition); one 0
and one not never merges.  Otherwise, with ``d`` and ``prev`` each in one
index position ``jd`` and ``jp`` of ``t`` (coefficients of one sign), ``jd``
must lie outside ``jp`` (an inner position's stride is too small), and the
stored extent of ``jp`` is at least ``u * f_prev * loop_stride(prev)``, ``u =
|c_prev| / g``; equality throughout is needed and enough:

* ``loop_stride(d) = 1`` (``unit_stride``);
* ``prev``'s factors at the levels from the source holder to ``h``
  (exclusive) are 1 (``unsplit``);
* the other dims of position ``jp`` add nothing to its extent (source extent
  1: no halo), or, for one other dim ``e``, ``|c_e| (ext_e - 1) = |c_prev| -
  g`` (windows whose stride equals their span tile the row densely: ``W = 2
  P + R`` with R = 2 in the source tile; ``extents``);
* the lattice step of ``jd`` is ``|c_d|``: dims of position ``jd`` whose
  coefficient is not a multiple of ``c_d`` have source extent 1
  (``unit_extent``);
* no position strictly between ``jd`` and ``jp`` is laid out: the dims there
  have temporal factor 1 at ``h`` (``no_loop``).

Not certified (``merge_conditions`` answers None; a model built on these
conditions then never claims the merge, which over-estimates the commands):
two run dims in one index position (``R`` then ``P`` along ``W = 2 P + R``),
a dim in several positions of one tensor.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass


def run_loops(level_mapping, dims) -> list[str]:
    """The level's nontrivial temporal loops, innermost first, in the mapping's order."""
    return [d for d in reversed(level_mapping.loop_order(dims)) if level_mapping.temporal_factor(d) > 1]


def order_is_free(mapping, level: int) -> bool:
    """Whether the loops at ``level`` run in the cheapest order: the mapping leaves the order of the
    innermost level unspecified."""
    return not mapping.levels[level].order and level == len(mapping.levels) - 1


def is_streamed(holders, level: int) -> bool:
    """Whether a tensor with holder levels ``holders`` is streamed at ``level``: none at or below it."""
    return all(i < level for i in holders)


def source_level(holders, level: int) -> int:
    """The innermost holder above ``level`` (level 0 always holds every tensor)."""
    return max((i for i in holders if i < level), default=0)


def loop_strides(mapping, level: int, loops) -> dict[str, int]:
    """How far one iteration of each loop at ``level`` moves its dim: the spatial factor at the level
    times the factors below it."""
    inside = mapping.tile_extents(level + 1, loops)
    return {d: mapping.levels[level].spatial_factor(d) * inside[d] for d in loops}


def index_positions(tensor, dim: str) -> list[int]:
    """The tensor's index positions whose expression uses ``dim``."""
    return [j for j, expr in enumerate(tensor.indices) if expr.coef(dim)]


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


def extends_run(streams, d: str, prev: str, prev_factor: int) -> bool:
    """Whether loop ``d`` extends a run whose outermost member is ``prev`` (``prev_factor`` iterations):
    ``addr(d) == prev_factor * addr(prev)`` in every streamed tensor's strides (``streams``)."""
    return all(s[d] == prev_factor * s[prev] for s in streams)


def run_of(loops, factors: dict[str, int], streams) -> tuple[tuple[str, ...], int]:
    """(run dims, run length) of ``loops`` (innermost first): the longest prefix that extends link by link."""
    run, length = [loops[0]], factors[loops[0]]
    for d in loops[1:]:
        if not extends_run(streams, d, run[-1], factors[run[-1]]):
            break
        run.append(d)
        length *= factors[d]
    return tuple(run), length


def commands_per_run(run_length: int, rows: int) -> int:
    """Compute commands of one run: ``ceil(run_length / rows)``."""
    return -(-run_length // rows)


def computes_per_residency(loops, factors: dict[str, int], run, run_length: int, rows: int) -> int:
    """Commands of one residency: those of the run times the factors of the loops outside it."""
    return commands_per_run(run_length, rows) * math.prod(factors[d] for d in loops if d not in run)


def last_compute_rows(run_length: int, rows: int) -> int:
    """Rows the last compute of a run streams: a run of ``run_length`` iterations is cut into commands of
    at most ``rows`` with the short one first (as the code generator does), so that a fill of new held
    tiles, which overlaps only the compute before it, overlaps a full one."""
    return min(run_length, rows)


def cheapest_run(loops, factors: dict[str, int], streams, rows: int, free: bool):
    """(run dims, run length, computes per residency) of ``loops`` (innermost first) in their order, or,
    when ``free``, in the order with the fewest commands (ties: the given order)."""
    best = None
    for candidate in (itertools.permutations(loops) if free else [loops]):
        run, length = run_of(list(candidate), factors, streams)
        computes = computes_per_residency(candidate, factors, run, length, rows)
        if best is None or computes < best[2]:
            best = (run, length, computes)
    return best


@dataclass(frozen=True)
class MergeCondition:
    """One sufficient condition, on one streamed tensor, for loop ``d`` to extend a run over ``prev``.

    Stated on the run level h and the tensor's source level s (dim sets):
    unit_stride: the loop at h steps its dim by 1 (spatial factor at h and
    every factor below h are 1).  unsplit: no factor at levels s..h-1.
    unit_extent: source-tile extent 1 (every factor at s and below is 1).
    no_loop: temporal factor 1 at h.  extents: (dim, value) pairs, the
    source-tile extent of dim is value.
    """

    unit_stride: frozenset = frozenset()
    unsplit: frozenset = frozenset()
    unit_extent: frozenset = frozenset()
    no_loop: frozenset = frozenset()
    extents: frozenset = frozenset()


def merge_conditions(tensor, d: str, prev: str, bounds: dict[str, int]) -> list[MergeCondition] | None:
    """The conditions (any one suffices, together necessary) under which loop ``d`` extends a run whose
    next inner member is ``prev``, as far as streamed ``tensor`` is concerned; None: not certified (see the
    module docstring).  ``bounds``: the loop bounds (dims of bound 1 never add to an extent)."""
    rel_d, rel_p = d in tensor.dims, prev in tensor.dims
    if not rel_d and not rel_p:
        return [MergeCondition()]
    if rel_d != rel_p:
        return None
    pos_d, pos_p = index_positions(tensor, d), index_positions(tensor, prev)
    if len(pos_d) != 1 or len(pos_p) != 1 or pos_d[0] >= pos_p[0]:
        return None
    jd, jp = pos_d[0], pos_p[0]
    c_d, c_p = tensor.indices[jd].coef(d), tensor.indices[jp].coef(prev)
    if (c_d > 0) != (c_p > 0):
        return None
    lattice = frozenset(e for e, c in tensor.indices[jd].terms if e != d and c % c_d)
    between = frozenset(e for j in range(jd + 1, jp) for e, _c in tensor.indices[j].terms)
    others = [(e, abs(c)) for e, c in tensor.indices[jp].terms if e != prev and bounds.get(e, 1) > 1]
    base = dict(unit_stride=frozenset({d}), unsplit=frozenset({prev}), no_loop=between)
    out = [MergeCondition(unit_extent=lattice | {e for e, _c in others}, **base)]
    if len(others) == 1:
        e, c_e = others[0]
        span = abs(c_p) - math.gcd(abs(c_p), c_e)
        value = 1 + span // c_e
        if span and span % c_e == 0 and bounds[e] % value == 0:
            out.append(MergeCondition(unit_extent=lattice, extents=frozenset({(e, value)}), **base))
    return out
