"""What a run of a generated program reports, whichever simulator ran it (``gemmini.run`` for the functional
and timing models, ``gemmini.run_rtl`` for the Verilated RTL)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class RunResult:
    """What a run reports.

    outputs: the int8 output array (matmul [M, N]; batched [B, M, N]; conv NHWC).  verified: the
    output equals the NumPy reference bit for bit; mismatches: differing
    elements.  cycles: the timing model's cycles (None when no timing model
    ran); ideal_cycles: MACs / DIM^2; utilization: ideal / cycles.
    instructions: commands executed.  dram_bytes: main-memory bytes moved by
    mvin/mvout.  busy: cycles each unit ("load", "execute", "store") was
    moving data or computing, as the simulator that gave ``cycles`` counts
    them (None without a cycle count).
    """

    outputs: np.ndarray
    verified: bool
    mismatches: int
    cycles: float | None
    ideal_cycles: float
    utilization: float | None
    instructions: int
    dram_bytes: int
    busy: dict | None = None

    def to_dict(self) -> dict:
        """The JSON form (without the output array)."""
        out = asdict(self)
        out.pop("outputs")
        return out
