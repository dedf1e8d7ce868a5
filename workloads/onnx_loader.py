"""One loop nest per Conv, Gemm and MatMul node of an ONNX model.

Shapes come from ONNX shape inference (``onnx.shape_inference.infer_shapes``)
over the graph inputs, initializers and declared value infos.  Word sizes
follow the element types (float32 -> 32 bits, int8 -> 8, ...); float32,
float64, int8 and int32 tensors also carry that ``dtype``.

Layer names (``layer_name``): the node's name; where it has none, or only a
counter (``n7``, ``node_12``, ``42``, as some converters write), the weight's
name without its weight suffix (``fire2/squeeze1x1_w_0`` -> ``fire2/squeeze1x1``,
``features.0.weight`` -> ``features.0``); else ``<op_type>_<index>`` with the
node's index in the graph (``Conv_7``).  A name already taken gets
``_<index>`` appended (and then ``_2``, ``_3``, ... while still taken).

* Conv (2-D; 1-D as height 1): ``strides``, ``dilations``, ``pads`` (the
  begin pads index the input; asymmetric end pads only change the output
  size, which is taken from the inferred output shape), ``group``
  (depthwise when group = C = K), ``kernel_shape`` or the weight's shape,
  ``auto_pad`` (SAME_UPPER / SAME_LOWER / VALID).
* Gemm: ``transA``/``transB``; Y[M, N] = A[M, K] B[K, N] (+ C, not a MAC loop).
* MatMul: numpy semantics.  When the second operand has no batch axes the
  leading axes of the first fold into M (a linear layer on [batch, seq,
  hidden]); otherwise the broadcast leading axes of the output become one
  ``batch`` dim (an operand broadcast over the batch is then counted as if it
  had its own copy per batch element).

Symbolic dimensions (``dim_param``) need values: pass ``dim_values``
(e.g. ``{"batch": 1}``); a missing one raises WorkloadError naming it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Mapping

from .builders import conv2d, matmul
from .dtypes import apply_dtype
from .errors import WorkloadError
from .ir import LoopNest
from .loaders_values import MAX_INT

# onnx.TensorProto element types -> bits per word
_ELEM_BITS = {1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32, 13: 64, 16: 16,
              17: 8, 18: 8, 19: 8, 20: 8}
# element types with a number type the IR knows (workloads.dtypes.DTYPE_BITS)
_ELEM_DTYPE = {1: "float32", 3: "int8", 6: "int32", 11: "float64"}

# node names that only count (n7, node_12, 42): converters' placeholders, not names
_COUNTER_NAME = re.compile(r"^(?:n|node)?[_-]?\d+$", re.IGNORECASE)
# weight tensor names that end in a weight suffix: what precedes it names the layer
_WEIGHT_SUFFIX = re.compile(r"^(?P<layer>.+?)(?:_w_\d+|_w|_W|_weights?|[./:]weights?|/W|/kernel)$")


def read_model(path: str | Path):
    """The ONNX ModelProto in the file ``path``; WorkloadError (exit 2) naming the file where it is missing,
    unreadable or holds no graph nodes."""
    import onnx

    src = str(path)
    try:
        model = onnx.load(src)
    except FileNotFoundError:
        raise WorkloadError("no such file", source=src) from None
    except Exception as exc:  # protobuf decode errors have no common base class
        raise WorkloadError(f"not a readable ONNX model ({type(exc).__name__}: {exc})", source=src) from None
    if not model.HasField("graph") or not model.graph.node:
        # protobuf reads many byte strings as a message of unknown fields: an empty model, not an error
        raise WorkloadError("not an ONNX model: no graph nodes", source=src)
    return model


def load_onnx(path: str | Path, dim_values: Mapping[str, int] | None = None) -> list[LoopNest]:
    """Loop nests of the Conv, Gemm and MatMul nodes of the model file ``path``, in graph order."""
    return nests_from_model(read_model(path), str(path), dim_values)


def nests_from_model(model, source: str = "<onnx model>", dim_values: Mapping[str, int] | None = None) -> list[LoopNest]:
    """Loop nests of an in-memory ``onnx.ModelProto``."""
    import onnx
    from onnx import shape_inference

    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False)
    except Exception as exc:  # inference errors come from C++ with assorted types
        raise WorkloadError(f"ONNX shape inference failed: {exc}", source=source) from None
    graph = inferred.graph
    dim_values = dict(dim_values or {})
    shapes: dict[str, tuple[list, int]] = {}
    for init in graph.initializer:
        shapes[init.name] = (list(init.dims), init.data_type)
    for info in list(graph.input) + list(graph.value_info) + list(graph.output):
        ttype = info.type.tensor_type
        if not ttype.HasField("shape"):
            continue
        dims = []
        for d in ttype.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param"):
                dims.append(d.dim_param)
            else:
                dims.append(None)
        shapes.setdefault(info.name, (dims, ttype.elem_type))

    def shape_of(node_label: str, tensor_name: str) -> tuple[list[int], int]:
        if tensor_name not in shapes:
            raise WorkloadError(f"shape of '{tensor_name}' is unknown after shape inference", source=source,
                                field=node_label)
        dims, elem = shapes[tensor_name]
        out = []
        for d in dims:
            if isinstance(d, str):
                if d not in dim_values:
                    raise WorkloadError(f"'{tensor_name}' has symbolic dimension '{d}'; pass dim_values={{'{d}': ...}}",
                                        source=source, field=node_label)
                d = dim_values[d]
            if d is None or int(d) < 1:
                raise WorkloadError(f"'{tensor_name}' has an unknown or empty dimension {dims}", source=source,
                                    field=node_label)
            if int(d) > MAX_INT:
                raise WorkloadError(f"'{tensor_name}' has dimension {int(d):,}, above the largest supported "
                                    f"{MAX_INT:,}", source=source, field=node_label)
            out.append(int(d))
        return out, elem

    nests = []
    used: set[str] = set()
    for index, node in enumerate(graph.node):
        if node.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        name = _unique(layer_name(node, index), index, used)
        label = f"node {name} ({node.op_type})"
        try:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            if len(node.input) < 2 or len(node.output) < 1:
                raise WorkloadError(f"needs two inputs and an output, has {len(node.input)} and {len(node.output)}",
                                    source=source, field=label)
            if node.op_type == "Conv":
                nests.append(_conv(node, attrs, name, label, source, shape_of))
            elif node.op_type == "Gemm":
                nests.append(_gemm(node, attrs, name, label, source, shape_of))
            else:
                nests.append(_matmul(node, name, label, source, shape_of))
        except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, OverflowError) as exc:
            if isinstance(exc, WorkloadError):
                raise
            # attributes or shapes a corrupted model gets wrong in ways the checks above do not name
            raise WorkloadError(f"malformed node ({type(exc).__name__}: {exc})", source=source, field=label) from None
    return nests


def layer_name(node, index: int) -> str:
    """The name of the layer of ``node`` (the ``index``-th node of its graph): see the module docstring."""
    if node.name and not _COUNTER_NAME.match(node.name):
        return node.name
    if len(node.input) > 1:
        m = _WEIGHT_SUFFIX.match(node.input[1])
        if m and not _COUNTER_NAME.match(m.group("layer")):
            return m.group("layer")
    return f"{node.op_type}_{index}"


def _unique(name: str, index: int, used: set[str]) -> str:
    """``name``, or with ``_<index>`` (then ``_2``, ``_3``, ...) appended while taken; records it in ``used``."""
    out, k = name, 1
    if out in used:
        out = f"{name}_{index}"
    while out in used:
        k += 1
        out = f"{name}_{index}_{k}"
    used.add(out)
    return out


def _bits(elem: int) -> int:
    return _ELEM_BITS.get(elem, 32)


def _typed(nest: LoopNest, elems: dict[str, int], source: str, label: str) -> LoopNest:
    """``nest`` with the ``dtype`` of each role whose element type the IR knows (others keep only bits)."""
    return apply_dtype(nest, {role: _ELEM_DTYPE.get(elem) for role, elem in elems.items()}, True, source, label)


def _conv(node, attrs, name, label, source, shape_of) -> LoopNest:
    x_shape, x_elem = shape_of(label, node.input[0])
    w_shape, w_elem = shape_of(label, node.input[1])
    y_shape, y_elem = shape_of(label, node.output[0])
    if not len(x_shape) == len(w_shape) == len(y_shape):
        raise WorkloadError(f"input {x_shape}, weight {w_shape} and output {y_shape} differ in rank", source=source,
                            field=label)
    if len(x_shape) == 3:  # 1-D convolution: height 1
        x_shape, w_shape, y_shape = ([*x_shape[:2], 1, x_shape[2]], [*w_shape[:2], 1, w_shape[2]],
                                     [*y_shape[:2], 1, y_shape[2]])
        one_d = True
    elif len(x_shape) == 4:
        one_d = False
    else:
        raise WorkloadError(f"only 1-D and 2-D convolutions are supported, input shape is {x_shape}", source=source,
                            field=label)

    def pair(key, default):
        value = list(attrs.get(key, [default] * (1 if one_d else 2)))
        return [default] + value if one_d else value

    strides, dilations = pair("strides", 1), pair("dilations", 1)
    N, C, H, W = x_shape
    K, _, S, R = w_shape
    _, _, Q, P = y_shape
    kernel = attrs.get("kernel_shape")
    if kernel is not None and list(kernel) != ([R] if one_d else [S, R]):
        raise WorkloadError(f"kernel_shape {list(kernel)} disagrees with the weight shape {w_shape}", source=source,
                            field=label)
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads_begin = []
        for size, out, k, s, d in ((H, Q, S, strides[0], dilations[0]), (W, P, R, strides[1], dilations[1])):
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            pads_begin.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
    elif auto_pad == "VALID":
        pads_begin = [0, 0]
    else:
        pads = list(attrs.get("pads", [0] * (2 if one_d else 4)))
        pads_begin = [0, pads[0]] if one_d else pads[:2]
    group = int(attrs.get("group", 1))
    bits = {"input": _bits(x_elem), "weight": _bits(w_elem), "output": _bits(y_elem)}
    try:
        nest = conv2d(name, N=N, C=C, K=K, P=P, Q=Q, R=R, S=S, H=H, W=W, stride=tuple(strides),
                      dilation=tuple(dilations), padding=tuple(pads_begin), groups=group, bits=bits)
    except WorkloadError as exc:
        raise WorkloadError(exc.reason, source=source, field=label) from None
    return _typed(nest, {"input": x_elem, "weight": w_elem, "output": y_elem}, source, label)


def _gemm(node, attrs, name, label, source, shape_of) -> LoopNest:
    a_shape, a_elem = shape_of(label, node.input[0])
    b_shape, b_elem = shape_of(label, node.input[1])
    _, y_elem = shape_of(label, node.output[0])
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise WorkloadError(f"Gemm operands must be 2-D, got {a_shape} and {b_shape}", source=source, field=label)
    M, K = a_shape[::-1] if attrs.get("transA", 0) else a_shape
    K2, N = b_shape[::-1] if attrs.get("transB", 0) else b_shape
    if K != K2:
        raise WorkloadError(f"inner dimensions differ: {K} and {K2}", source=source, field=label)
    nest = matmul(name, M=M, N=N, K=K, bits={"input": _bits(a_elem), "weight": _bits(b_elem), "output": _bits(y_elem)})
    nest.op.update(transA=bool(attrs.get("transA", 0)), transB=bool(attrs.get("transB", 0)), source="onnx Gemm")
    return _typed(nest, {"input": a_elem, "weight": b_elem, "output": y_elem}, source, label)


def _matmul(node, name, label, source, shape_of) -> LoopNest:
    a_shape, a_elem = shape_of(label, node.input[0])
    b_shape, b_elem = shape_of(label, node.input[1])
    y_shape, y_elem = shape_of(label, node.output[0])
    bits = {"input": _bits(a_elem), "weight": _bits(b_elem), "output": _bits(y_elem)}
    a = [1] + a_shape if len(a_shape) == 1 else a_shape
    b = b_shape + [1] if len(b_shape) == 1 else b_shape
    if a[-1] != b[-2]:
        raise WorkloadError(f"inner dimensions differ: {a_shape} @ {b_shape}", source=source, field=label)
    K, N = b[-1 - 1], b[-1]
    if len(b) == 2:
        M, batch = math.prod(a[:-1]), None
    else:
        M = a[-2]
        lead = y_shape[:-2] if len(y_shape) >= 2 else []
        batch = math.prod(lead) if lead else None
        if batch == 1:
            batch = None
    nest = matmul(name, M=M, N=N, K=K, batch=batch, bits=bits)
    nest.op.update(source="onnx MatMul")
    return _typed(nest, {"input": a_elem, "weight": b_elem, "output": y_elem}, source, label)
