"""ONNX: one loop nest per Conv / Gemm / MatMul node, shapes from shape inference (model built in the test)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from workloads import WorkloadError, conv2d, load, load_onnx, matmul
from workloads.onnx_loader import nests_from_model


def _init(name, shape, dtype=np.float32):
    return numpy_helper.from_array(np.zeros(shape, dtype=dtype), name)


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
    assert stem == conv2d("stem", C=3, K=8, H=16, W=16, R=3, S=3, stride=2, padding=1, bits=32)
    assert stem.dims["P"] == 8
    assert dw == conv2d("dw", C=8, K=8, groups=8, H=8, W=8, R=3, S=3, padding=1, bits=32)
    # asymmetric pads [h_begin=0, w_begin=1, h_end=0, w_end=0]: output width 9, input index P - 1
    assert pw.dims["P"] == 9 and pw.dims["Q"] == 8
    assert pw.tensor("Inputs").indices[3].offset == -1
    assert fc == matmul("fc", M=1, N=10, K=288, bits=32)
    assert proj == matmul("proj", M=1, N=6, K=10, bits=32)
    assert scores == matmul("scores", M=5, N=9, K=7, batch=24, bits=16)


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
