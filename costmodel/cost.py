"""What the cost model returns: accesses per level and tensor, latency, energy."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Access:
    """Accesses of one tensor at one level, in words (of that level's word size).

    fills: words written into the level from the next outer level holding the
    tensor.  reads: words read out of it (to fill inner levels, to write partial
    sums back outwards, or to feed the MACs).  writes: words written into it
    (fills, partial sums written back from inner levels, MAC updates).
    """

    reads: int = 0
    writes: int = 0
    fills: int = 0

    def __add__(self, other: "Access") -> "Access":
        return Access(self.reads + other.reads, self.writes + other.writes, self.fills + other.fills)

    def to_dict(self) -> dict:
        return {"reads": self.reads, "writes": self.writes, "fills": self.fills}


@dataclass(frozen=True)
class Cost:
    """The cost of one mapping of one workload (one execution; ``repeat`` not applied).

    cycles: total latency in cycles.  energy_pj: total energy in pJ.
    utilization: ideal cycles (MACs / peak MACs per cycle) / cycles.
    accesses[level][tensor]: Access in words.  footprint_words / footprint_bytes
    [level][tensor]: the largest resident tile of one instance.
    compute_cycles: temporal iterations of the nest (MACs / MAC units used).
    transfer_cycles[level]: bytes moved through one instance of the level over
    its bandwidth (0 where the bandwidth is unlimited).  overlapped[level]: whether
    the level's transfers run concurrently with compute (double buffering).
    bound_by: "compute" or "<level> bandwidth", the term that sets ``cycles``.
    energy_breakdown_pj: per level name, plus "MAC".
    dram_bytes: bytes moved between the outermost level and the levels inside it.
    partial_sums[level][output]: PartialSums, the output words the level
    exchanges with its next inner holder, split into partial sums and finals.
    computes: compute commands per instance at the levels that set
    ``compute_rows`` (0 where none does); see ``costmodel.compute_runs``.
    footprint_rows[level][tensor]: at row-addressed levels (``Level.row_bytes``)
    the rows of the stored tile (``mappings.validate.tile_rows``: the dense
    box, halo and padding included, in rows of the unrolled block); there
    footprint_bytes is rows x row_bytes.
    transfer_rows[level][tensor]: rows moved between the level and the inner
    holder of the tensor where the level charges per row (``Level`` row
    cycles; ``costmodel.transfers.transfer_rows``), summed over instances.
    fill_cycles / drain_cycles: cycles before the loops start (the first tiles
    moving in) and after they end (the last output tiles moving out), included in
    ``cycles``; 0 unless ``params["fill_before_compute"]`` (``costmodel.onload``).
    """

    cycles: float
    energy_pj: float
    utilization: float
    accesses: dict[str, dict[str, Access]]
    footprint_words: dict[str, dict[str, int]]
    footprint_bytes: dict[str, dict[str, float]]
    compute_cycles: int
    transfer_cycles: dict[str, float]
    overlapped: dict[str, bool]
    bound_by: str
    energy_breakdown_pj: dict[str, float]
    dram_bytes: float
    macs: int
    ideal_cycles: float
    extra: dict = field(default_factory=dict, compare=False)
    partial_sums: dict = field(default_factory=dict)
    computes: int = 0
    footprint_rows: dict = field(default_factory=dict)
    transfer_rows: dict = field(default_factory=dict)
    fill_cycles: float = 0.0
    drain_cycles: float = 0.0

    def to_dict(self) -> dict:
        """The JSON form of ``cosa evaluate --json``."""
        return {
            "cycles": self.cycles,
            "energy_pj": self.energy_pj,
            "utilization": self.utilization,
            "accesses": {lv: {t: a.to_dict() for t, a in per.items()} for lv, per in self.accesses.items()},
            "footprint_words": {lv: dict(per) for lv, per in self.footprint_words.items()},
            "footprint_bytes": {lv: dict(per) for lv, per in self.footprint_bytes.items()},
            "compute_cycles": self.compute_cycles,
            "transfer_cycles": dict(self.transfer_cycles),
            "overlapped": dict(self.overlapped),
            "bound_by": self.bound_by,
            "energy_breakdown_pj": dict(self.energy_breakdown_pj),
            "dram_bytes": self.dram_bytes,
            "macs": self.macs,
            "ideal_cycles": self.ideal_cycles,
            "partial_sums": {lv: {t: vars(p) for t, p in per.items()} for lv, per in self.partial_sums.items()},
            "computes": self.computes,
            "footprint_rows": {lv: dict(per) for lv, per in self.footprint_rows.items()},
            "transfer_rows": {lv: dict(per) for lv, per in self.transfer_rows.items()},
            "fill_cycles": self.fill_cycles,
            "drain_cycles": self.drain_cycles,
        }


@dataclass(frozen=True)
class PartialSums:
    """Output words moved between a level and its next inner holder, in words, summed over instances.

    reads: partial sums the level sends back in (reloads of earlier write-backs).
    writes: partial sums it receives that are not yet final (spills).
    final_writes: final results it receives (the last write-back of each tile).
    """

    reads: int = 0
    writes: int = 0
    final_writes: int = 0
