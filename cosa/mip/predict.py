"""The model's own estimate of a given mapping, to measure how the MIP objective ranks mappings."""

from __future__ import annotations

from .decode import fix_to_mapping, unfix_all
from .formulation import Formulation
from .solve import solve


def predict(form: Formulation, mapping, time_limit_s: float = 10.0) -> float | None:
    """Objective value the model assigns to ``mapping`` (None when the model cannot express it,
    or finds it infeasible, e.g. a tile the share grid cannot place)."""
    try:
        if not fix_to_mapping(form, mapping):
            return None
        result = solve(form.model, "highs", time_limit_s=time_limit_s, mip_gap=0.0)
    finally:
        unfix_all(form)
    return result.objective if result.has_solution else None
