"""A float ONNX model made int8 the way Gemmini can run it, with ONNX Runtime's static quantization.

``quantize_model`` calls ``onnxruntime.quantization.quantize_static`` (QOperator format by default: explicit
QLinearConv, QGemm, QLinearAdd, ... nodes; QDQ on request) with per-tensor scales, int8 activations and
weights and symmetric ranges for both, so every zero point is 0: Gemmini's datapath has no zero points, only
int8 operands, an int32 bias and a float32 scale applied when a result leaves the accumulator.

ReLU.  With symmetric activations ONNX Runtime keeps a ReLU as DequantizeLinear -> Relu -> QuantizeLinear,
its input and output calibrated separately.  Gemmini applies ReLU in the mvout of the layer that produced
the value, with the layer's one scale; so a second calibration pass gives the ReLU's input (the output of
the Conv, Gemm or Add before it, when the ReLU is its only consumer) the ReLU output's scale, or that of a
MaxPool right after the ReLU (the quantizer's ``TensorQuantOverrides``).  Then ``Q(relu(DQ(q)))`` equals
``relu(q)`` exactly and the ReLU fuses into the producer without changing a bit of ONNX Runtime's result.

Calibration inputs: ``n`` seeded standard-normal float32 tensors of the model's input shape, or arrays the
user gives (``.npy`` files, each one input or a batch of them along axis 0).
"""

from __future__ import annotations


import numpy as np

from .errors import CodegenError

EXTRA = "onnxruntime"
FORMATS = ("qoperator", "qdq")
_PRODUCERS = ("Conv", "Gemm", "MatMul", "Add")


def require_onnxruntime():
    """``onnxruntime``, or a CodegenError (exit 2) naming the optional extra that installs it."""
    try:
        import onnxruntime
    except ImportError:
        raise CodegenError(f"needs onnxruntime: pip install 'cosa-framework[{EXTRA}]'", source="onnxruntime",
                           field="import") from None
    return onnxruntime


def _load(path) -> object:
    from workloads.onnx_loader import read_model

    return read_model(path)


def input_specs(model, source: str) -> list[tuple[str, tuple]]:
    """(name, shape) of each graph input that is not an initializer; symbolic dimensions are refused."""
    inits = {i.name for i in model.graph.initializer}
    out = []
    for info in model.graph.input:
        if info.name in inits:
            continue
        dims = []
        for d in info.type.tensor_type.shape.dim:
            if not d.HasField("dim_value") or d.dim_value < 1:
                raise CodegenError(f"input '{info.name}' has a symbolic or empty dimension; give the model fixed "
                                   "input shapes", source=source, field=info.name)
            dims.append(int(d.dim_value))
        out.append((info.name, tuple(dims)))
    return out


def synthetic_inputs(specs, n: int, seed: int) -> list[dict]:
    """``n`` feeds of seeded standard-normal float32 arrays (feed ``i`` from ``seed + i``)."""
    feeds = []
    for i in range(n):
        rng = np.random.default_rng(seed + i)
        feeds.append({name: rng.standard_normal(shape).astype(np.float32) for name, shape in specs})
    return feeds


def npy_inputs(files, specs, source: str) -> list[dict]:
    """Calibration feeds from ``.npy`` files (one input model: each file one input or a batch along axis 0)."""
    if len(specs) != 1:
        raise CodegenError(f"the model has {len(specs)} inputs; .npy calibration data takes one-input models",
                           source=source, field="--calibration")
    name, shape = specs[0]
    feeds = []
    for f in files:
        try:
            arr = np.load(f, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise CodegenError(f"not a readable .npy array ({exc})", source=str(f), field="--calibration") from None
        if tuple(arr.shape) == shape:
            batch = [arr]
        elif tuple(arr.shape[1:]) == shape:
            batch = list(arr)
        else:
            raise CodegenError(f"shape {tuple(arr.shape)} is neither the input's {shape} nor a batch of it",
                               source=str(f), field="--calibration")
        feeds += [{name: np.asarray(a, dtype=np.float32)} for a in batch]
    return feeds


def _relu_producers(model) -> dict[str, str]:
    """Tensor whose scale to copy -> ReLU input, for each ReLU that is the only consumer of a Conv/Gemm/MatMul/Add
    output: the ReLU's output, or the output of a MaxPool that alone reads it (ONNX Runtime quantizes after
    the pool then; a max-pool commutes with the quantization)."""
    consumers: dict[str, int] = {}
    for node in model.graph.node:
        for name in node.input:
            consumers[name] = consumers.get(name, 0) + 1
    graph_outputs = {o.name for o in model.graph.output}
    produced_by = {out: node.op_type for node in model.graph.node for out in node.output}
    readers = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    out = {}
    for node in model.graph.node:
        if node.op_type == "Relu" and produced_by.get(node.input[0]) in _PRODUCERS \
                and consumers.get(node.input[0]) == 1 and node.input[0] not in graph_outputs:
            after = readers.get(node.output[0], [])
            if len(after) == 1 and after[0].op_type == "MaxPool" and node.output[0] not in graph_outputs:
                out[after[0].output[0]] = node.input[0]   # the pool keeps the scale: quantized after it
            else:
                out[node.output[0]] = node.input[0]
    return out


def _scales(model) -> dict[str, tuple[float, int]]:
    """Quantized tensor -> (scale, zero point), read from the initializers ``<tensor>_scale``/``_zero_point``."""
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    out = {}
    for name, value in inits.items():
        if name.endswith("_scale") and value.size == 1:
            base = name[:-len("_scale")]
            zp = inits.get(f"{base}_zero_point")
            out[base] = (np.float32(value.reshape(())), 0 if zp is None else int(zp.reshape(())))
    return out


def quantize_model(path, output, *, calibration: int | list = 8, seed: int = 0, fmt: str = "qoperator",
                   fuse_relu: bool = True) -> dict:
    """Write the int8 model of the float model ``path`` to ``output`` (module docstring).

    calibration: a number of seeded synthetic inputs, or a list of ``.npy`` files.  fmt: "qoperator" or
    "qdq".  fuse_relu: the second pass that gives each fusable ReLU's input the ReLU output's scale.
    Returns a summary: calibration inputs used, ReLUs made fusable, quantized nodes by op type."""
    ort = require_onnxruntime()
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    src = str(path)
    if fmt not in FORMATS:
        raise CodegenError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})", source=src, field="--format")
    model = _load(src)
    if any(n.op_type.startswith("QLinear") or n.op_type == "QuantizeLinear" for n in model.graph.node):
        raise CodegenError("the model is already quantized", source=src, field="nodes")
    specs = input_specs(model, src)
    if isinstance(calibration, int):
        if calibration < 1:
            raise CodegenError(f"needs at least one calibration input, got {calibration}", source=src,
                               field="--calibration")
        feeds = synthetic_inputs(specs, calibration, seed)
    else:
        feeds = npy_inputs(calibration, specs, src)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self._it = iter(feeds)

        def get_next(self):
            return next(self._it, None)

    quant_format = QuantFormat.QOperator if fmt == "qoperator" else QuantFormat.QDQ
    options = {"ActivationSymmetric": True, "WeightSymmetric": True}

    def run(extra):
        import logging

        level = logging.getLogger().level
        logging.getLogger().setLevel(logging.ERROR)    # the quantizer's advice on pre-processing and formats
        try:
            quantize_static(src, str(output), Reader(), quant_format=quant_format, per_channel=False,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                            extra_options=dict(options, **extra))
        except Exception as exc:  # the quantizer raises assorted types on models it cannot handle
            raise CodegenError(f"ONNX Runtime's quantizer failed ({type(exc).__name__}: {exc})", source=src,
                               field="model") from None
        finally:
            logging.getLogger().setLevel(level)

    run({})
    fused = {}
    if fuse_relu:
        pairs = _relu_producers(model)
        scales = _scales(_load(output))
        overrides = {inp: [{"scale": np.array(scales[out][0], dtype=np.float32),
                            "zero_point": np.array(0, dtype=np.int8)}]
                     for out, inp in pairs.items() if out in scales}
        if overrides:
            run({"TensorQuantOverrides": overrides})
            fused = {inp: float(v[0]["scale"]) for inp, v in overrides.items()}
    ops: dict[str, int] = {}
    for node in _load(output).graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    return {"model": src, "output": str(output), "format": fmt, "calibration_inputs": len(feeds),
            "seed": seed if isinstance(calibration, int) else None, "relu_fusable": sorted(fused),
            "nodes": dict(sorted(ops.items())), "onnxruntime": ort.__version__}
