"""Architecture description: a memory hierarchy from DRAM inwards, with spatial fan-out.

Level ``i`` is outside level ``i+1``.  A level with ``fanout > 1`` feeds that
many instances of the next inner level; the mapping's spatial factors at level
``i`` say which loop dims are unrolled across those instances.  The innermost
level feeds the MAC units (one MAC unit per innermost instance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from workloads import ROLES, FrameworkError


class ArchError(FrameworkError, ValueError):
    """An architecture file or preset is malformed or inconsistent."""


@dataclass(frozen=True)
class SpatialAxis:
    """One physical axis of a level's fan-out (a row or column of a systolic array).

    A dim may be unrolled on this axis when the set of tensor roles it indexes
    equals ``roles`` (e.g. Gemmini WS rows take reduction dims, which index
    the input and the weight but not the output).  ``window_dims``: whether
    dims that share a tensor axis with another dim (P, R of a sliding window)
    may be unrolled here.  ``dims``: an explicit allow-list that overrides the
    role rule when not empty.
    """

    name: str
    size: int
    roles: frozenset[str] = frozenset()
    window_dims: bool = False
    dims: frozenset[str] = frozenset()

    def admits(self, dim: str, workload) -> bool:
        if self.dims:
            return dim in self.dims
        if not self.window_dims and dim in workload.window_dims():
            return False
        return frozenset(t.role for t in workload.tensors if dim in t.dims) == self.roles


@dataclass(frozen=True)
class Level:
    """One memory level (per instance).

    capacity_bytes: None = unbounded (DRAM).  holds: tensor roles this level
    may keep (CoSA's "B" matrix); a tensor whose role is not held bypasses it.
    word_bits: when set, every tensor is stored here with this word size (an
    int32 accumulator holding int8 outputs).  Bandwidths in bytes per cycle
    (None = not a bottleneck).  Energies in pJ per byte.  fanout: instances of
    the next inner level below one instance of this level; spatial_axes give
    its shape (their sizes multiply to at most ``fanout``).  double_buffered:
    fills overlap compute.

    Calibration fields (defaults change nothing):
    partial_sum_bits: output partial sums spilled from this level to the next
    outer holder and read back from it move with this many bits per word
    there (Gemmini spills int32 accumulators to DRAM as 32-bit rows); the
    final results keep the outer level's word size.  init_fill_bits: each
    output tile's first residency here is initialised from the next outer
    holder with this many bits per word (a bias broadcast into the
    accumulator) instead of starting at zero.  compute_quantum: the temporal
    iterations of the loops at and below this level, per residency, round up
    to a multiple of this (Gemmini: a compute streams up to DIM rows and
    always occupies the array DIM cycles).
    """

    name: str
    capacity_bytes: int | None = None
    holds: frozenset[str] = frozenset(ROLES)
    word_bits: int | None = None
    read_bandwidth: float | None = None
    write_bandwidth: float | None = None
    read_energy_pj_per_byte: float = 0.0
    write_energy_pj_per_byte: float = 0.0
    fanout: int = 1
    spatial_axes: tuple[SpatialAxis, ...] = ()
    double_buffered: bool = False
    multicast: bool = True
    partial_sum_bits: int | None = None
    init_fill_bits: int | None = None
    compute_quantum: int = 1

    def bytes_per_word(self, tensor) -> float:
        return (self.word_bits if self.word_bits else tensor.bits) / 8

    def may_hold(self, tensor) -> bool:
        return tensor.role in self.holds


@dataclass(frozen=True)
class Arch:
    """A memory hierarchy (``levels[0]`` is DRAM or the network) and its MAC units.

    macs_per_cycle: MACs per cycle of one innermost instance.  mac_energy_pj:
    energy per MAC.  frequency_hz: for converting cycles to seconds.
    ``dataflow``: a label for presets that have several (Gemmini "ws"/"os").
    ``source``: where the numbers come from.
    """

    name: str
    levels: tuple[Level, ...]
    macs_per_cycle: int = 1
    mac_energy_pj: float = 0.0
    frequency_hz: float = 1e9
    dataflow: str | None = None
    source: str = ""
    params: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "levels", tuple(self.levels))
        src = f"arch {self.name}"
        if not self.levels:
            raise ArchError("an architecture needs at least one level", source=src, field="levels")
        names = [lv.name for lv in self.levels]
        if len(set(names)) != len(names):
            raise ArchError(f"level names repeat: {names}", source=src, field="levels")
        for lv in self.levels:
            if lv.fanout < 1:
                raise ArchError(f"fanout must be >= 1, got {lv.fanout}", source=src, field=f"{lv.name}.fanout")
            if lv.capacity_bytes is not None and lv.capacity_bytes < 0:
                raise ArchError("capacity must be >= 0", source=src, field=f"{lv.name}.capacity_bytes")
            for label in ("partial_sum_bits", "init_fill_bits"):
                bits = getattr(lv, label)
                if bits is not None and (isinstance(bits, bool) or not isinstance(bits, int) or bits < 1):
                    raise ArchError(f"must be a positive integer or None, got {bits!r}", source=src,
                                    field=f"{lv.name}.{label}")
            if isinstance(lv.compute_quantum, bool) or not isinstance(lv.compute_quantum, int) \
                    or lv.compute_quantum < 1:
                raise ArchError(f"must be a positive integer, got {lv.compute_quantum!r}", source=src,
                                field=f"{lv.name}.compute_quantum")
            unknown = set(lv.holds) - set(ROLES)
            if unknown:
                raise ArchError(f"unknown roles {sorted(unknown)}; known {ROLES}", source=src, field=f"{lv.name}.holds")
            if lv.spatial_axes and math.prod(a.size for a in lv.spatial_axes) > lv.fanout:
                raise ArchError("spatial axes multiply to more than the fanout", source=src, field=f"{lv.name}.spatial_axes")
        if set(self.levels[0].holds) != set(ROLES):
            raise ArchError("the outermost level must hold every tensor role", source=src, field=f"{self.levels[0].name}.holds")

    @property
    def level_names(self) -> tuple[str, ...]:
        return tuple(lv.name for lv in self.levels)

    def level(self, name: str) -> Level:
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise ArchError(f"no level named '{name}'; have {list(self.level_names)}", source=f"arch {self.name}")

    def level_index(self, name: str) -> int:
        return self.level_names.index(self.level(name).name)

    def instances(self, index: int) -> int:
        """Instances of level ``index`` in the whole machine."""
        return math.prod(lv.fanout for lv in self.levels[:index])

    @property
    def total_macs_per_cycle(self) -> int:
        """Peak MACs per cycle of the whole machine."""
        return self.instances(len(self.levels)) * self.macs_per_cycle

    def with_levels(self, **changes) -> "Arch":
        """A copy with some levels replaced: ``arch.with_levels(Scratchpad=dict(capacity_bytes=1024))``."""
        levels = []
        for lv in self.levels:
            levels.append(replace(lv, **changes[lv.name]) if lv.name in changes else lv)
        return replace(self, levels=tuple(levels))
