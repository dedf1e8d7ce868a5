"""Our short workload form: reading one layer or a ``layers:`` list, and writing it back (see ``workloads.loaders``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from .builders import conv2d, einsum, matmul
from .dtypes import DTYPE_BITS, apply_dtype, check_dtype
from .errors import WorkloadError
from .ir import AffineExpr, LoopNest, Tensor
from .loaders_values import _float, _int, _mapping, _pair_value, _reject_unknown, _wrap
from .sparse import SHORT_KEYS as _SPARSE_KEYS, SPARSE_KINDS, short_form_doc, short_form_sparse

SHORT_KINDS = ("conv2d", "depthwise", "matmul", "einsum", "loopnest") + SPARSE_KINDS

_CONV_KEYS = {"kind", "name", "N", "C", "K", "H", "W", "P", "Q", "R", "S", "stride", "dilation", "padding", "groups",
              "bits", "dtype", "density", "repeat", "source"}
_MATMUL_KEYS = {"kind", "name", "M", "N", "K", "batch", "bits", "dtype", "density", "repeat", "source"}
_EINSUM_KEYS = {"kind", "name", "spec", "bounds", "tensor_names", "bits", "dtype", "density", "repeat", "source"}
_LOOPNEST_KEYS = {"kind", "name", "dims", "tensors", "dtype", "repeat", "op", "source"}
_TENSOR_KEYS = {"name", "role", "indices", "bits", "dtype", "density", "shape"}
_KEYS_BY_KIND = {"conv2d": _CONV_KEYS, "depthwise": _CONV_KEYS, "matmul": _MATMUL_KEYS, "einsum": _EINSUM_KEYS,
                 "loopnest": _LOOPNEST_KEYS, **{k: _SPARSE_KEYS for k in SPARSE_KINDS}}


# --------------------------------------------------------------------------- our short form
def short_list(doc: dict, name: str, source: str) -> list[LoopNest]:
    _reject_unknown(doc, {"layers", "source", "name", "defaults"}, source, "top level")
    layers = doc["layers"]
    if not isinstance(layers, list) or not layers:
        raise WorkloadError("must be a non-empty list of layers", source=source, field="layers")
    defaults = _mapping(doc.get("defaults") or {}, source, "defaults")
    _reject_unknown(defaults, set().union(*_KEYS_BY_KIND.values()) - {"name"}, source, "defaults")
    out = []
    for i, layer in enumerate(layers):
        layer = _mapping(layer, source, f"layers[{i}]")
        kind = layer.get("kind", defaults.get("kind"))
        # a default applies to the layers whose kind takes that key
        accepted = _KEYS_BY_KIND.get(kind, set(defaults)) if isinstance(kind, str) else set(defaults)
        merged = {**{k: v for k, v in defaults.items() if k in accepted}, **layer}
        out.append(short_form_layer(merged, f"{name}_{i}", source, where=f"layers[{i}]"))
    names = [n.name for n in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise WorkloadError(f"layer names repeat: {dup}", source=source, field="layers")
    return out


def _role_dict(value: Any, source: str, field: str, kind: str) -> dict[str, Any]:
    if isinstance(value, dict):
        unknown = sorted(str(k) for k in value if k not in ("input", "weight", "output"))
        if unknown:
            raise WorkloadError(f"keys {unknown} are not roles (input, weight, output)", source=source, field=field)
        return dict(value)
    return {"input": value, "weight": value, "output": value} if kind == "bits" else {"input": value, "weight": value}


def _bits_arg(value: Any, source: str, field: str) -> dict[str, int] | None:
    if value is None:
        return None
    return {r: _int(v, source, f"{field}.{r}") for r, v in _role_dict(value, source, field, "bits").items()}


def _apply_density(nest: LoopNest, value: Any, source: str, field: str) -> LoopNest:
    if value is None:
        return nest
    by_role = {r: _float(v, source, f"{field}.{r}") for r, v in _role_dict(value, source, field, "density").items()}
    tensors = tuple(replace(t, density=by_role.get(t.role, t.density)) for t in nest.tensors)
    return _wrap(source, field, LoopNest, nest.name, nest.dims, tensors, nest.repeat, nest.op)


def short_form_layer(doc: dict, default_name: str, source: str = "<string>", where: str = "") -> LoopNest:
    """One layer of our short form (see the module docstring)."""
    at = f"{where}." if where else ""
    kind = doc.get("kind")
    if kind not in SHORT_KINDS:
        raise WorkloadError(f"unknown kind {kind!r}; expected one of {list(SHORT_KINDS)}", source=source,
                            field=f"{at}kind")
    name = str(doc.get("name", default_name))
    repeat = _int(doc.get("repeat", 1), source, f"{at}repeat")
    label = where or name
    if kind in SPARSE_KINDS:  # spmm, sddmm, fusedmm over a real pattern: workloads.sparse
        base = Path(source).parent if Path(source).is_file() else None
        return short_form_sparse(doc, name, source, label, base)
    if kind in ("conv2d", "depthwise"):
        _reject_unknown(doc, _CONV_KEYS, source, label)
        ints = {}
        for key in ("N", "C", "K", "H", "W", "P", "Q", "R", "S", "groups"):
            if key in doc:
                ints[key] = _int(doc[key], source, f"{at}{key}")
        if "C" not in ints:
            raise WorkloadError("missing C (input channels)", source=source, field=f"{at}C")
        if kind == "depthwise":
            for key in ("K", "groups"):
                if key in ints and ints[key] != ints["C"]:
                    raise WorkloadError(f"a depthwise layer has {key} = C = {ints['C']}", source=source, field=f"{at}{key}")
            ints["K"] = ints["groups"] = ints["C"]
        if "K" not in ints:
            raise WorkloadError("missing K (output channels)", source=source, field=f"{at}K")
        for out_key, in_key in (("P", "W"), ("Q", "H")):
            if out_key not in ints and in_key not in ints:
                raise WorkloadError(f"give {out_key} (output) or {in_key} (input size)", source=source, field=f"{at}{out_key}")
        stride = _pair_value(doc.get("stride", 1), source, f"{at}stride", 1)
        dilation = _pair_value(doc.get("dilation", 1), source, f"{at}dilation", 1)
        padding = _pair_value(doc.get("padding", 0), source, f"{at}padding", 0)
        nest = _wrap(source, label, conv2d, name, **ints, stride=stride, dilation=dilation, padding=padding,
                     bits=_bits_arg(doc.get("bits"), source, f"{at}bits"), repeat=repeat)
        _check_conv_sizes(nest, ints, source, label)
        nest = apply_dtype(nest, doc.get("dtype"), "bits" in doc, source, f"{at}dtype")
        return _apply_density(nest, doc.get("density"), source, f"{at}density")
    if kind == "matmul":
        _reject_unknown(doc, _MATMUL_KEYS, source, label)
        for key in ("M", "N", "K"):
            if key not in doc:
                raise WorkloadError("missing bound", source=source, field=f"{at}{key}")
        batch = doc.get("batch")
        nest = _wrap(source, label, matmul, name, M=_int(doc["M"], source, f"{at}M"), N=_int(doc["N"], source, f"{at}N"),
                     K=_int(doc["K"], source, f"{at}K"),
                     batch=None if batch is None else _int(batch, source, f"{at}batch"),
                     bits=_bits_arg(doc.get("bits"), source, f"{at}bits"), repeat=repeat)
        nest = apply_dtype(nest, doc.get("dtype"), "bits" in doc, source, f"{at}dtype")
        return _apply_density(nest, doc.get("density"), source, f"{at}density")
    if kind == "einsum":
        _reject_unknown(doc, _EINSUM_KEYS, source, label)
        if not isinstance(doc.get("spec"), str):
            raise WorkloadError("missing einsum spec, e.g. 'ik,kj->ij'", source=source, field=f"{at}spec")
        bounds = _mapping(doc.get("bounds"), source, f"{at}bounds")
        bounds = {str(k): _int(v, source, f"{at}bounds.{k}") for k, v in bounds.items()}
        bits = doc.get("bits")
        if isinstance(bits, dict):
            bits = _bits_arg(bits, source, f"{at}bits")
        elif isinstance(bits, list):
            bits = [_int(b, source, f"{at}bits[{i}]") for i, b in enumerate(bits)]
        elif bits is not None:
            bits = _int(bits, source, f"{at}bits")
        density = doc.get("density")
        if density is not None:
            if not isinstance(density, list):
                raise WorkloadError("must be a list (one density per tensor, operands then output)", source=source,
                                    field=f"{at}density")
            density = [_float(d, source, f"{at}density[{i}]") for i, d in enumerate(density)]
        names = doc.get("tensor_names")
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise WorkloadError("must be a list of names", source=source, field=f"{at}tensor_names")
        nest = _wrap(source, label, einsum, doc["spec"], bounds, name=name, tensor_names=names, bits=bits,
                     density=density, repeat=repeat)
        return apply_dtype(nest, doc.get("dtype"), "bits" in doc, source, f"{at}dtype")
    return _loopnest_form(doc, name, repeat, source, label, at)


def _check_conv_sizes(nest: LoopNest, ints: dict, source: str, label: str) -> None:
    """When both the input size and the output size are given they must agree."""
    sh, sw = nest.op["stride"]
    dh, dw = nest.op["dilation"]
    ph, pw = nest.op["padding"]
    for out_key, in_key, s, d, p, k in (("P", "W", sw, dw, pw, "R"), ("Q", "H", sh, dh, ph, "S")):
        if out_key in ints and in_key in ints:
            expected = (ints[in_key] + 2 * p - d * (nest.dims[k] - 1) - 1) // s + 1
            if expected != ints[out_key]:
                raise WorkloadError(f"{in_key}={ints[in_key]} gives {out_key}={expected} with this stride, dilation and "
                                    f"padding, not {ints[out_key]}", source=source, field=f"{label}.{out_key}")


def _loopnest_form(doc: dict, name: str, repeat: int, source: str, label: str, at: str) -> LoopNest:
    _reject_unknown(doc, _LOOPNEST_KEYS, source, label)
    dims = _mapping(doc.get("dims"), source, f"{at}dims")
    dims = {str(k): _int(v, source, f"{at}dims.{k}") for k, v in dims.items()}
    tensors_doc = doc.get("tensors")
    if not isinstance(tensors_doc, list) or not tensors_doc:
        raise WorkloadError("must be a non-empty list of tensors", source=source, field=f"{at}tensors")
    tensors = []
    for i, tdoc in enumerate(tensors_doc):
        where = f"{at}tensors[{i}]"
        tdoc = _mapping(tdoc, source, where)
        _reject_unknown(tdoc, _TENSOR_KEYS, source, where)
        if "name" not in tdoc:
            raise WorkloadError("a tensor needs a name", source=source, field=f"{where}.name")
        where = f"{at}tensors.{tdoc['name']}"
        indices = tdoc.get("indices")
        if not isinstance(indices, list):
            raise WorkloadError("must be a list of index expressions, e.g. ['N', '2*P + R']", source=source,
                                field=f"{where}.indices")
        exprs = []
        for a, text in enumerate(indices):
            expr = _wrap(source, f"{where}.indices[{a}]", AffineExpr.parse, text)
            unknown = sorted(set(expr.dims) - set(dims))
            if unknown:
                raise WorkloadError(f"index '{text}' uses unknown dimension(s) {unknown}; dims are {list(dims)}",
                                    source=source, field=f"{where}.indices[{a}]")
            exprs.append(expr)
        shape = tdoc.get("shape")
        if shape is not None:
            if not isinstance(shape, list):
                raise WorkloadError("must be a list of axis sizes", source=source, field=f"{where}.shape")
            shape = tuple(_int(s, source, f"{where}.shape[{a}]") for a, s in enumerate(shape))
        dtype = tdoc.get("dtype", doc.get("dtype"))
        if dtype is not None:
            check_dtype(dtype, source, f"{where}.dtype" if "dtype" in tdoc else f"{at}dtype")
        bits = tdoc.get("bits", 8 if dtype is None else DTYPE_BITS[dtype])
        tensors.append(_wrap(source, where, Tensor, str(tdoc["name"]), tuple(exprs), tdoc.get("role", "input"),
                             _int(bits, source, f"{where}.bits"),
                             _float(tdoc.get("density", 1.0), source, f"{where}.density"), shape, dtype))
    op = doc.get("op") or {}
    return _wrap(source, label, LoopNest, name, dims, tuple(tensors), repeat, dict(_mapping(op, source, f"{at}op")))



# --------------------------------------------------------------------------- writing the short form
def _pair_out(pair) -> int | list[int]:
    a, b = pair
    return int(a) if a == b else [int(a), int(b)]


def short_form(nest: LoopNest) -> dict:
    """The short-form document of ``nest`` (builder kinds by their parameters, others as ``kind: loopnest``)."""
    kind = nest.op.get("kind")
    if kind in SPARSE_KINDS and "pattern" in nest.op:
        return short_form_doc(nest)
    bits = {t.role: t.bits for t in nest.tensors}
    density = {t.role: t.density for t in nest.tensors if t.density != 1.0 and not t.is_output}
    doc: dict[str, Any]
    if kind == "conv2d" and set(bits) == {"input", "weight", "output"}:
        d, g = nest.dims, int(nest.op.get("groups", 1))
        h, w = nest.op["input_hw"]
        doc = {"kind": "conv2d", "name": nest.name, "N": d["N"], "C": d["C"] * g, "K": d["K"] * g, "H": int(h),
               "W": int(w), "P": d["P"], "Q": d["Q"], "R": d["R"], "S": d["S"],
               "stride": _pair_out(nest.op["stride"]), "dilation": _pair_out(nest.op["dilation"]),
               "padding": _pair_out(nest.op["padding"]), "groups": g}
    elif kind == "matmul" and set(bits) == {"input", "weight", "output"}:
        d = nest.dims
        doc = {"kind": "matmul", "name": nest.name, "M": d["M"], "N": d["N"], "K": d["K"]}
        if "batch" in d:
            doc["batch"] = d["batch"]
    elif kind == "einsum":
        doc = {"kind": "einsum", "name": nest.name, "spec": nest.op["spec"], "bounds": dict(nest.dims),
               "tensor_names": [t.name for t in nest.tensors], "bits": [t.bits for t in nest.tensors]}
        if any(t.density != 1.0 for t in nest.tensors):
            doc["density"] = [t.density for t in nest.tensors]
        density = {}
    else:
        doc = {"kind": "loopnest", "name": nest.name, "dims": dict(nest.dims), "tensors": []}
        for t in nest.tensors:
            tdoc = {"name": t.name, "role": t.role, "indices": [str(e) for e in t.indices], "bits": t.bits}
            if t.dtype is not None:
                tdoc["dtype"] = t.dtype
            if t.density != 1.0:
                tdoc["density"] = t.density
            if t.shape is not None:
                tdoc["shape"] = list(t.shape)
            doc["tensors"].append(tdoc)
        if nest.op:
            doc["op"] = _plain(nest.op)
        density = {}
    if doc["kind"] in ("conv2d", "matmul"):
        doc["bits"] = bits if len(set(bits.values())) > 1 else next(iter(bits.values()))
    if density:
        doc["density"] = density
    if doc["kind"] != "loopnest" and any(t.dtype for t in nest.tensors):
        doc["dtype"] = [t.dtype for t in nest.tensors] if doc["kind"] == "einsum" else \
            {t.role: t.dtype for t in nest.tensors if t.dtype}
    if nest.repeat != 1:
        doc["repeat"] = nest.repeat
    return doc


def _plain(value: Any) -> Any:
    """Tuples to lists, for YAML."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def dump_short(nests: LoopNest | list[LoopNest], source_note: str | None = None) -> str:
    """YAML text of our short form: one layer, or ``layers: [...]`` for a list; ``load`` reads it back."""
    if isinstance(nests, LoopNest):
        return yaml.safe_dump(short_form(nests), sort_keys=False, default_flow_style=None)
    doc: dict[str, Any] = {}
    if source_note:
        doc["source"] = source_note
    doc["layers"] = [short_form(n) for n in nests]
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)
