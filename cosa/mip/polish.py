"""Loop-order refinement of a decoded mapping under the exact cost model.

The MIP decides the factors and the order; its traffic terms are exact for
the reuse they model but the cost model also counts what the MIP leaves out
(inner-level traffic, output write-back details).  Only the relative order of
loops with factor > 1 matters, so each level has at most a few dozen orders:
try them level by level (outermost first, a few sweeps) and keep the best by
the exact objective.  Factors never change, so validity is preserved.
"""

from __future__ import annotations

import itertools

from mappings import LevelMapping, Mapping

from ..baselines.objective import TIE_TOLERANCE, TieSet

MAX_ORDERS_PER_LEVEL = 720
MAX_EVALUATIONS = 24


def _reuse_signature(order, tensors) -> tuple:
    """What an order changes: per tensor, the loops inside its innermost relevant loop."""
    sig = []
    for t in tensors:
        trailing = []
        for d in reversed(order):
            if d in t.dims:
                break
            trailing.append(d)
        sig.append(frozenset(trailing))
    return tuple(sig)


def _with_order(mapping: Mapping, level: int, order: tuple[str, ...]) -> Mapping:
    levels = list(mapping.levels)
    lm = levels[level]
    levels[level] = LevelMapping(lm.temporal, lm.spatial, order, lm.bypass)
    return Mapping(tuple(levels))


def polish_orders(workload, arch, mapping: Mapping, evaluate, objective: str, sweeps: int = 2,
                  max_evaluations: int = MAX_EVALUATIONS, cost=None, tolerance: float = TIE_TOLERANCE):
    """Best loop orders for fixed factors; returns (mapping, cost, evaluations).

    "Best" is the schedulers' lexicographic rule (``cosa.baselines.objective``: the objective, values
    within ``tolerance`` of the best tried as ties, then DRAM bytes, energy, the objective, the first tried).

    ``cost``: the mapping's cost when already known.  Orders with the same reuse signature (per tensor, the loops inside its
    innermost relevant loop) cost the same, so one order per signature is
    tried, within ``max_evaluations`` cost-model calls.  Deterministic, and never
    worse than the start under the rule.
    """
    best = mapping
    best_cost = cost if cost is not None else evaluate(workload, arch, mapping)
    ties = TieSet(objective, tolerance)
    ties.offer(best_cost, best)
    evaluations = 0 if cost is not None else 1
    for _ in range(sweeps):
        improved = False
        for level, lm in enumerate(best.levels[:-1]):
            loops = [d for d in workload.dims if lm.temporal_factor(d) > 1]
            if len(loops) < 2:
                continue
            current = tuple(d for d in lm.loop_order(workload.dims) if d in loops)
            seen = {_reuse_signature(current, workload.tensors)}
            for count, order in enumerate(itertools.permutations(loops)):
                if count >= MAX_ORDERS_PER_LEVEL or evaluations >= max_evaluations:
                    break
                signature = _reuse_signature(order, workload.tensors)
                if signature in seen:
                    continue
                seen.add(signature)
                candidate = _with_order(best, level, tuple(order))
                cost = evaluate(workload, arch, candidate)
                evaluations += 1
                ties.offer(cost, candidate)
                if ties.best()[1] is not best:
                    best_cost, best, _ = ties.best()
                    improved = True
                    lm = best.levels[level]
        if not improved:
            break
    return best, best_cost, evaluations
