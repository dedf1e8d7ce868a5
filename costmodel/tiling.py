"""Exact tile counting for the analytical cost model.

A mapping unrolls into a tiled loop nest (``Mapping.loops``).  Every loop ``j``
of dim ``d`` has a *stride*: the product of the factors of ``d`` in the loops
inside it, so the position of ``d`` is ``sum_j stride_j * x_j``.  For one tensor
and one memory level the loops fall in three groups:

* ``step_loops``: temporal loops outside the tile (levels above it), outer to
  inner; each of their iterations may bring a new tile;
* ``instance_loops``: spatial loops outside the tile; they select the instance
  (or the group of instances) and never change during the run;
* ``set_loops``: the loops whose whole range forms the tile (levels at and
  below it; for a multicast group also the spatial loops that fan out to it).

The tile is the set of tensor elements ``(idx_0(pos), idx_1(pos), ...)`` over
all values of the ``set_loops``, clipped to the tensor's stored ``shape`` when
it has one (padding: halo elements outside the stored tensor are never moved).

Tensor axes that share loop dims form a *component*; the tile is the product
of its components' sets, and the components depend on disjoint loops, so sums
over positions factor into products of per-component sums.  This keeps the
count exact (distinct elements under strides and dilations, clipping at the
padded borders) at a cost of one small enumeration per component.

Reuse rule (whole-tile refill): a tile is loaded whole whenever it differs
from the resident one.  Consecutive iterations of the step loops give the same
tile when only loops irrelevant to the tensor changed; the innermost relevant
step loop therefore sets the number of loads.  Consecutive tiles that coincide
as sets although a relevant loop changed (a sliding window whose shift is
undone by a reset inner loop, or windows clipped to the same border elements)
are detected and not reloaded either.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np


class NestLoop(NamedTuple):
    """One loop of the tiled nest with its stride (in iterations of its dim)."""

    level: int
    dim: str
    factor: int
    spatial: bool
    stride: int


def nest_loops(mapping, dims: Sequence[str]) -> tuple[NestLoop, ...]:
    """The tiled loop nest, outer to inner, with each loop's stride."""
    loops = list(mapping.loops(list(dims)))
    out = []
    for j, lp in enumerate(loops):
        stride = math.prod(q.factor for q in loops[j + 1:] if q.dim == lp.dim)
        out.append(NestLoop(lp.level, lp.dim, lp.factor, lp.spatial, stride))
    return tuple(out)


@dataclass(frozen=True)
class TileCounts:
    """Sums of tile sizes (words) over one tensor's tiles at one level.

    changes: words loaded over the run, summed over instances (whole-tile refill
    whenever the tile differs from the resident one, the first load included).
    distinct: words of the distinct tiles, summed over instances (each tile once).
    max_words: the largest tile.
    """

    changes: int
    distinct: int
    max_words: int


class _Component:
    """Tensor axes that share loop dims, with the base set of the tile."""

    def __init__(self, tensor, axes: list[int], set_loops: Sequence[NestLoop]):
        self.axes = axes
        self.dims = frozenset(d for a in axes for d in tensor.indices[a].dims)
        self.coef = {d: np.array([tensor.indices[a].coef(d) for a in axes], dtype=np.int64) for d in self.dims}
        self.offset = np.array([tensor.indices[a].offset for a in axes], dtype=np.int64)
        if tensor.shape is not None:
            self.hi = np.array([tensor.shape[a] for a in axes], dtype=np.int64)
        else:
            self.hi = None  # no stored shape: every index value exists, nothing is clipped
        self.single = len(axes) == 1
        mine = [lp for lp in set_loops if lp.dim in self.dims]
        self.progression = None  # (first, step, count): the 1-D set {first + k * step, k < count}
        if self.single:
            self.progression = _progression([(int(lp.stride * self.coef[lp.dim][0]), lp.factor) for lp in mine])
        if self.progression is not None:
            # the common case (a tile's index range, a window's, a stride's): closed forms, no enumeration,
            # so a dim of 2^24 costs what a dim of 16 does
            self._base = None
            self.size = self.progression[2]
            self.contiguous = self.progression[1] == 1
        elif self.single:  # 1-D sets that are no progression: sorted unique values
            values = np.zeros(1, dtype=np.int64)
            for lp in mine:
                step = np.arange(lp.factor, dtype=np.int64) * int(lp.stride * self.coef[lp.dim][0])
                values = (values[:, None] + step[None, :]).ravel()
                if len(values) > 4096:
                    values = np.unique(values)
            values = np.unique(values)
            self.values = values
            self._base = values[:, None]
            self.size = len(values)
            self.contiguous = int(values[-1] - values[0]) + 1 == len(values)
        else:
            base = np.zeros((1, len(axes)), dtype=np.int64)
            for lp in mine:
                step = np.arange(lp.factor, dtype=np.int64)[:, None] * (lp.stride * self.coef[lp.dim])[None, :]
                base = np.unique((base[:, None, :] + step[None, :, :]).reshape(-1, len(axes)), axis=0)
            self._base = base
            self.size = len(base)

    @property
    def base(self) -> np.ndarray:
        """The tile's elements at shift 0 (rows of axis values); built on demand for a progression."""
        if self._base is None:
            first, step, count = self.progression
            self._base = (first + step * np.arange(count, dtype=np.int64))[:, None]
        return self._base

    def _clipped_progression(self, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first element, count) of the progression moved by each shift and clipped to [0, hi)."""
        return _clip_progression(*self.progression, shift[:, 0], int(self.hi[0]))

    # --- shifts ---------------------------------------------------------------
    def shifts(self, loops: Sequence[NestLoop], fixed: np.ndarray | None = None) -> np.ndarray:
        """Axis shifts for every combination of ``loops`` values (rows, C order)."""
        shift = self.offset[None, :] if fixed is None else (self.offset + fixed)[None, :]
        for lp in loops:
            step = np.arange(lp.factor, dtype=np.int64)[:, None] * (lp.stride * self.coef[lp.dim])[None, :]
            shift = (shift[:, None, :] + step[None, :, :]).reshape(-1, len(self.axes))
        return shift

    # --- sizes and equality -----------------------------------------------------
    def sizes(self, shift: np.ndarray) -> np.ndarray:
        """Words of the tile (in-bounds elements) for each row of shifts."""
        if self.hi is None:
            return np.full(len(shift), self.size, dtype=np.int64)
        if self.progression is not None:
            return self._clipped_progression(shift)[1]
        if self.single:
            s = shift[:, 0]
            hi = int(self.hi[0])
            return np.searchsorted(self.values, hi - s, "left") - np.searchsorted(self.values, -s, "left")
        out = np.empty(len(shift), dtype=np.int64)
        for i, s in enumerate(shift):
            coords = self.base + s
            out[i] = int(np.all((coords >= 0) & (coords < self.hi), axis=1).sum())
        return out

    def _clipped(self, s: np.ndarray) -> set:
        coords = self.base + s
        if self.hi is not None:
            coords = coords[np.all((coords >= 0) & (coords < self.hi), axis=1)]
        return set(map(tuple, coords.tolist()))

    def equal(self, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """Whether the tile at each row of ``before`` shifts equals the one at ``after``."""
        same = np.all(before == after, axis=1)
        if self.hi is None:
            return same  # a nonempty finite set moved by a nonzero shift is a different set
        if self.progression is not None:  # equal clipped progressions: both empty, or same first and count
            first_b, n_b = self._clipped_progression(before)
            first_a, n_a = self._clipped_progression(after)
            return same | ((n_b == 0) & (n_a == 0)) | ((n_b == n_a) & (first_b == first_a))
        if self.single and self.contiguous:
            b0, b1, hi = int(self.values[0]), int(self.values[-1]), int(self.hi[0])
            lo_b, hi_b = np.maximum(0, b0 + before[:, 0]), np.minimum(hi - 1, b1 + before[:, 0])
            lo_a, hi_a = np.maximum(0, b0 + after[:, 0]), np.minimum(hi - 1, b1 + after[:, 0])
            empty_b, empty_a = lo_b > hi_b, lo_a > hi_a
            return same | (empty_b & empty_a) | (~empty_b & ~empty_a & (lo_b == lo_a) & (hi_b == hi_a))
        out = same.copy()
        for i in np.nonzero(~same)[0]:
            out[i] = self._clipped(before[i]) == self._clipped(after[i])
        return out


def _progression(terms: list[tuple[int, int]]) -> tuple[int, int, int] | None:
    """The set {sum_j c_j x_j : 0 <= x_j < f_j} of ``terms`` (c_j, f_j) as (first, step, count) when it
    is an arithmetic progression, else None.  Terms merge smallest step first: a term whose step is a
    multiple of the progression's and at most one past its end extends it without gaps or repeats."""
    first, step, count = 0, 1, 1
    for c, f in sorted((abs(c), f) for c, f in terms if f > 1 and c != 0):
        if count == 1:
            step, count = c, f
        elif c % step == 0 and c <= step * count:
            count = (step * (count - 1) + c * (f - 1)) // step + 1
        else:
            return None
    first += sum(c * (f - 1) for c, f in terms if c < 0 and f > 1)  # a negative step runs downwards
    return first, step, count


def _clip_progression(first: int, step: int, count: int, shift: np.ndarray, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(first element, count) of {first + shift + k * step, k < count} clipped to [0, hi), per shift."""
    start = first + shift
    lo = np.maximum(0, -(start // step))  # the first k with start + k * step >= 0
    top = np.minimum(count - 1, (hi - 1 - start) // step)  # the last k with start + k * step < hi
    return start + lo * step, np.maximum(0, top - lo + 1)


def _distinct_progression(terms: list[tuple[int, int]]) -> tuple[int, int, int] | None:
    """As ``_progression``, but only where every value arises once (each term's step is the span so far:
    the loops of one dim, whose positions are distinct)."""
    first, step, count = 0, 1, 1
    for c, f in sorted((abs(c), f) for c, f in terms if f > 1):
        if count == 1 and c != 0:
            step, count = c, f
        elif c == step * count:
            count *= f
        else:
            return None
    first += sum(c * (f - 1) for c, f in terms if c < 0 and f > 1)
    return first, step, count


@functools.lru_cache(maxsize=1 << 14)  # evaluations of neighbouring mappings repeat most (component, loops)
def _progression_sizes(comp: _Component, loops: tuple[NestLoop, ...]) -> tuple[int, int | None] | None:
    """(sum, max or None) of a progression tile's clipped sizes over every value of ``loops`` in closed
    form, when each dim's loops move it along a progression (their positions are distinct: mixed radix);
    None otherwise (the caller enumerates).  The dim whose loops take the most values is summed in closed
    form, the others' few values (a window's, at most ``_CHUNK``) one by one; per value the work is the
    smaller of the tile's and the moves' counts, not their product."""
    if comp.progression is None:
        return None
    by_dim: dict[str, list] = {}
    for lp in loops:
        by_dim.setdefault(lp.dim, []).append((int(lp.stride * comp.coef[lp.dim][0]), lp.factor))
    groups = [_distinct_progression(terms) for terms in by_dim.values()]
    if any(g is None for g in groups):
        return None
    groups = sorted(groups, key=lambda g: g[2]) or [(0, 1, 1)]
    s_first, s_step, s_count = groups[-1]
    if math.prod(g[2] for g in groups[:-1]) > _CHUNK:
        return None
    rest = np.zeros(1, dtype=np.int64)
    for f0, st, n in groups[:-1]:
        rest = (rest[:, None] + (f0 + st * np.arange(n, dtype=np.int64))[None, :]).ravel()
    first, step, count = comp.progression
    hi = int(comp.hi[0])
    total, largest, fits = 0, 0, False
    lo_s, hi_s = -first, hi - 1 - first - step * (count - 1)  # shifts that keep the whole tile inside
    for r in (rest + s_first + int(comp.offset[0])).tolist():
        if s_count <= count:
            sizes = _clip_progression(first, step, count, r + s_step * np.arange(s_count, dtype=np.int64), hi)[1]
            total, largest = total + int(sizes.sum()), max(largest, int(sizes.max()))
            continue
        total += int(_clip_progression(r, s_step, s_count, first + step * np.arange(count, dtype=np.int64),
                                       hi)[1].sum())
        k = max(0, -((r - lo_s) // s_step))  # the first move with r + k * s_step >= lo_s
        fits = fits or (lo_s <= hi_s and k < s_count and r + k * s_step <= hi_s)
    if s_count <= count:
        return total, largest
    return total, count if fits else None


def components(tensor, set_loops: Sequence[NestLoop]) -> tuple[_Component, ...]:
    """Group the tensor's axes into components of shared dims (cached: evaluations repeat them)."""
    return _components(tensor, tuple(set_loops))


@functools.lru_cache(maxsize=4096)
def _components(tensor, set_loops: tuple[NestLoop, ...]) -> tuple[_Component, ...]:
    out = []
    for axes in _axis_groups(tensor):
        dims = frozenset(d for a in axes for d in tensor.indices[a].dims)
        out.append(_component(tensor, axes, tuple(lp for lp in set_loops if lp.dim in dims)))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _component(tensor, axes: tuple[int, ...], set_loops: tuple[NestLoop, ...]) -> _Component:
    return _Component(tensor, list(axes), set_loops)


@functools.lru_cache(maxsize=1024)
def _axis_groups(tensor) -> tuple[tuple[int, ...], ...]:
    groups: list[tuple[set, list[int]]] = []
    for a, expr in enumerate(tensor.indices):
        dims = set(expr.dims)
        merged = [g for g in groups if g[0] & dims]
        for g in merged:
            groups.remove(g)
            dims |= g[0]
        axes = sorted([a] + [x for g in merged for x in g[1]])
        groups.append((dims, axes))
    return tuple(tuple(axes) for _, axes in groups)


def tile_counts(tensor, step_loops: Sequence[NestLoop], instance_loops: Sequence[NestLoop],
                set_loops: Sequence[NestLoop], reuse: bool = True,
                member_loops: Sequence[NestLoop] = (), delta: bool = False,
                delta_across_resets: bool = True) -> TileCounts:
    """Exact sums of tile sizes over a run (``_tile_counts``; cached: the mappings a search prices one after
    another share most of their tensors' loop groups)."""
    return _tile_counts(tensor, tuple(step_loops), tuple(instance_loops), tuple(set_loops), reuse,
                        tuple(member_loops), delta, delta_across_resets)


@functools.lru_cache(maxsize=1 << 14)
def _tile_counts(tensor, step_loops: tuple[NestLoop, ...], instance_loops: tuple[NestLoop, ...],
                 set_loops: tuple[NestLoop, ...], reuse: bool, member_loops: tuple[NestLoop, ...], delta: bool,
                 delta_across_resets: bool) -> TileCounts:
    """Exact sums of tile sizes over a run (see the module docstring).

    With ``reuse=False`` every iteration of every step loop counts (operands
    delivered to the MAC units each cycle): ``changes`` is then the sum over all
    iterations and instances of the tile size.

    ``member_loops`` (a subset of ``set_loops``): spatial loops over the members
    of a multicast group, whose tile is the union of the members' tiles.  A
    step then counts the whole union unless every member's own tile equals its
    previous one.  Exact when the members move together (always without
    clipping); when clipping makes only some members' tiles repeat, the union
    of all members is counted although only the moving ones need data.

    ``delta`` (Timeloop's sliding-window fetch): a changed tile loads only the
    words that were not in the previous one (|new| - |new & old|; with
    members, the union over the members of each one's new words).  Exact
    when the member loops index one component of the tensor (the product over
    components of the words kept is then exact); with members in several
    components each component's kept words are taken on their own.
    ``delta_across_resets=False`` (Timeloop's accounting): a step at which an
    inner loop the tensor depends on wraps around loads the whole tile.
    """
    relevant = tensor.dims
    comps = components(tensor, set_loops)
    members = list(member_loops)
    own = components(tensor, [lp for lp in set_loops if lp not in members]) if members else comps
    if reuse:
        last = max((j for j, lp in enumerate(step_loops) if lp.dim in relevant), default=-1)
    else:
        last = len(step_loops) - 1
    steps = list(step_loops[: last + 1])

    def free(loops) -> int:  # loops of dims the tensor does not depend on multiply the count
        return math.prod(lp.factor for lp in loops if lp.dim not in relevant)

    def comp_loops(comp, loops):
        return [lp for lp in loops if lp.dim in comp.dims]

    def size_sum(comp, loops) -> int:
        """Sum of the component's tile sizes over all values of ``loops``."""
        if comp.hi is None:  # unclipped: every position has the same size
            return comp.size * math.prod(lp.factor for lp in loops)
        closed = _progression_sizes(comp, tuple(loops))
        if closed is not None:
            return closed[0]
        return int(comp.sizes(comp.shifts(loops)).sum())

    def size_max(comp, loops) -> int:
        if comp.hi is None:
            return comp.size
        closed = _progression_sizes(comp, tuple(loops))
        if closed is not None and closed[1] is not None:
            return closed[1]
        return int(comp.sizes(comp.shifts(loops)).max())

    per_comp_all, max_words = [], 1
    for comp in comps:
        loops = comp_loops(comp, list(instance_loops) + steps)
        per_comp_all.append(size_sum(comp, loops))
        max_words *= size_max(comp, loops)
    total = free(list(instance_loops) + steps) * math.prod(per_comp_all)
    distinct = free(instance_loops) * math.prod(per_comp_all)

    if reuse and total:
        # Subtract the steps whose tile equals the previous one: loop j increments,
        # loops j+1..last reset from their last value to 0.
        for j, lj in enumerate(steps):
            inner = steps[j + 1:]
            outer = list(instance_loops) + steps[:j]
            mult = free(outer) * (lj.factor - 1 if lj.dim not in relevant else 1)
            prod = mult
            slide = delta and (delta_across_resets or not any(lp.dim in relevant for lp in inner))
            for comp, comp_own in zip(comps, own):
                moved = [lp for lp in inner if lp.dim in comp.dims]
                if lj.dim not in comp.dims and not moved:
                    prod *= size_sum(comp, comp_loops(comp, outer))
                    continue
                reset = np.zeros(len(comp.axes), dtype=np.int64)
                for lp in moved:
                    reset += (lp.factor - 1) * lp.stride * comp.coef[lp.dim]
                grid = comp_loops(comp, outer)
                if lj.dim in comp.dims:
                    grid = grid + [lj._replace(factor=lj.factor - 1)]
                    bump = lj.stride * comp.coef[lj.dim]
                else:
                    bump = np.zeros(len(comp.axes), dtype=np.int64)
                if slide:  # words kept from the previous tile (members: the union's words no member needs anew)
                    mine = [lp for lp in members if lp.dim in comp.dims]
                    prod *= _kept_words(comp, comp_own, grid, mine, reset, bump)
                    if prod == 0:
                        break
                    continue
                if comp.hi is None:
                    # Unclipped: the tile moves by bump - reset everywhere (members alike); it repeats
                    # only when that shift is zero.
                    prod *= size_sum(comp, grid) if np.all(bump == reset) else 0
                    if prod == 0:
                        break
                    continue
                mine = [lp for lp in members if lp.dim in comp.dims]
                repeated = None if mine else _repeated_words(comp, grid, reset, bump)
                if repeated is not None:  # counted on the borders only (see _repeated_words)
                    prod *= repeated
                    if prod == 0:
                        break
                    continue
                before = comp.shifts(grid, reset)
                after = comp.shifts(grid) + bump[None, :]
                if mine:  # the union repeats only when every member's own tile repeats
                    combos = math.prod(lp.factor for lp in mine)
                    own_before = comp_own.shifts(grid + mine, reset)
                    own_after = comp_own.shifts(grid + mine) + bump[None, :]
                    same = comp_own.equal(own_before, own_after).reshape(-1, combos).all(axis=1)
                else:
                    same = comp.equal(before, after)
                prod *= int(comp.sizes(after[same]).sum()) if same.any() else 0
                if prod == 0:
                    break
            total -= prod
    return TileCounts(changes=int(total), distinct=int(distinct), max_words=int(max_words))


_CHUNK = 1 << 18  # shifts handled at once where a border is enumerated


def _increasing_terms(terms: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """``terms`` (step, count) sorted so that the sum over them, read as a mixed-radix number with the
    smallest step as its last digit, increases strictly with that number; None when it does not."""
    terms = sorted((c, f) for c, f in terms if f > 1)
    span = 0
    for c, f in terms:
        if c <= span:
            return None
        span += c * (f - 1)
    return terms


def _decode(terms: list[tuple[int, int]], index: np.ndarray) -> np.ndarray:
    """The sums of ``terms`` at the mixed-radix numbers ``index`` (``_increasing_terms`` order)."""
    out = np.zeros(len(index), dtype=np.int64)
    for c, f in terms:
        out += (index % f) * c
        index = index // f
    return out


def _repeated_words(comp: _Component, grid: list, reset: np.ndarray, bump: np.ndarray) -> int | None:
    """Sum over the values of ``grid`` of the words of the tile after a step, where it equals the tile
    before it (the old one sits at ``reset``, the new one at ``bump``); None when this needs the
    general enumeration.  For a progression tile moved by loops whose positions increase with their
    mixed-radix index, the positions where both tiles lie wholly inside the tensor form one index
    interval: there the tiles are equal exactly when ``bump == reset`` (and hold the whole tile), so
    only the two borders are enumerated, which the tile's span bounds, not the dim's."""
    if comp.progression is None or comp.hi is None or not comp.single:
        return None
    terms = _increasing_terms([(int(lp.stride * comp.coef[lp.dim][0]), lp.factor) for lp in grid])
    if terms is None:
        return None
    first, step, count = comp.progression
    hi, offset = int(comp.hi[0]), int(comp.offset[0])
    r, b = int(reset[0]), int(bump[0])
    n_grid = math.prod(f for _, f in terms)
    value = lambda k: int(_decode(terms, np.array([k], dtype=np.int64))[0])  # noqa: E731
    # positions g with both tiles inside [0, hi): g in [lo, up]
    lo = -first - offset - min(r, b)
    up = hi - 1 - first - step * (count - 1) - offset - max(r, b)
    import bisect

    k_lo = bisect.bisect_left(range(n_grid), lo, key=value)
    k_up = bisect.bisect_right(range(n_grid), up, key=value) if up >= lo else k_lo
    inside = max(0, k_up - k_lo)
    total = inside * count if r == b else 0
    for start, stop in ((0, k_lo), (max(k_lo, k_up), n_grid)):
        for a in range(start, stop, _CHUNK):
            g = _decode(terms, np.arange(a, min(stop, a + _CHUNK), dtype=np.int64)) + offset
            before, after = (g + r)[:, None], (g + b)[:, None]
            same = comp.equal(before, after)
            total += int(comp.sizes(after[same]).sum()) if same.any() else 0
    return total


def _clip_count(points: np.ndarray, shift: np.ndarray, hi) -> int:
    """Points (rows of axis values) moved by ``shift`` that fall inside [0, hi) on every axis."""
    if hi is None:
        return len(points)
    coords = points + shift[None, :]
    return int(np.all((coords >= 0) & (coords < hi), axis=1).sum())


def _kept_words(comp: _Component, comp_own: _Component, grid: list, members: list, reset, bump) -> int:
    """Sum over ``grid`` of the words of the component's new tile that need no fetch (delta mode).

    Without members: |new & old| (the old tile sits at ``reset``, the new one is moved by ``bump``).
    With members (a multicast group): |union of new| - |union over members of (new_m - old_m)|.
    """
    before = comp.shifts(grid, reset)
    after = comp.shifts(grid) + bump[None, :]
    d = (reset - bump).astype(np.int64)  # old tile = new tile moved by d
    if not members and comp.progression is not None:  # progressions: the common part is one too
        first, step, count = comp.progression
        shift = int(d[0])
        if shift % step or abs(shift) // step >= count:
            return 0
        first, count = first + max(shift, 0), count - abs(shift) // step
        if comp.hi is None:
            return count * len(after)
        return int(_clip_progression(first, step, count, after[:, 0], int(comp.hi[0]))[1].sum())
    if not members:
        base = comp.base
        common = np.array(sorted(_row_set(base) & _row_set(base + d[None, :])),
                          dtype=np.int64).reshape(-1, len(comp.axes))
        if comp.hi is None:
            return len(common) * len(after)
        return sum(_clip_count(common, a, comp.hi) for a in after)
    own_offsets = comp_own.shifts(members) - comp_own.offset[None, :]
    base = comp_own.base
    cache: dict = {}
    total = 0
    for b, a in zip(before, after):
        key = (tuple(b), tuple(a)) if comp.hi is not None else ()
        if key not in cache:
            union_new, fresh = set(), set()
            for off in own_offsets:
                new = _clipped_rows(base + (a + off)[None, :], comp.hi)
                old = _clipped_rows(base + (b + off)[None, :], comp.hi)
                union_new |= new
                fresh |= new - old
            cache[key] = len(union_new) - len(fresh)
        total += cache[key]
    return total


def _row_set(points: np.ndarray) -> set:
    return {tuple(r) for r in points.tolist()}


def _clipped_rows(coords: np.ndarray, hi) -> set:
    if hi is not None:
        coords = coords[np.all((coords >= 0) & (coords < hi), axis=1)]
    return _row_set(coords)
