"""The host's share of an int8 network: NumPy operators with ONNX Runtime's integer semantics (CPU
execution provider, MLAS kernels), NCHW like the model.

Every requantization is float32 arithmetic rounded half to even, then saturated, as MLAS does it:

* QuantizeLinear: ``saturate(rint(x / scale) + zero_point)`` (a float32 division);
* DequantizeLinear: ``(q - zero_point) * scale`` in float32;
* QLinearAdd (com.microsoft), as MLAS's x86-64 AVX2 kernel computes it: with the float32 ratios
  ``ra = sa / sc`` and ``rb = sb / sc``, ``rint(fma(a, ra, b * rb))``, the product ``b * rb`` rounded to
  float32 and then fused with ``a * ra`` in one rounding, then the output zero point and saturation (zero
  points 0 here: ``cosa quantize`` makes them so).  Its SSE2 kernel rounds ``a * ra`` first and its ARM
  kernel works in fixed point, so on those hosts ONNX Runtime may differ from this by one LSB where a
  sum falls next to a rounding boundary;
* QLinearGlobalAveragePool (com.microsoft): the int32 sum of each channel times the float32
  ``x_scale / (y_scale * pixels)``, rounded half to even (``gemmini.numerics.scale_round``, Gemmini's own
  mvout rule, which is the same rule);
* MaxPool on int8: the maximum over each window, padding never chosen (exact);
* GlobalAveragePool on float32 (where the quantizer leaves it float, after a DequantizeLinear): the order
  MLAS's global pooling kernel sums in (``global_average_pool``; on a float graph input ONNX Runtime runs
  another kernel, which sums in plain order).
"""

from __future__ import annotations

import math

import numpy as np

from .errors import CodegenError
from .numerics import int_range, scale_round

_INT = {np.dtype(np.int8): 8, np.dtype(np.uint8): 8, np.dtype(np.int32): 32}


def _saturate(values: np.ndarray, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(values, info.min, info.max).astype(dtype)


def quantize_linear(x, scale, zero_point=0, dtype=np.int8) -> np.ndarray:
    """float32 ``x`` -> integers: ``saturate(rint(x / scale) + zero_point)``."""
    q = np.rint(np.asarray(x, dtype=np.float32) / np.float32(scale)).astype(np.float64) + int(zero_point)
    return _saturate(q, dtype)


def dequantize_linear(q, scale, zero_point=0) -> np.ndarray:
    """integers -> float32 ``(q - zero_point) * scale``."""
    return (np.asarray(q, dtype=np.int32) - int(zero_point)).astype(np.float32) * np.float32(scale)


def fused_add_f32(x, t) -> np.ndarray:
    """float32 of the exact sum ``x + t`` of two float64 arrays, rounded once (half to even), as a fused
    multiply-add rounds ``x = a * r`` (exact in float64 for an int8 ``a`` and a float32 ``r``) plus ``t``.

    The float64 sum ``s`` is exact unless the two terms' bits span more than 53; its exact error ``e`` (Knuth's
    two-sum) then decides the one case where rounding ``s`` to float32 differs from rounding ``x + t``: ``s``
    exactly halfway between two float32 values while ``e`` is not 0."""
    x, t = np.asarray(x, dtype=np.float64), np.asarray(t, dtype=np.float64)
    s = x + t
    back = s - x
    e = (x - (s - back)) + (t - back)
    y = s.astype(np.float32)
    up, down = np.nextafter(y, np.float32(np.inf)), np.nextafter(y, np.float32(-np.inf))
    y64 = y.astype(np.float64)
    y = np.where((s == (y64 + up.astype(np.float64)) / 2) & (e > 0), up, y)
    return np.where((s == (y64 + down.astype(np.float64)) / 2) & (e < 0), down, y)


def qlinear_add(a, scale_a, b, scale_b, scale_out, zero_out=0, relu: bool = False, dtype=np.int8) -> np.ndarray:
    """QLinearAdd of two int8 tensors with zero points 0 (broadcasting as NumPy), as MLAS's AVX2 kernel:
    ``rint(fma(a, ra, float32(b * rb)))``; ``relu``: a fused ReLU (exact: ``cosa quantize`` gives the sum the
    ReLU output's scale)."""
    ratio_a = np.float32(scale_a) / np.float32(scale_out)
    ratio_b = np.float32(scale_b) / np.float32(scale_out)
    part_b = np.asarray(b).astype(np.float32) * ratio_b
    value = fused_add_f32(np.asarray(a).astype(np.float64) * np.float64(ratio_a), part_b)
    q = np.rint(value).astype(np.float64) + int(zero_out)
    out = _saturate(q, dtype)
    return np.maximum(out, np.asarray(zero_out, dtype=dtype)) if relu else out


def _pool_geometry(x_shape, attrs: dict, source: str):
    kernel = list(attrs.get("kernel_shape", []))
    if len(kernel) != 2 or len(x_shape) != 4:
        raise CodegenError(f"2-D pooling of an NCHW tensor only (kernel {kernel}, input {list(x_shape)})",
                           source=source, field="kernel_shape")
    strides = list(attrs.get("strides", [1, 1]))
    dilations = list(attrs.get("dilations", [1, 1]))
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    if auto_pad not in ("NOTSET", "VALID"):
        raise CodegenError(f"auto_pad {auto_pad} is not supported (give pads)", source=source, field="auto_pad")
    rnd = math.ceil if attrs.get("ceil_mode", 0) else math.floor
    out = []
    for i in range(2):
        span = dilations[i] * (kernel[i] - 1) + 1
        out.append(int(rnd((x_shape[2 + i] + pads[i] + pads[i + 2] - span) / strides[i])) + 1)
    return kernel, strides, dilations, pads, out


def max_pool(x, attrs: dict, source: str = "MaxPool") -> np.ndarray:
    """MaxPool of an int8 NCHW tensor (ONNX attributes ``kernel_shape``, ``strides``, ``pads``,
    ``dilations``, ``ceil_mode``); padding positions are never the maximum."""
    x = np.asarray(x)
    kernel, strides, dilations, pads, (oh, ow) = _pool_geometry(x.shape, attrs, source)
    if np.issubdtype(x.dtype, np.floating):
        lo = -np.inf
    else:
        lo = int_range(_INT.get(x.dtype, 8))[0] if x.dtype != np.uint8 else 0
    n, c, h, w = x.shape
    extra_h = max(0, (oh - 1) * strides[0] + dilations[0] * (kernel[0] - 1) + 1 - (h + pads[0]))
    extra_w = max(0, (ow - 1) * strides[1] + dilations[1] * (kernel[1] - 1) + 1 - (w + pads[1]))
    padded = np.full((n, c, h + pads[0] + extra_h, w + pads[1] + extra_w), lo, dtype=x.dtype)
    padded[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w] = x
    out = np.full((n, c, oh, ow), lo, dtype=x.dtype)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            r0, c0 = i * dilations[0], j * dilations[1]
            out = np.maximum(out, padded[:, :, r0:r0 + strides[0] * (oh - 1) + 1:strides[0],
                                         c0:c0 + strides[1] * (ow - 1) + 1:strides[1]])
    return out


def qlinear_global_average_pool(x, scale_in, scale_out, zero_in=0, zero_out=0) -> np.ndarray:
    """QLinearGlobalAveragePool of an int8 NCHW tensor -> [N, C, 1, 1]."""
    x = np.asarray(x)
    pixels = x.shape[2] * x.shape[3]
    sums = x.astype(np.int64).sum(axis=(2, 3), keepdims=True) - int(zero_in) * pixels
    scale = np.float32(scale_in) / (np.float32(scale_out) * np.float32(pixels))
    return _saturate(scale_round(sums, scale, out_bits=32).astype(np.int64) + int(zero_out), x.dtype)


def global_average_pool(x) -> np.ndarray:
    """float32 GlobalAveragePool of an NCHW tensor in the order MLAS's x86 global kernel sums (ONNX Runtime's
    CPU provider): each channel's first ``4 * (n // 4)`` pixels (row-major) into four lanes, pixel ``i`` into
    lane ``i % 4`` one after the other; the lanes as ``(l0 + l2) + (l1 + l3)``; the remaining pixels one
    after the other; then divided by the pixel count ``n``, all in float32."""
    x = np.asarray(x, dtype=np.float32)
    n, c = x.shape[:2]
    flat = x.reshape(n, c, -1)
    pixels = flat.shape[2]
    body = pixels // 4 * 4
    lanes = np.zeros((n, c, 4), np.float32)
    if body:
        lanes = np.add.accumulate(flat[:, :, :body].reshape(n, c, body // 4, 4), axis=2, dtype=np.float32)[:, :, -1]
    total = (lanes[:, :, 0] + lanes[:, :, 2]) + (lanes[:, :, 1] + lanes[:, :, 3])
    for i in range(body, pixels):
        total = total + flat[:, :, i]
    return (total / np.float32(pixels)).astype(np.float32).reshape(n, c, 1, 1)


def flatten(x, axis: int = 1) -> np.ndarray:
    x = np.asarray(x)
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)


def reshape(x, shape, allowzero: int = 0) -> np.ndarray:
    """ONNX Reshape: 0 copies the input's dimension (unless ``allowzero``), -1 is inferred."""
    x = np.asarray(x)
    dims = [int(d) for d in np.asarray(shape).reshape(-1)]
    if not allowzero:
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return x.reshape(dims)
