"""Where a workload comes from: a YAML file, an ONNX model or a name in the bundled zoo.

``load(source)`` returns every layer of ``source``; ``load_one(source)`` returns its only layer.
``source`` is a path (``.yaml``/``.yml``/``.onnx``), one layer of an ONNX model
(``model.onnx:LAYER``; ``model.onnx/LAYER`` too where ``model.onnx`` is a file), or a
zoo name (``resnet50`` for a whole network, ``resnet50/res2a_branch2b`` for one layer).  YAML files
are read by ``workloads.loaders`` (every dialect it documents), ONNX models by
``workloads.onnx_loader`` (its docstring says how layers are named).

A whole ONNX model comes back as its distinct layers, each with ``repeat`` = how many of its layers
share that shape (``zoo.distinct``, as the zoo's networks carry them); one named layer comes back
alone with ``repeat`` 1.  ``bits`` (any source) replaces the word size of every tensor, e.g. 8 to
price a float32 model as the int8 network it would run as (``dtypes.with_bits``).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from . import zoo
from .dtypes import with_bits
from .errors import WorkloadError
from .ir import LoopNest
from .loaders import load_yaml_file

# where "model.onnx:LAYER" or "model.onnx/LAYER" splits into the file and the layer's name
_ONNX_SPLIT = re.compile(r"\.onnx([:/])", re.IGNORECASE)


def load(source: str | Path, bits: int | None = None) -> list[LoopNest]:
    """Every layer of a workload file, ONNX model or zoo name (see the module docstring)."""
    text = str(source)
    nests = _load(source, text)
    if bits is not None:
        nests = [with_bits(n, bits, text) for n in nests]
    return nests


def _load(source: str | Path, text: str) -> list[LoopNest]:
    path = Path(source)
    layer = None if path.exists() else split_onnx_layer(text)
    if layer is not None:
        return [onnx_layer(*layer)]
    if path.suffix.lower() == ".onnx":
        return zoo.distinct(_onnx_layers(path, text))
    if path.is_file():
        from .loaders_values import check_bounds

        return check_bounds(load_yaml_file(path), text)
    if path.suffix.lower() in (".yaml", ".yml"):
        raise WorkloadError("no such file", source=text)
    if zoo.has(text):
        return zoo.network(text) if "/" not in text else [zoo.layer(text)]
    raise WorkloadError(f"not a workload file and not a zoo name; the zoo has {', '.join(zoo.names())}", source=text)


def split_onnx_layer(text: str) -> tuple[str, str] | None:
    """``(file, layer)`` of ``FILE.onnx:LAYER`` or ``FILE.onnx/LAYER``, or None.  The first split whose file
    exists wins; when none does, the first ``.onnx:`` (so that the error names that file)."""
    splits = [(text[:m.start() + 5], text[m.end():], m.group(1)) for m in _ONNX_SPLIT.finditer(text)]
    splits = [(f, layer, sep) for f, layer, sep in splits if layer]
    for file, layer, _ in splits:
        if Path(file).is_file():
            return file, layer
    for file, layer, sep in splits:
        if sep == ":":
            return file, layer
    return None


def _onnx_layers(path: Path, text: str) -> list[LoopNest]:
    from .onnx_loader import load_onnx

    from .loaders_values import check_bounds

    nests = check_bounds(load_onnx(path), text)
    if not nests:
        raise WorkloadError("the model has no Conv, Gemm or MatMul node", source=text)
    return nests


def onnx_layer(file: str, name: str) -> LoopNest:
    """The layer named ``name`` of the ONNX model ``file`` (``repeat`` 1); a WorkloadError naming the file
    and the layer, with the closest names (or the first few) the model has, when it has no such layer."""
    nests = _onnx_layers(Path(file), file)
    for nest in nests:
        if nest.name == name:
            return nest
    names = [n.name for n in nests]
    close = difflib.get_close_matches(name, names, n=3)
    listed = f"did you mean {', '.join(close)}?" if close else "it has " + ", ".join(names[:6]) + \
        (", ..." if len(names) > 6 else "")
    raise WorkloadError(f"no layer '{name}'; {listed} ({len(names)} layers; 'cosa show {file}' lists them)",
                        source=file)


def load_one(source: str | Path, bits: int | None = None) -> LoopNest:
    """The only layer of ``source``; WorkloadError when it holds several."""
    layers = load(source, bits)
    if len(layers) != 1:
        names = ", ".join(layer.name for layer in layers[:8]) + (" ..." if len(layers) > 8 else "")
        how = (f"'{source}:LAYER'" if Path(source).suffix.lower() == ".onnx"
               else "a zoo name 'network/layer'")
        raise WorkloadError(f"holds {len(layers)} layers ({names}); name one (e.g. {how})", source=str(source))
    return layers[0]
