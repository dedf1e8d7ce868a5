"""The first fill before the loops and the last drain after them (``Arch.params["fill_before_compute"]``).

Our model overlaps a double-buffered level's transfers with compute from the first cycle on: the loops'
latency is the slowest of compute and the transfers.  ZigZag 3.9.1 adds two phases around the loops
(its "data onloading" and "data offloading"): before the first MAC every memory that holds an input
receives its first tile, level after level down from DRAM, and after the last MAC the output's last tiles
go back up, level after level.  Under the option ours adds the same two terms, priced with our tiles and
our bandwidths (``fill_and_drain``):

* One link is a tensor's move between two consecutive levels that store it, a parent ``p`` and a child
  ``c``.  Its cycles are the slower end: the words ``p`` sends out of one of its instances for the first
  tiles of all children below it (multicast as ``costmodel.evaluate.access_counts`` counts a step's reads)
  at ``p``'s read bandwidth, or the words of one child's largest tile at ``c``'s write bandwidth (for the
  drain: ``c``'s read and ``p``'s write bandwidth).  An unlimited bandwidth costs 0, as in the loops.
* A tile loaded only once (no temporal loop above the child that the tensor depends on: ZigZag moves the
  loops it does not depend on below the tile, as they do not change it) does not all wait:
  ZigZag lets such a transfer borrow what its port leaves idle while the loops run, the largest first,
  down to the time of the innermost holder's tile at that port's bandwidth (a MAC needs that much before
  it starts).  Ours does the same: such tiles leave the loops' transfers (``once_bytes``), and a level's
  idle cycles are the loops' cycles minus its remaining transfer cycles.  ZigZag applies this to the
  output's last write-back too (which cannot leave before the last MAC); ours follows it, as the option is
  ZigZag's timing.
* Fill: each input's links add up along its chain (the tile reaches ``c`` before ``c`` feeds the next
  level).  Two inputs fill side by side except on links whose ports at both ends carry both inputs (ours:
  levels that store both inputs and have a bandwidth): those run one after the other, ordered to finish
  soonest (ZigZag takes the better of its two orders; ours sorts by the rest of each chain, which is the
  best order for any number of inputs).  ZigZag counts a link whose port is shared at one end only as side
  by side, and so does ours: Simba's inputs and weights both leave DRAM's read channel, in parallel.
* Drain: the output's links add up along its chain, all in series (ZigZag's worst case).

Units: cycles; words of the level's word size; bytes are words times the level's bytes per word times the
tensor's density, as everywhere in ``costmodel.evaluate``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .tiling import nest_loops, tile_counts


@dataclass(frozen=True)
class Link:
    """One tensor's first fill (an input) or last drain (the output) between ``parent`` and ``child`` (level
    names): ``parent_cycles`` and ``child_cycles`` at each end's bandwidth after the idle-port credit,
    ``once``: the child's tile is loaded once in the run, ``shared``: both ends' ports carry both inputs."""

    tensor: str
    parent: str
    child: str
    parent_cycles: float
    child_cycles: float
    once: bool
    shared: bool

    @property
    def cycles(self) -> float:
        return max(self.parent_cycles, self.child_cycles)


@dataclass(frozen=True)
class FillDrain:
    """``fill_cycles`` before the loops and ``drain_cycles`` after them; ``links``: each link's share."""

    fill_cycles: float = 0.0
    drain_cycles: float = 0.0
    links: tuple[Link, ...] = field(default=())


def _chain(arch, mapping, tensor) -> list[int]:
    return [0] + [i for i in range(1, len(arch.levels)) if mapping.stores(i, tensor, arch)]


def once_loaded(workload, arch, mapping) -> set[tuple[str, int]]:
    """{(tensor name, level index)}: the levels (below DRAM) whose tile of a tensor is loaded once in the run,
    with no temporal loop above the level that the tensor depends on."""
    loops = [lp for lp in nest_loops(mapping, list(workload.dims)) if not lp.spatial and lp.factor > 1]
    return {(t.name, c) for t in workload.tensors for c in _chain(arch, mapping, t)[1:]
            if not any(lp.dim in t.dims and lp.level < c for lp in loops)}


def _end(lv, tensor, words: float, bandwidth: float | None) -> tuple[float, float]:
    """(bytes, cycles) of ``words`` of ``tensor`` through one instance of ``lv`` at ``bandwidth``."""
    moved = words * lv.bytes_per_word(tensor) * tensor.density
    return moved, (moved / bandwidth if bandwidth else 0.0)


@dataclass
class _RawLink:
    """One link before the idle-port credit (``_credit_idle_ports`` shortens the cycles in place): levels
    ``p`` and ``c`` (indices), per end its cycles, bytes per instance and floor (the innermost holder's tile
    at that end's bandwidth), ``once`` and ``shared`` as ``Link``'s."""

    tensor: object
    p: int
    c: int
    p_cycles: float
    c_cycles: float
    once: bool
    shared: bool
    p_floor: float
    c_floor: float
    p_bytes: float
    c_bytes: float


def _raw_links(workload, arch, mapping, foot: dict) -> list[_RawLink]:
    """Every link of every tensor, with both ends' cycles at their bandwidths (see ``_RawLink``)."""
    loops = nest_loops(mapping, list(workload.dims))
    timeloop = bool(arch.params.get("timeloop_counts", False))
    inputs = [t for t in workload.tensors if not t.is_output]
    single = once_loaded(workload, arch, mapping)
    raw = []
    for t in workload.tensors:
        chain = _chain(arch, mapping, t)
        innermost = chain[-1]
        for p, c in zip(chain, chain[1:]):
            pl, cl = arch.levels[p], arch.levels[c]
            between = [lp for lp in loops if lp.spatial and p <= lp.level < c]
            mc = [lp for lp in between if arch.levels[lp.level].multicast]
            separate = [lp for lp in between if lp not in mc]
            if timeloop and not t.is_output:  # as access_counts: identical tiles only share a read
                separate += [lp for lp in mc if lp.dim in t.dims]
                mc = [lp for lp in mc if lp.dim not in t.dims]
            above = [lp for lp in loops if lp.spatial and lp.level < p]
            below = [lp for lp in loops if lp.level >= c]
            sent = tile_counts(t, [], above + separate, below + mc, member_loops=mc).changes / arch.instances(p)
            p_bw, c_bw = (pl.write_bandwidth, cl.read_bandwidth) if t.is_output else (pl.read_bandwidth,
                                                                                      cl.write_bandwidth)
            p_bytes, p_cycles = _end(pl, t, sent, p_bw)
            c_bytes, c_cycles = _end(cl, t, foot[c][t.name], c_bw)
            first = foot[innermost][t.name]  # the innermost holder's tile: what a MAC needs to start
            floors = (_end(pl, t, first, p_bw)[1], _end(cl, t, first, c_bw)[1])
            shared = not t.is_output and all(
                bw and sum(1 for x in inputs if k == 0 or mapping.stores(k, x, arch)) > 1
                for k, bw in ((p, p_bw), (c, c_bw)))
            raw.append(_RawLink(t, p, c, p_cycles, c_cycles, (t.name, c) in single, shared, *floors, p_bytes, c_bytes))
    return raw


def once_bytes(workload, arch, mapping, foot: dict) -> dict[int, tuple[float, float]]:
    """{level index: (read bytes, write bytes) per instance} of the tiles loaded once (``once_loaded``), under
    ``arch.params["fill_before_compute"]`` only (else empty).  ``evaluate`` takes them out of the loops'
    transfers: they are the first fill (or the last drain), priced by ``fill_and_drain``, as ZigZag does."""
    if not arch.params.get("fill_before_compute"):
        return {}
    out: dict[int, list[float]] = {}
    for r in _raw_links(workload, arch, mapping, foot):
        if r.once:
            out.setdefault(r.p, [0.0, 0.0])[1 if r.tensor.is_output else 0] += r.p_bytes
            out.setdefault(r.c, [0.0, 0.0])[0 if r.tensor.is_output else 1] += r.c_bytes
    return {k: (r, w) for k, (r, w) in out.items()}


def fill_and_drain(workload, arch, mapping, foot: dict, loop_cycles: float,
                   transfer: dict[str, float]) -> FillDrain:
    """The first fill and last drain in cycles (see the module docstring), under
    ``arch.params["fill_before_compute"]`` only (else zeros).

    ``foot``: footprint words per level index and tensor (``access_counts``); ``loop_cycles``: the cycles
    of the loops themselves; ``transfer``: each level's transfer cycles per instance during the loops
    (without the tiles loaded once, ``once_bytes``)."""
    if not arch.params.get("fill_before_compute"):
        return FillDrain()
    raw = _raw_links(workload, arch, mapping, foot)
    _credit_idle_ports(arch, raw, loop_cycles, transfer)
    links = tuple(Link(r.tensor.name, arch.levels[r.p].name, arch.levels[r.c].name, r.p_cycles, r.c_cycles, r.once,
                       r.shared) for r in raw)
    drain = sum(x.cycles for x, r in zip(links, raw) if r.tensor.is_output)
    return FillDrain(_fill(links, [t.name for t in workload.tensors if not t.is_output]), drain, links)


def _credit_idle_ports(arch, raw: list, loop_cycles: float, transfer: dict[str, float]) -> None:
    """Shorten the once-only links' ends (in place) by their level's idle cycles during the loops, the
    longest first, each down to its floor (ZigZag's rule; see the module docstring)."""
    for k, lv in enumerate(arch.levels):
        ends = [(r, end) for r in raw if r.once for end, level in (("p", r.p), ("c", r.c)) if level == k]
        ends = [(r, end) for r, end in ends if getattr(r, f"{end}_cycles") > 0]
        if not ends:
            continue
        idle = max(0.0, loop_cycles - transfer.get(lv.name, 0.0))
        for r, end in sorted(ends, key=lambda e: -getattr(e[0], f"{e[1]}_cycles")):
            cycles = getattr(r, f"{end}_cycles")
            cut = min(idle, max(0.0, cycles - getattr(r, f"{end}_floor")))
            setattr(r, f"{end}_cycles", cycles - cut)
            idle -= cut


def _fill(links: tuple[Link, ...], inputs: list[str]) -> float:
    """Cycles until every input's first tiles are in place: per input the links of its chain in series; the
    shared links of different inputs one after the other (the inputs with the longest rest first), the rest
    side by side."""
    shared = {n: sum(x.cycles for x in links if x.tensor == n and x.shared) for n in inputs}
    rest = {n: sum(x.cycles for x in links if x.tensor == n and not x.shared) for n in inputs}
    start, done = 0.0, 0.0
    for n in sorted(inputs, key=lambda n: -rest[n]):
        start += shared[n]
        done = max(done, start + rest[n])
    return done
