"""The MIP's run model fixed to a mapping: the fewest compute commands it allows (tests/cosa/mip)."""

from __future__ import annotations

import pyomo.environ as pe

from cosa.mip import solve
from cosa.mip.decode import fix_to_mapping, unfix_all
from cosa.mip.runs import run_chain


def model_runs(form, mapping, level: int):
    """(fewest compute commands, run chain) the model allows at ``level`` with every variable fixed to
    ``mapping``; the model is restored afterwards."""
    m = form.model
    assert fix_to_mapping(form, mapping)
    m.obj.deactivate()
    m.fewest = pe.Objective(expr=form.runs[level].log_computes)
    try:
        result = solve(m, "highs", time_limit_s=20, mip_gap=0.0)
        assert result.has_solution
        chain = run_chain(form.runs[level], lambda v: pe.value(v, exception=False))
        return 2 ** pe.value(form.runs[level].log_computes), chain
    finally:
        m.del_component("fewest")
        m.obj.activate()
        unfix_all(form)
