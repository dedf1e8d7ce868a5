"""Where a workload comes from: a YAML file, an ONNX model or a name in the bundled zoo.

``load(source)`` returns every layer of ``source``; ``load_one(source)`` returns its only layer.
``source`` is a path (``.yaml``/``.yml``/``.onnx``) or a zoo name (``resnet50`` for a whole network,
``resnet50/res2a_branch2b`` for one layer).  YAML files are read by ``workloads.loaders`` (every
dialect it documents), ONNX models by ``workloads.onnx_loader``.
"""

from __future__ import annotations

from pathlib import Path

from . import zoo
from .errors import WorkloadError
from .ir import LoopNest
from .loaders import load_yaml_file


def load(source: str | Path) -> list[LoopNest]:
    """Every layer of a workload file, ONNX model or zoo name (see the module docstring)."""
    text = str(source)
    path = Path(source)
    if path.suffix.lower() == ".onnx":
        from .onnx_loader import load_onnx

        from .loaders_values import check_bounds

        nests = check_bounds(load_onnx(path), text)
        if not nests:
            raise WorkloadError("the model has no Conv, Gemm or MatMul node", source=text)
        return nests
    if path.is_file():
        from .loaders_values import check_bounds

        return check_bounds(load_yaml_file(path), text)
    if path.suffix.lower() in (".yaml", ".yml"):
        raise WorkloadError("no such file", source=text)
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
