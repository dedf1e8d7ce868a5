"""The mapspace of a workload on an architecture, shared by the random and exhaustive baselines.

A point of the space is a Mapping: for every dim, an ordered factorization of
its bound over the slots the arch offers (each level's temporal loop, and its
spatial fan-out where an axis admits the dim), a loop order per level, and no
bypass beyond what ``arch.levels[i].holds`` already fixes.

Orders are pruned to the ones that can change the cost:

* only the relative order of loops with a factor > 1 exists in a Mapping;
* the order at level ``i`` only decides how often tiles held *below* it are
  refilled, so it is enumerated only where some tensor is stored at a deeper
  level (the innermost level's order never matters);
* dims that index exactly the same tensors and are not part of a sliding
  window are interchangeable, so only one relative order of them is kept
  (the workload's dim order).

A dim that several spatial axes of a level admit is unrolled on the first of
them only (no preset has such a dim; the validator accepts any assignment).

``fits`` is a quick necessary check (spatial axis sizes and per-level
capacities, the latter counted by ``mappings.validate.tile_bytes``, so that a
row-addressed level is charged the rows it really stores); ``mappings.validate``
stays the arbiter of validity.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Iterator

from mappings import LevelMapping, Mapping
from mappings.validate import tile_bytes
from workloads import LoopNest
from workloads.divisors import divisors, prime_factor_counts, prime_factors

from ..schedule import SchedulingError


_CACHE_ENTRIES = 200_000  # level_bytes answers kept per MapSpace
SPATIAL_KEEP = 0.9  # chance that a sampled prime factor which fits a fan-out is unrolled there


@dataclass(frozen=True)
class Slot:
    """Where a factor may go: a level's temporal loop or its spatial fan-out
    (``axis``: index into the level's spatial_axes, None when it has none)."""

    level: int
    spatial: bool = False
    axis: int | None = None


def _compositions(n: int, slots: int) -> Iterator[tuple[int, ...]]:
    """Every ordered way to write ``n`` as a product of ``slots`` positive factors."""
    if slots == 1:
        yield (n,)
        return
    for d in divisors(n):
        for rest in _compositions(n // d, slots - 1):
            yield (d,) + rest


def _count_compositions(n: int, slots: int) -> int:
    return math.prod(math.comb(e + slots - 1, slots - 1) for e in prime_factor_counts(n).values())


class MapSpace:
    """The mapspace of ``workload`` on ``arch`` (see the module docstring)."""

    def __init__(self, workload: LoopNest, arch):
        self.workload = workload
        self.arch = arch
        self.dims = tuple(workload.dims)
        n_levels = len(arch.levels)
        self.slots: dict[str, tuple[Slot, ...]] = {}
        for d in self.dims:
            slots = []
            for i, lv in enumerate(arch.levels):
                slots.append(Slot(i))
                if lv.fanout > 1:
                    if lv.spatial_axes:
                        axis = next((a for a, ax in enumerate(lv.spatial_axes) if ax.admits(d, workload)), None)
                        if axis is not None:
                            slots.append(Slot(i, True, axis))
                    else:
                        slots.append(Slot(i, True, None))
            self.slots[d] = tuple(slots)
        # tensors stored at each level (held by role; no extra bypass)
        self.stored = tuple(tuple(t for t in workload.tensors if lv.may_hold(t)) for lv in arch.levels)
        deepest = max((i for i in range(n_levels) if self.stored[i]), default=0)
        self.order_levels = tuple(i for i in range(n_levels) if i < deepest)
        window = workload.window_dims()
        self.signature = {
            d: (d,) if d in window else tuple(t.name for t in workload.tensors if d in t.dims) for d in self.dims}
        self._bytes_cache: dict[tuple, float] = {}  # level_bytes by what tile_bytes reads

    # --- checks -----------------------------------------------------------------
    def slot_limit(self, slot: Slot) -> int | None:
        """Largest product of the factors one slot group may take (None = unbounded)."""
        if not slot.spatial:
            return None
        lv = self.arch.levels[slot.level]
        return lv.spatial_axes[slot.axis].size if slot.axis is not None else lv.fanout

    def spatial_ok(self, mapping: Mapping) -> bool:
        """Per level: each axis's product <= its size and the total <= the fanout."""
        for i, (lv, lm) in enumerate(zip(self.arch.levels, mapping.levels)):
            if not lm.spatial:
                continue
            if lm.fanout_used > lv.fanout:
                return False
            per_axis: dict[int | None, int] = {}
            for d, f in lm.spatial.items():
                slot = next((s for s in self.slots[d] if s.level == i and s.spatial), None)
                if slot is None:
                    return False
                per_axis[slot.axis] = per_axis.get(slot.axis, 1) * f
            for axis, product in per_axis.items():
                if axis is not None and product > lv.spatial_axes[axis].size:
                    return False
        return True

    def level_bytes(self, mapping: Mapping, level: int) -> float:
        """Bytes of the tiles stored in one instance of ``level``, as ``mappings.validate`` counts them
        (``tile_bytes``): words with halos, or at a row-addressed level the rows of the stored box
        (a stride's gaps skipped) times the row bytes."""
        # tile_bytes reads the tile extents, the level's bypass and (for a row block) spatial factors
        lm = mapping.levels[level]
        extents = mapping.tile_extents(level, self.dims)
        key = (level, tuple(extents.values()), lm.bypass,
               tuple(tuple(sorted(m.spatial.items())) for m in mapping.levels))
        found = self._bytes_cache.get(key)
        if found is None:
            if len(self._bytes_cache) >= _CACHE_ENTRIES:
                self._bytes_cache.clear()
            found = self._bytes_cache[key] = sum(tile_bytes(mapping, self.workload, self.arch, level).values())
        return found

    def level_fits(self, mapping: Mapping, level: int) -> bool:
        """The level's tiles fit its capacity (twice over when it is double buffered): the capacity
        check of ``mappings.validate`` (rows of a row-addressed level are whole, so comparing their
        bytes with the capacity is comparing rows with its whole rows)."""
        lv = self.arch.levels[level]
        if lv.capacity_bytes is None:
            return True
        buffers = 2 if lv.double_buffered else 1
        return buffers * self.level_bytes(mapping, level) <= lv.capacity_bytes

    def fits(self, mapping: Mapping) -> bool:
        return self.spatial_ok(mapping) and all(self.level_fits(mapping, i) for i in range(len(self.arch.levels)))

    # --- building mappings --------------------------------------------------------
    def build(self, placement: dict[str, tuple[int, ...]], orders: dict[int, tuple[str, ...]] | None = None) -> Mapping:
        """A Mapping from per-dim factors aligned with ``self.slots[dim]`` and per-level orders."""
        n_levels = len(self.arch.levels)
        temporal = [dict() for _ in range(n_levels)]
        spatial = [dict() for _ in range(n_levels)]
        for d, factors in placement.items():
            for slot, f in zip(self.slots[d], factors):
                if f > 1:
                    (spatial if slot.spatial else temporal)[slot.level][d] = f
        orders = orders or {}
        levels = []
        for i in range(n_levels):
            order = orders.get(i) or tuple(d for d in self.dims if d in temporal[i])
            levels.append(LevelMapping(temporal=temporal[i], spatial=spatial[i], order=order))
        return Mapping(tuple(levels))

    def canonical_orders(self, temporal_dims: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        """Orders of ``temporal_dims`` that can differ in cost (one per arrangement of signatures)."""
        dims = [d for d in self.dims if d in temporal_dims]
        if len(dims) < 2:
            yield tuple(dims)
            return
        groups: dict[tuple, list[str]] = {}
        for d in dims:
            groups.setdefault(self.signature[d], []).append(d)
        labels = [self.signature[d] for d in dims]
        seen = set()
        for perm in itertools.permutations(labels):
            if perm in seen:
                continue
            seen.add(perm)
            queues = {k: list(v) for k, v in groups.items()}
            yield tuple(queues[label].pop(0) for label in perm)

    # --- sizes ----------------------------------------------------------------------
    def factorization_count(self, dim: str) -> int:
        return _count_compositions(self.workload.dims[dim], len(self.slots[dim]))

    def dim_factorizations(self, dim: str) -> list[tuple[int, ...]]:
        """Ordered factorizations of one dim over its slots, dropping those over a slot's limit."""
        slots = self.slots[dim]
        limits = [self.slot_limit(s) for s in slots]
        return [c for c in _compositions(self.workload.dims[dim], len(slots))
                if all(lim is None or f <= lim for f, lim in zip(c, limits))]

    def size_lower_bound(self) -> int:
        """A cheap lower bound of ``exhaustive_size``: temporal placements only, one order each."""
        n_levels = len(self.arch.levels)
        return math.prod(_count_compositions(self.workload.dims[d], n_levels) for d in self.dims)

    def exhaustive_size(self) -> int:
        """Mappings the exhaustive iterator would consider (factorizations x pruned orders),
        before the capacity and combined spatial checks remove some."""
        per_dim = {d: self.dim_factorizations(d) for d in self.dims}
        # state: per order level, a sorted tuple of (signature, count) of dims with a temporal factor > 1
        states: Counter = Counter({(): 1})
        for d in self.dims:
            patterns: Counter = Counter()
            for c in per_dim[d]:
                present = tuple(
                    lvl for lvl in self.order_levels
                    if any(f > 1 for s, f in zip(self.slots[d], c) if s.level == lvl and not s.spatial))
                patterns[present] += 1
            new_states: Counter = Counter()
            for state, count in states.items():
                for present, n in patterns.items():
                    new_states[state + tuple((lvl, self.signature[d]) for lvl in present)] += count * n
            states = new_states
        total = 0
        for state, count in states.items():
            orders = 1
            for lvl in self.order_levels:
                sigs = Counter(sig for l2, sig in state if l2 == lvl)
                n = sum(sigs.values())
                orders *= math.factorial(n) // math.prod(math.factorial(k) for k in sigs.values())
            total += count * orders
        return total

    # --- enumeration ------------------------------------------------------------------
    def enumerate(self, check: bool = True) -> Iterator[Mapping]:
        """Every mapping of the space with every cost-relevant order; with ``check``, only
        those that pass ``fits`` (without it, exactly ``exhaustive_size()`` mappings)."""
        per_dim = [self.dim_factorizations(d) for d in self.dims]
        for combo in itertools.product(*per_dim):
            base = self.build(dict(zip(self.dims, combo)))
            if check and not self.fits(base):
                continue
            choices = [list(self.canonical_orders(tuple(base.levels[lvl].temporal))) for lvl in self.order_levels]
            for picked in itertools.product(*choices):
                if not any(len(o) > 1 for o in picked):
                    yield base
                    continue
                levels = list(base.levels)
                for lvl, order in zip(self.order_levels, picked):
                    lm = levels[lvl]
                    levels[lvl] = LevelMapping(lm.temporal, lm.spatial, order, lm.bypass)
                yield Mapping(tuple(levels))

    # --- sampling -------------------------------------------------------------------
    def _draw_spatial(self, rng: random.Random, placement: dict[str, list[int]]) -> dict[str, list[int]]:
        """Spatial factors first: per fan-out (a level's axis, or the level itself when it has
        no axes) in a random order, the prime factors its dims have left, in a random order,
        each placed there (with probability ``SPATIAL_KEEP``) while it fits the axis's size and
        the level's fanout.  Returns the prime factors of each dim left for temporal loops."""
        left = {d: list(prime_factors(self.workload.dims[d])) for d in self.dims}
        groups: dict[tuple[int, int | None], list[tuple[str, int]]] = {}
        for d in self.dims:
            for k, s in enumerate(self.slots[d]):
                if s.spatial:
                    groups.setdefault((s.level, s.axis), []).append((d, k))
        level_used: dict[int, int] = {}
        keys = sorted(groups, key=lambda key: (key[0], -1 if key[1] is None else key[1]))
        rng.shuffle(keys)  # which fan-out takes a dim's factors (or a level's fanout) first
        for key in keys:
            level, axis = key
            limit = self.slot_limit(Slot(level, True, axis))
            fanout = self.arch.levels[level].fanout
            primes = [(d, k, p) for d, k in groups[key] for p in left[d]]
            rng.shuffle(primes)
            used = 1
            for d, k, p in primes:
                if used * p > limit or level_used.get(level, 1) * p > fanout:
                    continue
                if rng.random() >= SPATIAL_KEEP:
                    continue
                placement[d][k] *= p
                left[d].remove(p)
                used *= p
                level_used[level] = level_used.get(level, 1) * p
        return left

    def sample(self, rng: random.Random) -> Mapping:
        """One random mapping, meant to pass ``fits``: spatial factors first (``_draw_spatial``),
        each remaining prime factor to a random temporal slot of its dim, then, outermost level
        first, factors leave an over-full level for the level above until it fits: temporal
        factors first, spatial ones only when no temporal factor is left to move.  The draws
        lean towards mappings that use the fan-out; ``enumerate`` still covers the whole space."""
        n_levels = len(self.arch.levels)
        placement = {d: [1] * len(self.slots[d]) for d in self.dims}
        left = self._draw_spatial(rng, placement)
        for d in self.dims:
            temporal = [k for k, s in enumerate(self.slots[d]) if not s.spatial]
            for p in left[d]:
                placement[d][temporal[rng.randrange(len(temporal))]] *= p
        for level in range(1, n_levels):
            relevant = {d for t in self.stored[level] for d in t.dims}
            while not self.level_fits(self.build({d: tuple(v) for d, v in placement.items()}), level):
                movable = [(d, k) for d in self.dims if d in relevant
                           for k, s in enumerate(self.slots[d]) if s.level >= level and placement[d][k] > 1]
                if not movable:
                    break  # nothing left to move out: validate will reject it
                temporal = [(d, k) for d, k in movable if not self.slots[d][k].spatial]
                pool = temporal or movable
                d, k = pool[rng.randrange(len(pool))]
                p = prime_factors(placement[d][k])[0]
                placement[d][k] //= p
                placement[d][self.slots[d].index(Slot(level - 1))] *= p
        mapping = self.build({d: tuple(v) for d, v in placement.items()})
        levels = list(mapping.levels)
        for lvl in self.order_levels:
            lm = levels[lvl]
            order = [d for d in self.dims if d in lm.temporal]
            rng.shuffle(order)
            levels[lvl] = LevelMapping(lm.temporal, lm.spatial, tuple(order), lm.bypass)
        return Mapping(tuple(levels))


def random_mapping(workload: LoopNest, arch, rng: random.Random, *, space: MapSpace | None = None,
                   max_tries: int = 200) -> Mapping:
    """A random valid mapping (``mappings.validate`` passes), by sampling with repair and rejection.

    Raises SchedulingError after ``max_tries`` rejected samples.
    """
    mapping, _ = random_mapping_with_rejections(workload, arch, rng, space=space, max_tries=max_tries)
    return mapping


def random_mapping_with_rejections(workload: LoopNest, arch, rng: random.Random, *, space: MapSpace | None = None,
                                   max_tries: int = 200) -> tuple[Mapping, int]:
    """As ``random_mapping``, also returning how many samples were rejected."""
    from mappings import MappingError, validate

    space = space or MapSpace(workload, arch)
    last_error = None
    for tries in range(max_tries):
        mapping = space.sample(rng)
        if not space.fits(mapping):
            continue
        try:
            validate(mapping, workload, arch)
        except MappingError as err:  # reject and draw again
            last_error = err
            continue
        return mapping, tries
    raise SchedulingError(f"no valid mapping in {max_tries} random samples (last reason: {last_error})",
                          source=f"workload {workload.name} on arch {arch.name}", field="mapping")
