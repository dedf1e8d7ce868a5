"""The ONNX graphs of bench/onnx_zoo.py have the zoo's layers (workloads/zoo), counted by shape."""

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import onnx_zoo  # noqa: E402

from workloads import zoo  # noqa: E402
from workloads.onnx_loader import nests_from_model  # noqa: E402


def _shapes(nests):
    return Counter(tuple(sorted(n.dims.items())) + (tuple(sorted((n.op or {}).get("stride", ()))),) for n in nests)


def test_resnet50_graph_has_the_zoo_layers():
    nests = nests_from_model(onnx_zoo.resnet50(224), "resnet50.onnx")
    assert len(nests) == 54                      # 53 convolutions and the classifier
    convs = [n for n in nests if n.op["kind"] == "conv2d"]
    want = Counter()
    for layer in zoo.network("resnet50"):
        if layer.op["kind"] == "conv2d" and layer.name != "fc1000":
            want[tuple(sorted(layer.dims.items())) + (tuple(sorted(layer.op.get("stride", ()))),)] += layer.repeat \
                if hasattr(layer, "repeat") else 1
    assert _shapes(convs) == want


def test_mobilenet_v2_graph_has_52_convolutions_and_17_depthwise():
    nests = nests_from_model(onnx_zoo.mobilenet_v2(224), "mobilenet_v2.onnx")
    convs = [n for n in nests if n.op["kind"] == "conv2d"]
    assert len(convs) == 52 and sum(n.op.get("groups", 1) > 1 for n in convs) == 17
    assert len(nests) - len(convs) == 1
