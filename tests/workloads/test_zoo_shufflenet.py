"""ShuffleNet v1 from the paper's table: the ONNX graph, its loop nests, and the zoo file made from them."""

from __future__ import annotations

import pytest

from workloads import load_onnx, zoo
from workloads.zoo.shufflenet import STAGE_UNITS, shufflenet_model, write_shufflenet, zoo_text


def test_onnx_graph_is_valid_and_has_the_papers_complexity(tmp_path):
    path = write_shufflenet(tmp_path / "shufflenet.onnx")
    nests = load_onnx(path)
    convs = [n for n in nests if n.op.get("kind") == "conv2d"]
    assert len(convs) == 1 + 3 * sum(STAGE_UNITS)  # conv1 + three convolutions per unit
    assert len(nests) == len(convs) + 1  # and the classifier
    # Table 2 of the paper: 140 MFLOPs (multiply-adds) for ShuffleNet 1x, g = 3
    assert sum(n.macs for n in nests) == pytest.approx(140e6, rel=0.03)
    dw = [n for n in convs if n.name.endswith("dwconv")]
    assert all(n.op["groups"] == n.dims["G"] and n.dims["C"] == n.dims["K"] == 1 for n in dw)
    grouped = [n for n in convs if n.name.endswith("gconv2")]
    assert all(n.op["groups"] == 3 for n in grouped)
    first = next(n for n in convs if n.name == "stage2.unit1.gconv1")
    assert first.op["groups"] == 1  # 24 input channels: not grouped, as the paper says
    assert nests[-1].dims == {"M": 1, "N": 1000, "K": 960}


def test_zoo_file_is_the_graphs_distinct_layers(tmp_path):
    assert zoo.path("shufflenet_v1").read_text() == zoo_text()
    from_onnx = zoo.distinct(load_onnx(write_shufflenet(tmp_path / "s.onnx")))
    from_zoo = zoo.network("shufflenet_v1")
    assert [(n.name, n.dims, n.repeat) for n in from_onnx] == [(n.name, n.dims, n.repeat) for n in from_zoo]
    assert sum(n.repeat for n in from_zoo) == 50
    assert {t.bits for n in from_zoo for t in n.tensors} == {8}


def test_distinct_sums_repeats_and_keeps_first_names():
    nests = load_onnx_model(shufflenet_model(8))
    layers = zoo.distinct(nests)
    assert sum(n.repeat for n in layers) == len(nests)
    assert len({n.name for n in layers}) == len(layers)


def load_onnx_model(model):
    from workloads.onnx_loader import nests_from_model

    return nests_from_model(model)


def test_unknown_group_count_is_refused():
    with pytest.raises(ValueError):
        shufflenet_model(5)
