"""The rows of ``cosa compare``: one ``CompareRow`` per (layer, scheduler), gathered in a ``CompareResult``.

Plain records, shared by the comparison (``cosa.compare``), its measured peers (``cosa.compare_peers``) and
the reports (``cosa.report``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CompareRow:
    """One scheduler on one layer.  ``error`` is set (and the numbers are NaN) when it failed."""

    layer: str
    scheduler: str
    repeat: int = 1
    macs: int = 0
    cycles: float = math.nan
    energy_pj: float = math.nan
    utilization: float = math.nan
    dram_bytes: float = math.nan
    seconds: float = math.nan
    objective_value: float = math.nan
    ratio: float = math.nan
    bound_bytes: float | None = None
    bound_ratio: float | None = None
    roofline_cycles: float | None = None
    cycles_over_roofline: float | None = None
    measured_s: float | None = None
    measured_verified: bool | None = None
    status: str = "ok"
    error: str | None = None
    extra: dict = field(default_factory=dict, compare=False)
    claim: str = ""  # the status in words, with the model it holds in (``Schedule.claim``, checked by the layer's rows)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        return {
            "layer": self.layer, "scheduler": self.scheduler, "repeat": self.repeat, "macs": self.macs,
            "cycles": self.cycles, "energy_pj": self.energy_pj, "utilization": self.utilization,
            "dram_bytes": self.dram_bytes, "seconds": self.seconds, "objective_value": self.objective_value,
            "ratio": self.ratio, "bound_bytes": self.bound_bytes, "bound_ratio": self.bound_ratio,
            "roofline_cycles": self.roofline_cycles, "cycles_over_roofline": self.cycles_over_roofline,
            "measured_s": self.measured_s, "measured_verified": self.measured_verified,
            "status": self.status, "claim": self.claim, "error": self.error, "extra": self.extra,
        }


@dataclass(frozen=True)
class CompareResult:
    """Rows in layer order, then scheduler order; ``meta``: arch, objective, seed, machine, versions, date."""

    rows: tuple[CompareRow, ...]
    layers: tuple[str, ...]
    schedulers: tuple[str, ...]
    arch: str
    objective: str
    meta: dict = field(default_factory=dict)

    def row(self, layer: str, scheduler: str) -> CompareRow:
        for r in self.rows:
            if r.layer == layer and r.scheduler == scheduler:
                return r
        raise KeyError((layer, scheduler))

    def by_layer(self) -> dict[str, list[CompareRow]]:
        out: dict[str, list[CompareRow]] = {name: [] for name in self.layers}
        for r in self.rows:
            out[r.layer].append(r)
        return out
