"""NumPy references for what Gemmini programs compute (int8 in, int32 accumulate, int8 out).

Layouts (the ones the code generator and the simulators use):

* matmul: A [M, K] int8, B [K, N] int8, bias [N] int32 (added to every row),
  C [M, N] int8.  Batched: A [B, M, K], B [B, K, N], bias [B, N], C [B, M, N]
  (``batched_matmul_ref``).
* conv: input NHWC int8 [N, H, W, C]; weights [R, S, C, K] int8, which is
  the GEMM B matrix [R*S*C, K] after ``weights.reshape(-1, K)`` (row =
  kernel position (r, s) then input channel c; column = output channel k);
  bias [K] int32; output NHWC int8 [N, P, Q, K] (N*P*Q GEMM rows by K).
  Grouped (``groups`` = G): weights [R, S, C/G, K]; output channels
  ``g*K/G .. (g+1)*K/G - 1`` read input channels ``g*C/G .. (g+1)*C/G - 1``
  (depthwise: G = C = K, weights [R, S, 1, C]).

The last step is ``numerics.requantize``: the int32 sums are scaled
(round-half-to-even of the float32 product), passed through ReLU if asked
and saturated to int8, exactly as mvout does from the accumulator.
"""

from __future__ import annotations

import numpy as np

from .errors import SimulationError
from .numerics import requantize, wrap_int32


def _as_int(array, dtype, name: str, source: str, ndim: int) -> np.ndarray:
    arr = np.asarray(array)
    if arr.ndim != ndim:
        raise SimulationError(f"expected {ndim} dimensions, got shape {arr.shape}", source=source, field=name)
    if not np.issubdtype(arr.dtype, np.integer):
        raise SimulationError(f"expected integers, got {arr.dtype}", source=source, field=name)
    info = np.iinfo(dtype)
    if arr.size and (arr.min() < info.min or arr.max() > info.max):
        raise SimulationError(f"values outside {np.dtype(dtype).name}", source=source, field=name)
    return arr.astype(dtype)


def matmul_acc(a, b, bias=None) -> np.ndarray:
    """int32 accumulator values A @ B + bias (two's-complement wrap, like the accumulator)."""
    src = "matmul_ref"
    a = _as_int(a, np.int8, "A", src, 2)
    b = _as_int(b, np.int8, "B", src, 2)
    if a.shape[1] != b.shape[0]:
        raise SimulationError(f"A is {a.shape} but B is {b.shape}: inner sizes differ", source=src, field="B")
    total = a.astype(np.int64) @ b.astype(np.int64)
    if bias is not None:
        bias_arr = np.asarray(bias)
        if bias_arr.ndim == 1:
            bias_arr = _as_int(bias_arr, np.int32, "bias", src, 1)
            if bias_arr.shape[0] != b.shape[1]:
                raise SimulationError(f"bias has {bias_arr.shape[0]} entries, B has {b.shape[1]} columns",
                                      source=src, field="bias")
        else:
            bias_arr = _as_int(bias_arr, np.int32, "bias", src, 2)
            if bias_arr.shape != total.shape:
                raise SimulationError(f"bias is {bias_arr.shape}, C is {total.shape}", source=src, field="bias")
        total = total + bias_arr.astype(np.int64)
    return wrap_int32(total)


def matmul_ref(a, b, bias=None, scale: float = 1.0, relu: bool = False) -> np.ndarray:
    """C = requantize(A @ B + bias): int8 [M, N] from int8 A [M, K], int8 B [K, N], int32 bias [N] (or [M, N])."""
    return requantize(matmul_acc(a, b, bias), scale, 1 if relu else 0)


def batched_matmul_ref(a, b, bias=None, scale: float = 1.0, relu: bool = False) -> np.ndarray:
    """C[g] = requantize(A[g] @ B[g] + bias[g]): int8 [B, M, N] from int8 A [B, M, K], int8 B [B, K, N] and
    int32 bias [B, N] (one bias row per batch entry)."""
    src = "batched_matmul_ref"
    a = _as_int(a, np.int8, "A", src, 3)
    b = _as_int(b, np.int8, "B", src, 3)
    if a.shape[0] != b.shape[0]:
        raise SimulationError(f"A has {a.shape[0]} batch entries, B has {b.shape[0]}", source=src, field="B")
    if bias is not None:
        bias = _as_int(bias, np.int32, "bias", src, 2)
        if bias.shape != (a.shape[0], b.shape[2]):
            raise SimulationError(f"bias is {bias.shape}, expected {(a.shape[0], b.shape[2])}", source=src,
                                  field="bias")
    out = [matmul_ref(a[i], b[i], None if bias is None else bias[i], scale, relu) for i in range(a.shape[0])]
    return np.stack(out) if out else np.zeros((0, a.shape[1], b.shape[2]), dtype=np.int8)


def _pair(value, name: str, source: str) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise SimulationError(f"expected one int or a pair, got {value!r}", source=source, field=name)
        pair = (int(value[0]), int(value[1]))
    else:
        pair = (int(value), int(value))
    return pair


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Output rows (or cols) of a convolution: floor((size + 2*pad - dil*(kernel-1) - 1) / stride) + 1."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def im2col(x, kernel: tuple[int, int], stride=1, padding=0, dilation=1) -> np.ndarray:
    """The GEMM A matrix [N*P*Q, R*S*C] of an NHWC input (zero padding), row order (n, p, q),
    column order (r, s, c): the order of the weights' GEMM rows."""
    src = "conv_ref"
    x = _as_int(x, np.int8, "x", src, 4)
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride, "stride", src), _pair(padding, "padding", src), \
        _pair(dilation, "dilation", src)
    if min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise SimulationError("stride and dilation must be >= 1, padding >= 0", source=src, field="stride")
    r_size, s_size = kernel
    n, h, w, c = x.shape
    p = conv_output_size(h, r_size, sh, ph, dh)
    q = conv_output_size(w, s_size, sw, pw, dw)
    if p < 1 or q < 1:
        raise SimulationError(f"the {r_size}x{s_size} kernel does not fit the padded {h}x{w} input",
                              source=src, field="w")
    padded = np.zeros((n, h + 2 * ph, w + 2 * pw, c), dtype=np.int8)
    padded[:, ph:ph + h, pw:pw + w, :] = x
    cols = np.empty((n, p, q, r_size, s_size, c), dtype=np.int8)
    for r in range(r_size):
        for s in range(s_size):
            rows_from = r * dh
            cols_from = s * dw
            cols[:, :, :, r, s, :] = padded[:, rows_from:rows_from + sh * (p - 1) + 1:sh,
                                            cols_from:cols_from + sw * (q - 1) + 1:sw, :]
    return cols.reshape(n * p * q, r_size * s_size * c)


def conv_weights_as_gemm(w) -> np.ndarray:
    """Weights [R, S, C, K] -> the GEMM B matrix [R*S*C, K]."""
    w = _as_int(w, np.int8, "w", "conv_ref", 4)
    return w.reshape(-1, w.shape[3])


def conv_ref(x, w, bias=None, stride=1, padding=0, dilation=1, scale: float = 1.0,
             relu: bool = False, groups: int = 1) -> np.ndarray:
    """2-D convolution: int8 NHWC x, int8 [R, S, C/groups, K] w, int32 [K] bias -> int8 NHWC [N, P, Q, K].

    stride, padding (zeros, both sides) and dilation: one int or an (rows, cols) pair.  ``groups``: group
    ``g`` computes output channels ``g*K/groups ...`` from input channels ``g*C/groups ...``.
    """
    src = "conv_ref"
    x = _as_int(x, np.int8, "x", src, 4)
    w = _as_int(w, np.int8, "w", src, 4)
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise SimulationError(f"groups must be a positive integer, got {groups!r}", source=src, field="groups")
    if x.shape[3] % groups or w.shape[3] % groups:
        raise SimulationError(f"groups={groups} must divide the {x.shape[3]} input and {w.shape[3]} output "
                              "channels", source=src, field="groups")
    if w.shape[2] * groups != x.shape[3]:
        raise SimulationError(f"weights have {w.shape[2]} input channels per group, x has {x.shape[3]} channels "
                              f"in {groups} group(s)", source=src, field="w")
    n, h, wid, _ = x.shape
    r_size, s_size, cg, k = w.shape
    kg = k // groups
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride, "stride", src), _pair(padding, "padding", src), \
        _pair(dilation, "dilation", src)
    p = conv_output_size(h, r_size, sh, ph, dh)
    q = conv_output_size(wid, s_size, sw, pw, dw)
    if p < 1 or q < 1:
        raise SimulationError(f"the {r_size}x{s_size} kernel does not fit the padded {h}x{wid} input",
                              source=src, field="w")
    if bias is not None:
        bias = _as_int(bias, np.int32, "bias", src, 1)
        if bias.shape[0] != k:
            raise SimulationError(f"bias has {bias.shape[0]} entries, the weights {k} output channels",
                                  source=src, field="bias")
    out = np.empty((n, p, q, k), dtype=np.int8)
    for g in range(groups):
        a = im2col(x[..., g * cg:(g + 1) * cg], (r_size, s_size), (sh, sw), (ph, pw), (dh, dw))
        ks = slice(g * kg, (g + 1) * kg)
        part = matmul_ref(a, conv_weights_as_gemm(w[..., ks]), None if bias is None else bias[ks], scale, relu)
        out[..., ks] = part.reshape(n, p, q, kg)
    return out
