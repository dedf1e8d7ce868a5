"""Dims fused into one where the memory cannot tell them apart.

Two dims ``a`` and ``b`` of a nest *fuse* into one dim ``ab`` of bound ``A * B`` when every tensor either
has neither or indexes them alone, unit-stride, on two adjacent axes (``a`` first) whose inner axis holds
exactly ``B`` words: element ``(.., a, b, ..)`` then sits at ``a * B + b`` of one axis of ``A * B`` words,
so the fused nest reads and writes the same memory in the same order of elements.  A 1x1 stride-1
convolution's output pixels (``Outputs[N][K][Q][P]``, ``Inputs[N][C][Q][P]``) fuse into one row of ``Q *
P`` pixels: a 14 x 14 image becomes a row of 196, which fills 16-lane vectors where a row of 14 does not.
A sliding window (``Q + S`` with ``S > 1``), a stride (``2*Q``), padding (an input axis longer or shorter
than the output's) or a dim that indexes one tensor and not another keep the dims apart.

Dims of bound 1 are dropped first (each of their terms is 0), so ``P + R`` with ``R = 1`` reads as ``P``;
an axis left without terms holds one word.

A stride keeps dims apart in the layer's memory, but not in a copy: ``subsample`` reads an input axis
indexed ``s * P`` (a 1x1 convolution of stride ``s``) as ``P`` on the strided copy of that tensor
(``x[..., ::s, ::s]``, ``LoopNest.op["subsampled"]`` records how to make it), whose pixels then fuse.
A back end that runs such a nest makes the copy as part of each call (``targets.cpu``).
"""

from __future__ import annotations

import math
from dataclasses import replace

from .ir import AffineExpr, LoopNest


def squeeze(nest: LoopNest) -> LoopNest:
    """``nest`` without its dims of bound 1 (their terms are 0 in every index); the nest itself when it has
    none, or when all its dims are 1."""
    unit = {d for d, b in nest.dims.items() if b == 1}
    if not unit or len(unit) == len(nest.dims):
        return nest
    tensors = tuple(replace(t, indices=tuple(AffineExpr(tuple((d, c) for d, c in e.terms if d not in unit),
                                                        e.offset) for e in t.indices))
                    for t in nest.tensors)
    dims = {d: b for d, b in nest.dims.items() if d not in unit}
    return LoopNest(nest.name, dims, tensors, nest.repeat, dict(nest.op))


def _alone(expr: AffineExpr) -> str | None:
    """The dim of an index that is one dim with coefficient 1 and no offset, else None."""
    return expr.terms[0][0] if len(expr.terms) == 1 and expr.terms[0][1] == 1 and expr.offset == 0 else None


def _axis_pair(t, a: str, b: str, bounds: dict) -> int | None:
    """The axis of ``a`` in ``t`` when ``t`` holds ``a`` and ``b`` alone on adjacent axes (``a`` first),
    mentions neither elsewhere, and stores exactly ``bounds[b]`` words along ``b``'s axis (and at least
    ``bounds[a]`` along ``a``'s); else None."""
    for k in range(len(t.indices) - 1):
        if _alone(t.indices[k]) == a and _alone(t.indices[k + 1]) == b:
            others = [e for n, e in enumerate(t.indices) if n not in (k, k + 1)]
            if any(a in e.dims or b in e.dims for e in others):
                return None
            if t.shape is not None and (t.shape[k + 1] != bounds[b] or t.shape[k] < bounds[a]):
                return None
            return k
    return None


def fusable(nest: LoopNest, a: str, b: str) -> bool:
    """Whether dims ``a`` (outer) and ``b`` (inner) of ``nest`` fuse (the module docstring)."""
    if a == b:
        return False
    for t in nest.tensors:
        if a not in t.dims and b not in t.dims:
            continue
        if _axis_pair(t, a, b, nest.dims) is None:
            return False
    return True


def fuse(nest: LoopNest, a: str, b: str) -> LoopNest:
    """``nest`` with ``a`` and ``b`` fused into the dim ``a + b`` (the names joined) at ``a``'s place;
    ``fusable`` must hold."""
    name = a + b
    tensors = []
    for t in nest.tensors:
        k = _axis_pair(t, a, b, nest.dims) if (a in t.dims or b in t.dims) else None
        if k is None:
            tensors.append(t)
            continue
        indices = t.indices[:k] + (AffineExpr.of(name),) + t.indices[k + 2:]
        shape = None if t.shape is None else t.shape[:k] + (t.shape[k] * t.shape[k + 1],) + t.shape[k + 2:]
        tensors.append(replace(t, indices=indices, shape=shape))
    dims = {}
    for d, bound in nest.dims.items():
        if d == a:
            dims[name] = bound * nest.dims[b]
        elif d != b:
            dims[d] = bound
    fused = {**nest.op.get("fused_dims", {}), name: [a, b]}
    return LoopNest(nest.name, dims, tuple(tensors), nest.repeat, {**nest.op, "fused_dims": fused})


def _strided(expr: AffineExpr) -> tuple[str, int] | None:
    """(dim, stride) of an index that is one dim times a stride above 1 with no offset, else None."""
    if len(expr.terms) == 1 and expr.terms[0][1] > 1 and expr.offset == 0:
        return expr.terms[0]
    return None


def subsample(nest: LoopNest) -> LoopNest:
    """``nest`` (squeezed) with every input axis indexed by one dim times a stride ``s > 1`` and no offset
    (the dim on no other axis of that tensor) read as that dim alone: the tensor becomes the copy of its
    words at the multiples of ``s`` along that axis, ``bound`` of them.  ``op["subsampled"]`` gives, per
    rewritten tensor, ``strides`` (per axis, 1 where unchanged), ``shape`` (the stored tensor's) and
    ``copy_shape`` (the copy's: ``x[tuple(slice(0, s * n, s) ...)]`` of those extents).  The same MACs on
    the same words; ``nest`` itself when no axis qualifies."""
    out = squeeze(nest)
    tensors, done = [], {}
    for t in out.tensors:
        ranges = [e.value_range(out.dims) for e in t.indices]
        if t.shape is None and any(lo < 0 for lo, _ in ranges):
            tensors.append(t)  # padding with no stored shape: the back end refuses it anyway
            continue
        shape = tuple(t.shape) if t.shape is not None else tuple(hi + 1 for _, hi in ranges)
        strides, indices, copy = [], [], []
        for k, e in enumerate(t.indices):
            hit = None if t.is_output else _strided(e)
            if hit is not None:
                d, st = hit
                others = [x for n, x in enumerate(t.indices) if n != k]
                if any(d in x.dims for x in others) or st * (out.dims[d] - 1) >= shape[k]:
                    hit = None
            if hit is None:
                strides.append(1), indices.append(e), copy.append(shape[k])
            else:
                strides.append(hit[1]), indices.append(AffineExpr.of(hit[0])), copy.append(out.dims[hit[0]])
        if all(x == 1 for x in strides):
            tensors.append(t)
            continue
        tensors.append(replace(t, indices=tuple(indices), shape=tuple(copy)))
        done[t.name] = {"strides": strides, "shape": list(shape), "copy_shape": copy}
    if not done:
        return nest
    return LoopNest(out.name, dict(out.dims), tuple(tensors), out.repeat,
                    {**out.op, "subsampled": {**out.op.get("subsampled", {}), **done}})


def fuse_all(nest: LoopNest) -> LoopNest:
    """``nest`` squeezed (``squeeze``) and then with every fusable pair of dims fused, repeatedly, until
    none is left; the same MACs and the same memory per tensor.  ``nest`` itself when no pair fuses.  The
    pairs are tried in the order of the nest's dims, so the result depends on the nest alone."""
    out = squeeze(nest)
    if not any(fusable(out, a, b) for a in out.dims for b in out.dims):
        return nest
    while True:
        pair = next(((a, b) for a in out.dims for b in out.dims if fusable(out, a, b)), None)
        if pair is None:
            break
        out = fuse(out, *pair)
    assert math.prod(out.dims.values()) == nest.macs
    return out
