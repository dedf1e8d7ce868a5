"""Objectives of the search baselines and their deterministic tie-breaking."""

from __future__ import annotations

from ..schedule import SchedulingError

OBJECTIVES = ("latency", "energy", "edp")


def check_objective(objective: str, source: str) -> str:
    if objective not in OBJECTIVES:
        raise SchedulingError(f"objective must be one of {OBJECTIVES}, got {objective!r}", source=source,
                              field="objective")
    return objective


def objective_value(cost, objective: str) -> float:
    """latency: cycles; energy: pJ; edp: cycles * pJ."""
    if objective == "latency":
        return float(cost.cycles)
    if objective == "energy":
        return float(cost.energy_pj)
    return float(cost.cycles) * float(cost.energy_pj)


def mapping_text(mapping) -> str:
    """A canonical one-line text of a mapping (the last tie-breaker)."""
    parts = []
    for i, lm in enumerate(mapping.levels):
        parts.append(f"L{i}:T{sorted(lm.temporal.items())}S{sorted(lm.spatial.items())}"
                     f"O{list(lm.order)}B{sorted(lm.bypass)}")
    return "|".join(parts)


def objective_key(cost, mapping, objective: str) -> tuple:
    """Sort key: the objective, then DRAM bytes, then the canonical mapping text (smaller is better)."""
    return (objective_value(cost, objective), float(cost.dram_bytes), mapping_text(mapping))
