"""Tile-factor refinement of a decoded mapping under the exact cost model, for terms the MIP only bounds.

On a CPU arch (``params["micro_kernel"]``) the cost model charges what the MIP's linear model does not
price exactly: the micro-kernel's issue cycles, set by the register block the code generator picks from
the kernel tile (FMA latency chains, load ports, partial vectors: the MIP counts temporal iterations, a
lower bound of them), and the hardware-managed caches (``lru_caches``: a tile that returns while the data
touched since still fits is a hit; the MIP counts a scratchpad's refills, an upper bound).  So the MIP's
optimum is re-priced with the cost model and improved by local moves: one prime factor of one dim's
temporal loop moved to another level's temporal loop (the moved loop goes innermost there), every move
that leaves the mapping valid tried, the best kept, until no move helps or the budget is spent; where none
helps, two opposite moves between a pair of levels (``exchanges``) are tried the same way, then keeping
an input out of (or back in) a run of levels (``bypasses``: on a CPU, whether and where it is packed).
Spatial factors never change.  Deterministic, and never worse than the start under the schedulers'
lexicographic rule (``cosa.baselines.objective``).
"""

from __future__ import annotations

from mappings import LevelMapping, Mapping
from mappings.validate import violations
from costmodel.packing import read_once
from workloads.divisors import prime_factor_counts

from ..baselines.objective import objective_value

MAX_EVALUATIONS = 600
MIN_GAIN = 0.002  # a move must save more than this share of the objective


def _moved(mapping: Mapping, dim: str, prime: int, src: int, dst: int) -> Mapping:
    """``mapping`` with ``prime`` of ``dim``'s temporal factor moved from level ``src`` to level ``dst``."""
    levels = list(mapping.levels)
    a, b = levels[src], levels[dst]
    ta = dict(a.temporal)
    ta[dim] = ta[dim] // prime
    if ta[dim] == 1:
        del ta[dim]
    tb = dict(b.temporal)
    tb[dim] = tb.get(dim, 1) * prime
    order_b = tuple(d for d in b.order if d != dim) + ((dim,) if b.order else ())
    levels[src] = LevelMapping(ta, a.spatial, tuple(d for d in a.order if d in ta), a.bypass)
    levels[dst] = LevelMapping(tb, b.spatial, order_b, b.bypass)
    return Mapping(tuple(levels))


def neighbours(workload, mapping: Mapping):
    """Every mapping one prime-factor move away (see the module docstring), in a fixed order."""
    n = len(mapping.levels)
    for d in workload.dims:
        for src in range(n):
            factor = mapping.levels[src].temporal_factor(d)
            if factor <= 1:
                continue
            for prime in sorted(prime_factor_counts(factor)):
                for dst in range(n):
                    if dst != src:
                        yield _moved(mapping, d, prime, src, dst)


def exchanges(workload, mapping: Mapping):
    """Every mapping two opposite prime-factor moves away, in a fixed order: a prime of one dim's temporal
    factor from level ``a`` to a deeper level ``b`` and a prime of another dim's from ``b`` to ``a``.  Such a
    swap keeps both tiles near their size, so it reaches what single moves cannot where a capacity binds
    (a 7 x 7 3x3 convolution: half the output channels out of the L1 tile, twice the input channels in)."""
    n = len(mapping.levels)
    for a in range(n):
        for b in range(a + 1, n):
            for d in workload.dims:
                fd = mapping.levels[a].temporal_factor(d)
                for p in sorted(prime_factor_counts(fd)) if fd > 1 else ():
                    for e in workload.dims:
                        fe = mapping.levels[b].temporal_factor(e)
                        if e == d or fe <= 1:
                            continue
                        for q in sorted(prime_factor_counts(fe)):
                            yield _moved(_moved(mapping, d, p, a, b), e, q, b, a)


def bypasses(workload, arch, mapping: Mapping):
    """Every mapping that keeps one input out of (or back in) a run of consecutive levels between DRAM and
    the innermost level, in a fixed order, for the inputs whose copy would be read once
    (``costmodel.packing.read_once``).  On a CPU a level that keeps an input is where the generator packs
    it; kept out of every level above the kernel's, the input is read where it is stored: a 7 x 7 1x1
    convolution's weights, each used once, were copied into panels at a third of the kernel's time.  Only
    those: the cost model ranks dropping any copy above keeping it, and on a 3x3 convolution (padded
    inputs read in place) and a GEMM (panels reread) that ran 2 to 15 times slower."""
    inner = len(mapping.levels) - 1
    for t in workload.inputs:
        if not read_once(workload, arch, mapping, t):
            continue
        levels = [k for k in range(1, inner) if arch.levels[k].may_hold(t)]
        for i, a in enumerate(levels):
            for b in levels[i:]:
                span = [k for k in levels if a <= k <= b]
                kept = [t.name not in mapping.levels[k].bypass for k in span]
                if all(kept) or not any(kept):
                    out = list(mapping.levels)
                    for k in span:
                        lm = out[k]
                        out[k] = LevelMapping(lm.temporal, lm.spatial, lm.order,
                                              lm.bypass | {t.name} if all(kept) else lm.bypass - {t.name})
                    yield Mapping(tuple(out))


def polish_factors(workload, arch, mapping: Mapping, evaluate, objective: str, cost=None,
                   max_evaluations: int = MAX_EVALUATIONS, gain: float = MIN_GAIN):
    """Steepest descent over single prime-factor moves under ``evaluate``, then over ``exchanges`` where no
    single move helps, then over ``bypasses``; returns (mapping, cost, evaluations).

    Each sweep prices every valid neighbour of the current best and moves to the one with the lowest
    ``objective`` when that beats the current one by more than ``gain`` (relative), so the descent cannot
    cycle; ties among neighbours go to the first in the order the three generators yield them."""
    best = mapping
    best_cost = cost if cost is not None else evaluate(workload, arch, mapping)
    evaluations = 0 if cost is not None else 1
    seen = {repr(best)}
    while evaluations < max_evaluations:
        step = None
        for moves in (neighbours, exchanges, lambda w, m: bypasses(w, arch, m)):
            for candidate in moves(workload, best):
                if evaluations >= max_evaluations:
                    break
                key = repr(candidate)
                if key in seen or violations(candidate, workload, arch):
                    continue
                seen.add(key)
                got = evaluate(workload, arch, candidate)
                evaluations += 1
                if step is None or objective_value(got, objective) < objective_value(step[1], objective):
                    step = (candidate, got)
            if step is not None and objective_value(step[1], objective) < \
                    (1 - gain) * objective_value(best_cost, objective):
                break
        if step is None or objective_value(step[1], objective) >= (1 - gain) * objective_value(best_cost, objective):
            break
        best, best_cost = step
    return best, best_cost, evaluations
