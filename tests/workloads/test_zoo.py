"""The bundled zoo: names, layer counts with repeats, MAC totals against published figures."""

import pytest

from workloads import LoopNest, WorkloadError, load, load_one, zoo

# published multiply-accumulate counts (batch 1): ResNet-50 4.1 G, MobileNet-V2 300 M, VGG-16 15.5 G,
# torchvision AlexNet 714 M; BERT-base sequence 128: 12 x (4*128*768^2 + 2*128^2*768 + 2*128*768*3072)
EXPECTED = {
    "resnet50": (24, 54, 4.09e9),
    "mobilenet_v2": (31, 53, 0.300e9),
    "vgg16": (12, 16, 15.47e9),
    "alexnet": (8, 8, 0.714e9),
    "bert_base_128": (6, 72, 12 * (4 * 128 * 768**2 + 2 * 128**2 * 768 + 2 * 128 * 768 * 3072)),
    "bert_base_512": (6, 72, 12 * (4 * 512 * 768**2 + 2 * 512**2 * 768 + 2 * 512 * 768 * 3072)),
}


def test_names():
    assert set(EXPECTED) | {"deepbench"} <= set(zoo.names())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_counts_and_macs(name):
    distinct, total, macs = EXPECTED[name]
    layers = zoo.network(name)
    assert len(layers) == distinct
    assert sum(n.repeat for n in layers) == total
    assert sum(n.macs * n.repeat for n in layers) == pytest.approx(macs, rel=0.01)
    assert zoo.source(name)
    assert len({n.name for n in layers}) == len(layers)


def test_every_network_loads_and_layers_addressable():
    for name in zoo.names():
        for qualified in zoo.layer_names(name):
            nest = zoo.layer(qualified)
            assert isinstance(nest, LoopNest) and load_one(qualified) == nest


def test_resnet_layer_shape():
    nest = load_one("resnet50/res2a_branch2b")
    assert nest.dims == {"N": 1, "K": 64, "C": 64, "P": 56, "Q": 56, "R": 3, "S": 3} and nest.repeat == 3
    assert load("resnet50") == zoo.network("resnet50")


def test_mobilenet_depthwise_uses_groups():
    nest = zoo.layer("mobilenet_v2/b2_dw")
    assert nest.dims["G"] == 96 and nest.dims["C"] == 1 and nest.dims["K"] == 1 and nest.dims["P"] == 56


def test_unknown_names():
    with pytest.raises(WorkloadError, match="no layer 'nope'"):
        zoo.layer("resnet50/nope")
    with pytest.raises(WorkloadError, match="no network"):
        zoo.network("resnet51")
    assert not zoo.has("resnet50/nope") and zoo.has("resnet50") and zoo.has("vgg16/conv1_1")
