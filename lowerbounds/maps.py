"""The linear index maps of a loop nest, as the HBL machinery sees them.

A loop nest with loops x in Z^d reads and writes arrays through affine maps;
only the linear parts matter for the rank conditions (offsets shift an
image, they do not change its size).  ``MapSystem`` holds, over a tuple of
loop dims:

* ``arrays``: one ``IndexMap`` per tensor (one integer row per tensor axis,
  plus its element size in bytes);
* ``phantoms``: extra maps whose image size is known a priori (a loop index
  is bounded by its loop bound; a split stride index by the filter size).
  Dinh and Demmel's loop bounds are exactly these phantom arrays.

Dims that index no tensor are dropped: iterations that differ only in such a
dim touch the same data, so the traffic of the nest is at least the traffic
of one slice of it, and the slice is what the bound is computed for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from workloads import LoopNest, WorkloadError


@dataclass(frozen=True)
class IndexMap:
    """A linear map Z^d -> Z^rows.  ``bytes_per_word``: element size of the
    array (arrays).  ``bound``: the largest image a set of iterations can have
    (phantoms, in elements); None for real arrays."""

    name: str
    rows: tuple[tuple[int, ...], ...]
    bytes_per_word: float = 1.0
    bound: float | None = None

    def support(self, dims: tuple[str, ...]) -> frozenset[str]:
        return frozenset(dims[k] for row in self.rows for k, c in enumerate(row) if c != 0)


@dataclass(frozen=True)
class MapSystem:
    """Loop dims (name -> bound), the array maps and the phantom maps."""

    dims: tuple[str, ...]
    bounds: tuple[int, ...]
    arrays: tuple[IndexMap, ...]
    phantoms: tuple[IndexMap, ...] = ()

    @property
    def ndims(self) -> int:
        return len(self.dims)

    @property
    def iterations(self) -> int:
        return math.prod(self.bounds)

    def bound_of(self, dim: str) -> int:
        return self.bounds[self.dims.index(dim)]

    def with_loop_phantoms(self) -> "MapSystem":
        """Add one coordinate map per loop, bounded by its loop bound (Dinh-Demmel's phantom arrays)."""
        extra = []
        for k, (dim, bound) in enumerate(zip(self.dims, self.bounds)):
            row = tuple(int(i == k) for i in range(self.ndims))
            extra.append(IndexMap(f"loop:{dim}", (row,), bound=float(bound)))
        return replace(self, phantoms=self.phantoms + tuple(extra))

    def without_unit_dims(self) -> "MapSystem":
        """Drop dims whose bound is 1 (a split of a small filter leaves some)."""
        keep = [k for k, b in enumerate(self.bounds) if b > 1]
        if len(keep) == self.ndims:
            return self

        def cut(m: IndexMap) -> IndexMap:
            rows = tuple(tuple(row[k] for k in keep) for row in m.rows)
            return replace(m, rows=tuple(r for r in rows if any(r)))

        return MapSystem(tuple(self.dims[k] for k in keep), tuple(self.bounds[k] for k in keep),
                         tuple(cut(m) for m in self.arrays), tuple(cut(m) for m in self.phantoms))

    def projective_relaxation(self) -> "MapSystem":
        """Every row that mixes dims dropped from the arrays, and the phantoms that mix dims dropped.

        A map reduced to some of its rows never has a larger image, so every
        exponent valid for the relaxation gives a valid (weaker) bound; its
        subspace lattice is always small (one block per dim).
        """

        def single(m: IndexMap) -> IndexMap:
            return replace(m, rows=tuple(r for r in m.rows if sum(1 for c in r if c != 0) == 1))

        return MapSystem(self.dims, self.bounds, tuple(single(m) for m in self.arrays),
                         tuple(single(m) for m in self.phantoms if all(sum(1 for c in r if c) == 1 for r in m.rows)))

    def blocks(self) -> list[tuple[int, ...]]:
        """Groups of dim positions linked by a row that mixes them (P and R in ``P + R``).

        Every row of every map lies inside one block, so subspaces, kernels and
        ranks decompose over blocks and the rank conditions can be checked
        block by block.
        """
        parent = list(range(self.ndims))

        def find(a: int) -> int:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        for m in self.arrays + self.phantoms:
            for row in m.rows:
                cols = [k for k, c in enumerate(row) if c != 0]
                for c in cols[1:]:
                    parent[find(c)] = find(cols[0])
        groups: dict[int, list[int]] = {}
        for k in range(self.ndims):
            groups.setdefault(find(k), []).append(k)
        return [tuple(g) for g in groups.values()]


def live_dims(nest: LoopNest, unit_dims: bool = False) -> tuple[str, ...]:
    """Dims that index at least one tensor and (unless ``unit_dims``) have more than one value.

    A dim of bound 1 is the constant 0: dropping it changes no map's image
    (and keeps the subspace lattices small: a depthwise layer's G + C with C = 1).
    """
    used = set().union(*(t.dims for t in nest.tensors))
    return tuple(d for d in nest.dims if d in used and (unit_dims or nest.dims[d] > 1))


def map_system(nest: LoopNest, unit_dims: bool = False) -> MapSystem:
    """The arrays of ``nest`` as linear maps over its live dims (no phantoms); ``unit_dims``
    keeps dims of bound 1 (the HBL exponent is a property of the maps, not of the bounds)."""
    if not isinstance(nest, LoopNest):
        raise WorkloadError(f"expected a LoopNest, got {type(nest).__name__}", source="lowerbounds")
    dims = live_dims(nest, unit_dims)
    arrays = []
    for t in nest.tensors:
        rows = tuple(tuple(expr.coef(d) for d in dims) for expr in t.indices if expr.terms)
        arrays.append(IndexMap(t.name, rows, bytes_per_word=t.bytes_per_word))
    return MapSystem(dims, tuple(nest.dims[d] for d in dims), tuple(arrays))
