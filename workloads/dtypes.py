"""Number types of tensors: what a word holds, not only how many bits it has.

A ``Tensor`` may carry a ``dtype`` (``float32``, ``float64``, ``int8``,
``int32``); its ``bits`` then equal the type's width.  A tensor with only
``bits`` gets its number type from the target that runs it
(``resolve_dtype``): on CPU and GPU targets 32 and 64 bits are floats and 8
bits int8; Gemmini keeps int8 inputs and int32 accumulators.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .errors import WorkloadError

DTYPE_BITS = {"float32": 32, "float64": 64, "int8": 8, "int32": 32}
"""Every number type the IR knows, with its width in bits."""

_BY_BITS = {
    "cpu": {8: "int8", 32: "float32", 64: "float64"},
    "gpu": {8: "int8", 32: "float32", 64: "float64"},
    "gemmini": {8: "int8", 32: "int32"},
}


def check_dtype(value: Any, source: str | None = None, field: str | None = "dtype") -> str:
    """``value`` as a dtype name, or a WorkloadError naming the source and field."""
    if not isinstance(value, str) or value not in DTYPE_BITS:
        raise WorkloadError(f"dtype {value!r} is not one of {list(DTYPE_BITS)}", source=source, field=field)
    return value


def resolve_dtype(tensor, target: str = "cpu") -> str:
    """The number type of ``tensor`` on ``target`` (``cpu``, ``gpu`` or ``gemmini``): its own ``dtype``, else
    the one its ``bits`` mean there."""
    if tensor.dtype is not None:
        return tensor.dtype
    table = _BY_BITS.get(target, _BY_BITS["cpu"])
    if tensor.bits not in table:
        raise WorkloadError(f"{tensor.bits}-bit words have no number type on {target} (known: "
                            f"{', '.join(f'{b} bits = {t}' for b, t in table.items())}); give a dtype",
                            source=f"tensor {tensor.name}", field="bits")
    return table[tensor.bits]


def apply_dtype(nest, value: Any, bits_given: bool, source: str, field: str):
    """``nest`` (a ``LoopNest``; this module does not import the IR, which imports it) with the short form's ``dtype`` applied: one name for every tensor, a dict by role
    (input, weight, output) or a list per tensor (in tensor order).  Without ``bits`` in the document the
    tensors' bits follow the type; with both, they must agree."""
    if value is None:
        return nest
    if isinstance(value, dict):
        unknown = sorted(str(k) for k in value if k not in ("input", "weight", "output"))
        if unknown:
            raise WorkloadError(f"keys {unknown} are not roles (input, weight, output)", source=source, field=field)
        by_tensor = {t.name: (value.get(t.role), f"{field}.{t.role}") for t in nest.tensors}
    elif isinstance(value, list):
        if len(value) != len(nest.tensors):
            raise WorkloadError(f"needs {len(nest.tensors)} entries (one per tensor)", source=source, field=field)
        by_tensor = {t.name: (v, f"{field}[{i}]") for i, (t, v) in enumerate(zip(nest.tensors, value))}
    else:
        by_tensor = {t.name: (value, field) for t in nest.tensors}
    tensors = []
    for t in nest.tensors:
        name, where = by_tensor[t.name]
        if name is None:
            tensors.append(t)
            continue
        dtype = check_dtype(name, source, where)
        if bits_given and t.bits != DTYPE_BITS[dtype]:
            raise WorkloadError(f"dtype {dtype} has {DTYPE_BITS[dtype]} bits but bits gives {t.bits} for tensor "
                                f"'{t.name}'", source=source, field=where)
        tensors.append(replace(t, bits=DTYPE_BITS[dtype], dtype=dtype))
    try:
        return replace(nest, tensors=tuple(tensors))
    except WorkloadError as exc:
        raise WorkloadError(exc.reason, source=source, field=field) from None


def with_bits(nest, bits: int, source: str = "--bits"):
    """``nest`` (a ``LoopNest``) with every tensor's words ``bits`` wide (a tensor's ``dtype`` is kept only
    where it has that width, e.g. int8 under 8; others then take the type the target gives those bits)."""
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 64:
        raise WorkloadError(f"word size must be an integer from 1 to 64 bits, got {bits!r}", source=source,
                            field="bits")
    tensors = tuple(replace(t, bits=bits, dtype=t.dtype if DTYPE_BITS.get(t.dtype) == bits else None)
                    for t in nest.tensors)
    return replace(nest, dims=dict(nest.dims), tensors=tensors, op=dict(nest.op))
