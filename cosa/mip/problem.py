"""The facts the MIP is built from: prime factors, divisors, holders, spatial axes.

Pure functions of a ``LoopNest`` and an ``Arch``; nothing here knows Pyomo.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from workloads.divisors import divisors, prime_factor_counts
from workloads.footprint import clipped_span_entries, stored_span_entries

from ..schedule import SchedulingError


@dataclass(frozen=True)
class SpatialSlot:
    """One spatial axis of one level: ``size`` instances along it, ``dims`` it may unroll."""

    level: int
    name: str
    size: int
    dims: tuple[str, ...]


@dataclass(frozen=True)
class WindowAxis:
    """A tensor axis whose extent is not a single loop extent (a sliding window, a strided index).

    ``terms``: (dim, |coefficient|) of the dims with bound > 1; ``clip``: the
    stored extent of the axis (``Tensor.shape``) or None.  Its extent for loop
    extents e is ``min(clip, 1 + sum |c| * (e - 1))`` (``workloads.footprint``).
    """

    terms: tuple[tuple[str, int], ...]
    clip: int | None

    def extent(self, extents: dict[str, int]) -> int:
        """Entries of the axis in a tile of loop ``extents`` (``workloads.footprint.clipped_span_entries``)."""
        return clipped_span_entries(self.terms, extents, self.clip)

    def stored_extent(self, extents: dict[str, int], groups: frozenset[str] = frozenset()) -> int:
        """Entries a row-addressed buffer keeps (``workloads.footprint.stored_span_entries``): the padding
        too (not clipped), without the gaps of a common stride, group dims as separate blocks."""
        return stored_span_entries(self.terms, extents, groups)

    def combos(self, bounds: dict[str, int]):
        """Every tuple of loop extents (divisors of the bounds) of this axis' dims."""
        return product(*(divisors(bounds[d]) for d, _ in self.terms))


@dataclass(frozen=True)
class TensorAxes:
    """How a tensor's tile is computed from loop extents: plain dims (one word per
    loop index) times window axes."""

    plain: tuple[str, ...]
    windows: tuple[WindowAxis, ...]


@dataclass(frozen=True)
class Problem:
    """What the formulation needs, precomputed.

    ``dims``: loop dims with bound > 1 (dims of bound 1 have factor 1 everywhere).
    ``primes[d]``: prime -> multiplicity.  ``holders[t]``: levels that store
    tensor ``t``, outermost (DRAM, 0) first.  ``slots``: the spatial axes.
    ``order_levels``: levels whose temporal loop order is a decision.
    ``capacity[i]``: usable bytes of one buffer of level ``i`` (None: unbounded;
    halved when the level is double buffered).
    """

    workload: object
    arch: object
    dims: tuple[str, ...]
    bounds: dict
    primes: dict
    holders: dict
    slots: tuple[SpatialSlot, ...]
    order_levels: tuple[int, ...]
    capacity: tuple
    axes: dict

    @property
    def levels(self) -> int:
        return len(self.arch.levels)

    def relevant(self, dim: str, tensor_name: str) -> bool:
        return dim in self.workload.tensor(tensor_name).dims


def tensor_axes(tensor, bounds: dict[str, int]) -> TensorAxes:
    """Split a tensor's axes into plain dims and window axes (ignoring dims of bound 1)."""
    plain: list[str] = []
    windows: list[WindowAxis] = []
    for axis, expr in enumerate(tensor.indices):
        terms = tuple((d, abs(c)) for d, c in expr.terms if bounds[d] > 1)
        clip = tensor.shape[axis] if tensor.shape is not None else None
        if not terms:
            continue
        if len(terms) == 1 and terms[0][1] == 1 and (clip is None or clip >= bounds[terms[0][0]]):
            plain.append(terms[0][0])
        else:
            windows.append(WindowAxis(terms, clip))
    return TensorAxes(tuple(plain), tuple(windows))


def build_problem(workload, arch, order_levels: str | tuple[int, ...] = "all") -> Problem:
    """Collect the MIP's inputs and check the cheap infeasibilities first.

    ``order_levels``: "all" (every level that has an inner storage level),
    "outer" (DRAM only), or explicit level indices.
    Raises SchedulingError naming the level and tensor when a level cannot hold
    even a one-word tile of a tensor it must store.
    """
    src = f"schedule of {workload.name} on {arch.name}"
    bounds = dict(workload.dims)
    dims = tuple(d for d, b in bounds.items() if b > 1)
    primes = {d: prime_factor_counts(bounds[d]) for d in dims}
    holders = {t.name: tuple(i for i, lv in enumerate(arch.levels) if i == 0 or lv.may_hold(t)) for t in workload.tensors}
    capacity = []
    for i in range(len(arch.levels)):
        capacity.append(arch.usable_capacity(i) if i > 0 else None)
    # A level must hold a one-word tile of each tensor it stores (and all of them together).
    for i, lv in enumerate(arch.levels):
        if capacity[i] is None:
            continue
        stored = [t for t in workload.tensors if i in holders[t.name]]
        need = sum(lv.bytes_per_word(t) for t in stored)
        if need > capacity[i]:
            names = ", ".join(f"{t.name} ({lv.bytes_per_word(t):g} B/word)" for t in stored)
            raise SchedulingError(
                f"capacity of level {i} ({lv.name}): {capacity[i]:g} usable bytes cannot hold even one word of "
                f"each tensor it must store: {names}", source=src, field=f"{lv.name}.capacity_bytes")
    slots = []
    for i, lv in enumerate(arch.levels):
        if lv.fanout <= 1:
            continue
        if lv.spatial_axes:
            for axis in lv.spatial_axes:
                admitted = tuple(d for d in dims if axis.admits(d, workload))
                if axis.size > 1 and admitted:
                    slots.append(SpatialSlot(i, axis.name, axis.size, admitted))
        else:
            slots.append(SpatialSlot(i, "fanout", lv.fanout, dims))
    inner_holder = max((max(h) for h in holders.values()), default=0)
    if order_levels == "all":
        olevels = tuple(i for i in range(len(arch.levels)) if i < inner_holder)
    elif order_levels == "outer":
        olevels = (0,) if inner_holder > 0 else ()
    else:
        olevels = tuple(sorted(set(int(i) for i in order_levels)))
        bad = [i for i in olevels if not 0 <= i < len(arch.levels)]
        if bad:
            raise SchedulingError(f"order levels {bad} are not levels of {arch.name}", source=src, field="order_levels")
    axes = {t.name: tensor_axes(t, bounds) for t in workload.tensors}
    return Problem(workload, arch, dims, bounds, primes, holders, tuple(slots), olevels, tuple(capacity), axes)
