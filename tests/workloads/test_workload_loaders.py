"""Loaders: every CoSA workload file, Timeloop v0.3 / v0.4 snippets, our short form, errors, round trips."""

import math
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from workloads import LoopNest, WorkloadError, conv2d, dump_short, einsum, load, load_one, matmul, zoo
from workloads.loaders import detect_dialect, parse_yaml_text, read_yaml

COSA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "cosa-workloads"

V03 = """
problem:
  shape:
    name: CNN-Layer
    dimensions: [ C, M, R, S, N, P, Q ]
    coefficients:
      - name: Wstride
        default: 1
      - name: Hstride
        default: 1
      - name: Wdilation
        default: 1
      - name: Hdilation
        default: 1
    data-spaces:
      - name: Weights
        projection:
          - [ [C] ]
          - [ [M] ]
          - [ [R] ]
          - [ [S] ]
      - name: Inputs
        projection:
          - [ [N] ]
          - [ [C] ]
          - [ [R, Wdilation], [P, Wstride] ]
          - [ [S, Hdilation], [Q, Hstride] ]
      - name: Outputs
        projection:
          - [ [N] ]
          - [ [M] ]
          - [ [Q] ]
          - [ [P] ]
        read-write: True
  instance:
    C: 8
    M: 16
    R: 3
    S: 3
    N: 1
    P: 5
    Q: 4
    Wstride: 2
    Hdilation: 2
"""

V04_GEMM = """
problem:
  version: 0.4
  shape:
    name: gemm
    dimensions: [ M, N, K ]
    data_spaces:
      - name: A
        projection: [ [[M]], [[K]] ]
      - name: B
        projection: [ [[K]], [[N]] ]
      - name: Z
        projection: [ [[M]], [[N]] ]
        read_write: True
  instance:
    M: 32
    N: 24
    K: 16
    densities:
      A: 0.5
      B: {distribution: fixed_structured, density: 0.25}
"""


def cosa_files():
    return sorted(COSA.rglob("*.yaml"))


def test_every_cosa_file_loads():
    files = cosa_files()
    assert len(files) >= 140
    total = 0
    for f in files:
        layers = load(f)
        assert layers and all(isinstance(n, LoopNest) for n in layers), f
        total += len(layers)
    assert total > len(files)


def test_cosa_flat_layer_is_builder_conv():
    nest = load_one(COSA / "resnet50_graph" / "_outputs_input.2.yaml")
    assert nest.name == "_outputs_input.2"
    assert nest.dims == {"N": 1, "K": 64, "C": 3, "P": 112, "Q": 112, "R": 7, "S": 7}
    assert nest.op["kind"] == "conv2d" and nest.op["stride"] == (2, 2)
    assert nest == conv2d("_outputs_input.2", C=3, K=64, P=112, Q=112, R=7, S=7, stride=2)


def test_flat_form_accepts_m_and_defaults():
    (nest,) = parse_yaml_text("problem: {shape: cnn-layer, C: 4, M: 8, P: 3, Q: 2}", "f", "f.yaml")
    assert nest == conv2d("f", C=4, K=8, P=3, Q=2)


def test_cosa_zero_dilation_read_as_one():
    nest = load_one(COSA / "deepbench_graph" / "01_DeepSpeech.yaml")
    assert nest.op["dilation"] == (1, 1) and "dilation 0" in nest.op["note"]
    assert nest.tensor("Inputs").indices[3].coef("R") == 1


def test_cosa_layer_lists_and_resnet_total():
    layers = load(COSA / "resnet50_graph" / "layers.yaml")
    assert len(layers) == 54
    assert sum(n.macs for n in layers) == sum(n.macs * n.repeat for n in zoo.network("resnet50"))
    assert len(load(COSA / "resnet50_graph" / "unique_layers.yaml")) == 24


def _signature(n):
    return (tuple(sorted(n.dims.items())), tuple(n.op.get("stride", ())))


@pytest.mark.parametrize("network", ["resnet50", "alexnet"])
def test_cosa_networks_agree_with_zoo(network):
    ours = {}
    for n in zoo.network(network):
        ours[_signature(n)] = ours.get(_signature(n), 0) + n.repeat
    theirs = {}
    for n in load(COSA / f"{network}_graph" / "layers.yaml"):
        theirs[_signature(n)] = theirs.get(_signature(n), 0) + 1
    assert ours == theirs


def test_concatenated_example_is_split():
    layers = load(COSA / "resnet50_graph" / "example.yaml")
    assert len(layers) == 55
    assert all("concatenated" in n.op["note"] for n in layers)


def test_timeloop_v03_general_projection():
    nest = parse_yaml_text(V03, "v03", "v03.yaml")[0]
    assert detect_dialect(read_yaml(V03)) == "timeloop-v0.3"
    assert nest.name == "v03" and nest.dims["M"] == 16
    assert [t.role for t in nest.tensors] == ["weight", "input", "output"]
    w_axis = nest.tensor("Inputs").indices[2]
    h_axis = nest.tensor("Inputs").indices[3]
    assert (w_axis.coef("P"), w_axis.coef("R")) == (2, 1)   # Wstride 2, Wdilation default 1
    assert (h_axis.coef("Q"), h_axis.coef("S")) == (1, 2)   # Hstride default 1, Hdilation 2
    assert nest.macs == 8 * 16 * 9 * 5 * 4
    # Inputs span (P-1)*2 + R = 11 columns and (Q-1) + 2*(S-1) + 1 = 8 rows
    assert nest.size_words("Inputs") == 8 * 11 * 8


def test_timeloop_cnn_in_builder_naming_becomes_builder_conv():
    text = V03.replace("M", "K").replace("Hdilation: 2", "Hdilation: 1")
    nest = parse_yaml_text(text, "c", "c.yaml")[0]
    assert nest.op["kind"] == "conv2d" and nest.op["stride"] == (1, 2)
    assert nest == conv2d("c", C=8, K=16, P=5, Q=4, R=3, S=3, stride=(1, 2))


def test_timeloop_v04_with_densities():
    nest = parse_yaml_text(V04_GEMM, "g", "g.yaml")[0]
    assert detect_dialect(read_yaml(V04_GEMM)) == "timeloop-v0.4"
    assert nest.dims == {"M": 32, "N": 24, "K": 16}
    assert [(t.name, t.role, t.density) for t in nest.tensors] == [
        ("A", "input", 0.5), ("B", "weight", 0.25), ("Z", "output", 1.0)]
    assert nest.effective_macs == pytest.approx(32 * 24 * 16 * 0.125)


@pytest.mark.parametrize("text, field, words", [
    ("problem: {shape: cnn-layer, C: 4, K: 4, P: 2}", "problem.Q", "missing bound"),
    ("problem: {shape: cnn-layer, C: 4, K: 4, P: 2, Q: x}", "problem.Q", "integer"),
    ("problem: {shape: cnn-layer, C: 4, K: 4, P: 2, Q: 2, Z: 1}", "problem", "unknown key"),
    ("problem: {shape: gemm-layer, C: 4}", "problem.shape", "unknown problem shape"),
    (V03.replace("[ [N] ]\n          - [ [C] ]", "[ [N] ]\n          - [ [X] ]"), "Inputs.projection", "unknown dimension"),
    (V03.replace("    M: 16\n", ""), "problem.instance.M", "missing bound"),
    (V03.replace("read-write", "read_write"), "problem.shape", "read-write"),
    (V04_GEMM.replace("data_spaces", "data-spaces"), "data_spaces", "v0.3 uses hyphens"),
    ("kind: conv2d\nC: 4\nK: 4\nH: 8", "W", "give P"),
    ("kind: conv2d\nC: 4\nK: 4\nH: 8\nW: 8\nP: 3", "P", "gives P=8"),
    ("kind: matmul\nM: 4\nN: 4", "K", "missing bound"),
    ("kind: matmul\nM: 4\nN: 4\nK: 2\nbits: {inputs: 8}", "bits", "not roles"),
    ("kind: loopnest\ndims: {P: 4}\ntensors: [{name: O, role: output, indices: ['P + Q']}]", "indices", "unknown dimension"),
    ("kind: sparse\nM: 1", "kind", "unknown kind"),
    ("layers: [{kind: matmul, name: a, M: 1, N: 1, K: 1}, {kind: matmul, name: a, M: 1, N: 1, K: 1}]", "layers", "repeat"),
    ("foo: 1", None, "unknown workload dialect"),
])
def test_errors_name_file_field_reason(text, field, words):
    with pytest.raises(WorkloadError) as info:
        parse_yaml_text(text, "x", "bad.yaml")
    msg = str(info.value)
    assert msg.startswith("bad.yaml") and words in msg
    if field:
        assert field in msg


def test_malformed_yaml_reports_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("kind: matmul\nM: 4\n  N: [1,\n")
    with pytest.raises(WorkloadError) as info:
        load(path)
    assert "broken.yaml" in str(info.value) and "line" in str(info.value)


def test_repeated_key_is_an_error():
    with pytest.raises(WorkloadError, match="appears twice"):
        parse_yaml_text("kind: matmul\nM: 4\nM: 8\nN: 1\nK: 1", "x", "dup.yaml")


def test_unknown_source():
    with pytest.raises(WorkloadError, match="not a workload file and not a zoo name"):
        load("no_such_network")
    with pytest.raises(WorkloadError, match="no such file"):
        load("missing.yaml")
    with pytest.raises(WorkloadError, match="holds 24 layers"):
        load_one("resnet50")


def test_short_form_file_named_after_stem(tmp_path):
    path = tmp_path / "my_layer.yaml"
    path.write_text("kind: matmul\nM: 8\nN: 4\nK: 2\nbits: {input: 8, weight: 4, output: 32}\n")
    nest = load_one(path)
    assert nest.name == "my_layer" and nest == matmul("my_layer", M=8, N=4, K=2, bits={"weight": 4, "output": 32})


def test_short_form_kinds():
    doc = """
source: test
defaults: {N: 1}
layers:
  - {kind: depthwise, name: dw, C: 8, H: 10, W: 10, R: 3, S: 3, stride: 2, padding: 1}
  - {kind: einsum, name: e, spec: "ik,kj->ij", bounds: {i: 4, j: 5, k: 6}, bits: [8, 4, 32], density: [0.5, 1.0, 1.0]}
  - kind: loopnest
    name: conv1d
    dims: {P: 6, R: 3}
    tensors:
      - {name: I, role: input, indices: ["2*P + R"], bits: 16}
      - {name: F, role: weight, indices: [R]}
      - {name: O, role: output, indices: [P], bits: 32}
"""
    dw, e, c1 = parse_yaml_text(doc, "net", "net.yaml")
    assert dw == conv2d("dw", C=8, K=8, groups=8, H=10, W=10, R=3, S=3, stride=2, padding=1)
    assert dw.dims["P"] == 5 and dw.dims["G"] == 8
    assert e.tensors[0].density == 0.5 and [t.bits for t in e.tensors] == [8, 4, 32]
    assert c1.tensor("I").tile_words(c1.dims) == 2 * 5 + 2 + 1


NESTS = [
    conv2d("c", C=6, K=4, H=9, W=11, R=3, S=2, stride=(2, 1), dilation=(1, 2), padding=(1, 0),
           bits={"input": 8, "weight": 4, "output": 32}, repeat=3),
    conv2d("g", C=8, K=4, groups=2, P=3, Q=3, R=3, S=3),
    matmul("mm", M=3, N=5, K=7, batch=2, bits=16),
    einsum("ijk,jl->il", {"i": 2, "j": 3, "k": 4, "l": 5}, name="e", density=[0.5, 1.0, 1.0]),
]


@pytest.mark.parametrize("nest", NESTS, ids=lambda n: n.name)
def test_dump_short_round_trip(nest):
    back = parse_yaml_text(dump_short(nest), "ignored", "rt.yaml")
    assert back == [nest]
    assert back[0].op["kind"] == nest.op["kind"]


def test_dump_short_general_nest_and_list():
    from workloads import tensor
    general = LoopNest("gen", {"P": 4, "R": 3}, (tensor("I", ["P + 2*R - 1"], shape=[8]), tensor("O", ["P"], "output", 32)))
    back = parse_yaml_text(dump_short([general, NESTS[0]], "note"), "x", "rt.yaml")
    assert back == [general, NESTS[0]]


@settings(max_examples=30, deadline=None)
@given(C=st.integers(1, 6), K=st.integers(1, 6), H=st.integers(3, 12), W=st.integers(3, 12), R=st.integers(1, 3),
       S=st.integers(1, 3), sh=st.integers(1, 3), sw=st.integers(1, 3), pad=st.integers(0, 1))
def test_conv_round_trip_property(C, K, H, W, R, S, sh, sw, pad):
    nest = conv2d("p", C=C, K=K, H=H, W=W, R=R, S=S, stride=(sh, sw), padding=pad)
    back = load_one_text(dump_short(nest))
    assert back == nest and back.macs == nest.macs
    assert math.prod(back.tensor("Inputs").shape) == C * H * W


def load_one_text(text):
    (nest,) = parse_yaml_text(text, "t", "t.yaml")
    return nest
