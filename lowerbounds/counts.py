"""Exact counts the bounds need: iterations that do real work and elements that are really touched.

A padded convolution reads zeros outside the stored input; those iterations
need no data and a schedule may skip them, so the bound counts only the
iterations whose every index lies inside its tensor's ``shape``.  A strided
convolution with a small filter never reads some input columns; compulsory
traffic counts only the elements some iteration touches.
"""

from __future__ import annotations

import math

import numpy as np

from workloads import AffineExpr, LoopNest, Tensor

MAX_RANGE = 1 << 22
"""Widest index range counted exactly (values of one axis expression)."""


def _value_counts(expr: AffineExpr, bounds: dict[str, int]) -> tuple[int, np.ndarray] | None:
    """(lowest value, number of iteration tuples per value) for an axis over the box of its dims.

    The histogram of sum(c_d * x_d) is the convolution of each term's
    histogram; None when the range is too wide to count.
    """
    lo, hi = expr.value_range(bounds)
    if hi - lo + 1 > MAX_RANGE:
        return None
    hist = np.ones(1, dtype=np.int64)
    for dim, coef in expr.terms:
        step = abs(coef)
        term = np.zeros(step * (bounds[dim] - 1) + 1, dtype=np.int64)
        term[::step] = 1
        hist = np.convolve(hist, term)
    return lo, hist


def _axis_valid(expr: AffineExpr, bounds: dict[str, int], extent: int | None) -> tuple[int, int]:
    """(iteration tuples of the axis's dims, those whose value lies in [0, extent))."""
    total = math.prod(bounds[d] for d in expr.dims)
    if extent is None:
        return total, total
    counted = _value_counts(expr, bounds)
    if counted is None:
        lo, hi = expr.value_range(bounds)
        return total, total if 0 <= lo and hi < extent else 0
    lo, hist = counted
    values = lo + np.arange(len(hist))
    inside = (values >= 0) & (values < extent)
    return total, int(hist[inside].sum())


def working_iterations(nest: LoopNest) -> int:
    """Iterations whose indices all fall inside the stored tensors (all of them when nothing is padded).

    Axes that leave their ``shape`` are independent when they use disjoint
    dims (a convolution's rows and columns), and then the count is exact;
    otherwise it is the union bound |Z| - sum of each axis's misses, which is
    never above the true count.
    """
    total = nest.macs
    losses = []  # (dims of the axis, fraction of the axis's box that is valid)
    for t in nest.tensors:
        if t.shape is None:
            continue
        for expr, extent in zip(t.indices, t.shape):
            if not expr.terms:
                continue
            box, valid = _axis_valid(expr, nest.dims, extent)
            if valid < box:
                losses.append((frozenset(expr.dims), box, valid))
    if not losses:
        return total
    disjoint = all(not (a[0] & b[0]) for i, a in enumerate(losses) for b in losses[i + 1:])
    if disjoint:
        count = total
        for _, box, valid in losses:
            count = count // box * valid  # box divides the running count: the dims are disjoint
        return count
    return max(0, total - sum((box - valid) * (total // box) for _, box, valid in losses))


def _axis_distinct(expr: AffineExpr, bounds: dict[str, int], extent: int | None) -> int:
    """Distinct values of an axis expression inside [0, extent) (a lower bound when not countable)."""
    if not expr.terms:
        return 1 if extent is None or 0 <= expr.offset < extent else 0
    counted = _value_counts(expr, bounds)
    if counted is None:
        return max(bounds[d] for d in expr.dims)  # never more than the true number of distinct values
    lo, hist = counted
    values = lo + np.arange(len(hist))
    mask = hist > 0
    if extent is not None:
        mask &= (values >= 0) & (values < extent)
    return int(mask.sum())


def touched_words(nest: LoopNest, tensor: Tensor | str) -> int:
    """Elements of ``tensor`` that some iteration reads or writes (dense).

    Exact when the tensor's axes use disjoint dims (the product of per-axis
    distinct values); otherwise the largest per-axis count, a lower bound.
    """
    t = nest.tensor(tensor) if isinstance(tensor, str) else tensor
    extents = t.shape if t.shape is not None else (None,) * len(t.indices)
    per_axis = [_axis_distinct(e, nest.dims, x) for e, x in zip(t.indices, extents)]
    dim_sets = [frozenset(e.dims) for e in t.indices]
    disjoint = all(not (a & b) for i, a in enumerate(dim_sets) for b in dim_sets[i + 1:])
    if disjoint:
        return math.prod(per_axis)
    return max(per_axis) if per_axis else 1
