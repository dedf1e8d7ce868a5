"""An int8 ONNX network (``gemmini.onnx_quantize``'s QOperator form) as a graph of steps for Gemmini.

``load_network`` reads the model into a ``networkx.DiGraph`` of its operators (an edge per activation
tensor from its producer to each consumer), refuses an operator it cannot place (naming the node, its op
type and the supported ones) or a float model (pointing at ``cosa quantize``), and ``plan`` turns it into
``Step``s in topological order:

* ``QLinearConv``, ``QGemm`` and ``QLinearMatMul`` run on Gemmini (``on`` "gemmini"): int8 operands, the
  int32 bias in the accumulator, the float32 scale ``x_scale * w_scale / y_scale`` applied in the mvout;
* a following ``DequantizeLinear -> Relu -> QuantizeLinear`` whose two scales are equal and zero points 0
  (what ``cosa quantize`` makes) fuses into that step's mvout as its ReLU (``fused``); it is exact, since
  ``Q(relu(DQ(q))) = relu(q)`` then;
* the rest runs on the host in NumPy with ONNX Runtime's integer semantics (``gemmini.network_ops``):
  residual additions (``QLinearAdd`` rescales both operands, which the accumulator cannot do bit-exactly;
  a ReLU after it fuses the same way), pooling, Flatten/Reshape, Quantize/DequantizeLinear, and the
  float operators ONNX Runtime's quantizer leaves between them (Relu, GlobalAveragePool).

``arena_plan`` places the int8/int32 activations in one arena from their lifetimes (a buffer is free once
its last consumer has run): the peak of live bytes, the arena's size (first fit) and the sum of all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from .errors import CodegenError

GEMMINI_OPS = ("QLinearConv", "QGemm", "QLinearMatMul")
HOST_OPS = ("QuantizeLinear", "DequantizeLinear", "Relu", "QLinearAdd", "MaxPool", "QLinearGlobalAveragePool",
            "GlobalAveragePool", "Flatten", "Reshape")
SUPPORTED = GEMMINI_OPS + HOST_OPS


@dataclass
class Step:
    """One operator (or a fused group) as it runs.  name: the node's layer name; op: its op type; on:
    "gemmini" or "host"; inputs/output: tensor names (``inputs`` as the node lists them, constants
    included); attrs: the node's attributes; relu: a ReLU fused into the output; fused: the names of the
    nodes folded into this step; pool: (size, stride, padding) of a max-pool fused into the store path."""

    name: str
    op: str
    on: str
    inputs: list
    output: str
    attrs: dict
    relu: bool = False
    fused: list = field(default_factory=list)
    pool: tuple | None = None


@dataclass
class Network:
    """The model: ``graph`` (node name -> node, with ``op``, ``inputs``, ``outputs``, ``attrs``),
    ``constants`` (initializers as arrays), ``shapes`` and ``dtypes`` of every tensor (ONNX shape
    inference), the graph's ``inputs`` and ``outputs``, the ``source`` file."""

    source: str
    graph: nx.DiGraph
    constants: dict
    shapes: dict
    dtypes: dict
    inputs: list
    outputs: list
    model: object = field(repr=False, default=None)


@dataclass(frozen=True)
class ArenaPlan:
    """offsets: activation tensor -> byte offset in the arena; size_bytes: the arena's size (first fit);
    peak_bytes: the most bytes live at once; sum_bytes: every activation in a buffer of its own;
    lifetimes: tensor -> (step that writes it, last step that reads it)."""

    offsets: dict
    size_bytes: int
    peak_bytes: int
    sum_bytes: int
    lifetimes: dict

    def to_dict(self) -> dict:
        return {"arena_bytes": self.size_bytes, "peak_bytes": self.peak_bytes, "sum_bytes": self.sum_bytes,
                "buffers": len(self.offsets)}


def load_network(path, model=None) -> Network:
    """The network of the int8 ONNX model file ``path`` (or the ``onnx.ModelProto`` ``model``)."""
    import onnx
    from onnx import numpy_helper, shape_inference

    from workloads.onnx_loader import _unique, layer_name, read_model

    src = str(path)
    if model is None:
        model = read_model(src)
    nodes = list(model.graph.node)
    if not nodes:
        raise CodegenError("not an ONNX model: no graph nodes", source=src)
    if not any(n.op_type in GEMMINI_OPS for n in nodes) and any(n.op_type == "DequantizeLinear" for n in nodes):
        raise CodegenError("a QDQ model (float operators between Quantize/DequantizeLinear): the network runs "
                           "from the QOperator form, 'cosa quantize FLOAT_MODEL --format qoperator'", source=src,
                           field="nodes")
    if not any(n.op_type in GEMMINI_OPS for n in nodes):
        raise CodegenError("a float model (no QLinearConv, QGemm or QLinearMatMul node): make it int8 with "
                           f"'cosa quantize {src} -o MODEL.int8.onnx'", source=src, field="nodes")
    used: set = set()
    names = [_unique(layer_name(n, i), i, used) for i, n in enumerate(nodes)]
    bad = [(name, n.op_type) for name, n in zip(names, nodes) if n.op_type not in SUPPORTED]
    if bad:
        where = ", ".join(f"node {name} ({op})" for name, op in bad)
        raise CodegenError(f"cannot place {where}; supported operators: {', '.join(SUPPORTED)}", source=src,
                           field="nodes")
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False)
    except Exception as exc:  # inference errors come from C++ with assorted types
        raise CodegenError(f"ONNX shape inference failed: {exc}", source=src) from None
    constants = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    shapes, dtypes = {}, {}
    for info in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = info.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[info.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
            dtypes[info.name] = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
    graph = nx.DiGraph()
    producer = {}
    for name, node in zip(names, nodes):
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        graph.add_node(name, op=node.op_type, inputs=list(node.input), outputs=list(node.output), attrs=attrs)
        for out in node.output:
            producer[out] = name
    for name in names:
        for tensor in graph.nodes[name]["inputs"]:
            if tensor in producer:
                graph.add_edge(producer[tensor], name, tensor=tensor)
    inputs = [i.name for i in model.graph.input if i.name not in constants]
    for tensor in list(shapes):
        if tensor not in dtypes:
            del shapes[tensor]
    _propagate(graph, names, shapes, dtypes, constants)
    missing = [t for n in names for t in graph.nodes[n]["outputs"] if t not in shapes]
    if missing:
        raise CodegenError(f"shape of {', '.join(missing[:3])} unknown after shape inference", source=src,
                           field="value_info")
    return Network(src, graph, constants, shapes, dtypes, inputs, [o.name for o in model.graph.output], model)


def _propagate(graph, names, shapes, dtypes, constants) -> None:
    """Shapes and dtypes ONNX shape inference leaves unknown (the com.microsoft operators), from the
    operators' rules, in topological order."""
    from .network_ops import _pool_geometry, flatten, reshape

    position = {name: i for i, name in enumerate(names)}
    for name in nx.lexicographical_topological_sort(graph, key=lambda n: position[n]):
        d = graph.nodes[name]
        out, ins = d["outputs"][0], d["inputs"]
        if out in shapes or ins[0] not in shapes:
            continue
        x, op = shapes[ins[0]], d["op"]
        if op == "QLinearAdd" and ins[3] in shapes:
            shape = tuple(np.broadcast_shapes(x, shapes[ins[3]]))
        elif op in ("QLinearGlobalAveragePool", "GlobalAveragePool"):
            shape = x[:2] + (1,) * (len(x) - 2)
        elif op == "QGemm" and ins[3] in constants:
            b = constants[ins[3]].shape
            shape = (x[1] if d["attrs"].get("transA", 0) else x[0], b[0] if d["attrs"].get("transB", 0) else b[1])
        elif op == "QLinearConv" and ins[3] in constants and len(x) == 4:
            w, a = constants[ins[3]].shape, d["attrs"]
            pads, strides = list(a.get("pads", [0] * 4)), list(a.get("strides", [1, 1]))
            dil = list(a.get("dilations", [1, 1]))
            shape = (x[0], w[0]) + tuple((x[2 + i] + pads[i] + pads[i + 2] - dil[i] * (w[2 + i] - 1) - 1)
                                         // strides[i] + 1 for i in range(2))
        elif op == "QLinearMatMul" and ins[3] in constants:
            shape = tuple(x[:-1]) + (constants[ins[3]].shape[-1],)
        elif op == "MaxPool":
            shape = x[:2] + tuple(_pool_geometry(x, d["attrs"], name)[4])
        elif op == "Flatten":
            shape = flatten(np.empty(x, np.int8), int(d["attrs"].get("axis", 1))).shape
        elif op == "Reshape" and ins[1] in constants:
            shape = reshape(np.empty(x, np.int8), constants[ins[1]], int(d["attrs"].get("allowzero", 0))).shape
        elif op in ("Relu", "QuantizeLinear", "DequantizeLinear"):
            shape = x
        else:
            continue
        shapes[out] = tuple(int(v) for v in shape)
        if op == "QuantizeLinear":
            dtypes[out] = constants[ins[2]].dtype if len(ins) > 2 and ins[2] in constants else np.dtype(np.uint8)
        elif op == "DequantizeLinear":
            dtypes[out] = np.dtype(np.float32)
        else:
            dtypes[out] = dtypes.get(ins[0], np.dtype(np.int8))


def _scalar(net: Network, name: str, default=0):
    if not name:
        return default
    if name not in net.constants:
        raise CodegenError(f"'{name}' must be a constant (an initializer)", source=net.source, field=name)
    return net.constants[name].reshape(-1)[0] if net.constants[name].size == 1 else net.constants[name]


def _fusable_relu(net: Network, name: str):
    """The chain DequantizeLinear -> Relu [-> MaxPool] -> QuantizeLinear after node ``name`` that fuses into
    it exactly, or None: each node feeds only the next, the two scales are equal, zero points 0.  A float
    max-pool between them commutes with the quantization (a monotone map), so it runs on the int8 values."""
    g = net.graph
    chain = [name]
    for ops in (("DequantizeLinear",), ("Relu",), ("MaxPool", "QuantizeLinear"), ("QuantizeLinear",)):
        nxt = list(g.successors(chain[-1]))
        if len(nxt) != 1 or g.nodes[nxt[0]]["op"] not in ops or g.nodes[chain[-1]]["outputs"][0] in net.outputs:
            return None
        chain.append(nxt[0])
        if g.nodes[nxt[0]]["op"] == "QuantizeLinear":
            break
    chain = chain[1:]
    dq, q = g.nodes[chain[0]]["inputs"], g.nodes[chain[-1]]["inputs"]
    scale_dq, scale_q = _scalar(net, dq[1]), _scalar(net, q[1])
    zps = [_scalar(net, dq[2] if len(dq) > 2 else ""), _scalar(net, q[2] if len(q) > 2 else "")]
    if np.float32(scale_dq) != np.float32(scale_q) or any(int(z) != 0 for z in zps):
        return None
    return chain


def _store_pool(step: Step, attrs: dict):
    """(size, stride, padding) when Gemmini's store-side pooler computes this max-pool of ``step``'s output
    exactly as ONNX: a dense convolution, a square window with one stride and padding, no dilation or ceil
    mode; padding only after a fused ReLU (the pooler counts a padded position as 0, ONNX never picks it:
    the same once every value is >= 0).  Else None."""
    kernel, strides = list(attrs.get("kernel_shape", [])), list(attrs.get("strides", [1, 1]))
    pads, dil = list(attrs.get("pads", [0, 0, 0, 0])), list(attrs.get("dilations", [1, 1]))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    if (step.op != "QLinearConv" or int(step.attrs.get("group", 1)) != 1 or len(kernel) != 2
            or kernel[0] != kernel[1] or strides[0] != strides[1] or len(set(pads)) != 1 or dil != [1, 1]
            or attrs.get("ceil_mode", 0) or attrs.get("storage_order", 0)
            or (auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad) != "NOTSET"
            or (pads[0] and not step.relu) or pads[0] >= kernel[0]):
        return None
    return int(kernel[0]), int(strides[0]), int(pads[0])


def _pool_after(net: Network, step: Step, last: str):
    """The int8 MaxPool node that alone reads the output ``last`` writes for ``step``, or None."""
    g = net.graph
    succ = list(g.successors(last))
    if len(succ) != 1 or g.nodes[last]["outputs"][0] in net.outputs or g.nodes[succ[0]]["op"] != "MaxPool":
        return None
    return succ[0]


def plan(net: Network, store_pool: bool = True) -> list[Step]:
    """The network's steps in topological order (ties broken by the model's node order), fusions applied:
    a ReLU chain (``_fusable_relu``) into its producer, then a max-pool after a convolution into its store
    path (``_store_pool``; ``store_pool`` False: never, as explicit-command programs have no pooler); a
    max-pool inside a ReLU chain that the pooler cannot take becomes an int8 host step after the producer."""
    g = net.graph
    position = {name: i for i, name in enumerate(g.nodes)}
    order = list(nx.lexicographical_topological_sort(g, key=lambda n: position[n]))
    folded: set = set()
    steps = []
    for name in order:
        if name in folded:
            continue
        d = g.nodes[name]
        on = "gemmini" if d["op"] in GEMMINI_OPS else "host"
        step = Step(name, d["op"], on, list(d["inputs"]), d["outputs"][0], dict(d["attrs"]))
        host_pool = None
        if d["op"] in GEMMINI_OPS + ("QLinearAdd",):
            chain = _fusable_relu(net, name)
            pool_node = None
            if chain:
                step.relu, step.output = True, g.nodes[chain[-1]]["outputs"][0]
                folded.update(chain)
                pool_node = next((n for n in chain if g.nodes[n]["op"] == "MaxPool"), None)
                step.fused = [n for n in chain if n != pool_node]
            else:
                pool_node = _pool_after(net, step, name)
                if pool_node is not None:
                    step.output = g.nodes[pool_node]["outputs"][0]
                    folded.add(pool_node)
            if pool_node is not None:
                step.pool = _store_pool(step, g.nodes[pool_node]["attrs"]) if store_pool else None
                if step.pool is not None:
                    step.fused.append(pool_node)
                else:                               # the pool on the host, on the fused step's int8 output
                    inner = f"{d['outputs'][0]}/relu" if step.relu else d["outputs"][0]
                    net.shapes[inner], net.dtypes[inner] = net.shapes[d["outputs"][0]], np.dtype(np.int8)
                    host_pool = Step(pool_node, "MaxPool", "host", [inner], step.output,
                                     dict(g.nodes[pool_node]["attrs"]))
                    step.output = inner
        steps.append(step)
        if host_pool is not None:
            steps.append(host_pool)
    return steps


def tensor_bytes(net: Network, tensor: str) -> int:
    return int(np.prod(net.shapes[tensor], dtype=np.int64)) * np.dtype(net.dtypes[tensor]).itemsize


def arena_plan(net: Network, steps: list[Step]) -> ArenaPlan:
    """Lifetimes of the activations the steps write (graph inputs live from step 0, graph outputs to the
    end) and their placement in one arena: first fit by offset, in order of the writing step."""
    birth = {t: 0 for t in net.inputs}
    last = {}
    for i, s in enumerate(steps):
        for t in s.inputs:
            if t in birth:
                last[t] = i
        birth.setdefault(s.output, i)
    end = len(steps)
    lifetimes = {t: (b, end if t in net.outputs else last.get(t, b)) for t, b in birth.items()}
    sizes = {t: tensor_bytes(net, t) for t in lifetimes}
    offsets: dict = {}
    live: list = []          # (offset, end offset, last step)
    first = {t: i for i, t in enumerate(lifetimes)}
    for t in sorted(lifetimes, key=lambda t: (lifetimes[t][0], first[t])):
        start = lifetimes[t][0]
        live = [seg for seg in live if seg[2] >= start]
        offset = 0
        for lo, hi, _ in sorted(live):
            if offset + sizes[t] <= lo:
                break
            offset = max(offset, -(-hi // 64) * 64)
        offsets[t] = offset
        live.append((offset, offset + sizes[t], lifetimes[t][1]))
    size = max((offsets[t] + sizes[t] for t in offsets), default=0)
    peak = max((sum(sizes[t] for t, (b, e) in lifetimes.items() if b <= i <= e) for i in range(end + 1)), default=0)
    return ArenaPlan(offsets, int(size), int(peak), int(sum(sizes.values())), lifetimes)
