"""Mapping: per memory level, the temporal and spatial loop factors, loop order and bypass.

Semantics (shared by the cost model, the trace counter, the MIP decoder and
the code generators):

* ``levels[i]`` is aligned with ``arch.levels[i]`` (0 = DRAM, outermost).
* The tiled loop nest, outer to inner, is: level 0's temporal loops in
  ``order`` (outer to inner), level 0's spatial loops, level 1's temporal
  loops, level 1's spatial loops, ..., the innermost level's spatial loops.
* The tile resident in one instance of level ``i`` spans the factors of levels
  ``i`` and deeper, temporal and spatial: its temporal loops walk over the
  tiles of level ``i+1`` inside it; its spatial loops spread them over the
  ``fanout`` instances of level ``i+1``.
* A tensor in ``bypass`` (or whose role the level may not hold) is not stored
  at that level; its tiles go straight between the nearest levels that do hold it.
* For every dim, the product of all its factors equals its loop bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

from workloads import FrameworkError


class MappingError(FrameworkError, ValueError):
    """A mapping does not fit its workload or architecture, or a mapping file is malformed."""


class Loop(NamedTuple):
    """One loop of the tiled nest."""

    level: int
    dim: str
    factor: int
    spatial: bool


@dataclass(frozen=True)
class LevelMapping:
    """Factors at one level: ``temporal`` and ``spatial`` (dim -> factor, 1 when absent),
    ``order`` of the temporal loops (outer to inner; dims not listed go innermost in
    the workload's dim order), and the tensor names that ``bypass`` this level."""

    temporal: dict[str, int] = field(default_factory=dict)
    spatial: dict[str, int] = field(default_factory=dict)
    order: tuple[str, ...] = ()
    bypass: frozenset[str] = frozenset()

    def __post_init__(self):
        object.__setattr__(self, "temporal", {d: int(f) for d, f in dict(self.temporal).items() if int(f) != 1})
        object.__setattr__(self, "spatial", {d: int(f) for d, f in dict(self.spatial).items() if int(f) != 1})
        object.__setattr__(self, "order", tuple(self.order))
        object.__setattr__(self, "bypass", frozenset(self.bypass))

    def temporal_factor(self, dim: str) -> int:
        return self.temporal.get(dim, 1)

    def spatial_factor(self, dim: str) -> int:
        return self.spatial.get(dim, 1)

    def loop_order(self, dims) -> tuple[str, ...]:
        """Temporal loop dims, outer to inner, completed with unlisted dims in ``dims`` order."""
        listed = [d for d in self.order if d in dims]
        return tuple(listed + [d for d in dims if d not in listed])

    @property
    def fanout_used(self) -> int:
        return math.prod(self.spatial.values())


@dataclass(frozen=True)
class Mapping:
    """A schedule: one LevelMapping per architecture level, DRAM first."""

    levels: tuple[LevelMapping, ...]

    def __post_init__(self):
        object.__setattr__(self, "levels", tuple(self.levels))

    def factor(self, dim: str) -> int:
        """Product of all factors of ``dim``: its bound (``validate``), or more where the CPU code generator
        cuts a ragged last tile (``targets.cpu.plan.ragged_nest``)."""
        return math.prod(lm.temporal_factor(dim) * lm.spatial_factor(dim) for lm in self.levels)

    def tile_extents(self, level: int, dims) -> dict[str, int]:
        """Loop extents of the tile resident in one instance of ``level`` (levels >= level)."""
        return {d: math.prod(lm.temporal_factor(d) * lm.spatial_factor(d) for lm in self.levels[level:]) for d in dims}

    def loops(self, dims) -> Iterator[Loop]:
        """The tiled loop nest, outer to inner (factor-1 loops omitted)."""
        for i, lm in enumerate(self.levels):
            for d in lm.loop_order(dims):
                if lm.temporal_factor(d) > 1:
                    yield Loop(i, d, lm.temporal_factor(d), False)
            for d in dims:
                if lm.spatial_factor(d) > 1:
                    yield Loop(i, d, lm.spatial_factor(d), True)

    def stores(self, level: int, tensor, arch) -> bool:
        """Whether ``tensor`` is kept at ``level`` (held by the arch and not bypassed)."""
        return arch.levels[level].may_hold(tensor) and tensor.name not in self.levels[level].bypass
