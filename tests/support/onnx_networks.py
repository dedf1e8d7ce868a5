"""A small float CNN written with onnx.helper, and its int8 form, for the whole-network tests.

conv 3->8 (3x3, pad 1) + ReLU + 3x3 stride-2 max-pool (pad 1: ResNet's stem), conv 8->8 (3x3, pad 1),
residual add of the pool's output + ReLU, depthwise 3x3 conv, 2x2 max-pool, global average pool, flatten,
fully connected 8->10: on a 1x3x8x8 input, so a run takes seconds.  ``depthwise_cnn``: a MobileNet-like
block whose depthwise convolutions have more channels than one packed group takes; ``downsample_cnn``: a 1x1
stride-2 convolution named as the one ``resnet50.c`` runs through ``tiled_conv_downsample``.
"""

from __future__ import annotations

import numpy as np


def _seeded_weights(seed: int):
    """``weight(name, *shape)``: float32 initializers drawn in call order from one seeded generator."""
    from onnx import numpy_helper

    rng = np.random.default_rng(seed)

    def weight(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)
    return weight


def _model(nodes, inits, name: str, input_shape: list, classes: int = 10):
    """The checked opset-13 model of ``nodes`` from input x (``input_shape``) to logits y [1, classes]."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def tiny_cnn(seed: int = 0):
    """The float model (an ``onnx.ModelProto``; weights seeded)."""
    from onnx import helper

    weight = _seeded_weights(seed)

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "p1"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["r2"], name="relu2"),
             helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], name="dw", pads=[1, 1, 1, 1], group=8),
             helper.make_node("MaxPool", ["c3"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1)]
    inits = [weight("w1", 8, 3, 3, 3), weight("b1", 8), weight("w2", 8, 8, 3, 3), weight("b2", 8),
             weight("w3", 8, 1, 3, 3), weight("b3", 8), weight("wf", 10, 8), weight("bf", 10)]
    return _model(nodes, inits, "tiny_cnn", [1, 3, 8, 8])


def write_tiny_cnn(directory, seed: int = 0):
    """(float model path, int8 model path) in ``directory`` (quantized on 8 seeded inputs)."""
    import onnx

    from gemmini.onnx_quantize import quantize_model

    float_path = directory / "tiny_cnn.onnx"
    int8_path = directory / "tiny_cnn.int8.onnx"
    onnx.save(tiny_cnn(seed), str(float_path))
    quantize_model(float_path, int8_path, calibration=8, seed=seed)
    return float_path, int8_path


def depthwise_cnn(seed: int = 0):
    """conv 3->24 (3x3, pad 1) + ReLU, depthwise 3x3 stride 2 (pad 1) + ReLU, depthwise 3x3 stride 1 (pad 1),
    pointwise 24->8, global average pool, flatten, fully connected 8->10, on a 1x3x10x10 input: 24 channels
    pack as two groups of 12."""
    from onnx import helper

    weight = _seeded_weights(seed)

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="dw1", pads=[1, 1, 1, 1], strides=[2, 2],
                              group=24),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], name="dw2", pads=[1, 1, 1, 1], group=24),
             helper.make_node("Conv", ["c3", "w4", "b4"], ["c4"], name="pw"),
             helper.make_node("GlobalAveragePool", ["c4"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1)]
    inits = [weight("w1", 24, 3, 3, 3), weight("b1", 24), weight("w2", 24, 1, 3, 3), weight("b2", 24),
             weight("w3", 24, 1, 3, 3), weight("b3", 24), weight("w4", 8, 24, 1, 1), weight("b4", 8),
             weight("wf", 10, 8), weight("bf", 10)]
    return _model(nodes, inits, "depthwise_cnn", [1, 3, 10, 10])


def downsample_cnn(seed: int = 0):
    """conv 3->16 (3x3, pad 1) + ReLU, then ``res4a_branch1``: 1x1 stride 2, 16->32 (the name ``resnet50.c``
    runs through ``tiled_conv_downsample``), global average pool, flatten, fully connected 32->10, on a
    1x3x12x12 input."""
    from onnx import helper

    weight = _seeded_weights(seed)

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="res4a_branch1", strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["c2"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1)]
    inits = [weight("w1", 16, 3, 3, 3), weight("b1", 16), weight("w2", 32, 16, 1, 1), weight("b2", 32),
             weight("wf", 10, 32), weight("bf", 10)]
    return _model(nodes, inits, "downsample_cnn", [1, 3, 12, 12])


def write_int8(model, directory, name: str, seed: int = 0):
    """``model`` quantized on 8 seeded inputs, saved in ``directory`` as NAME.int8.onnx (its path)."""
    import onnx

    from gemmini.onnx_quantize import quantize_model

    float_path, int8_path = directory / f"{name}.onnx", directory / f"{name}.int8.onnx"
    onnx.save(model, str(float_path))
    quantize_model(float_path, int8_path, calibration=8, seed=seed)
    return int8_path
