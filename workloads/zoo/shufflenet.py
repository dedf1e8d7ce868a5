"""ShuffleNet v1 as an ONNX graph, written from the architecture table of the paper.

Zhang, Zhou, Lin and Sun, "ShuffleNet: An Extremely Efficient Convolutional
Neural Network for Mobile Devices" (CVPR 2018), Table 1: a 3x3 stride-2
convolution to 24 channels and a 3x3 stride-2 max-pool, then three stages of
ShuffleNet units (4, 8 and 4 units; the first of each stride 2) whose output
channels for g groups are 144/200/240/272/384 x (1, 2, 4) for g = 1/2/3/4/8,
a global average pool and a 1000-way fully connected layer; 224 x 224 input.

A unit: a 1x1 group convolution to the bottleneck (a quarter of the unit's
output channels), a channel shuffle, a 3x3 depthwise convolution (stride 2
in the first unit of a stage) and a 1x1 group convolution back.  A stride-1
unit adds its input; a stride-2 unit concatenates a 3x3 stride-2 average pool
of its input, so its last convolution makes the stage's channels minus the
input's.  The first 1x1 convolution of stage 2 is not grouped (24 input
channels are too few, as the paper says).  Batch normalisation is folded
away (inference).  Weights are graph inputs with shapes and no values: the
file is small and carries everything a loop nest needs.
"""

from __future__ import annotations

from pathlib import Path

STAGE_CHANNELS = {1: 144, 2: 200, 3: 240, 4: 272, 8: 384}  # stage 2 output channels, by groups (Table 1)
STAGE_UNITS = (4, 8, 4)


def shufflenet_model(groups: int = 3, image: int = 224, batch: int = 1):
    """The ``onnx.ModelProto`` of ShuffleNet v1 with ``groups`` groups (1x width)."""
    import onnx
    from onnx import TensorProto, helper

    if groups not in STAGE_CHANNELS:
        raise ValueError(f"groups must be one of {sorted(STAGE_CHANNELS)}, got {groups}")
    nodes, inputs = [], []
    count = {"n": 0}

    def fresh(stem: str) -> str:
        count["n"] += 1
        return f"{stem}_{count['n']}"

    def conv(x: str, c_in: int, c_out: int, kernel: int, stride: int, group: int, name: str) -> str:
        w = f"{name}.weight"
        inputs.append(helper.make_tensor_value_info(w, TensorProto.FLOAT, [c_out, c_in // group, kernel, kernel]))
        y = fresh(name)
        pad = kernel // 2
        nodes.append(helper.make_node("Conv", [x, w], [y], name=name, kernel_shape=[kernel, kernel],
                                      strides=[stride, stride], pads=[pad] * 4, group=group))
        return y

    def op(kind: str, xs: list, **attrs) -> str:
        y = fresh(kind.lower())
        nodes.append(helper.make_node(kind, xs, [y], **attrs))
        return y

    def shuffle(x: str, channels: int, size: int) -> str:
        shape = helper.make_tensor(fresh("shape"), TensorProto.INT64, [5], [batch, groups, channels // groups,
                                                                           size, size])
        back = helper.make_tensor(fresh("shape"), TensorProto.INT64, [4], [batch, channels, size, size])
        a = op("Constant", [], value=shape)
        b = op("Constant", [], value=back)
        y = op("Reshape", [x, a])
        y = op("Transpose", [y], perm=[0, 2, 1, 3, 4])
        return op("Reshape", [y, b])

    x = "image"
    graph_in = helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, 3, image, image])
    x = op("Relu", [conv(x, 3, 24, 3, 2, 1, "conv1")])
    x = op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    size, c_in = image // 4, 24
    c_stage = STAGE_CHANNELS[groups]
    for stage, units in enumerate(STAGE_UNITS, start=2):
        for unit in range(units):
            first = unit == 0
            stride = 2 if first else 1
            mid = c_stage // 4
            c_out = c_stage - c_in if first else c_stage
            g1 = 1 if (stage == 2 and first) else groups
            tag = f"stage{stage}.unit{unit + 1}"
            y = op("Relu", [conv(x, c_in, mid, 1, 1, g1, f"{tag}.gconv1")])
            y = shuffle(y, mid, size)
            y = conv(y, mid, mid, 3, stride, mid, f"{tag}.dwconv")
            size_out = size // stride
            y = conv(y, mid, c_out, 1, 1, groups, f"{tag}.gconv2")
            if first:
                short = op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
                x = op("Relu", [op("Concat", [short, y], axis=1)])
            else:
                x = op("Relu", [op("Add", [x, y])])
            size, c_in = size_out, c_stage
        c_stage *= 2
    x = op("Flatten", [op("GlobalAveragePool", [x])], axis=1)
    inputs.append(helper.make_tensor_value_info("fc.weight", TensorProto.FLOAT, [1000, c_in]))
    nodes.append(helper.make_node("Gemm", [x, "fc.weight"], ["logits"], name="fc", transB=1))
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 1000])
    graph = helper.make_graph(nodes, f"shufflenet_v1_g{groups}", [graph_in] + inputs, [out])
    model = helper.make_model(graph, producer_name="cosa-framework zoo",
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def write_shufflenet(path: str | Path, groups: int = 3, image: int = 224, batch: int = 1) -> Path:
    """Write ``shufflenet_model(...)`` to ``path`` (an .onnx file); returns the path."""
    import onnx

    path = Path(path)
    onnx.save(shufflenet_model(groups, image, batch), str(path))
    return path


def zoo_text(groups: int = 3) -> str:
    """The zoo's YAML (``shufflenet_v1.yaml``): the distinct layers of ``shufflenet_model(groups)`` with their
    repeat counts, in int8 like the zoo's other networks (the ONNX model's words are fp32)."""
    import yaml

    from ..dtypes import with_bits
    from ..loaders_short import short_form
    from ..onnx_loader import nests_from_model
    from . import distinct

    layers = [short_form(with_bits(nest, 8))
              for nest in distinct(nests_from_model(shufflenet_model(groups), f"shufflenet_v1_g{groups}"))]
    head = ("# ShuffleNet v1, g = %d, 1x (Zhang et al., CVPR 2018, Table 1), 224x224 input, batch 1: the distinct\n"
            "# Conv/Gemm layers of workloads.zoo.shufflenet.shufflenet_model (an ONNX graph written from the table),\n"
            "# repeat = how many share the shape; int8.  Regenerate: python -m workloads.zoo.shufflenet > this file\n"
            % groups)
    body = yaml.safe_dump({"source": f"ShuffleNet v1 g={groups} 1x (Zhang et al. 2018, Table 1), 224x224, batch 1, "
                                     "int8", "layers": layers}, sort_keys=False, default_flow_style=None, width=120)
    return head + body


if __name__ == "__main__":
    print(zoo_text(), end="")
