"""Read loop nests from workload YAML files (``load_yaml_file``) and YAML text.

``workloads.sources.load`` is the entry point that also takes ONNX models and zoo names.
The YAML dialect is detected from the document:

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

This module holds the file reader and the dialect detection; the readers
are ``loaders_short`` (our short form, and writing it), ``loaders_timeloop``
(CoSA's flat problems and Timeloop's shapes), ``loaders_values`` (the value
checks) and ``yamlio`` (YAML parsing with its limits).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import WorkloadError
from .ir import LoopNest
from .loaders_short import SHORT_KINDS, dump_short, short_form, short_form_layer, short_list
from .loaders_timeloop import flat_cnn_layer, timeloop_problem
from .yamlio import load_yaml, read_text_file, read_yaml as _read_yaml, yaml_error_reason

__all__ = ["SHORT_KINDS", "detect_dialect", "dump_short", "load_yaml_file", "parse_document",
           "parse_yaml_text", "read_yaml", "short_form", "short_form_layer"]


def load_yaml_file(path: str | Path) -> list[LoopNest]:
    """Layers of one YAML workload file, in any supported dialect."""
    path = Path(path)
    src = str(path)
    text = read_text_file(path, src, WorkloadError)
    return parse_yaml_text(text, path.stem, src, base_dir=path.parent)



def read_yaml(text: str, source: str = "<string>") -> Any:
    """Parse YAML text; WorkloadError with the line on malformed input, a repeated key or a limit passed."""
    return _read_yaml(text, source, WorkloadError)


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
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        blocks = _split_concatenated(text)
        if blocks is None:
            raise WorkloadError(yaml_error_reason(exc), source=source) from None
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
        return [flat_cnn_layer(doc["problem"], name, source)]
    if dialect in ("timeloop-v0.3", "timeloop-v0.4"):
        return [timeloop_problem(doc, name, source, dialect)]
    if dialect == "short":
        return [short_form_layer(doc, name, source)]
    if dialect == "short-list":
        return short_list(doc, name, source)
    if dialect == "layer-list":
        if base_dir is None:
            raise WorkloadError("a list of layer names needs a file to resolve them against", source=source)
        return _layer_list(doc, base_dir, source)
    what = type(doc).__name__ if not isinstance(doc, dict) else f"a mapping with keys {sorted(map(str, doc))}"
    raise WorkloadError(f"unknown workload dialect: got {what}; expected 'problem:' (Timeloop/CoSA), 'kind:' or "
                        f"'layers:' (short form), or a list of layer names", source=source)



# --------------------------------------------------------------------------- layer lists
def _layer_list(names: list[str], base_dir: Path, source: str) -> list[LoopNest]:
    out = []
    for i, entry in enumerate(names):
        path = base_dir / f"{entry}.yaml"
        if not path.is_file():
            raise WorkloadError(f"layer '{entry}' has no file {path.name} next to the list", source=source,
                                field=f"[{i}]")
        text = read_text_file(path, str(path), WorkloadError)
        try:
            doc = load_yaml(text)
        except yaml.YAMLError:
            doc = None  # parse_yaml_text reports it with its line
        if detect_dialect(doc) == "layer-list":
            raise WorkloadError(f"layer '{entry}' is itself a list of layers", source=source, field=f"[{i}]")
        out.extend(parse_yaml_text(text, path.stem, str(path), base_dir))
    return out
