"""Load loop nests from workload files, ONNX models and the bundled zoo.

``load(source)`` returns every layer of ``source``; ``load_one(source)``
returns its only layer.  ``source`` is a path (``.yaml``/``.yml``/``.onnx``)
or a zoo name (``resnet50`` for a whole network, ``resnet50/res2a_branch2b``
for one layer).  The YAML dialect is detected from the document:

* **cnn-layer (flat)**, as in CoSA's workload files::

      problem: {shape: cnn-layer, N: 1, C: 64, K: 64, P: 56, Q: 56, R: 3, S: 3,
                Wstride: 1, Hstride: 1, Wdilation: 1, Hdilation: 1}

  ``M`` is accepted for ``K``; N, R, S, strides and dilations default to 1.
  Inputs are indexed ``W = Wstride*P + Wdilation*R``, ``H = Hstride*Q + Hdilation*S``
  (no padding).  A dilation of 0 (found in CoSA's DeepBench files) is read as 1.
* **Timeloop v0.3**: ``problem: {shape: {name, dimensions, coefficients,
  data-spaces: [{name, projection, read-write}]}, instance: {...}}`` with
  hyphenated keys.  A projection is one entry per tensor axis, each a sum of
  terms ``[dim]`` or ``[dim, coefficient]`` (``[coefficient, dim]`` is accepted
  too); a coefficient is a name from ``coefficients`` (its value from
  ``instance`` or its ``default``) or an integer.
* **Timeloop v0.4**: the same with ``version: 0.4`` and underscored keys
  (``data_spaces``, ``read_write``); ``instance.densities`` (data space -> density
  or ``{density: d}``) sets tensor densities.
* **Our short form**: one layer per document, or ``layers: [...]`` (with
  an optional ``source:`` note and ``defaults:``, whose keys apply to every
  layer whose kind takes them)::

      kind: conv2d      # name, N, C, K, H and W or P and Q, R, S, stride, dilation,
                        # padding, groups, bits: {input, weight, output} or an int,
                        # density: {input, weight}, repeat
      kind: depthwise   # conv2d with groups = C = K; give C
      kind: matmul      # name, M, N, K, batch, bits, density, repeat
      kind: einsum      # name, spec: "ik,kj->ij", bounds: {i: .., j: .., k: ..},
                        # tensor_names, bits (int, list per tensor or by role), density (list), repeat
      kind: loopnest    # name, dims: {P: 8, R: 3}, repeat, op,
                        # tensors: [{name, role, indices: ["2*P + R", ...], bits, density, shape}]

  Pairs (stride, dilation, padding) are an int or ``[height, width]``.
  ``dtype`` (``float32``, ``float64``, ``int8``, ``int32``) gives the number
  type: one name for every tensor, a dict by role, a list per tensor
  (einsum), or per tensor (loopnest; a top-level one applies to tensors
  without their own).  Without ``bits`` the bits follow the type; with both
  they must agree.  Only ``bits``: see ``workloads.dtypes.resolve_dtype``.
* **Layer list**: a YAML list of names; each is the sibling file ``<name>.yaml``
  (CoSA's ``layers.yaml`` and ``unique_layers.yaml``).

Layers of a single-layer file are named after the file stem (an explicit
``name`` in the short form wins); layers of a ``layers:`` file after their
``name`` or ``<stem>_<index>``.  Timeloop data spaces become tensors: the
read-write one is the ``output``, one whose name contains "weight" or
"filter" a ``weight``, otherwise the second read data space is the weight and
the others inputs; word size 8 bits unless the short form says otherwise.
A Timeloop problem that is a plain convolution in builder naming (dims
N K C P Q R S, data spaces Weights / Inputs / Outputs) comes back as built by
``conv2d`` (with its ``op``); other problems keep their own names.
Malformed input raises ``WorkloadError`` naming the file and field.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import yaml

from .builders import conv2d, einsum, matmul
from .dtypes import DTYPE_BITS, apply_dtype, check_dtype
from .errors import WorkloadError
from .ir import AffineExpr, LoopNest, Tensor
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
_FLAT_CNN_KEYS = {"shape", "N", "C", "K", "M", "P", "Q", "R", "S", "Wstride", "Hstride", "Wdilation", "Hdilation"}


# --------------------------------------------------------------------------- entry points
def load(source: str | Path) -> list[LoopNest]:
    """Every layer of a workload file, ONNX model or zoo name (see the module docstring)."""
    text = str(source)
    path = Path(source)
    if path.suffix.lower() == ".onnx":
        from .onnx_loader import load_onnx

        return load_onnx(path)
    if path.is_file():
        return load_yaml_file(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        raise WorkloadError("no such file", source=text)
    from . import zoo

    if zoo.has(text):
        return zoo.network(text) if "/" not in text else [zoo.layer(text)]
    raise WorkloadError(f"not a workload file and not a zoo name; the zoo has {', '.join(zoo.names())}", source=text)


def load_one(source: str | Path) -> LoopNest:
    """The only layer of ``source``; WorkloadError when it holds several."""
    layers = load(source)
    if len(layers) != 1:
        names = ", ".join(layer.name for layer in layers[:8]) + (" ..." if len(layers) > 8 else "")
        raise WorkloadError(f"holds {len(layers)} layers ({names}); name one (e.g. a zoo name 'network/layer')",
                            source=str(source))
    return layers[0]


def load_yaml_file(path: str | Path) -> list[LoopNest]:
    """Layers of one YAML workload file, in any supported dialect."""
    path = Path(path)
    src = str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise WorkloadError(f"cannot read: {exc.strerror or exc}", source=src) from None
    return parse_yaml_text(text, path.stem, src, base_dir=path.parent)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (PyYAML keeps the last one silently)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hashable = key in seen
        except TypeError:
            hashable = False
        if hashable:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice (first on line {seen[key] + 1})", key_node.start_mark)
        try:
            seen[key] = key_node.start_mark.line
        except TypeError:
            pass
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _yaml_error(exc: yaml.YAMLError, source: str) -> WorkloadError:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return WorkloadError(f"malformed YAML{where}: {problem}", source=source)


def read_yaml(text: str, source: str = "<string>") -> Any:
    """Parse YAML text; WorkloadError with the line on malformed input or a repeated key."""
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source) from None


def _split_concatenated(text: str) -> list[str] | None:
    """Blocks of a file that concatenates ``problem:`` documents without ``---`` separators, or None."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.rstrip() == "problem:"]
    if len(starts) < 2:
        return None
    return ["".join(lines[a:b]) for a, b in zip(starts, starts[1:] + [len(lines)])]


def parse_yaml_text(text: str, name: str, source: str = "<string>", base_dir: Path | None = None) -> list[LoopNest]:
    """Layers of a YAML document given as text (``name``: the default layer name).

    A file that concatenates several ``problem:`` blocks without ``---``
    separators (CoSA's ``resnet50_graph/example.yaml``: a layer-name list, then
    the layer blocks) is split at each top-level ``problem:`` line; block ``i``
    becomes layer ``<name>_<i>`` and a leading name list is ignored.
    """
    try:
        doc = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        blocks = _split_concatenated(text)
        if blocks is None:
            raise _yaml_error(exc, source) from None
        out = []
        for i, block in enumerate(blocks):
            for nest in parse_document(read_yaml(block, f"{source} (block {i})"), f"{name}_{i}", source, base_dir):
                nest.op["note"] = "; ".join(filter(None, [nest.op.get("note"), "split from a concatenated file"]))
                out.append(nest)
        return out
    return parse_document(doc, name, source, base_dir)


def detect_dialect(doc: Any) -> str:
    """'cnn-layer', 'timeloop-v0.3', 'timeloop-v0.4', 'short', 'short-list', 'layer-list' or 'unknown'."""
    if isinstance(doc, list) and doc and all(isinstance(x, str) for x in doc):
        return "layer-list"
    if not isinstance(doc, dict):
        return "unknown"
    if "problem" in doc:
        problem = doc["problem"]
        if not isinstance(problem, dict):
            return "unknown"
        shape = problem.get("shape")
        if isinstance(shape, str):
            return "cnn-layer"
        version = problem.get("version", doc.get("version"))
        if isinstance(shape, dict):
            if str(version).strip() in ("0.4", "0.40") or "data_spaces" in shape:
                return "timeloop-v0.4"
            return "timeloop-v0.3"
        return "unknown"
    if "layers" in doc:
        return "short-list"
    if "kind" in doc:
        return "short"
    return "unknown"


def parse_document(doc: Any, name: str, source: str = "<string>", base_dir: Path | None = None) -> list[LoopNest]:
    """Layers of a parsed YAML document (dialect auto-detected)."""
    dialect = detect_dialect(doc)
    if dialect == "cnn-layer":
        return [_flat_cnn_layer(doc["problem"], name, source)]
    if dialect in ("timeloop-v0.3", "timeloop-v0.4"):
        return [_timeloop_problem(doc, name, source, dialect)]
    if dialect == "short":
        return [short_form_layer(doc, name, source)]
    if dialect == "short-list":
        return _short_list(doc, name, source)
    if dialect == "layer-list":
        if base_dir is None:
            raise WorkloadError("a list of layer names needs a file to resolve them against", source=source)
        return _layer_list(doc, base_dir, source)
    what = type(doc).__name__ if not isinstance(doc, dict) else f"a mapping with keys {sorted(map(str, doc))}"
    raise WorkloadError(f"unknown workload dialect: got {what}; expected 'problem:' (Timeloop/CoSA), 'kind:' or "
                        f"'layers:' (short form), or a list of layer names", source=source)


# --------------------------------------------------------------------------- value checks
def _int(value: Any, source: str, field: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkloadError(f"must be an integer, got {value!r}", source=source, field=field)
    if value < minimum:
        raise WorkloadError(f"must be >= {minimum}, got {value}", source=source, field=field)
    return value


def _pair_value(value: Any, source: str, field: str, minimum: int) -> int | tuple[int, int]:
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise WorkloadError(f"must be an int or a pair [height, width], got {value!r}", source=source, field=field)
        return (_int(value[0], source, f"{field}[0]", minimum), _int(value[1], source, f"{field}[1]", minimum))
    return _int(value, source, field, minimum)


def _float(value: Any, source: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WorkloadError(f"must be a number, got {value!r}", source=source, field=field)
    return float(value)


def _mapping(value: Any, source: str, field: str) -> dict:
    if not isinstance(value, dict):
        raise WorkloadError(f"must be a mapping, got {type(value).__name__}", source=source, field=field)
    return value


def _reject_unknown(doc: Mapping, allowed: set[str], source: str, where: str) -> None:
    unknown = sorted(str(k) for k in doc if k not in allowed)
    if unknown:
        raise WorkloadError(f"unknown key(s) {unknown}; allowed: {sorted(allowed)}", source=source, field=where)


def _wrap(source: str, where: str, call, *args, **kwargs):
    """Run a builder and prefix its errors with the file and the layer."""
    try:
        return call(*args, **kwargs)
    except WorkloadError as exc:
        field = f"{where}.{exc.field}" if exc.field else where
        raise WorkloadError(exc.reason if exc.source is None else f"{exc.source}: {exc.reason}",
                            source=source, field=field) from None
    except (TypeError, ValueError) as exc:
        raise WorkloadError(str(exc), source=source, field=where) from None


# --------------------------------------------------------------------------- CoSA / Timeloop flat cnn-layer
def _flat_cnn_layer(problem: dict, name: str, source: str) -> LoopNest:
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


def _timeloop_problem(doc: dict, name: str, source: str, dialect: str) -> LoopNest:
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


# --------------------------------------------------------------------------- our short form
def _short_list(doc: dict, name: str, source: str) -> list[LoopNest]:
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
        accepted = _KEYS_BY_KIND.get(kind, set(defaults))
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


# --------------------------------------------------------------------------- layer lists
def _layer_list(names: list[str], base_dir: Path, source: str) -> list[LoopNest]:
    out = []
    for i, entry in enumerate(names):
        path = base_dir / f"{entry}.yaml"
        if not path.is_file():
            raise WorkloadError(f"layer '{entry}' has no file {path.name} next to the list", source=source,
                                field=f"[{i}]")
        text = path.read_text()
        try:
            doc = yaml.load(text, Loader=_StrictLoader)
        except yaml.YAMLError:
            doc = None  # parse_yaml_text reports it with its line
        if detect_dialect(doc) == "layer-list":
            raise WorkloadError(f"layer '{entry}' is itself a list of layers", source=source, field=f"[{i}]")
        out.extend(parse_yaml_text(text, path.stem, str(path), base_dir))
    return out


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
