"""ONNX: one loop nest per Conv / Gemm / MatMul node, shapes from shape inference (model built in the test)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from workloads import WorkloadError, conv2d, load, load_one, load_onnx, matmul, zoo
from workloads.dtypes import apply_dtype
from workloads.onnx_loader import layer_name, nests_from_model
from workloads.dtypes import with_bits
from workloads.sources import split_onnx_layer


def _init(name, shape, dtype=np.float32):
    return numpy_helper.from_array(np.zeros(shape, dtype=dtype), name)


def _f32(nest):
    """``nest`` as a float32 model gives it: 32-bit words typed float32."""
    return apply_dtype(nest, "float32", True, "test", "dtype")


def small_model():
    """x[1,3,16,16] -> conv 3x3 s2 p1 -> depthwise 3x3 -> conv 1x1 (asymmetric pad) -> flatten -> Gemm(transB)
    -> MatMul; plus a batched MatMul of two graph inputs."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["y1"], name="stem", strides=[2, 2], pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("Conv", ["y1", "w2"], ["y2"], name="dw", group=8, pads=[1, 1, 1, 1], dilations=[1, 1]),
        helper.make_node("Conv", ["y2", "w3"], ["y3"], pads=[0, 1, 0, 0]),
        helper.make_node("Flatten", ["y3"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "w4"], ["g"], name="fc", transB=1),
        helper.make_node("MatMul", ["g", "w5"], ["h"], name="proj"),
        helper.make_node("MatMul", ["q", "k"], ["s"], name="scores"),
    ]
    inits = [_init("w1", (8, 3, 3, 3)), _init("w2", (8, 1, 3, 3)), _init("w3", (4, 8, 1, 1)),
             _init("w4", (10, 4 * 8 * 9)), _init("w5", (10, 6))]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16]),
         helper.make_tensor_value_info("q", TensorProto.FLOAT16, [2, 12, 5, 7]),
         helper.make_tensor_value_info("k", TensorProto.FLOAT16, [2, 12, 7, 9])],
        [helper.make_tensor_value_info("h", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("s", TensorProto.FLOAT16, None)],
        initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_one_nest_per_node(tmp_path):
    path = tmp_path / "tiny.onnx"
    onnx.save(small_model(), str(path))
    nests = load(path)
    assert [n.name for n in nests] == ["stem", "dw", "Conv_2", "fc", "proj", "scores"]
    stem, dw, pw, fc, proj, scores = nests
    assert stem == _f32(conv2d("stem", C=3, K=8, H=16, W=16, R=3, S=3, stride=2, padding=1, bits=32))
    assert stem.dims["P"] == 8
    assert dw == _f32(conv2d("dw", C=8, K=8, groups=8, H=8, W=8, R=3, S=3, padding=1, bits=32))
    # asymmetric pads [h_begin=0, w_begin=1, h_end=0, w_end=0]: output width 9, input index P - 1
    assert pw.dims["P"] == 9 and pw.dims["Q"] == 8
    assert pw.tensor("Inputs").indices[3].offset == -1
    assert fc == _f32(matmul("fc", M=1, N=10, K=288, bits=32))
    assert proj == _f32(matmul("proj", M=1, N=6, K=10, bits=32))
    assert scores == matmul("scores", M=5, N=9, K=7, batch=24, bits=16)  # float16: bits only, no IR dtype


def test_macs_match_numpy_reference_counts():
    nests = nests_from_model(small_model())
    # conv MACs = output elements x (C/groups) x R x S
    assert nests[0].macs == 1 * 8 * 8 * 8 * 3 * 9
    assert nests[1].macs == 8 * 8 * 8 * 1 * 9
    assert nests[5].macs == 2 * 12 * 5 * 9 * 7


def test_linear_on_3d_input_folds_leading_axes():
    node = helper.make_node("MatMul", ["a", "w"], ["y"], name="ffn")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT16, [1, 128, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)],
                              initializer=[_init("w", (64, 32), np.float16)])
    (nest,) = nests_from_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    assert nest == matmul("ffn", M=128, N=32, K=64, bits=16)


def test_symbolic_dims_need_values():
    node = helper.make_node("Gemm", ["a", "b"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[_init("b", (4, 3))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(WorkloadError, match="symbolic dimension 'batch'"):
        nests_from_model(model, "m.onnx")
    (nest,) = nests_from_model(model, "m.onnx", {"batch": 2})
    assert nest.name == "Gemm_0" and nest.dims == {"M": 2, "N": 3, "K": 4}


def test_bad_files(tmp_path):
    with pytest.raises(WorkloadError, match="no such file"):
        load_onnx(tmp_path / "none.onnx")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00not a model")
    with pytest.raises(WorkloadError, match="junk.onnx"):
        load(junk)


def test_conv_auto_pad_same_upper_and_1d():
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="same", auto_pad="SAME_UPPER", strides=[2, 2]),
             helper.make_node("Conv", ["s", "v"], ["t"], name="one_d", pads=[2, 2], dilations=[2])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 7, 8]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 3, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
        initializer=[_init("w", (4, 2, 4, 3)), _init("v", (5, 3, 3))])
    same, one_d = nests_from_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    # SAME_UPPER: output ceil(in / stride); total pad split with the extra row/column at the end
    assert (same.dims["Q"], same.dims["P"]) == (4, 4)
    assert same.op["padding"] == ((3 * 2 + 4 - 7) // 2, (3 * 2 + 3 - 8) // 2)
    assert one_d.dims["P"] == 10 and one_d.dims["Q"] == 1 and one_d.dims["S"] == 1
    assert one_d.tensor("Inputs").indices[3] == one_d.tensor("Inputs").indices[3].parse("P + 2*R - 2")


def _model(nodes, inputs, inits, outputs=("y",)):
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                                   for o in outputs], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def fire_model():
    """Two fire-like blocks whose squeeze and expand layers have the same shapes, named as a Caffe2
    converter names them: counter node names (n0, n2, ...) and weights ``<layer>_w_0``; plus an unnamed
    Gemm whose weight name says nothing, and two nodes that share one name."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])
    nodes, inits, prev = [], [], "x"
    for b in (2, 3):
        for part, k, c, r in (("squeeze1x1", 4, 8, 1), ("expand3x3", 8, 4, 3)):
            w = f"fire{b}/{part}_w_0"
            inits.append(_init(w, (k, c, r, r)))
            y = f"fire{b}_{part}"
            nodes.append(helper.make_node("Conv", [prev, w], [y], name=f"n{len(nodes) * 2}", pads=[r // 2] * 4))
            nodes.append(helper.make_node("Relu", [y], [y + "_r"]))
            prev = y + "_r"
    nodes.append(helper.make_node("Flatten", [prev], ["f"], axis=1))
    nodes.append(helper.make_node("Gemm", ["f", "W9"], ["g"], transB=1))
    nodes.append(helper.make_node("MatMul", ["g", "p"], ["h"], name="head"))
    nodes.append(helper.make_node("MatMul", ["h", "q"], ["y"], name="head"))
    inits += [_init("W9", (10, 8 * 36)), _init("p", (10, 4)), _init("q", (4, 3))]
    return _model(nodes, [x], inits)


def test_layer_names_from_the_graph():
    names = [n.name for n in nests_from_model(fire_model())]
    # counter node names give way to the weight's layer name; an unnamed node with a bare weight name is
    # op type and graph index; a repeated node name gets the node's index
    assert names == ["fire2/squeeze1x1", "fire2/expand3x3", "fire3/squeeze1x1", "fire3/expand3x3", "Gemm_9",
                     "head", "head_11"]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("node_name, weight, expected", [
    ("conv1", "conv1_w_0", "conv1"),                      # a real node name wins
    ("/features/features.0/Conv", "onnx::Conv_7", "/features/features.0/Conv"),
    ("", "features.0.weight", "features.0"),
    ("n12", "gpu_0/res2_0_branch2a_w_0", "gpu_0/res2_0_branch2a"),
    ("node_3", "w3", "Conv_5"),                           # no weight suffix: op type and index
    ("", "", "Conv_5"),
    ("17", "n3_w", "Conv_5"),                             # a counter before the suffix names nothing
])
def test_layer_name_rule(node_name, weight, expected):
    node = helper.make_node("Conv", ["x", weight], ["y"], name=node_name)
    assert layer_name(node, 5) == expected


def test_identical_layers_merge_with_repeat_counts(tmp_path):
    path = tmp_path / "fire.onnx"
    onnx.save(fire_model(), str(path))
    every = load_onnx(path)
    merged = load(path)
    assert [(n.name, n.repeat) for n in merged] == [("fire2/squeeze1x1", 2), ("fire2/expand3x3", 2),
                                                    ("Gemm_9", 1), ("head", 1), ("head_11", 1)]
    assert merged == zoo.distinct(every)  # the zoo's merging, reused
    assert sum(n.repeat * n.macs for n in merged) == sum(n.macs for n in every)
    # a named layer comes alone, even one merged into an earlier twin
    one = load(f"{path}:fire3/expand3x3")
    assert [(n.name, n.repeat) for n in one] == [("fire3/expand3x3", 1)]
    assert one[0].dims == merged[1].dims
    assert load_one(f"{path}/fire2/squeeze1x1").name == "fire2/squeeze1x1"  # the zoo's 'network/layer' form


def test_unknown_layer_names_the_file_and_offers_names(tmp_path):
    path = tmp_path / "fire.onnx"
    onnx.save(fire_model(), str(path))
    with pytest.raises(WorkloadError) as err:
        load(f"{path}:fire2/expand5x5")
    msg = str(err.value)
    assert str(path) in msg and "'fire2/expand5x5'" in msg and "did you mean fire2/expand3x3" in msg
    assert "7 layers" in msg and "\n" not in msg
    with pytest.raises(WorkloadError, match="it has fire2/squeeze1x1, fire2/expand3x3, .*, \\.\\.\\."):
        load(f"{path}:zzz")
    with pytest.raises(WorkloadError, match="missing.onnx: no such file"):
        load(str(tmp_path / "missing.onnx:conv1"))
    with pytest.raises(WorkloadError, match=r"holds 5 layers .*fire.onnx:LAYER"):
        load_one(path)


def test_split_onnx_layer(tmp_path):
    (tmp_path / "a.onnx").mkdir()
    model = tmp_path / "a.onnx" / "m.onnx"
    onnx.save(fire_model(), str(model))
    assert split_onnx_layer(f"{model}:conv") == (str(model), "conv")
    assert split_onnx_layer(f"{model}/x/y") == (str(model), "x/y")  # the first split whose file exists
    assert split_onnx_layer("net.onnx:a:b") == ("net.onnx", "a:b")
    assert split_onnx_layer("net.onnx/a") is None  # no such file: only ':' names a layer then
    assert split_onnx_layer("net.onnx") is None and split_onnx_layer("net.onnx:") is None


def test_word_size_from_the_model_and_bits_override():
    stem = nests_from_model(small_model())[0]
    assert {(t.bits, t.dtype) for t in stem.tensors} == {(32, "float32")}
    int8 = with_bits(stem, 8)
    assert {(t.bits, t.dtype) for t in int8.tensors} == {(8, None)}
    assert int8.dims == stem.dims and int8.op == stem.op and int8.name == stem.name
    assert int8.size_bytes("Weights") * 4 == stem.size_bytes("Weights")
    # a dtype of the new width stays
    typed = apply_dtype(conv2d("c", C=2, K=2, H=4, W=4), "int8", True, "t", "dtype")
    assert {t.dtype for t in with_bits(typed, 8).tensors} == {"int8"}
    assert {t.dtype for t in with_bits(typed, 16).tensors} == {None}
    for bad in (0, 65, True, 8.0):
        with pytest.raises(WorkloadError, match="1 to 64"):
            with_bits(stem, bad)


def test_bits_keep_the_names_and_repeat_counts(tmp_path):
    path = tmp_path / "fire.onnx"
    onnx.save(fire_model(), str(path))
    layers = load(path, bits=8)
    assert {t.bits for n in layers for t in n.tensors} == {8}
    assert [(n.name, n.repeat) for n in layers] == [(n.name, n.repeat) for n in load(path)]
    assert load_one(f"{path}:head", bits=16).tensor("A").bits == 16
