"""What every scheduler returns: the mapping, its cost, and how it was found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workloads import FrameworkError


class SchedulingError(FrameworkError, RuntimeError):
    """No valid mapping could be found (infeasible constraint, time-out without incumbent, ...)."""


@dataclass(frozen=True)
class SolverStats:
    """Statistics of one search.  Times in seconds.

    For the MIP: model size and the solver's status and relative gap.  For
    search baselines: ``evaluated`` mappings and no model size.  ``model``:
    the model in which ``status`` holds ("the MIP's linearised model" for
    the MIP, "the cost model" for exhaustive search); ``claim()`` says it
    in words, which is how reports print the status.
    """

    solver: str
    status: str
    variables: int = 0
    binaries: int = 0
    constraints: int = 0
    gap: float | None = None
    objective: float | None = None
    build_s: float = 0.0
    solve_s: float = 0.0
    evaluated: int = 0
    cuts: int = 0
    seed: int | None = None
    model: str | None = None

    def claim(self) -> str:
        """The status with the model it holds in: "optimal in the MIP's linearised model (gap 0.05%)",
        "time_limit in ... (gap 3.1%)", "optimal in the cost model"; the bare status when no model is named."""
        if not self.model:
            return self.status
        gap = f" (gap {self.gap:.2%})" if self.gap is not None else ""
        return f"{self.status} in {self.model}{gap}"

    @property
    def total_s(self) -> float:
        return self.build_s + self.solve_s

    def to_dict(self) -> dict:
        return {
            "solver": self.solver, "status": self.status, "variables": self.variables, "binaries": self.binaries,
            "constraints": self.constraints, "gap": self.gap, "objective": self.objective, "build_s": self.build_s,
            "solve_s": self.solve_s, "total_s": self.total_s, "evaluated": self.evaluated, "cuts": self.cuts,
            "seed": self.seed, "model": self.model, "claim": self.claim(),
        }


@dataclass(frozen=True)
class Schedule:
    """A validated mapping of ``workload`` on ``arch``, its cost and provenance.

    ``scheduler``: "cosa", "gemmini-default", "random", "exhaustive", ...
    ``extra``: scheduler-specific facts (the vendor heuristic's tile arguments).
    ``bound``: the lower-bound report at the level fed by DRAM, when computed.
    """

    workload: Any
    arch: Any
    mapping: Any
    cost: Any
    scheduler: str
    stats: SolverStats
    extra: dict = field(default_factory=dict)
    bound: Any = None

    def claim(self) -> str:
        """What the scheduler may say of this schedule: its status in the model it holds in
        (``SolverStats.claim``), and where the MIP returned another mapping than its main solve's
        (a tie-break within its tolerance, or its start), which one."""
        text = self.stats.claim()
        how = (self.extra or {}).get("tie_break")
        tolerance = (self.extra or {}).get("tie_tolerance")
        returned = (self.extra or {}).get("returned")
        if returned not in (None, "mip"):
            text += f"; returned its start, the {returned} mapping, which the cost model ranks first"
        elif how == "factor moves":
            text += "; returned the mapping the cost model's prime-factor moves reached from that optimum (faster there)"
        elif how not in (None, "main"):
            tie = how.removesuffix(", factor moves")
            text += (f"; returned the {tie} mapping within {tolerance:.0%} of that optimum (ties: fewer DRAM bytes, "
                     "then less energy, in the cost model)")
            if tie != how:
                text += ", then the cost model's prime-factor moves from it (faster there)"
        padded = (self.extra or {}).get("padded")
        if padded:  # a schedule of the layer padded to fill the array (cosa.mip.padding, ZigZag's read back)
            text += "; of the layer padded " + ", ".join(f"{d} {b} -> {p}" for d, (b, p) in padded.items())
        return text
