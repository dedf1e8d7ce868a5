"""Linear-model helpers shared by the MIP's parts: guarded constraint adds and the 2**x epigraph."""

from __future__ import annotations

import math

import pyomo.environ as pe

LN2 = math.log(2.0)
EPS = 1e-7


def add(constraints: pe.ConstraintList, expr) -> None:
    """Add ``expr``; a relation that folded to a constant (all its terms were fixed at 0) is
    dropped when true and kept as an infeasible row when false."""
    if expr is True:
        return
    if expr is False:
        constraints.add(pe.Constraint.Infeasible)
        return
    constraints.add(expr)


def exp_tangents(model: pe.ConcreteModel, name: str, exponent_expr, lo: float, hi: float) -> pe.Var:
    """A variable ``y >= 2**exponent_expr`` (under-approximated by tangents on [lo, hi])."""
    x = pe.Var(bounds=(None, None))
    y = pe.Var(bounds=(0, None))
    model.add_component(f"{name}_x", x)
    model.add_component(f"{name}_y", y)
    model.add_component(f"{name}_def", pe.Constraint(expr=x == exponent_expr))
    points = []
    a = math.floor(lo)
    while a <= hi + 1e-9:
        points.append(a)
        a += 0.5 if -3 <= a < 10 else 1.0
    cons = pe.ConstraintList()
    model.add_component(f"{name}_tan", cons)
    for a in points:
        add(cons, y >= 2.0 ** a * (1.0 + LN2 * (x - a)))
    return y
