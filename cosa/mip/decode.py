"""Turn a solved model into a ``Mapping``, and add cuts when the exact check disagrees."""

from __future__ import annotations

import math

import pyomo.environ as pe

from mappings import LevelMapping, Mapping
from workloads.divisors import multiplicity

from .formulation import Formulation
from .reuse import reuse_order, reuse_sets
from .runs import fix_runs, level_order, unfix_runs


def _count(var) -> int:
    value = pe.value(var, exception=False)
    return int(round(value)) if value is not None else 0


def decode(form: Formulation) -> Mapping:
    """The mapping of the model's loaded solution.

    Temporal factors from ``nT``, spatial factors from ``nS`` (merged over a
    level's axes), loop order from the order slots (outermost slot first) or the reuse sets (``reuse.reuse_order``);
    a level whose compute runs the model counts (``runs.py``) gets the run
    innermost; other levels without an order decision keep the workload's
    dim order.
    """
    problem = form.problem
    L = problem.levels
    temporal = [dict() for _ in range(L)]
    spatial = [dict() for _ in range(L)]
    for (k, d, p), var in form.nT.items():
        n = _count(var)
        if n:
            temporal[k][d] = temporal[k].get(d, 1) * p ** n
    for (a, d, p), var in form.nS.items():
        n = _count(var)
        if n:
            k = problem.slots[a].level
            spatial[k][d] = spatial[k].get(d, 1) * p ** n
    orders = [() for _ in range(L)]
    levels_with_order = sorted({k for (k, _d) in form.order})
    for k in levels_with_order:
        slot_of = {}
        for d in problem.dims:
            values = [pe.value(o, exception=False) or 0.0 for o in form.order[k, d]]
            slot_of[d] = max(range(len(values)), key=lambda s: (values[s], -s))
        orders[k] = tuple(sorted(problem.dims, key=lambda d: slot_of[d]))
    if form.reuse:
        # the outermost level: an order that reuses every tile as the reuse binaries say
        sets = {}
        for (t, d), var in form.reuse.items():
            if temporal[0].get(d, 1) > 1 and (pe.value(var, exception=False) or 0.0) > 0.5:
                sets.setdefault(t, set()).add(d)
        orders[0] = reuse_order(sets, problem.dims)
    for h, runs in form.runs.items():
        if not runs.order_decided:
            # the run the model counted on goes innermost, in the order its merges need
            orders[h] = level_order(runs, problem.dims, temporal[h], lambda v: pe.value(v, exception=False))
    levels = []
    for k in range(L):
        order = tuple(d for d in orders[k] if temporal[k].get(d, 1) > 1)
        levels.append(LevelMapping(temporal[k], spatial[k], order))
    return Mapping(tuple(levels))


def add_capacity_cut(form: Formulation, mapping: Mapping, level: int) -> None:
    """Exclude every solution whose tiles at ``level`` are at least as large as ``mapping``'s.

    Tile sizes grow with the loop extents, so a decoded tile set that
    overflows stays overflowing for larger extents: at least one relevant
    extent must shrink (a disjunction over dims, one binary each).
    """
    m = form.model
    problem = form.problem
    stored = [t for t in problem.workload.tensors if level in problem.holders[t.name]]
    dims = [d for d in problem.dims if any(d in t.dims for t in stored)]
    extents = mapping.tile_extents(level, problem.dims)
    shrinkable = [d for d in dims if extents[d] > 1]
    if not shrinkable:
        return
    n = form.cuts
    pick = pe.Var(shrinkable, domain=pe.Binary)
    m.add_component(f"cut_pick_{n}", pick)
    cons = pe.ConstraintList()
    m.add_component(f"cut_{n}", cons)
    cons.add(sum(pick[d] for d in shrinkable) >= 1)
    for d in shrinkable:
        current = math.log2(extents[d])
        # the next smaller divisor is at most current - log2(e/(e-1)); 1e-4 is well inside that gap
        cons.add(form.extent_log[level, d] <= current - 1e-4 + math.log2(problem.bounds[d]) * (1 - pick[d]))
    form.cuts += 1


def fix_to_mapping(form: Formulation, mapping: Mapping) -> bool:
    """Fix the placement and order variables to ``mapping`` (the inverse of ``decode``).

    Returns False when the mapping cannot be expressed (a spatial factor on
    no admitting axis).  ``unfix_all`` undoes it.  Used to read the model's
    own estimate of a given mapping (``predict``).
    """
    problem = form.problem
    for (k, d, p), var in form.nT.items():
        var.fix(multiplicity(mapping.levels[k].temporal_factor(d), p))
    for var in form.nS.values():
        var.fix(0)
    for k, lm in enumerate(mapping.levels):
        for d, factor in lm.spatial.items():
            if factor == 1 or d not in problem.dims:
                continue
            homes = [a for a, slot in enumerate(problem.slots) if slot.level == k and d in slot.dims]
            if not homes:
                return False
            for p in problem.primes[d]:
                e = multiplicity(factor, p)
                if e and (homes[0], d, p) not in form.nS:
                    return False
                if e:
                    form.nS[homes[0], d, p].fix(e)
    for k in {k for (k, _d) in form.order}:
        order = [d for d in mapping.levels[k].loop_order(problem.workload.dims) if d in problem.dims]
        for d in problem.dims:
            for s, var in enumerate(form.order[k, d]):
                var.fix(1 if order.index(d) == s else 0)
    if form.reuse:
        lm = mapping.levels[0]
        sets = reuse_sets(lm.loop_order(problem.workload.dims), lm.temporal_factor, problem.workload.tensors)
        for (t, d), var in form.reuse.items():
            var.fix(1 if d in sets[t] else 0)
    for runs in form.runs.values():
        fix_runs(runs, mapping, problem.workload.dims)
    return True


def unfix_all(form: Formulation) -> None:
    for var in list(form.nT.values()) + list(form.nS.values()) + list(form.reuse.values()):
        var.unfix()
    for slots in form.order.values():
        for var in slots:
            var.unfix()
    for runs in form.runs.values():
        unfix_runs(runs)

