"""The roofline of one nest on one architecture: the cycles no schedule can beat.

roofline cycles = max(compute, memory), where

* compute = MACs / the machine's peak MACs per cycle (``Arch.total_macs_per_cycle``;
  Gemmini: DIM^2 per cycle);
* memory = the compulsory DRAM traffic (every element some iteration touches, read
  once if an input, written once if an output, at its own element size; nonzeros
  only for a sparse tensor: ``lowerbounds.compulsory``) through the outermost
  level's port (``Level.transfer_cycles``: the same read/write rule the cost model
  charges).

It is a bound for the cost model's cycles (every schedule moves at least the
compulsory bytes and runs every MAC) and a target for measured cycles.  Not
counted: an output's initial value (a bias: one word per output channel) and
per-row DMA overheads, which only make real schedules slower.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel import Arch, ArchError
from workloads import LoopNest, WorkloadError

from .counts import touched_words


@dataclass(frozen=True)
class Roofline:
    """Roofline cycles of ``workload`` on ``arch`` and their two terms (cycles; bytes)."""

    workload: str
    arch: str
    macs: int
    peak_macs_per_cycle: int
    compute_cycles: float
    read_bytes: float
    write_bytes: float
    memory_cycles: float

    @property
    def cycles(self) -> float:
        return max(self.compute_cycles, self.memory_cycles)

    @property
    def bound_by(self) -> str:
        return "compute" if self.compute_cycles >= self.memory_cycles else "memory"

    def over(self, cycles: float) -> float:
        """``cycles`` / roofline cycles (>= 1 for every schedule the cost model prices)."""
        return float(cycles) / self.cycles if self.cycles > 0 else float("inf")

    def to_dict(self) -> dict:
        return {"roofline_cycles": self.cycles, "roofline_bound_by": self.bound_by,
                "roofline_compute_cycles": self.compute_cycles, "roofline_memory_cycles": self.memory_cycles,
                "compulsory_read_bytes": self.read_bytes, "compulsory_write_bytes": self.write_bytes}


def roofline(workload: LoopNest, arch: Arch) -> Roofline:
    """max(MACs / peak MACs per cycle, compulsory DRAM bytes through the outermost level's port)."""
    if not isinstance(workload, LoopNest):
        raise WorkloadError(f"expected a LoopNest, got {type(workload).__name__}", source="lowerbounds.roofline")
    if not isinstance(arch, Arch):
        raise ArchError(f"expected an Arch, got {type(arch).__name__}", source="lowerbounds.roofline")
    read = write = 0.0
    for t in workload.tensors:
        moved = touched_words(workload, t) * t.density * t.bytes_per_word
        if t.is_output:
            write += moved
        else:
            read += moved
    peak = arch.total_macs_per_cycle
    return Roofline(workload=workload.name, arch=arch.name, macs=workload.macs, peak_macs_per_cycle=peak,
                    compute_cycles=workload.macs / peak, read_bytes=read, write_bytes=write,
                    memory_cycles=arch.levels[0].transfer_cycles(read, write))
