"""NumPy reference of any dense loop nest with affine indices, inputs for it, and the comparison rule.

Each input is viewed (``as_strided``, no copy beyond the zero padding) with one axis per loop dim it
depends on; ``np.einsum`` contracts the views in float64 (ints in int64, exact); the result is added
into the output through its affine indices (``np.add.at``).  Targets share it.
"""

from __future__ import annotations

import math
import string

import numpy as np

NUMPY_DTYPES = {"float32": np.float32, "float64": np.float64, "int8": np.int8, "int32": np.int32}
TOLERANCE = {"float32": 1e-5, "float64": 1e-12, "int32": 0.0, "int8": 0.0}
"""Largest accepted max |out - ref| / max |ref| per output type (0: bit-exact)."""


def random_inputs(workload, dtypes: dict, shapes: dict, seed: int = 0) -> dict:
    """Arrays for every input: floats uniform in [-1, 1), ints in [-8, 8); C-contiguous."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in workload.inputs:
        dt = NUMPY_DTYPES[dtypes[t.name]]
        shape = shapes[t.name]
        if np.issubdtype(dt, np.integer):
            out[t.name] = rng.integers(-8, 8, size=shape).astype(dt)
        else:
            out[t.name] = (rng.random(shape) * 2 - 1).astype(dt)
    return out


def _view(tensor, array: np.ndarray, dims: dict, wide) -> np.ndarray:
    """``array`` (zero-padded to the index range) viewed with one axis per dim of ``tensor``."""
    pads = []
    for expr, size in zip(tensor.indices, array.shape):
        lo, hi = expr.value_range(dims)
        pads.append((max(0, -lo), max(0, hi - (size - 1))))
    padded = np.ascontiguousarray(np.pad(array.astype(wide), pads) if any(a or b for a, b in pads)
                                  else array.astype(wide))
    strides = np.array(padded.strides) // padded.itemsize
    offset = sum(int(s) * (e.offset + p[0]) for s, e, p in zip(strides, tensor.indices, pads))
    order = [d for d in dims if d in tensor.dims]
    step = [sum(int(s) * e.coef(d) for s, e in zip(strides, tensor.indices)) for d in order]
    flat = padded.reshape(-1)[offset:]
    return np.lib.stride_tricks.as_strided(flat, shape=[dims[d] for d in order],
                                           strides=[g * padded.itemsize for g in step], writeable=False), order


def reference(workload, arrays: dict, shapes: dict, out_dtype: str, blas: bool = True) -> np.ndarray:
    """The output of ``workload`` on ``arrays`` (input name -> array), in float64 (int64 for ints).
    ``blas=False``: NumPy's own loops (no BLAS call, so every product reaches the sum: the reference of
    ``targets.exceptions``' NaN/Inf rules)."""
    dims = workload.dims
    letters = {d: (string.ascii_letters[k]) for k, d in enumerate(dims)}
    wide = np.int64 if out_dtype.startswith("int") else np.float64
    operands, specs = [], []
    for t in workload.inputs:
        view, order = _view(t, arrays[t.name], dims, wide)
        operands.append(view)
        specs.append("".join(letters[d] for d in order))
    out = workload.output
    order = [d for d in dims if d in out.dims]
    result = np.einsum(",".join(specs) + "->" + "".join(letters[d] for d in order), *operands,
                       optimize=blas and len(operands) > 1)
    shape = shapes[out.name]
    strides = [math.prod(shape[a + 1:]) for a in range(len(shape))]
    index = np.zeros([dims[d] for d in order], dtype=np.int64)
    index += sum(s * e.offset for s, e in zip(strides, out.indices))
    for k, d in enumerate(order):
        g = sum(s * e.coef(d) for s, e in zip(strides, out.indices))
        axis = [1] * len(order)
        axis[k] = dims[d]
        index += (g * np.arange(dims[d])).reshape(axis)
    full = np.zeros(math.prod(shape), dtype=wide)
    np.add.at(full, index.reshape(-1), result.reshape(-1))
    return full.reshape(shape)


def compare(out: np.ndarray, ref: np.ndarray, out_dtype: str) -> tuple[bool, float]:
    """(verified, max_abs_err): ints must match exactly; floats within ``TOLERANCE`` of max |ref|."""
    err = float(np.max(np.abs(out.astype(ref.dtype) - ref))) if out.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    return err <= TOLERANCE[out_dtype] * max(scale, 1.0), err
