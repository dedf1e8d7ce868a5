"""ResNet-50 and MobileNet-V2 written as float ONNX graphs with ``onnx.helper`` (seeded random weights).

The layer shapes are those of ``workloads/zoo`` (torchvision's ResNet-50 v1.5 and MobileNet-V2), at an input
resolution of choice (224 for the real networks).  MobileNet-V2's ReLU6 is written as ReLU: Gemmini's
mvout applies ReLU, and ONNX Runtime's quantizer keeps a Clip as float arithmetic between a Dequantize and
a QuantizeLinear.  Weights are He-initialised so activations keep their range through the depth.
"""

from __future__ import annotations

import numpy as np


class _Builder:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def _name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def conv(self, x, c, k, kernel, stride=1, groups=1, relu=True, name=None):
        from onnx import helper, numpy_helper

        name = name or self._name("conv")
        fan_in = c // groups * kernel * kernel
        w = self.rng.standard_normal((k, c // groups, kernel, kernel)) * np.sqrt(2.0 / fan_in)
        b = self.rng.standard_normal(k) * 0.05
        self.inits += [numpy_helper.from_array(w.astype(np.float32), f"{name}.weight"),
                       numpy_helper.from_array(b.astype(np.float32), f"{name}.bias")]
        pad = kernel // 2
        self.nodes.append(helper.make_node("Conv", [x, f"{name}.weight", f"{name}.bias"], [f"{name}.out"], name=name,
                                           kernel_shape=[kernel, kernel], strides=[stride, stride],
                                           pads=[pad] * 4, group=groups))
        return self.relu(f"{name}.out", name) if relu else f"{name}.out"

    def relu(self, x, stem):
        from onnx import helper

        self.nodes.append(helper.make_node("Relu", [x], [f"{stem}.relu"], name=f"{stem}_relu"))
        return f"{stem}.relu"

    def add(self, a, b, relu):
        from onnx import helper

        name = self._name("add")
        self.nodes.append(helper.make_node("Add", [a, b], [f"{name}.out"], name=name))
        return self.relu(f"{name}.out", name) if relu else f"{name}.out"

    def op(self, op_type, x, **attrs):
        from onnx import helper

        name = self._name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, [x], [f"{name}.out"], name=name, **attrs))
        return f"{name}.out"

    def head(self, x, c, classes):
        from onnx import helper, numpy_helper

        x = self.op("Flatten", self.op("GlobalAveragePool", x))
        w = self.rng.standard_normal((classes, c)) * np.sqrt(1.0 / c)
        self.inits += [numpy_helper.from_array(w.astype(np.float32), "fc.weight"),
                       numpy_helper.from_array(np.zeros(classes, np.float32), "fc.bias")]
        self.nodes.append(helper.make_node("Gemm", [x, "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1))

    def model(self, name, resolution, classes):
        import onnx
        from onnx import TensorProto, helper

        image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, resolution, resolution])
        logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])
        graph = helper.make_graph(self.nodes, name, [image], [logits], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        onnx.checker.check_model(model)
        return model


def resnet50(resolution: int = 224, classes: int = 1000, seed: int = 0):
    """ResNet-50 v1.5 (stride 2 on each stage's first 3x3 conv) as a float ONNX model."""
    g = _Builder(seed)
    x = g.conv("image", 3, 64, 7, stride=2, name="conv1")
    x = g.op("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 64
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 0 else 1
            name = f"res{stage + 2}{'abcdef'[block]}"
            y = g.conv(x, c, width, 1, name=f"{name}_branch2a")
            y = g.conv(y, width, width, 3, stride=stride, name=f"{name}_branch2b")
            y = g.conv(y, width, width * 4, 1, relu=False, name=f"{name}_branch2c")
            short = g.conv(x, c, width * 4, 1, stride=stride, relu=False, name=f"{name}_branch1") if block == 0 else x
            x, c = g.add(y, short, relu=True), width * 4
    g.head(x, c, classes)
    return g.model("resnet50", resolution, classes)


def mobilenet_v2(resolution: int = 224, classes: int = 1000, seed: int = 0):
    """MobileNet-V2 (width 1.0; ReLU for ReLU6) as a float ONNX model."""
    g = _Builder(seed)
    x, c = g.conv("image", 3, 32, 3, stride=2, name="conv1"), 32
    settings = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))
    for t, out, n, s in settings:
        for i in range(n):
            stride, hidden = (s if i == 0 else 1), c * t
            y = g.conv(x, c, hidden, 1) if t != 1 else x
            y = g.conv(y, hidden, hidden, 3, stride=stride, groups=hidden)
            y = g.conv(y, hidden, out, 1, relu=False)
            x = g.add(y, x, relu=False) if stride == 1 and c == out else y
            c = out
    x = g.conv(x, c, 1280, 1)
    g.head(x, 1280, classes)
    return g.model("mobilenet_v2", resolution, classes)
