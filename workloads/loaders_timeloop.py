"""CoSA's flat ``cnn-layer`` problems and Timeloop v0.3 / v0.4 problem shapes (see ``workloads.loaders``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from .builders import conv2d
from .errors import WorkloadError
from .ir import AffineExpr, LoopNest, Tensor
from .loaders_values import _float, _int, _mapping, _reject_unknown, _wrap

_FLAT_CNN_KEYS = {"shape", "N", "C", "K", "M", "P", "Q", "R", "S", "Wstride", "Hstride", "Wdilation", "Hdilation"}


# --------------------------------------------------------------------------- CoSA / Timeloop flat cnn-layer
def flat_cnn_layer(problem: dict, name: str, source: str) -> LoopNest:
    shape = problem["shape"]
    if shape.strip().lower().replace("_", "-") != "cnn-layer":
        raise WorkloadError(f"unknown problem shape '{shape}'; only 'cnn-layer' has a flat form", source=source,
                            field="problem.shape")
    _reject_unknown(problem, _FLAT_CNN_KEYS, source, "problem")
    if "K" in problem and "M" in problem:
        raise WorkloadError("give K or M (output channels), not both", source=source, field="problem.M")
    get = {}
    for key, default in (("N", 1), ("C", None), ("K", None), ("P", None), ("Q", None), ("R", 1), ("S", 1),
                         ("Wstride", 1), ("Hstride", 1), ("Wdilation", 1), ("Hdilation", 1)):
        value = problem.get(key, problem.get("M") if key == "K" else None)
        if value is None:
            if default is None:
                raise WorkloadError("missing bound", source=source, field=f"problem.{key}")
            value = default
        minimum = 0 if key.endswith("dilation") else 1
        get[key] = _int(value, source, f"problem.{key}", minimum)
    zero_dilation = get["Wdilation"] == 0 or get["Hdilation"] == 0
    nest = _wrap(source, "problem", conv2d, name, N=get["N"], C=get["C"], K=get["K"], P=get["P"], Q=get["Q"],
                 R=get["R"], S=get["S"], stride=(get["Hstride"], get["Wstride"]),
                 dilation=(max(1, get["Hdilation"]), max(1, get["Wdilation"])))
    if zero_dilation:
        nest.op["note"] = "dilation 0 in the file read as 1"
    return nest


# --------------------------------------------------------------------------- Timeloop v0.3 / v0.4
def _key(style: str, word: str) -> str:
    """'data-spaces' (v0.3) or 'data_spaces' (v0.4)."""
    return word.replace("-", "_") if style == "timeloop-v0.4" else word


def timeloop_problem(doc: dict, name: str, source: str, dialect: str) -> LoopNest:
    problem = doc["problem"]
    shape = problem["shape"]
    ds_key, rw_key = _key(dialect, "data-spaces"), _key(dialect, "read-write")
    other = "data_spaces" if ds_key == "data-spaces" else "data-spaces"
    if ds_key not in shape:
        hint = f" (found '{other}': {'v0.4 uses underscores' if other == 'data_spaces' else 'v0.3 uses hyphens'})" \
            if other in shape else ""
        raise WorkloadError(f"missing '{ds_key}'{hint}", source=source, field=f"problem.shape.{ds_key}")
    dims = shape.get("dimensions")
    if isinstance(dims, str):
        dims = [d.strip() for d in dims.strip("[] ").split(",") if d.strip()]
    if not isinstance(dims, list) or not dims or not all(isinstance(d, str) for d in dims):
        raise WorkloadError(f"must be a list of dimension names, got {dims!r}", source=source,
                            field="problem.shape.dimensions")
    coefficients: dict[str, int | None] = {}
    for i, coef in enumerate(shape.get("coefficients") or []):
        where = f"problem.shape.coefficients[{i}]"
        coef = _mapping(coef, source, where)
        if "name" not in coef:
            raise WorkloadError("a coefficient needs a name", source=source, field=where)
        default = coef.get("default")
        coefficients[str(coef["name"])] = None if default is None else _int(default, source, f"{where}.default", 0)
    instance = problem.get("instance")
    if instance is None:  # older files put the instance next to the shape
        instance = {k: v for k, v in problem.items() if k not in ("shape", "version")}
    instance = _mapping(instance, source, "problem.instance")
    densities = instance.get("densities") or {}
    bounds: dict[str, int] = {}
    for dim in dims:
        if dim not in instance:
            raise WorkloadError(f"missing bound of dimension '{dim}'", source=source, field=f"problem.instance.{dim}")
        bounds[dim] = _int(instance[dim], source, f"problem.instance.{dim}")
    values: dict[str, int] = {}
    for coef, default in coefficients.items():
        value = instance.get(coef, default)
        if value is None:
            raise WorkloadError(f"coefficient '{coef}' has no value and no default", source=source,
                                field=f"problem.instance.{coef}")
        values[coef] = _int(value, source, f"problem.instance.{coef}", 0)
    extra = sorted(str(k) for k in instance if k not in bounds and k not in values and k != "densities")
    if extra:
        raise WorkloadError(f"instance names {extra}, which are neither dimensions {dims} nor coefficients "
                            f"{sorted(coefficients)}", source=source, field="problem.instance")
    spaces = shape[ds_key]
    if not isinstance(spaces, list) or not spaces:
        raise WorkloadError("must be a non-empty list", source=source, field=f"problem.shape.{ds_key}")
    parsed = []
    for i, space in enumerate(spaces):
        where = f"problem.shape.{ds_key}[{i}]"
        space = _mapping(space, source, where)
        if "name" not in space:
            raise WorkloadError("a data space needs a name", source=source, field=where)
        sname = str(space["name"])
        where = f"problem.shape.{ds_key}.{sname}"
        if "projection" not in space:
            raise WorkloadError("missing projection", source=source, field=f"{where}.projection")
        axes = _projection(space["projection"], set(dims), values, source, f"{where}.projection")
        output = bool(space.get(rw_key, False))
        parsed.append((sname, axes, output))
    if not any(out for _, _, out in parsed):
        raise WorkloadError(f"no data space is marked '{rw_key}: True'", source=source, field=f"problem.shape.{ds_key}")
    roles = _roles(parsed)
    tensors = []
    for (sname, axes, _), role in zip(parsed, roles):
        density = densities.get(sname, 1.0)
        if isinstance(density, dict):
            density = density.get("density", 1.0)
        density = _float(density, source, f"problem.instance.densities.{sname}")
        tensors.append(_wrap(source, f"problem.shape.{ds_key}.{sname}", Tensor, sname, tuple(axes), role, 8, density))
    nest = _wrap(source, "problem", LoopNest, name, bounds, tuple(tensors), 1,
                 {"kind": "timeloop", "shape": str(shape.get("name", "")), "coefficients": dict(values)})
    return _as_builder_conv(nest) or nest


def _projection(value: Any, dims: set[str], coefficients: Mapping[str, int], source: str, field: str) -> list[AffineExpr]:
    if not isinstance(value, list) or not value:
        raise WorkloadError(f"must be a list with one entry per tensor axis, got {value!r}", source=source, field=field)
    axes = []
    for a, axis in enumerate(value):
        where = f"{field}[{a}]"
        if isinstance(axis, str):
            terms = [t.strip().split("*") for t in axis.split("+")]
        elif isinstance(axis, list):
            terms = [[t] if isinstance(t, (str, int)) else t for t in axis]
        else:
            raise WorkloadError(f"an axis must be a list of terms, got {axis!r}", source=source, field=where)
        expr_terms = []
        for term in terms:
            if not isinstance(term, list) or not 1 <= len(term) <= 2:
                raise WorkloadError(f"a term is [dim] or [dim, coefficient], got {term!r}", source=source, field=where)
            dim_names = [t.strip() for t in term if isinstance(t, str) and t.strip() in dims]
            others = [t.strip() if isinstance(t, str) else t for t in term if not (isinstance(t, str) and t.strip() in dims)]
            if len(dim_names) != 1:
                unknown = [t for t in others if isinstance(t, str) and t not in coefficients and not t.isdigit()]
                raise WorkloadError(f"term {term!r} names unknown dimension(s) {unknown or term}; "
                                    f"dimensions are {sorted(dims)}", source=source, field=where)
            coef = 1
            for other in others:
                if isinstance(other, bool) or not isinstance(other, (int, str)):
                    raise WorkloadError(f"bad coefficient {other!r}", source=source, field=where)
                if isinstance(other, int) or other.lstrip("-").isdigit():
                    coef *= int(other)
                elif other in coefficients:
                    coef *= coefficients[other]
                else:
                    raise WorkloadError(f"term {term!r}: '{other}' is neither a dimension {sorted(dims)} nor a "
                                        f"coefficient {sorted(coefficients)}", source=source, field=where)
            expr_terms.append((dim_names[0], coef))
        axes.append(AffineExpr(tuple(expr_terms)))
    return axes


def _roles(parsed: list[tuple[str, list, bool]]) -> list[str]:
    roles = ["output" if out else "" for _, _, out in parsed]
    for i, (sname, _, out) in enumerate(parsed):
        if not out and ("weight" in sname.lower() or "filter" in sname.lower()):
            roles[i] = "weight"
    reads = [i for i, r in enumerate(roles) if not r]
    if "weight" not in roles and len(reads) >= 2:
        roles[reads[1]] = "weight"
    return [r or "input" for r in roles]


def _terms(expr: AffineExpr) -> tuple[tuple[tuple[str, int], ...], int]:
    """An axis expression independent of the order of its terms."""
    return tuple(sorted(expr.terms)), expr.offset


def _as_builder_conv(nest: LoopNest) -> LoopNest | None:
    """The same nest from ``conv2d`` (with its ``op``) when it is a plain convolution in builder naming.

    Tensor axes may come in another order (Timeloop's weights are C, K, R, S);
    the builder's order is used then, which changes no footprint or count.
    """
    if set(nest.dims) != {"N", "K", "C", "P", "Q", "R", "S"}:
        return None
    try:
        inputs = nest.tensor("Inputs")
        w_axis = next(e for e in inputs.indices if "P" in e.dims)
        h_axis = next(e for e in inputs.indices if "Q" in e.dims)
        stride = (h_axis.coef("Q"), w_axis.coef("P"))
        dilation = (h_axis.coef("S"), w_axis.coef("R"))
        if min(stride + dilation) < 1:
            return None
        d = nest.dims
        built = conv2d(nest.name, N=d["N"], C=d["C"], K=d["K"], P=d["P"], Q=d["Q"], R=d["R"], S=d["S"],
                       stride=stride, dilation=dilation)
    except (WorkloadError, StopIteration):
        return None

    def axes(t):  # axis order is a layout choice: compare the axes as a multiset
        return sorted(repr(_terms(e)) for e in t.indices)

    ours = {t.name: (t.role, axes(t)) for t in nest.tensors}
    theirs = {t.name: (t.role, axes(t)) for t in built.tensors}
    if ours != theirs:
        return None
    tensors = tuple(replace(t, density=nest.tensor(t.name).density) for t in built.tensors)
    return LoopNest(built.name, built.dims, tensors, nest.repeat, built.op)
