"""Loop order and tile reuse in the MIP: how many times a level loads a tile of a tensor.

Relevant temporal loops outside the child level always count; an irrelevant
loop counts unless it sits inside every relevant loop with factor > 1 (the
resident tile is reused across it).  Two encodings of the levels whose order
is a decision:

* **reuse sets** (one order level, the outermost: CoSA's default, "outer").
  ``reuse[t, d]`` (binary): irrelevant loop ``d`` is reused for ``t``, that is,
  it lies in the innermost run of loops all irrelevant to ``t``.  Those runs are
  suffixes of one order, so the sets of two tensors are nested (one contains the
  other); conversely nested sets are realized by the order that puts the
  smallest set innermost, then the rest of the next one, and so on
  (``reuse_order``).  Nestedness is pairwise: no ``d`` in the first set only
  with ``e`` in the second only.  This has no order slots and no position
  big-M, so its LP relaxation is much tighter (it decides the same thing).
* **order slots** (several order levels): ``order[k, d, s]`` places dim
  ``d``'s loop at slot ``s`` of level ``k``; ``inside[t, c, k, s]`` says some
  relevant loop with factor > 1 sits at (k, s) or inside it (CoSA's Y); the
  irrelevant factors at slots outside it are charged, linearized with big-M
  bounds (exact in the direction the objective pushes).

``nontrivial[k, d]``: level ``k``'s loop of ``d`` has a factor > 1.
"""

from __future__ import annotations

import math

import pyomo.environ as pe

from .linear import add as _add


def uses_reuse_sets(order_levels) -> bool:
    """Whether the order is decided through reuse sets (a single order level, the outermost)."""
    return list(order_levels) == [0]


def build_order(m, problem, needed_levels, order_levels, log_t, symmetry_breaking=True, reuse_sets=True):
    """The nontrivial-loop indicators of ``needed_levels`` and the order variables of ``order_levels``.

    Returns (nontrivial, order, reuse): ``order[k, d]`` the slot binaries of
    dim ``d`` at level ``k`` (order-slot encoding), ``reuse[t, d]`` the reuse
    binaries of the outermost level (reuse-set encoding, where ``reuse_sets`` and the outermost level is
    the only order level); one of them is empty.
    """
    dims, bounds = problem.dims, problem.bounds
    log2 = math.log2
    m.orderc = pe.ConstraintList()
    nontrivial = {}
    for k in sorted(needed_levels):
        for d in dims:
            z = pe.Var(domain=pe.Binary)
            m.add_component(f"nontrivial_{k}_{d}", z)
            _add(m.orderc, log_t(k, d) <= log2(bounds[d]) * z)
            nontrivial[k, d] = z
    order, reuse = {}, {}
    if reuse_sets and uses_reuse_sets(order_levels):
        tensors = problem.workload.tensors
        for t in tensors:
            for d in dims:
                if d not in t.dims:
                    reuse[t.name, d] = pe.Var(domain=pe.Binary)
                    m.add_component(f"reuse_{t.name}_{d}", reuse[t.name, d])
        w = lambda t, d: reuse.get((t.name, d), 0)  # noqa: E731
        for a, t1 in enumerate(tensors):
            for t2 in tensors[a + 1:]:
                for d in dims:
                    for e in dims:
                        if d != e and (t1.name, d) in reuse and (t2.name, e) in reuse:
                            # nested sets: not d in t1's set only while e is in t2's set only
                            _add(m.orderc, w(t1, d) - w(t2, d) + w(t2, e) - w(t1, e) <= 1)
        return nontrivial, order, reuse
    nslots = len(dims)
    for k in order_levels:
        o = pe.Var([(d, s) for d in dims for s in range(nslots)], domain=pe.Binary)
        m.add_component(f"order_{k}", o)
        for d in dims:
            _add(m.orderc, sum(o[d, s] for s in range(nslots)) == 1)
            order[k, d] = [o[d, s] for s in range(nslots)]
        for s in range(nslots):
            _add(m.orderc, sum(o[d, s] for d in dims) == 1)
        if symmetry_breaking:
            # loops with factor 1 keep the workload's dim order among themselves (fewer equivalent orders)
            pos = {d: sum(s * o[d, s] for s in range(nslots)) for d in dims}
            for a, d1 in enumerate(dims):
                for d2 in dims[a + 1:]:
                    _add(m.orderc, pos[d1] + 1 <= pos[d2] + nslots * (nontrivial[k, d1] + nontrivial[k, d2]))
    return nontrivial, order, reuse


def reload_log(m, problem, t, c, log_t, order, reuse, order_levels, nontrivial):
    """log2 of how many times one instance of level ``c`` loads a tile of ``t``.

    Levels without an order decision count their irrelevant loops in full
    (conservative).
    """
    dims = problem.dims
    rel = [d for d in dims if d in t.dims]
    irr = [d for d in dims if d not in t.dims]
    total = sum(log_t(k, d) for k in range(c) for d in rel)
    fixed_levels = [k for k in range(c) if k not in order_levels]
    total = total + sum(log_t(k, d) for k in fixed_levels for d in irr)
    levels = [k for k in order_levels if k < c]
    if not levels or not irr:
        return total
    if reuse:
        return total + _reload_reuse_sets(m, problem, t, c, log_t, reuse, nontrivial, rel, irr)
    return total + _reload_order_slots(m, problem, t, c, log_t, order, levels, nontrivial, rel, irr)


def _reload_reuse_sets(m, problem, t, c, log_t, reuse, nontrivial, rel, irr):
    """The outermost level's irrelevant factors of ``t`` not reused for child ``c``: all of them, less the
    reused ones; none is reused while a relevant loop with factor > 1 sits at a level between."""
    log2 = math.log2
    bounds = problem.bounds
    blockers = [nontrivial[kk, d] for kk in range(1, c) for d in rel]
    saved = pe.Var(irr, bounds=lambda _m, d: (0, log2(bounds[d])))
    m.add_component(f"saved_{t.name}_{c}", saved)
    cons = pe.ConstraintList()
    m.add_component(f"reload_{t.name}_{c}", cons)
    for d in irr:
        _add(cons, saved[d] <= log_t(0, d))
        _add(cons, saved[d] <= log2(bounds[d]) * reuse[t.name, d])
        for z in blockers:
            _add(cons, saved[d] <= log2(bounds[d]) * (1 - z))
    return sum(log_t(0, d) - saved[d] for d in irr)


def _reload_order_slots(m, problem, t, c, log_t, order, levels, nontrivial, rel, irr):
    """The irrelevant factors of ``t`` charged at the order levels outside ``c`` (order-slot encoding)."""
    dims = problem.dims
    bounds = problem.bounds
    log2 = math.log2
    nslots = len(dims)
    tag = f"{t.name}_{c}"
    inside = pe.Var([(k, s) for k in levels for s in range(nslots)], bounds=(0, 1))
    m.add_component(f"inside_{tag}", inside)
    irr_factor = pe.Var([(k, s) for k in levels for s in range(nslots)], bounds=(0, None))
    m.add_component(f"irrfactor_{tag}", irr_factor)
    charged = pe.Var([(k, s) for k in levels for s in range(nslots)], bounds=(0, None))
    m.add_component(f"charged_{tag}", charged)
    cons = pe.ConstraintList()
    m.add_component(f"reload_{tag}", cons)
    big = max(log2(bounds[d]) for d in irr)
    for k in levels:
        for s in range(nslots):
            for d in rel:
                _add(cons, inside[k, s] >= order[k, d][s] + nontrivial[k, d] - 1)
            if s + 1 < nslots:
                _add(cons, inside[k, s] >= inside[k, s + 1])
            for d in irr:
                _add(cons, irr_factor[k, s] >= log_t(k, d) - log2(bounds[d]) * (1 - order[k, d][s]))
            _add(cons, charged[k, s] >= irr_factor[k, s] - big * (1 - inside[k, s]))
        # relevant loops at deeper levels (inside this level) keep the whole level "outside"
        for kk in range(k + 1, c):
            if kk in levels:
                _add(cons, inside[k, nslots - 1] >= inside[kk, 0])
            else:
                for d in rel:
                    _add(cons, inside[k, nslots - 1] >= nontrivial[kk, d])
    return sum(charged[k, s] for k in levels for s in range(nslots))


def reuse_sets(order: tuple[str, ...], factor, tensors) -> dict:
    """Per tensor, the loops of a level's ``order`` (outer to inner) reused for it: the innermost run of
    loops with factor > 1 (``factor(d)``) that it ignores."""
    loops = [d for d in order if factor(d) > 1]
    out = {}
    for t in tensors:
        run = set()
        for d in reversed(loops):
            if d in t.dims:
                break
            run.add(d)
        out[t.name] = run
    return out


def reuse_order(sets: dict, dims) -> tuple[str, ...]:
    """A loop order (outer to inner) that reuses at least ``sets[t]`` for every tensor (the sets nested):
    the smallest set innermost, then what the next larger set adds, ...; the other loops outermost, each
    group in ``dims`` order."""
    groups, placed = [], set()
    for s in sorted(sets.values(), key=len):
        new = [d for d in dims if d in s and d not in placed]
        if new:
            groups.append(new)
            placed.update(new)
    rest = [d for d in dims if d not in placed]
    inner_first = [d for g in groups for d in g[::-1]]
    return tuple(rest) + tuple(reversed(inner_first))
