"""Objectives of the schedulers and their one tie-breaking rule, shared by the MIP and every baseline.

The rule is lexicographic: the objective (latency: cycles, energy: pJ, edp:
cycles * pJ), then DRAM bytes, then energy in pJ, then the objective again
(of two ties equal in bytes and energy, the faster), then the order in which
the candidates came (the first wins: a search's stream is seeded, and the
MIP offers its main solution first, so a full tie keeps it).  Objective
values within ``TIE_TOLERANCE`` (relative) of the best one count as ties:
2 %, below what the models resolve (the cost model follows the command-level
timing model within a 2.5 % median error; the MIP's linearised latency
predicts the cost model with a median error under 1 %: on ResNet-50's
res4b_branch2b the mapping decoded at a 2 % cap costs 2.04 % more cycles in
the cost model), while DRAM bytes are
counted exactly and are most of the energy on the presets (a DRAM byte costs
tens of times an SRAM byte).  2 % rather than 1 % because the tie set is
anchored at the fastest schedule found: two schedules within 1 % of each
other, one of them up to 1 % above the fastest, are then both ties.  A
schedule is thus never more than 2 % slower than the fastest one found, and
among those it moves the fewest bytes.  ``tolerance=0`` gives the strict
lexicographic order.

Among the candidates within the tolerance of the best objective the one with
the smallest (DRAM bytes, energy, objective) wins, the earliest among equals.  ``TieSet`` keeps, while
candidates stream in, only those that can still win: within the tolerance of
the best objective so far and not beaten on both the objective and the
secondary key by another one, so an exhaustive search keeps a handful.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..schedule import SchedulingError

OBJECTIVES = ("latency", "energy", "edp")

TIE_TOLERANCE = 0.02
"""Objective values within this fraction of the best count as ties (see the module docstring)."""


def check_objective(objective: str, source: str) -> str:
    if objective not in OBJECTIVES:
        raise SchedulingError(f"objective must be one of {OBJECTIVES}, got {objective!r}", source=source,
                              field="objective")
    return objective


def objective_value(cost, objective: str) -> float:
    """latency: cycles; energy: pJ; edp: cycles * pJ; the MIP's own "cosa" objective ranks by cycles."""
    if objective == "energy":
        return float(cost.energy_pj)
    if objective == "edp":
        return float(cost.cycles) * float(cost.energy_pj)
    return float(cost.cycles)


def secondary_key(cost) -> tuple:
    """What breaks ties of the objective: DRAM bytes, then energy in pJ."""
    return (float(cost.dram_bytes), float(cost.energy_pj))


def within(value: float, best: float, tolerance: float) -> bool:
    """Whether objective ``value`` ties with ``best`` (``value <= best * (1 + tolerance)``; values >= 0)."""
    return value <= best * (1.0 + tolerance)


@dataclass
class TieSet:
    """The lexicographic choice over a stream of costed mappings (see the module docstring).

    ``offer(cost, mapping, item)`` adds a candidate (``item``: anything to get back, default the
    mapping); ``best()`` returns ``(cost, mapping, item)`` of the winner, or None when empty.
    """

    objective: str
    tolerance: float = TIE_TOLERANCE
    entries: list = field(default_factory=list)  # (value, secondary key, cost, mapping, item)
    best_value: float | None = None

    def offer(self, cost, mapping, item: Any = None) -> None:
        value = objective_value(cost, self.objective)
        if self.best_value is not None and not within(value, self.best_value, self.tolerance):
            return
        key = secondary_key(cost) + (value,)
        if any(v <= value and k <= key for v, k, *_ in self.entries):
            return  # another candidate is at least as good on both: this one can never win
        if self.best_value is None or value < self.best_value:
            self.best_value = value
        # an earlier candidate falls out when it leaves the window or this one beats it on both keys (an
        # equal secondary key keeps the earlier one: it wins while both tie)
        self.entries = [e for e in self.entries
                        if within(e[0], self.best_value, self.tolerance) and not (value <= e[0] and key < e[1])]
        self.entries.append((value, key, cost, mapping, mapping if item is None else item))

    def best(self):
        if not self.entries:
            return None
        _, _, cost, mapping, item = min(self.entries, key=lambda e: e[1])
        return cost, mapping, item

    def __len__(self) -> int:
        return len(self.entries)


def lexicographic_best(candidates, objective: str, tolerance: float = TIE_TOLERANCE):
    """``(cost, mapping, item)`` of the winner among ``(cost, mapping, item)`` triples (None when empty)."""
    ties = TieSet(objective, tolerance)
    for cost, mapping, item in candidates:
        ties.offer(cost, mapping, item)
    return ties.best()
