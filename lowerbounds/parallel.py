"""Parallel bounds for general nests: memory-independent (and memory-dependent when M is given).

Memory-independent: with P processors, one of them runs at least |Z|/P
iterations E.  For every (s, t) meeting the HBL rank conditions of the
arrays and the loop-bound phantoms, |E| <= prod_j x_j^s_j prod_i L_i^t_i
where x_j = |phi_j(E)| are the elements of array j it touches, and weighted
AM-GM turns that into a floor on the bytes it touches:

    sum_j p_j x_j >= G(s, t) = sigma * (prod_j (p_j / s_j)^s_j * (|Z|/P) / prod_i L_i^t_i)^(1/sigma),

sigma = sum_j s_j.  Every feasible (s, t) certifies G; the largest G is the
Lagrange dual of "least footprint" and is found by maximising a concave
function over the cone of scaled exponents (scipy SLSQP), after which G is
recomputed in closed form at the (checked) exponents it returned.  It owns
at most 1/P of the data (balanced initial distribution), so it moves at
least G - data/P.  For matmul this reproduces 3 (mnk/P)^(2/3) and Al Daas
et al.'s other two regimes; for convolution 3 (p_I p_F p_O sigma' (|Z|/P)^2 / (RS))^(1/3)
where the filter is small.

Memory-dependent: that processor's local memory of M bytes makes it a
sequential machine running |Z|/P iterations, so the sequential bound applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from workloads import LoopNest, WorkloadError

from .counts import touched_words, working_iterations
from .dual import bounded_systems, solve_dual
from .hbl import LatticeTooLarge, cached_constraints
from .memory import parse_memory
from .segments import segment_bound
from .tile_lp import tile_lp

FEASIBILITY_TOL = 1e-9


@dataclass(frozen=True)
class ParallelBound:
    """Per-processor bounds for ``processors`` processors, in bytes and words.

    footprint_bytes: least bytes the busiest processor touches.  owned_bytes:
    data / P.  memory_independent_bytes = max(0, footprint - owned).
    memory_dependent_bytes: the sequential bound for |Z|/P iterations with
    ``memory_bytes`` of local memory (None without a memory).  exponents: the
    certifying s_j per tensor and t per phantom.
    """

    workload: str
    processors: int
    memory_bytes: float | None
    footprint_bytes: float
    owned_bytes: float
    memory_independent_bytes: float
    footprint_words: float
    owned_words: float
    memory_independent_words: float
    memory_dependent_bytes: float | None
    exponents: dict

    @property
    def bound_bytes(self) -> float:
        """The larger of the two bounds."""
        return max(self.memory_independent_bytes, self.memory_dependent_bytes or 0.0)

    def to_dict(self) -> dict:
        out = dict(self.__dict__)
        out["exponents"] = dict(self.exponents)
        out["bound_bytes"] = self.bound_bytes
        return out


def certificate(s: np.ndarray, t: np.ndarray, sizes: np.ndarray, phantom_logs: np.ndarray, log_work: float) -> float:
    """G(s, t): the footprint floor certified by one exponent vector (0 when it certifies nothing)."""
    used = s > 1e-12
    sigma = float(s[used].sum())
    if sigma <= 0:
        return 0.0
    h = log_work + float(np.dot(s[used], np.log(sizes[used] / s[used]))) - float(np.dot(t, phantom_logs))
    return sigma * math.exp(h / sigma)


def _feasible(x: np.ndarray, constraints) -> bool:
    if np.any(x < -FEASIBILITY_TOL) or np.any(x > 1 + FEASIBILITY_TOL):
        return False
    return all(np.dot(c.ranks, x) >= c.dim - FEASIBILITY_TOL for c in constraints)


def _best_certificate(system, sizes: np.ndarray, log_work: float, source: str):
    """(G, s, t) maximising the certificate over the exponents of one view."""
    constraints = cached_constraints(system)
    na, nph = len(system.arrays), len(system.phantoms)
    phantom_logs = np.array([math.log(m.bound) for m in system.phantoms])
    # start: the plain HBL exponents (phantoms only where no array covers a direction), so sigma > 0
    start = solve_dual(system, np.ones(na), np.full(nph, 1e3), source)
    s0 = np.array([start.arrays[m.name] for m in system.arrays])
    t0 = np.array([start.phantoms[m.name] for m in system.phantoms])
    best = (certificate(s0, t0, sizes, phantom_logs, log_work), s0, t0)
    if best[0] <= 0:
        return best
    scale = best[0]
    sigma0 = float(s0.sum())
    v0 = np.concatenate([s0 / sigma0, t0 / sigma0, [1.0 / sigma0]])
    log_scale = math.log(scale)

    def objective(v):
        w, tau, mu = v[:na], v[na:na + nph], v[-1]
        w_safe = np.maximum(w, 1e-300)
        value = float(np.sum(w - w * (log_scale + np.log(w_safe / sizes)))) - float(np.dot(tau, phantom_logs)) \
            + mu * log_work
        grad = np.concatenate([-(log_scale + np.log(w_safe / sizes)), -phantom_logs, [log_work]])
        return -value, -grad

    rows = []
    for c in constraints:
        rows.append(np.concatenate([np.array(c.ranks, dtype=float), [-float(c.dim)]]))
    for j in range(na + nph):
        row = np.zeros(na + nph + 1)
        row[j], row[-1] = -1.0, 1.0
        rows.append(row)
    a = np.array(rows)
    cons = [{"type": "ineq", "fun": lambda v, a=a: a @ v, "jac": lambda v, a=a: a}]
    bounds = [(1e-12, None)] * na + [(0.0, None)] * nph + [(1e-12, None)]
    res = minimize(objective, v0, jac=True, method="SLSQP", bounds=bounds, constraints=cons,
                   options={"maxiter": 300, "ftol": 1e-12})
    mu = res.x[-1]
    if mu > 0:
        x = np.clip(res.x[:-1] / mu, 0.0, 1.0)
        if _feasible(x, constraints):
            g = certificate(x[:na], x[na:], sizes, phantom_logs, log_work)
            g *= 1.0 - 1e-8  # the exponents are feasible to 1e-9: give the noise back
            if g > best[0]:
                best = (g, x[:na], x[na:])
    return best


def least_footprint(nest: LoopNest, work: float, sizes: dict | None) -> tuple[float, dict]:
    """(least units a set of ``work`` iterations touches, certifying exponents), over all valid views."""
    if work <= 1:
        return 0.0, {}
    best, exps = 0.0, {}
    source = f"workload {nest.name}"
    for system in bounded_systems(nest):
        p = np.array([1.0 if sizes is None else sizes[m.name] for m in system.arrays])
        try:
            g, s, t = _best_certificate(system, p, math.log(work), source)
        except LatticeTooLarge:
            continue
        if g > best:
            best = g
            exps = {m.name: float(v) for m, v in zip(system.arrays, s)}
            exps.update({m.name: float(v) for m, v in zip(system.phantoms, t) if v > 1e-12})
    return best, exps


def parallel_bound(nest: LoopNest, processors: int, memory=None) -> ParallelBound:
    """Communication of the busiest of ``processors`` processors (bytes and words).

    ``memory``: local memory per processor in bytes (number or "256KiB"); when
    given, the memory-dependent bound is reported too.
    """
    if not isinstance(processors, int) or isinstance(processors, bool) or processors < 1:
        raise WorkloadError(f"processors must be a positive integer, got {processors!r}",
                            source=f"parallel bound of {nest.name}", field="processors")
    if any(t.density < 1.0 for t in nest.tensors):
        raise WorkloadError("parallel bounds assume dense tensors", source=f"parallel bound of {nest.name}",
                            field="density")
    work = working_iterations(nest) / processors
    sizes = {t.name: t.bytes_per_word for t in nest.tensors}
    data_words = sum(touched_words(nest, t) for t in nest.tensors)
    data_bytes = sum(touched_words(nest, t) * t.bytes_per_word for t in nest.tensors)
    footprint_b, exps = least_footprint(nest, work, sizes)
    footprint_w, _ = least_footprint(nest, work, None)
    memory_bytes = dependent = None
    if memory is not None:
        memory_bytes = parse_memory(memory)
        busiest = math.ceil(work * (1 - 1e-12))
        lp = tile_lp(nest, memory_bytes, "bytes")
        leading = busiest * memory_bytes / memory_bytes ** lp.khat - memory_bytes
        dependent = max(0.0, leading, segment_bound(nest, memory_bytes, sizes, busiest))
    return ParallelBound(
        workload=nest.name, processors=processors, memory_bytes=memory_bytes,
        footprint_bytes=footprint_b, owned_bytes=data_bytes / processors,
        memory_independent_bytes=max(0.0, footprint_b - data_bytes / processors),
        footprint_words=footprint_w, owned_words=data_words / processors,
        memory_independent_words=max(0.0, footprint_w - data_words / processors),
        memory_dependent_bytes=dependent, exponents=exps)
