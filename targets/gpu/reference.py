"""NumPy reference for any dense affine loop nest, test data and the comparison of results.

The reference fixes the dims that share a tensor axis with a larger dim
(the kernel window R, S of a convolution; a group dim G) and, for each of
their values, gathers every operand along the remaining one-dim axes (zero
outside the stored tensor: padding) and contracts with ``numpy.einsum``.
Floats are accumulated in float64, integers in int64.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .layout import array_shape

NUMPY = {"float32": np.float32, "float64": np.float64, "int8": np.int8, "int32": np.int32}

RTOL = {"float32": 1e-5, "float64": 1e-12, "int32": 0.0}
"""Largest accepted |result - reference| relative to max |reference|; integers are exact."""


def _fixed_dims(workload) -> list[str]:
    """Dims to enumerate so that every tensor axis has at most one free dim."""
    fixed: list[str] = []
    for t in workload.tensors:
        for e in t.indices:
            free = sorted((d for d in e.dims if d not in fixed), key=lambda d: -workload.dims[d])
            fixed += free[1:]
    return fixed


def random_inputs(workload, types: dict[str, str], seed: int = 0) -> dict[str, np.ndarray]:
    """Random arrays for the read tensors: floats uniform in [-1, 1), integers in [-8, 8)."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in workload.inputs:
        shape = array_shape(t, workload.dims)
        dtype = NUMPY[types[t.name]]
        if np.issubdtype(dtype, np.integer):
            out[t.name] = rng.integers(-8, 8, size=shape).astype(dtype)
        else:
            out[t.name] = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    return out


def _gather(array: np.ndarray, tensor, point: dict[str, int], dims: dict[str, int], letters: dict[str, str]):
    """``array`` indexed along each axis by its free dim (or a constant), zero outside: (view, subscripts)."""
    view, subs = array, ""
    axis = 0
    for e in tensor.indices:
        free = [d for d in e.dims if d not in point]
        const = e.offset + sum(c * point[d] for d, c in e.terms if d in point)
        if free:
            d = free[0]
            idx = const + e.coef(d) * np.arange(dims[d])
        else:
            idx = np.array([const])
        valid = (idx >= 0) & (idx < view.shape[axis])
        taken = np.take(view, np.clip(idx, 0, view.shape[axis] - 1), axis=axis)
        if not valid.all():
            shape = [1] * taken.ndim
            shape[axis] = len(idx)
            taken = taken * valid.reshape(shape)
        if free:
            view, subs, axis = taken, subs + letters[free[0]], axis + 1
        else:
            view = np.squeeze(taken, axis=axis)
    return view, subs


def reference(workload, inputs: dict[str, np.ndarray], out_dtype: str) -> np.ndarray:
    """The output of ``workload`` on ``inputs`` (float64 for float outputs, int64 for integer ones)."""
    dims = workload.dims
    wide = np.int64 if out_dtype.startswith("int") else np.float64
    letters = {d: chr(ord("a") + k) if k < 26 else chr(ord("A") + k - 26) for k, d in enumerate(dims)}
    out_t = workload.output
    result = np.zeros(array_shape(out_t, dims), dtype=wide)
    fixed = _fixed_dims(workload)
    for values in itertools.product(*(range(dims[d]) for d in fixed)):
        point = dict(zip(fixed, values))
        ops, subs = [], []
        for t in workload.inputs:
            view, s = _gather(inputs[t.name].astype(wide), t, point, dims, letters)
            ops.append(view)
            subs.append(s)
        seen = set("".join(subs))
        for d in dims:  # dims no operand has (a broadcast or a repetition): a vector of ones
            if d not in point and letters[d] not in seen:
                ops.append(np.ones(dims[d], dtype=wide))
                subs.append(letters[d])
        out_free = [next((d for d in e.dims if d not in point), None) for e in out_t.indices]
        spec = ",".join(subs) + "->" + "".join(letters[d] for d in out_free if d is not None)
        part = np.einsum(spec, *ops, optimize=len(ops) > 2)
        index = []
        for e, d in zip(out_t.indices, out_free):
            const = e.offset + sum(c * point[x] for x, c in e.terms if x in point)
            index.append(const + e.coef(d) * np.arange(dims[d]) if d is not None else np.array([const]))
        grid = np.ix_(*index)
        np.add.at(result, grid, part.reshape([len(i) for i in index]))
    return result


def compare(result: np.ndarray, ref: np.ndarray, dtype: str) -> tuple[bool, float]:
    """(verified, max |result - reference|): within ``RTOL[dtype]`` x max |reference| (exact for integers)."""
    if result.shape != ref.shape:
        return False, math.inf
    err = float(np.max(np.abs(result.astype(ref.dtype) - ref))) if ref.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    return err <= RTOL[dtype] * scale, err
