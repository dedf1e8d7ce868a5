"""``BoundReport``: the sequential traffic bound of one nest for one fast-memory size."""

from __future__ import annotations

from dataclasses import dataclass, field

BINDINGS = ("lp", "hbl", "compulsory")


@dataclass(frozen=True)
class BoundReport:
    """Lower bound on the traffic between slow memory (DRAM) and a fast memory of ``memory_bytes``.

    What is bounded: loads into plus stores out of the fast memory, for one
    execution of the nest (``repeat`` not applied), comparable to
    ``Cost.dram_bytes``.  Three bounds, all in bytes (and in words):

    * ``lp``: the Dinh-Demmel leading term |Z| * M / M^khat less one
      segment's M (M in bytes, element sizes per tensor; ``khat`` from the
      phantom-array dual).  Its constant is the LP's, not a proven one; the
      tests hold it against exhaustive mapping searches;
    * ``hbl``: the explicit-constant segment bound (T - p_max) * (ceil(|Z| / F) - 1),
      F = the most iterations a segment moving T bytes can run (proven; see
      ``segments.py``);
    * ``compulsory``: each input element that some iteration reads, read once,
      and each output element written once.

    ``bound_bytes`` is the largest; ``binding`` names it.  Words: the same
    bounds with every element one word and a memory of M / (smallest element
    size) words (the most words it can hold).  ``tile``: dim -> integer side
    of the tile LP's tile (floor of M^lambda_i).  ``iterations``: |Z| (working
    iterations: those that touch padding are left out).  ``memory_bytes`` is
    None for an unbounded fast memory (then only compulsory traffic counts).
    """

    workload: str
    memory_bytes: float | None
    memory_words: float | None
    iterations: int
    s_hbl: float | None
    hbl_exponents: dict
    khat: float | None
    khat_words: float | None
    lambdas: dict
    tile: dict
    lp_bytes: float
    hbl_bytes: float
    compulsory_bytes: float
    bound_bytes: float
    lp_words: float
    hbl_words: float
    compulsory_words: float
    bound_words: float
    binding: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    def ratio(self, traffic_bytes: float) -> float:
        """traffic / bound (>= 1 for every valid schedule; inf when the bound is 0)."""
        return float(traffic_bytes) / self.bound_bytes if self.bound_bytes > 0 else float("inf")

    def to_dict(self) -> dict:
        """The JSON form of ``cosa bound --json``."""
        return {
            "workload": self.workload,
            "memory_bytes": self.memory_bytes,
            "memory_words": self.memory_words,
            "iterations": self.iterations,
            "s_hbl": self.s_hbl,
            "hbl_exponents": dict(self.hbl_exponents),
            "khat": self.khat,
            "khat_words": self.khat_words,
            "lambdas": dict(self.lambdas),
            "tile": dict(self.tile),
            "lp_bytes": self.lp_bytes,
            "hbl_bytes": self.hbl_bytes,
            "compulsory_bytes": self.compulsory_bytes,
            "bound_bytes": self.bound_bytes,
            "lp_words": self.lp_words,
            "hbl_words": self.hbl_words,
            "compulsory_words": self.compulsory_words,
            "bound_words": self.bound_words,
            "binding": self.binding,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class BoundCurve:
    """The bound over a range of fast-memory sizes (bytes), one report per size."""

    workload: str
    reports: tuple[BoundReport, ...]

    @property
    def memories_bytes(self) -> list[float]:
        return [r.memory_bytes for r in self.reports]

    @property
    def bounds_bytes(self) -> list[float]:
        return [r.bound_bytes for r in self.reports]

    def to_dict(self) -> dict:
        return {"workload": self.workload,
                "points": [{"memory_bytes": r.memory_bytes, "bound_bytes": r.bound_bytes, "lp_bytes": r.lp_bytes,
                            "hbl_bytes": r.hbl_bytes, "compulsory_bytes": r.compulsory_bytes,
                            "bound_words": r.bound_words, "binding": r.binding, "khat": r.khat}
                           for r in self.reports]}
