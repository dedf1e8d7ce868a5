"""The explicit-constant segment bound (the HBL argument with every constant kept).

Cut an execution into consecutive segments that each move at most T bytes
between the fast memory (M bytes) and slower memory, every segment but the
last moving more than T - p_max.  In one segment:

* an input element used was resident at its start or loaded in it, and an
  output element updated is resident at its end or stored in it, so the
  elements taking part satisfy sum_j p_j x_j <= 2M + T, and each array alone
  x_j <= (M + T) / p_j (and no more than it has);
* by HBL with loop-bound phantoms, for every (s, t) meeting the rank
  conditions, the iterations run are at most prod_j x_j^s_j prod_i L_i^t_i.

Maximising the product over x under the budget (water filling) gives, for
each exponent vector, a proven cap F on a segment's iterations; any exponent
vector certifies, so a few are tried and the smallest F kept.  With F, at
least ceil(|Z| / F) segments are needed and

    W >= (T - p_max) * (ceil(|Z| / F) - 1),

maximised over a few T.  For matmul this gives about 1.41 mnk / sqrt(M) for
large sizes, above the leading term mnk / sqrt(M) of the tile LP.
"""

from __future__ import annotations

import math

import numpy as np

from workloads import LoopNest

from .counts import touched_words
from .dual import bounded_systems, solve_dual
from .hbl import LatticeTooLarge

TRANSFER_RATIOS = (1.0, 2.0, 4.0)
"""Segment sizes T tried, as multiples of M."""
REFINE_STEPS = 2


def waterfill(weights: np.ndarray, sizes: np.ndarray, caps: np.ndarray, budget: float) -> np.ndarray:
    """argmax sum_j w_j log x_j  s.t.  sum_j p_j x_j <= budget, 0 <= x_j <= cap_j (w >= 0).

    Unconstrained by caps the optimum spends budget * w_j / sum(w) on array j;
    arrays that would pass their cap are fixed at it and the rest re-spread.
    """
    x = np.zeros(len(weights))
    free = weights > 1e-12
    remaining = budget
    while free.any():
        share = remaining * weights / weights[free].sum() / sizes
        over = free & (share > caps)
        if not over.any():
            x[free] = share[free]
            break
        x[over] = caps[over]
        remaining -= float((sizes[over] * caps[over]).sum())
        free &= ~over
        if remaining <= 0:
            break
    return x


def _log_cap(weights, sizes, caps, budget, phantom_weights, phantom_logs) -> tuple[float, np.ndarray]:
    """(log of the iteration cap certified by one exponent vector, the maximising footprints)."""
    x = waterfill(weights, sizes, caps, budget)
    used = weights > 1e-12
    if np.any(x[used] <= 0):
        return math.inf, x
    value = float(np.dot(weights[used], np.log(x[used]))) + float(np.dot(phantom_weights, phantom_logs))
    return value, x


def log_segment_capacity(nest: LoopNest, memory: float, transfer: float, sizes: dict | None) -> float:
    """log of the most iterations a segment moving ``transfer`` units can run with ``memory`` units."""
    best = math.inf
    for system in bounded_systems(nest):
        p = np.array([1.0 if sizes is None else sizes[m.name] for m in system.arrays])
        touched = np.array([float(touched_words(nest, m.name)) for m in system.arrays])
        caps = np.minimum(touched, (memory + transfer) / p)
        budget = 2.0 * memory + transfer
        phantom_logs = np.array([math.log(m.bound) for m in system.phantoms])
        for footprint in [np.minimum(caps, budget / (len(p) * p))]:
            for _ in range(REFINE_STEPS):
                costs = np.log(np.maximum(footprint, 1.0))
                try:
                    sol = solve_dual(system, costs, phantom_logs, f"workload {nest.name}")
                except LatticeTooLarge:
                    break
                weights = np.array([sol.arrays[m.name] for m in system.arrays])
                phantom_weights = np.array([sol.phantoms[m.name] for m in system.phantoms])
                value, footprint = _log_cap(weights, p, caps, budget, phantom_weights, phantom_logs)
                best = min(best, value)
    return best


def segment_bound(nest: LoopNest, memory: float, sizes: dict | None, iterations: int) -> float:
    """max over T of (T - p_max) * (ceil(|Z| / F(T)) - 1), in the memory's unit (0 when it all fits, or
    when no iteration touches stored data: every index falls in the padding)."""
    if iterations <= 0:
        return 0.0
    widest = 1.0 if sizes is None else max(sizes.values())
    best = 0.0
    for ratio in TRANSFER_RATIOS:
        transfer = ratio * memory
        if transfer <= widest:
            continue
        log_f = log_segment_capacity(nest, memory, transfer, sizes)
        if not math.isfinite(log_f):
            continue
        # lean down: float noise must not add a segment
        segments = math.ceil(math.exp(math.log(iterations) - log_f) * (1.0 - 1e-9))
        best = max(best, (transfer - widest) * max(0, segments - 1))
    return best
