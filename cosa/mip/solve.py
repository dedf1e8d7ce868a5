"""Solver back ends through Pyomo: HiGHS (default, no licence) and Gurobi (when licensed).

One run is single-threaded with a fixed seed, so the same model gives the
same solution.  A time limit returns the incumbent with its status and gap.
``warm_start=True`` hands the variables' current values to the solver as a
MIP start (HiGHS: ``setSolution`` before the run; Gurobi: the ``Start``
attribute of the discrete variables), so a feasible start is an incumbent
from the first node on.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import pyomo.environ as pe  # also registers the solver plug-ins
from pyomo.contrib.solver.common.factory import SolverFactory
from pyomo.contrib.solver.solvers.highs import Highs

from ..schedule import SchedulingError

SOLVERS = ("highs", "gurobi")

GUROBI_PIP_LIMITS = ("the pip licence allows 2,000 variables and 2,000 linear constraints, "
                     "200 variables once any quadratic term exists")
GUROBI_FULL_LICENCE = ("get a full licence (free for academic use) at https://gurobi.com/unrestricted and "
                       "point GRB_LICENSE_FILE at its gurobi.lic")
_GRB_ERROR_NO_LICENSE = 10009  # gurobipy's GurobiError.errno values
_GRB_ERROR_SIZE_LIMIT_EXCEEDED = 10010


@dataclass(frozen=True)
class SolveResult:
    """What one solver call found.

    ``status``: "optimal", "time_limit", "infeasible", "unbounded" or "error";
    ``has_solution``: an incumbent was loaded into the model; ``gap``: relative
    MIP gap of the incumbent (0 when proven optimal); ``solve_s``: seconds.
    """

    solver: str
    status: str
    has_solution: bool
    objective: float | None
    bound: float | None
    gap: float | None
    solve_s: float
    message: str = ""


def gurobi_available() -> bool:
    """True when gurobipy imports and a licence is found (a size-limited pip licence counts)."""
    try:
        import gurobipy  # noqa: F401
    except ImportError:
        return False
    try:
        return bool(SolverFactory("gurobi_direct").available())
    except Exception:  # noqa: BLE001  (any licence failure means "not available")
        return False


def _status(result) -> str:
    term = str(result.termination_condition).rsplit(".", 1)[-1]
    return {
        "convergenceCriteriaSatisfied": "optimal",
        "maxTimeLimit": "time_limit",
        "iterationLimit": "iteration_limit",
        "provenInfeasible": "infeasible",
        "locallyInfeasible": "infeasible",
        "infeasibleOrUnbounded": "infeasible",
        "unbounded": "unbounded",
    }.get(term, term)


def _gap(objective, bound) -> float | None:
    if objective is None or bound is None or not all(map(math.isfinite, (objective, bound))):
        return None
    return abs(objective - bound) / max(abs(objective), 1e-12)


def _gurobi_error(exc: Exception, model, size, source: str) -> SchedulingError | None:
    """A one-line SchedulingError for Gurobi's licence refusals, or None for any other failure."""
    errno = getattr(exc, "errno", None)
    text = str(exc)
    if errno == _GRB_ERROR_SIZE_LIMIT_EXCEEDED or "size-limited" in text or "too large" in text.lower():
        nvars, nint, ncons = size or (model.nvariables(), None, model.nconstraints())
        integer = f" ({nint} integer)" if nint is not None else ""
        return SchedulingError(
            f"the model is too large for Gurobi's size-limited licence: {nvars} variables{integer} and {ncons} "
            f"constraints ({GUROBI_PIP_LIMITS}); use solver='highs' (no licence, no size limit), or {GUROBI_FULL_LICENCE}",
            source=source, field="solver")
    if errno == _GRB_ERROR_NO_LICENSE or "licen" in text.lower():
        return SchedulingError(f"Gurobi licence problem: {' '.join(text.split())}; use solver='highs', or "
                               f"{GUROBI_FULL_LICENCE}", source=source, field="solver")
    return None


class _HighsWithStart(Highs):
    """Pyomo's HiGHS interface, plus the model's current variable values as a MIP start.

    Pyomo's new HiGHS interface has no warm start; HiGHS itself takes one
    through ``setSolution`` (checked for feasibility, then used as the first
    incumbent).  Variables without a value start at 0.  ``start``: whether the
    next solve gets one.  Every solve begins from HiGHS's default options (the
    instance is kept per model, ``_highs_for``, and HiGHS keeps options between runs).
    """

    start = False

    def _solve(self):
        import highspy
        import numpy as np

        self._solver_model.resetOptions()
        columns = getattr(self, "_pyomo_var_to_solver_var_map", None)
        variables = getattr(self, "_vars", None)
        if self.start and columns and variables is not None:
            values = np.zeros(len(columns))
            for var_id, column in columns.items():
                value = variables[var_id][0].value
                values[column] = value if value is not None else 0.0
            start = highspy.HighsSolution()
            start.col_value = values
            start.value_valid = True
            start.dual_valid = False
            self._solver_model.setSolution(start)
        return super()._solve()


def _highs_for(model) -> _HighsWithStart:
    """The HiGHS instance that solves ``model``, kept on the model: the driver solves one model many times
    (its MIP start's fixed solve, the main solve, the tie-breaking and fill solves, each adding or removing a
    few rows, fixing or freeing variables, or changing the objective), and Pyomo's persistent interface then
    sends HiGHS only what changed instead of translating the whole model again.  Fixed variables are passed
    as bounds (so fixing and freeing them touches no row)."""
    opt = model.__dict__.get("_cosa_highs")
    if opt is None:
        opt = _HighsWithStart(treat_fixed_vars_as_params=False)
        model.__dict__["_cosa_highs"] = opt
    return opt


def _objective_value(model) -> float:
    """Value of ``model``'s active objective at the variables' current values."""
    return float(pe.value(next(model.component_data_objects(pe.Objective, active=True))))


def solve(model, solver: str = "highs", time_limit_s: float = 60.0, mip_gap: float = 0.01, seed: int = 0,
          source: str = "", size: tuple[int, int, int] | None = None, warm_start: bool = False,
          highs_options: dict | None = None) -> SolveResult:
    """Solve ``model`` in place; load the incumbent when there is one.

    ``warm_start``: pass the variables' current values as a MIP start (the
    caller loads a feasible solution first; an infeasible one is ignored by
    the solver).  ``highs_options``: more HiGHS options (name: value), for
    HiGHS only.

    Raises SchedulingError for an unknown solver, a solver that is not
    installed or licensed, and a model over Gurobi's size-limited licence
    (``size`` = (variables, integer variables, constraints) for the message).
    """
    if solver not in SOLVERS:
        raise SchedulingError(f"unknown solver '{solver}'; choose one of {list(SOLVERS)}", source=source, field="solver")
    if time_limit_s is None or time_limit_s <= 0:
        raise SchedulingError(f"time_limit_s must be positive, got {time_limit_s!r}", source=source, field="time_limit_s")
    if mip_gap is None or mip_gap < 0:
        raise SchedulingError(f"mip_gap must be >= 0, got {mip_gap!r}", source=source, field="mip_gap")
    if solver == "gurobi":
        try:
            import gurobipy  # noqa: F401
        except ImportError:
            raise SchedulingError("solver 'gurobi' needs gurobipy (pip install gurobipy) and a licence; "
                                  "use solver='highs'", source=source, field="solver") from None
        opt = SolverFactory("gurobi_direct")
        options = {"Seed": int(seed), "Threads": 1}
        extra = {"warmstart_discrete_vars": True} if warm_start else {}
    else:
        opt = _highs_for(model)
        opt.start = bool(warm_start)
        options = {"random_seed": int(seed), "output_flag": False, **(highs_options or {})}
        extra = {}
    from ..deadline import clamp_s, raise_if_expired

    time_limit_s = clamp_s(time_limit_s)  # the command's --deadline: the solver returns before it
    start = time.perf_counter()
    try:
        result = opt.solve(model, time_limit=float(time_limit_s), rel_gap=float(mip_gap), threads=1,
                           load_solutions=False, raise_exception_on_nonoptimal_result=False,
                           solver_options=options, **extra)
    except Exception as exc:  # noqa: BLE001  (translated below; real bugs keep their text)
        error = _gurobi_error(exc, model, size, source) if solver == "gurobi" else None
        if error is not None:
            raise error from None
        raise
    raise_if_expired()  # a run the deadline cut short (HiGHS then may report 'error') is the deadline's failure
    elapsed = time.perf_counter() - start
    status = _status(result)
    has_solution = str(result.solution_status).rsplit(".", 1)[-1] in ("feasible", "optimal")
    if has_solution:
        result.solution_loader.load_vars()
    objective = result.incumbent_objective if has_solution else None
    bound = result.objective_bound
    bound = float(bound) if bound is not None else None
    if has_solution:
        # the model's own objective at the loaded point: HiGHS's interface reports its objective without the
        # expression's constant term (Gurobi's with it), which the bound lacks as well
        offset = _objective_value(model) - float(objective)
        objective = float(objective) + offset
        bound = bound + offset if bound is not None else None
    gap = 0.0 if status == "optimal" and has_solution and mip_gap == 0 else _gap(objective, bound)
    return SolveResult(solver, status, has_solution, objective, bound, gap, elapsed)
