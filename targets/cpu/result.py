"""What a CPU kernel's run reports (``RunResult``) and how its calls are timed (``time_call``); the dense
runner (``targets.cpu.run``), the sparse one (``targets.cpu.sparse``) and the TVM peer share them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..exceptions import UNCHECKED


@dataclass
class RunResult:
    verified: bool
    max_abs_err: float
    reference: str
    seconds: float
    gflops: float
    threads: int
    mapping: dict
    times_s: list
    exception_status: dict = field(default_factory=lambda: UNCHECKED.to_dict())

    def to_dict(self) -> dict:
        return {"verified": self.verified, "max_abs_err": self.max_abs_err, "reference": self.reference,
                "seconds": self.seconds, "gflops": self.gflops, "threads": self.threads, "mapping": self.mapping,
                "times_s": self.times_s, "exception_status": self.exception_status}


def time_call(fn, repeat: int) -> list[float]:
    """Wall-clock seconds of ``repeat`` calls of ``fn()``."""
    times = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times
