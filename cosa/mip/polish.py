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


def objective_value(cost, objective: str) -> float:
    """latency: cycles; energy: pJ; edp: cycles * pJ; cosa: cycles (for ranking only)."""
    if objective == "energy":
        return float(cost.energy_pj)
    if objective == "edp":
        return float(cost.cycles) * float(cost.energy_pj)
    return float(cost.cycles)


def _with_order(mapping: Mapping, level: int, order: tuple[str, ...]) -> Mapping:
    levels = list(mapping.levels)
    lm = levels[level]
    levels[level] = LevelMapping(lm.temporal, lm.spatial, order, lm.bypass)
    return Mapping(tuple(levels))


def polish_orders(workload, arch, mapping: Mapping, evaluate, objective: str, sweeps: int = 2,
                  max_evaluations: int = MAX_EVALUATIONS, cost=None):
    """Best loop orders for fixed factors; returns (mapping, cost, evaluations).

    ``cost``: the mapping's cost when already known.  Orders with the same reuse signature (per tensor, the loops inside its
    innermost relevant loop) cost the same, so one order per signature is
    tried, within ``max_evaluations`` cost-model calls.  Ties keep the
    incumbent, so the result is deterministic and never worse.
    """
    best = mapping
    best_cost = cost if cost is not None else evaluate(workload, arch, mapping)
    best_key = (objective_value(best_cost, objective), float(getattr(best_cost, "dram_bytes", 0.0)))
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
                key = (objective_value(cost, objective), float(getattr(cost, "dram_bytes", 0.0)))
                if key < best_key:
                    best, best_cost, best_key, improved = candidate, cost, key, True
                    lm = best.levels[level]
        if not improved:
            break
    return best, best_cost, evaluations
