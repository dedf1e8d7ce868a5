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
    search baselines: ``evaluated`` mappings and no model size.
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

    @property
    def total_s(self) -> float:
        return self.build_s + self.solve_s

    def to_dict(self) -> dict:
        return {
            "solver": self.solver, "status": self.status, "variables": self.variables, "binaries": self.binaries,
            "constraints": self.constraints, "gap": self.gap, "objective": self.objective, "build_s": self.build_s,
            "solve_s": self.solve_s, "total_s": self.total_s, "evaluated": self.evaluated, "cuts": self.cuts,
            "seed": self.seed,
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
