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
    role rule when not empty.  ``excluded``: dims never unrolled here, whatever
    their roles (Gemmini's WS rows: a kernel's R and S, which its programs walk
    in time even where they index no sliding window, as on a 1x1 image).
    """

    name: str
    size: int
    roles: frozenset[str] = frozenset()
    window_dims: bool = False
    dims: frozenset[str] = frozenset()
    excluded: frozenset[str] = frozenset()

    def admits(self, dim: str, workload) -> bool:
        if dim in self.excluded:
            return False
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
    to a multiple of this (a compute that always occupies the array a fixed
    number of cycles).  compute_rows: the most iterations of this level's
    temporal loops one compute command streams (Gemmini WS Registers: DIM
    pixel rows under one weight block); None = no per-compute modelling
    here.  compute_overhead_cycles: cycles each compute command adds to the
    iterations it streams (only with compute_rows).  See
    ``costmodel.run_rules`` for how loops merge into one command's run.
    A level sets compute_rows or a compute_quantum above 1, not both.

    Row-addressed buffers (defaults change nothing): row_bytes: the level
    stores tiles in rows of this many bytes (Gemmini: DIM int8 words in the
    scratchpad, DIM int32 words in the accumulator).  row_axes: role ->
    name of a spatial axis of this level's fan-out or of the nearest inner
    level that has an axis of that name; one row of a tensor of that role
    holds one block of the words of the dims the mapping unrolls on that
    axis (the spatial factors there, of the dims that index the tensor), and
    a block narrower than a row still takes a whole row (a wider one takes
    ceil(block bytes / row_bytes) rows).  A tile is stored as a dense box:
    per tensor axis the range of its index over the tile with the gaps of a
    common stride skipped (halo and padding included: a convolution's
    padding is moved in as zeros), dims that index every tensor (groups)
    stored as separate blocks.  Rows of a tile = ceil(box words / block) x
    rows per block; roles not in row_axes are packed densely (ceil(box bytes
    / row_bytes)).  Exact for Gemmini's code generator (input rows hold the
    channels unrolled on the array rows under WS, weight and accumulator
    rows the output channels unrolled on the columns).  See
    ``mappings.validate.tile_rows``.

    Per-row transfer cost (defaults change nothing): a DMA that moves a tile
    between this level (the parent) and its next inner holder row by row pays
    per row, not per byte.  read_row_extra_cycles / write_row_extra_cycles:
    cycles a row read from / written to this level costs on top of its beats;
    read_row_min_cycles / write_row_min_cycles: the least cycles one row takes.
    A row of b bytes then costs max(ceil(b / bandwidth) + extra, min) cycles
    instead of b / bandwidth (Gemmini: an mvin row costs its 16-byte beats + 1,
    an mvout row at least 1.5 cycles).  Rows are counted for the tensors whose
    role has a row axis at the inner holder (``row_axes``): one row carries the
    inner tile's extent along the dims unrolled on that axis, at most
    ``max_transfer_row_bytes`` of the inner level's words (a whole number of
    blocks), and a block narrower than the axis moves alone.
    max_transfer_row_bytes: set on the inner level; None = no cap.

    separate_channels: reads and writes have their own channels of read_bandwidth and
    write_bandwidth and overlap (Timeloop's model: its files give this); False (the default):
    one port serves both in turn (Gemmini's DMA).
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
    compute_rows: int | None = None
    compute_overhead_cycles: int = 0
    row_bytes: int | None = None
    row_axes: tuple[tuple[str, str], ...] = ()
    read_row_extra_cycles: float = 0.0
    read_row_min_cycles: float = 0.0
    write_row_extra_cycles: float = 0.0
    write_row_min_cycles: float = 0.0
    max_transfer_row_bytes: int | None = None
    separate_channels: bool = False

    def __post_init__(self):
        # accept {role: axis} and keep a hashable, canonical (role, axis) tuple in ROLES order
        axes = self.row_axes
        pairs = list(axes.items()) if isinstance(axes, dict) else list(axes or ())
        if not isinstance(axes, (dict, tuple, list)) and axes is not None or \
                not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
            raise ArchError(f"expected role -> spatial axis name pairs, got {axes!r}", source=f"level {self.name}",
                            field=f"{self.name}.row_axes")
        order = {r: k for k, r in enumerate(ROLES)}
        pairs = sorted(((str(r), str(a)) for r, a in pairs), key=lambda p: (order.get(p[0], len(order)), p))
        object.__setattr__(self, "row_axes", tuple(pairs))

    @property
    def row_transfer_costed(self) -> bool:
        """Whether rows moved to or from this level cost per row (any ``*_row_*_cycles`` set)."""
        return any((self.read_row_extra_cycles, self.read_row_min_cycles, self.write_row_extra_cycles,
                    self.write_row_min_cycles))

    def row_transfer_cycles(self, row_bytes: float, write: bool) -> float:
        """Cycles one row of ``row_bytes`` bytes read from (written to, ``write``) this level takes.

        max(ceil(row bytes / bandwidth) + extra, min); without a bandwidth only the extra and min count.
        """
        bandwidth = self.write_bandwidth if write else self.read_bandwidth
        extra = self.write_row_extra_cycles if write else self.read_row_extra_cycles
        least = self.write_row_min_cycles if write else self.read_row_min_cycles
        beats = math.ceil(row_bytes / bandwidth - 1e-9) if bandwidth else 0
        return max(beats + extra, least)

    def transfer_cycles(self, read_bytes: float, write_bytes: float) -> float:
        """Cycles one instance takes to read ``read_bytes`` from and write ``write_bytes`` to this level.

        The one place for the port rule: a port serves reads and writes in turn (read bytes /
        read_bandwidth + write bytes / write_bandwidth); with ``separate_channels`` reads and
        writes flow at once on their own channels (Timeloop's rule: the slower channel's cycles,
        max(read bytes / read_bandwidth, write bytes / write_bandwidth)).  An unlimited bandwidth costs 0.
        """
        reads = read_bytes / self.read_bandwidth if self.read_bandwidth else 0.0
        writes = write_bytes / self.write_bandwidth if self.write_bandwidth else 0.0
        return max(reads, writes) if self.separate_channels else reads + writes

    def row_axis(self, role: str) -> str | None:
        """The spatial axis whose block one row of a tensor of ``role`` holds (None: packed densely)."""
        return dict(self.row_axes).get(role)

    def bytes_per_word(self, tensor) -> float:
        return (self.word_bits if self.word_bits else tensor.bits) / 8

    def may_hold(self, tensor) -> bool:
        return tensor.role in self.holds


@dataclass(frozen=True)
class Arch:
    """A memory hierarchy (``levels[0]`` is DRAM or the network) and its MAC units.

    macs_per_cycle: MACs per cycle of one innermost instance (a fraction where an instance is one vector of
    several that share an FMA issue slot, as the CPU register level has).  mac_energy_pj:
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
        m = self.macs_per_cycle  # a fraction where one instance is a share of a wider unit (a SIMD lane)
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m <= 0:
            raise ArchError(f"must be a positive number, got {m!r}", source=src, field="macs_per_cycle")
        for label, positive in (("frequency_hz", True), ("mac_energy_pj", False)):
            v = getattr(self, label)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < 0 or (positive and v == 0):
                raise ArchError(f"must be a {'positive' if positive else 'non-negative'}, finite number, got {v!r}",
                                source=src, field=label)
        names = [lv.name for lv in self.levels]
        if len(set(names)) != len(names):
            raise ArchError(f"level names repeat: {names}", source=src, field="levels")
        for lv in self.levels:
            if lv.fanout < 1:
                raise ArchError(f"fanout must be >= 1, got {lv.fanout}", source=src, field=f"{lv.name}.fanout")
            cap = lv.capacity_bytes
            if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap <= 0):
                raise ArchError(f"capacity must be a positive number of bytes (None: unbounded), got {cap!r}",
                                source=src, field=f"{lv.name}.capacity_bytes")
            for label in ("read_bandwidth", "write_bandwidth"):
                bw = getattr(lv, label)
                if bw is not None and (isinstance(bw, bool) or not isinstance(bw, (int, float))
                                       or not math.isfinite(bw) or bw <= 0):
                    raise ArchError(f"bandwidth must be a positive, finite number of bytes per cycle (None: "
                                    f"unlimited), got {bw!r}", source=src, field=f"{lv.name}.{label}")
            for label in ("partial_sum_bits", "init_fill_bits"):
                bits = getattr(lv, label)
                if bits is not None and (isinstance(bits, bool) or not isinstance(bits, int) or bits < 1):
                    raise ArchError(f"must be a positive integer or None, got {bits!r}", source=src,
                                    field=f"{lv.name}.{label}")
            if isinstance(lv.compute_quantum, bool) or not isinstance(lv.compute_quantum, int) \
                    or lv.compute_quantum < 1:
                raise ArchError(f"must be a positive integer, got {lv.compute_quantum!r}", source=src,
                                field=f"{lv.name}.compute_quantum")
            rows = lv.compute_rows
            if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
                raise ArchError(f"must be a positive integer or None, got {rows!r}", source=src,
                                field=f"{lv.name}.compute_rows")
            extra = lv.compute_overhead_cycles
            if isinstance(extra, bool) or not isinstance(extra, int) or extra < 0:
                raise ArchError(f"must be a non-negative integer, got {extra!r}", source=src,
                                field=f"{lv.name}.compute_overhead_cycles")
            if rows is not None and lv.compute_quantum > 1:
                raise ArchError(f"sets both compute_rows ({rows}) and compute_quantum ({lv.compute_quantum}); "
                                "per-compute runs replace the quantum", source=src, field=f"{lv.name}.compute_rows")
            if rows is None and extra:
                raise ArchError(f"compute_overhead_cycles ({extra}) needs compute_rows", source=src,
                                field=f"{lv.name}.compute_overhead_cycles")
            _check_rows(self, lv, src)
            _check_row_transfer(lv, src)
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

    def refilled_by_double_buffer(self, index: int) -> bool:
        """Whether ``params["refill_needs_room"]`` asks level ``index`` for room for two tiles: it is the next
        level that may hold some role below a ``double_buffered`` level, whose transfers into it overlap
        compute only while the next tile can arrive beside the one in use (ZigZag's rule: a memory filled
        over half is refilled between uses; Timeloop's model and ours by default overlap regardless)."""
        if not self.params.get("refill_needs_room") or index == 0:
            return False
        lv = self.levels[index]
        for role in lv.holds:
            above = next((k for k in range(index - 1, -1, -1) if role in self.levels[k].holds), None)
            if above is not None and self.levels[above].double_buffered:
                return True
        return False

    def usable_capacity(self, index: int) -> float | None:
        """Bytes one buffer of level ``index`` may fill: its capacity, halved where it is ``double_buffered``
        or refilled by a double-buffered level under ``params["refill_needs_room"]``; None: unbounded."""
        cap = self.levels[index].capacity_bytes
        if cap is None:
            return None
        return cap / (2 if self.levels[index].double_buffered or self.refilled_by_double_buffer(index) else 1)

    def instances(self, index: int) -> int:
        """Instances of level ``index`` in the whole machine."""
        return math.prod(lv.fanout for lv in self.levels[:index])

    @property
    def total_macs_per_cycle(self) -> int:
        """Peak MACs per cycle of the whole machine."""
        return self.instances(len(self.levels)) * self.macs_per_cycle

    def axis_level(self, index: int, axis_name: str) -> int | None:
        """The first level at or inside ``index`` that has a spatial axis named ``axis_name`` (None: none)."""
        for j in range(index, len(self.levels)):
            if any(a.name == axis_name for a in self.levels[j].spatial_axes):
                return j
        return None

    def with_levels(self, **changes) -> "Arch":
        """A copy with some levels replaced: ``arch.with_levels(Scratchpad=dict(capacity_bytes=1024))``."""
        levels = []
        for lv in self.levels:
            levels.append(replace(lv, **changes[lv.name]) if lv.name in changes else lv)
        return replace(self, levels=tuple(levels))


def _check_rows(arch: Arch, lv: Level, src: str) -> None:
    """row_bytes is a positive integer or None; row_axes name known roles and axes at or below the level."""
    rb = lv.row_bytes
    if rb is not None and (isinstance(rb, bool) or not isinstance(rb, int) or rb < 1):
        raise ArchError(f"must be a positive integer or None, got {rb!r}", source=src, field=f"{lv.name}.row_bytes")
    if lv.row_axes and rb is None:
        raise ArchError(f"row_axes {dict(lv.row_axes)} need row_bytes", source=src, field=f"{lv.name}.row_axes")
    roles = [r for r, _ in lv.row_axes]
    if len(set(roles)) != len(roles):
        raise ArchError(f"a role is named twice: {roles}", source=src, field=f"{lv.name}.row_axes")
    index = arch.levels.index(lv)
    for role, axis in lv.row_axes:
        if role not in ROLES:
            raise ArchError(f"unknown role '{role}'; known {ROLES}", source=src, field=f"{lv.name}.row_axes")
        if arch.axis_level(index, axis) is None:
            below = sorted({a.name for other in arch.levels[index:] for a in other.spatial_axes})
            raise ArchError(f"role '{role}': no spatial axis named '{axis}' at or below this level "
                            f"(axes there: {below})", source=src, field=f"{lv.name}.row_axes")


def _check_row_transfer(lv: Level, src: str) -> None:
    """Per-row transfer cycles are finite non-negative numbers; max_transfer_row_bytes a positive integer."""
    for label in ("read_row_extra_cycles", "read_row_min_cycles", "write_row_extra_cycles", "write_row_min_cycles"):
        value = getattr(lv, label)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ArchError(f"must be a non-negative number, got {value!r}", source=src, field=f"{lv.name}.{label}")
    cap = lv.max_transfer_row_bytes
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise ArchError(f"must be a positive integer or None, got {cap!r}", source=src,
                        field=f"{lv.name}.max_transfer_row_bytes")


_NEIGHBOUR_FIELDS = ("partial_sum_bits", "init_fill_bits", "compute_rows", "row_bytes", "row_axes",
                     "max_transfer_row_bytes")
"""Level fields whose meaning depends on the levels next to it: such a level keeps its place."""


def sibling_runs(arch: Arch) -> list[tuple[int, int]]:
    """Runs of sibling levels: (first, last) index ranges of two or more consecutive levels below the outermost
    whose every level but the last has a fan-out of 1 (so each has one instance per instance of the run's
    first) and whose held roles are disjoint, none of them setting a field tied to its neighbours
    (``_NEIGHBOUR_FIELDS``, ``compute_quantum``).  Such levels keep different tensors side by side in one
    unit (Eyeriss's per-PE filter, input and psum scratchpads): their nesting order is a convention of the
    level list, not a property of the hardware."""
    def movable(lv: Level) -> bool:
        return lv.compute_quantum == 1 and not any(getattr(lv, f) for f in _NEIGHBOUR_FIELDS)

    runs, i, n = [], 1, len(arch.levels)
    while i < n:
        j, held = i, set(arch.levels[i].holds)
        while (j + 1 < n and arch.levels[j].fanout == 1 and movable(arch.levels[j]) and movable(arch.levels[j + 1])
               and not held & arch.levels[j + 1].holds):
            j += 1
            held |= arch.levels[j].holds
        if j > i:
            runs.append((i, j))
        i = j + 1
    return runs


def sibling_orders(arch: Arch) -> list[Arch]:
    """``arch`` and every architecture that differs from it only in the order of its sibling levels
    (``sibling_runs``): the same hardware listed another way, ``arch`` first.  A run's fan-out (``fanout``,
    ``spatial_axes``, ``multicast``) stays with its innermost position; every other field moves with its
    level."""
    from itertools import permutations, product

    runs = sibling_runs(arch)
    per_run = [list(permutations(range(a, b + 1))) for a, b in runs]
    out = []
    for choice in product(*per_run):
        levels = list(arch.levels)
        for (a, b), order in zip(runs, choice):
            last = arch.levels[b]
            for k, src in enumerate(order):
                lv = arch.levels[src]
                fan = last if a + k == b else Level("_", fanout=1)
                levels[a + k] = replace(lv, fanout=fan.fanout, spatial_axes=fan.spatial_axes, multicast=fan.multicast)
        out.append(arch if levels == list(arch.levels) else replace(arch, levels=tuple(levels)))
    return out
