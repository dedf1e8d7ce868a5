"""The host's share of an int8 network: NumPy operators with ONNX Runtime's integer semantics (CPU
execution provider, MLAS kernels), NCHW like the model.

Every requantization is float32 arithmetic rounded half to even, then saturated, as MLAS does it:

* QuantizeLinear: ``saturate(rint(x / scale) + zero_point)`` (a float32 division);
* DequantizeLinear: ``(q - zero_point) * scale`` in float32;
* QLinearAdd (com.microsoft): ``rint(a * (sa / sc) + b * (sb / sc))`` with both ratios float32, then the
  output zero point and saturation (zero points 0 here: ``cosa quantize`` makes them so);
* QLinearGlobalAveragePool (com.microsoft): the int32 sum of each channel times the float32
  ``x_scale / (y_scale * pixels)``, rounded half to even (``gemmini.numerics.scale_round``, Gemmini's own
  mvout rule, which is the same rule);
* MaxPool on int8: the maximum over each window, padding never chosen (exact).
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


def qlinear_add(a, scale_a, b, scale_b, scale_out, zero_out=0, relu: bool = False, dtype=np.int8) -> np.ndarray:
    """QLinearAdd of two int8 tensors with zero points 0 (broadcasting as NumPy); ``relu``: a fused ReLU
    (exact: ``cosa quantize`` gives the sum the ReLU output's scale)."""
    ratio_a = np.float32(scale_a) / np.float32(scale_out)
    ratio_b = np.float32(scale_b) / np.float32(scale_out)
    value = np.asarray(a).astype(np.float32) * ratio_a + np.asarray(b).astype(np.float32) * ratio_b
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
    """float32 GlobalAveragePool of an NCHW tensor: each channel's pixels summed in row-major order in
    float32 (one after the other, as the network program's C does), divided by the pixels.  ONNX Runtime
    sums in another order; the last bits of the mean may differ, and so, where its next QuantizeLinear
    rounds at a tie-breaking boundary, can one int8 LSB after it."""
    x = np.asarray(x, dtype=np.float32)
    n, c = x.shape[:2]
    pixels = np.float32(x.shape[2] * x.shape[3])
    sums = np.cumsum(x.reshape(n, c, -1), axis=2, dtype=np.float32)[:, :, -1]
    return (sums / pixels).astype(np.float32).reshape(n, c, 1, 1)


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
