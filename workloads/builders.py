"""Builders for the common loop nests.

Dimension names follow Timeloop's convolution naming so that CoSA and
Timeloop files round-trip: N batch, K output channels, C input channels,
P output width, Q output height, R filter width, S filter height (and G groups).
The input is indexed ``W = Wstride*P + Wdilation*R - pad_w`` and
``H = Hstride*Q + Hdilation*S - pad_h``.
"""

from __future__ import annotations

import re
from typing import Mapping

from .errors import WorkloadError
from .ir import AffineExpr, LoopNest, Tensor

DEFAULT_BITS = {"input": 8, "weight": 8, "output": 8}


def _pair(value, what: str) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    try:
        a, b = value
        return int(a), int(b)
    except (TypeError, ValueError):
        raise WorkloadError(f"{what} must be an int or a pair (height, width), got {value!r}") from None


def _bits(bits: Mapping[str, int] | int | None) -> dict[str, int]:
    if bits is None:
        return dict(DEFAULT_BITS)
    if isinstance(bits, int):
        return {r: bits for r in DEFAULT_BITS}
    out = dict(DEFAULT_BITS)
    for k, v in bits.items():
        if k not in out:
            raise WorkloadError(f"bits key '{k}' is not one of {list(out)}", field="bits")
        out[k] = int(v)
    return out


def conv2d(name: str = "conv2d", *, N: int = 1, C: int, K: int, P: int | None = None, Q: int | None = None,
           R: int = 1, S: int = 1, H: int | None = None, W: int | None = None,
           stride: int | tuple[int, int] = 1, dilation: int | tuple[int, int] = 1,
           padding: int | tuple[int, int] = 0, groups: int = 1,
           bits: Mapping[str, int] | int | None = None, repeat: int = 1) -> LoopNest:
    """A 2-D convolution (NCHW semantics; C and K are totals over all groups).

    Give either the output size (P width, Q height) or the input size (W, H);
    the other follows from stride, dilation and padding (height first in pairs).
    ``groups == C == K`` is a depthwise convolution.
    """
    sh, sw = _pair(stride, "stride")
    dh, dw = _pair(dilation, "dilation")
    ph, pw = _pair(padding, "padding")
    src = f"conv2d {name}"
    if groups < 1 or C % groups or K % groups:
        raise WorkloadError(f"groups={groups} must divide C={C} and K={K}", source=src, field="groups")
    if min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise WorkloadError("strides and dilations must be >= 1, padding >= 0", source=src)
    if P is None:
        if W is None:
            raise WorkloadError("give the output width P or the input width W", source=src, field="P")
        P = (W + 2 * pw - dw * (R - 1) - 1) // sw + 1
    if Q is None:
        if H is None:
            raise WorkloadError("give the output height Q or the input height H", source=src, field="Q")
        Q = (H + 2 * ph - dh * (S - 1) - 1) // sh + 1
    if W is None:
        W = (P - 1) * sw + dw * (R - 1) + 1 - 2 * pw
    if H is None:
        H = (Q - 1) * sh + dh * (S - 1) + 1 - 2 * ph
    if min(P, Q, W, H) < 1:
        raise WorkloadError(f"non-positive spatial size (P={P}, Q={Q}, W={W}, H={H})", source=src)
    b = _bits(bits)
    cg, kg = C // groups, K // groups
    dims = {"N": N}
    if groups > 1:
        dims["G"] = groups
    dims.update(K=kg, C=cg, P=P, Q=Q, R=R, S=S)
    e = AffineExpr.of
    w_idx = AffineExpr((("P", sw), ("R", dw)), -pw)
    h_idx = AffineExpr((("Q", sh), ("S", dh)), -ph)
    if groups > 1:
        in_c = AffineExpr((("G", cg), ("C", 1)))
        out_k = AffineExpr((("G", kg), ("K", 1)))
        w_axes = (e("G"), e("K"), e("C"), e("S"), e("R"))
    else:
        in_c, out_k = e("C"), e("K")
        w_axes = (e("K"), e("C"), e("S"), e("R"))
    tensors = (
        Tensor("Weights", w_axes, "weight", b["weight"]),
        Tensor("Inputs", (e("N"), in_c, h_idx, w_idx), "input", b["input"], shape=(N, C, H, W)),
        Tensor("Outputs", (e("N"), out_k, e("Q"), e("P")), "output", b["output"]),
    )
    op = {"kind": "conv2d", "stride": (sh, sw), "dilation": (dh, dw), "padding": (ph, pw), "groups": groups,
          "input_hw": (H, W)}
    return LoopNest(name, dims, tensors, repeat, op)


def depthwise_conv2d(name: str = "depthwise", *, C: int, **kwargs) -> LoopNest:
    """Depthwise convolution: one filter per channel (groups = C = K)."""
    return conv2d(name, C=C, K=C, groups=C, **kwargs)


def matmul(name: str = "matmul", *, M: int, N: int, K: int, batch: int | None = None,
           bits: Mapping[str, int] | int | None = None, repeat: int = 1) -> LoopNest:
    """C[M, N] += A[M, K] * B[K, N] (optionally batched over ``batch``).

    A is the ``input`` (streamed rows), B the ``weight``, C the ``output``.
    """
    b = _bits(bits)
    dims = {"batch": batch} if batch else {}
    dims.update(M=M, N=N, K=K)
    lead = ("batch",) if batch else ()
    tensors = (
        Tensor("A", lead + ("M", "K"), "input", b["input"]),
        Tensor("B", lead + ("K", "N"), "weight", b["weight"]),
        Tensor("C", lead + ("M", "N"), "output", b["output"]),
    )
    return LoopNest(name, dims, tensors, repeat, {"kind": "matmul", "batched": bool(batch)})


_EINSUM = re.compile(r"^\s*([a-zA-Z]+(?:\s*,\s*[a-zA-Z]+)*)\s*->\s*([a-zA-Z]*)\s*$")


def einsum(spec: str, bounds: Mapping[str, int], *, name: str = "einsum", tensor_names: list[str] | None = None,
           bits: Mapping[str, int] | list[int] | int | None = None, density: list[float] | None = None,
           repeat: int = 1) -> LoopNest:
    """Loop nest from an einsum string, e.g. ``einsum("ik,kj->ij", {"i": 64, "j": 64, "k": 32})``.

    Operands are named A, B, ... and the output is named after them unless
    ``tensor_names`` is given (operands first, output last).  The first operand
    is the ``input``, the second the ``weight``, further ones ``input``.
    ``bits`` is one int, a list per tensor (operands then output), or a dict by role.
    """
    m = _EINSUM.match(spec)
    if not m:
        raise WorkloadError(f"cannot parse einsum '{spec}' (expected e.g. 'ik,kj->ij')", field="spec")
    operands = [s.strip() for s in m.group(1).split(",")]
    out = m.group(2)
    letters = []
    for s in operands + [out]:
        for ch in s:
            if ch not in letters:
                letters.append(ch)
    missing = [ch for ch in letters if ch not in bounds]
    if missing:
        raise WorkloadError(f"einsum '{spec}': no bound for {missing}", field="bounds")
    extra = [k for k in bounds if k not in letters]
    if extra:
        raise WorkloadError(f"einsum '{spec}': bounds for unknown dimensions {extra}", field="bounds")
    n = len(operands) + 1
    names = tensor_names or [chr(ord("A") + i) for i in range(len(operands))] + ["Out"]
    if len(names) != n:
        raise WorkloadError(f"tensor_names needs {n} names (operands then output)", field="tensor_names")
    roles = ["input"] + ["weight"] * (len(operands) > 1) + ["input"] * max(0, len(operands) - 2) + ["output"]
    if isinstance(bits, list):
        bit_list = [int(x) for x in bits]
        if len(bit_list) != n:
            raise WorkloadError(f"bits needs {n} entries", field="bits")
    else:
        by_role = _bits(bits)
        bit_list = [by_role[r] for r in roles]
    dens = list(density) if density is not None else [1.0] * n
    if len(dens) != n:
        raise WorkloadError(f"density needs {n} entries", field="density")
    tensors = tuple(
        Tensor(names[i], tuple(AffineExpr.of(ch) for ch in s), roles[i], bit_list[i], dens[i])
        for i, s in enumerate(operands + [out]))
    dims = {ch: int(bounds[ch]) for ch in letters}
    return LoopNest(name, dims, tensors, repeat, {"kind": "einsum", "spec": spec})
