"""Run an int8 ONNX network (``gemmini.network``) layer by layer on the functional and timing models, and
compare its output with ONNX Runtime running the same model.

Each Gemmini step runs as the library call Gemmini's own networks make for its layer
(``gemmini.vendor.calls.from_workload``: what ``resnet50.c`` and ``mobilenet.c`` call), on the functional
model (``gemmini.vendor.run.run_vendor``, which also checks the layer against its NumPy reference), with
the tile arguments of the layer's schedule: ``tiles_for`` gives, per distinct layer shape, either the
library's own tiles ("gemmini-default") or the ones ``gemmini.loop_schedule.tune_tiles`` finds from
cosa's mapping ("cosa").  Where the library's call takes no tile arguments, cosa's schedule may run its
own calls instead (``cosa_layer_calls``): a depthwise layer as packed groups of up to DIM channels, one dense
convolution per group whose weights (block-diagonal, ``block_diagonal``) are laid out on the host from the
model's constants before the network runs (``compile_layer``); the activations go through the same calls; a
layer ``resnet50.c`` runs through ``tiled_conv_downsample`` (one matmul per output row) through
``tiled_conv_auto`` on the hardware's downsample path.  Cycles per layer come from the timing model
(``gemmini.sim.timing``); host steps have none.  Activations are NCHW int8 like the model; a Gemmini step
reads and writes them NHWC.

Where ONNX Runtime's rounding may differ from ours: on the int8 operators, nowhere known.  Gemmini's
mvout (float32 product of the int32 sum and the float32 scale, rounded half to even, saturated) is MLAS's
requantization of QLinearConv and QGemm when the scale is computed as ONNX Runtime does, float32
``(x_scale * w_scale) / y_scale``; the int8 host operators follow ``gemmini.network_ops``.  The one float
operator placed here, a GlobalAveragePool the quantizer left float, sums in another order than ONNX
Runtime, so its QuantizeLinear may round one LSB apart at a tie.  The comparison reports the largest
difference in int8 LSBs rather than assuming it is 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import network_ops as ops
from .errors import CodegenError, SimulationError
from .network import Network, Step, _scalar, arena_plan, plan

SCHEDULERS = ("cosa", "gemmini-default")
STYLES = ("loops", "isa")


@dataclass(frozen=True)
class GemminiLayer:
    """A Gemmini step as a layer: ``workload`` (a ``workloads`` LoopNest), ``key`` (its shape: equal keys
    share one schedule) and how the operands map to the library's buffers."""

    step: Step
    workload: object
    key: tuple
    kind: str  # "conv" or "matmul"


@dataclass
class LayerRun:
    """One step's run: name, op, on ("gemmini"/"host"), scheduler, cycles (None on the host),
    cycles_source, tiles (None: the library's own), library_cycles (the library's own tiles on the
    timing model), layer_verified (the layer's output equals its NumPy reference), fused node names,
    rejected_tiles (faster tiles whose stream failed the layer's check: ``LayerTiles.rejected``), note
    (``LayerTiles.note``), calls: the library functions the step ran (``calls_summary``)."""

    name: str
    op: str
    on: str
    scheduler: str | None = None
    cycles: float | None = None
    cycles_source: str = "none (host step)"
    tiles: list | None = None
    library_cycles: float | None = None
    layer_verified: bool | None = None
    fused: list = field(default_factory=list)
    rejected_tiles: list = field(default_factory=list)
    note: str | None = None
    calls: str | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class NetworkRun:
    """values: every tensor computed (name -> array); layers: LayerRun per step; cycles: their sum
    (Gemmini steps, timing model; None when computed by the reference); arena: the activation arena's plan; isa_layers: step name ->
    ``network_isa.IsaLayer`` in the explicit-command style (else empty)."""

    values: dict
    layers: list
    cycles: float
    arena: object
    isa_layers: dict = field(default_factory=dict)


def _conv_layer(net: Network, step: Step) -> GemminiLayer:
    from workloads import conv2d

    src = f"{net.source}: node {step.name} (QLinearConv)"
    x, w = step.inputs[0], step.inputs[3]
    n, c, h, wid = net.shapes[x]
    k, cg, kh, kw = net.constants[w].shape if w in net.constants else (None,) * 4
    if k is None:
        raise CodegenError("weights must be a constant", source=src, field="w")
    a = step.attrs
    pads = list(a.get("pads", [0, 0, 0, 0]))
    strides = list(a.get("strides", [1, 1]))
    dil = list(a.get("dilations", [1, 1]))
    auto_pad = a.get("auto_pad", b"NOTSET")
    if (auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad) not in ("NOTSET", "VALID"):
        raise CodegenError("auto_pad SAME is not placed on Gemmini (give explicit pads)", source=src, field="auto_pad")
    if kh != kw or pads[0] != pads[2] or pads[1] != pads[3] or pads[0] != pads[1] or strides[0] != strides[1] \
            or dil[0] != dil[1]:
        raise CodegenError(f"Gemmini's library takes square kernels and one stride, padding and dilation (kernel "
                           f"{kh}x{kw}, pads {pads}, strides {strides})", source=src, field="attributes")
    groups = int(a.get("group", 1))
    wl = conv2d(step.name, N=n, C=c, K=k, H=h, W=wid, R=kw, S=kh, stride=strides[0], dilation=dil[0],
                padding=pads[0], groups=groups, bits=8)
    return GemminiLayer(step, wl, ("conv", n, c, k, h, wid, kh, strides[0], dil[0], pads[0], groups, step.pool),
                        "conv")


def _matmul_layer(net: Network, step: Step) -> GemminiLayer:
    from workloads import matmul

    src = f"{net.source}: node {step.name} ({step.op})"
    a_shape = net.shapes[step.inputs[0]]
    b = step.inputs[3]
    if b not in net.constants:
        raise CodegenError("the second operand must be a constant", source=src, field="B")
    b_shape = net.constants[b].shape
    if step.op == "QGemm":
        if step.attrs.get("transA", 0) or float(step.attrs.get("alpha", 1.0)) != 1.0:
            raise CodegenError("transA and alpha != 1 are not placed on Gemmini", source=src, field="attributes")
        k, n = b_shape[::-1] if step.attrs.get("transB", 0) else b_shape
    else:
        k, n = b_shape
    if len(a_shape) != 2 or len(b_shape) != 2 or a_shape[1] != k:
        raise CodegenError(f"2-D operands only ({list(a_shape)} x {list(b_shape)})", source=src, field="A")
    m = a_shape[0]
    return GemminiLayer(step, matmul(step.name, M=m, N=n, K=k, bits=8), ("matmul", m, n, k), "matmul")


def gemmini_layers(net: Network, steps: list[Step]) -> list[GemminiLayer]:
    """The Gemmini steps as layers (raises CodegenError naming a node Gemmini's library cannot run, or
    whose scales and zero points it cannot apply)."""
    out = []
    for s in steps:
        if s.on == "gemmini":
            _scale(net, s)
            out.append((_conv_layer if s.op == "QLinearConv" else _matmul_layer)(net, s))
    return out


def distinct_layers(layers: list[GemminiLayer]) -> dict:
    """key -> the first layer of that shape (the one scheduled for all of them)."""
    out = {}
    for layer in layers:
        out.setdefault(layer.key, layer)
    return out


@dataclass(frozen=True)
class LayerTiles:
    """The tiles a distinct layer runs with: ``tiles`` (None: the library's own), ``cycles`` and
    ``library_cycles`` (timing model), ``rejected``: faster tiles whose stream failed the layer's NumPy check
    on the functional model with seeded inputs (tiles -> mismatching elements), ``note``: why the
    library's own tiles were kept without a search (the mapping has no program), else None; ``own_calls``:
    below."""

    tiles: tuple | None
    cycles: float
    library_cycles: float
    rejected: dict
    note: str | None = None
    own_calls: bool = False
    """The tiles are for cosa's own calls (``cosa_layer_calls``: a depthwise layer as packed groups), not the
    library's."""


QUANT_SUFFIX = "_quant"
"""The suffix ONNX Runtime's quantizer gives the int8 node it makes from a float node (conv1 -> conv1_quant)."""


def library_calls(layer: GemminiLayer, relu: bool = False, scale: float = 1.0):
    """The library's calls for ``layer`` (``from_workload``'s; a fused max-pool through ``tiled_conv_auto``'s
    pooling arguments, as ``resnet50.c`` calls its first layer; ``tiled_conv_downsample`` for the 1x1 stride-2
    layers ``resnet50.c`` calls so, ``gemmini.vendor.calls.RESNET50_C_DOWNSAMPLE``, named as in the float
    model)."""
    from .vendor.calls import RESNET50_C_DOWNSAMPLE, conv, from_workload

    if layer.step.pool is None:
        name = layer.step.name.removesuffix(QUANT_SUFFIX)
        return from_workload(layer.workload, bias=True, relu=relu, scale=scale,
                             downsample_call=name in RESNET50_C_DOWNSAMPLE)
    d, op = layer.workload.dims, layer.workload.op
    rows, cols = op["input_hw"]
    return conv(layer.workload.name, d["N"], rows, cols, d["C"], d["K"], d["R"], stride=op["stride"][0],
                padding=op["padding"][0], dilation=op["dilation"][0], bias=True, relu=relu, scale=scale,
                pool=layer.step.pool)


def cosa_layer_calls(layer: GemminiLayer, relu: bool = False, scale: float = 1.0):
    """cosa's own calls for ``layer`` where the library's take no tile arguments
    (``gemmini.loop_schedule.cosa_calls``: a depthwise layer as packed groups of up to DIM channels with
    block-diagonal weights, ``gemmini.vendor.calls.depthwise_packed``; a ``tiled_conv_downsample`` layer through
    ``tiled_conv_auto``), else None (the library's calls)."""
    from .loop_schedule import cosa_calls

    if layer.step.pool is not None:
        return None
    return cosa_calls(layer.workload, library_calls(layer), bias=True, relu=relu, scale=scale)


def calls_summary(vendor) -> str:
    """The functions ``vendor`` calls, as "fn" or "fn x count" (packed depthwise groups named so)."""
    fns = [call.fn for call in vendor.calls]
    out = ", ".join(f"{fn} x{fns.count(fn)}" if fns.count(fn) > 1 else fn for fn in dict.fromkeys(fns))
    if vendor.layer.get("weights_layout") == "block_diagonal":
        out += f" (depthwise packed by {vendor.buffer('weights').shape[2]})"
    return out


def tiles_for(layer: GemminiLayer, mapping, arch, *, budget: int = 16, seed: int = 0, checks: int = 4,
              chooser=None) -> LayerTiles:
    """The tiles of ``layer``: ``gemmini.loop_schedule.tune_tiles`` from ``mapping`` (cosa's; ``chooser``: the
    loop-tile chooser for matmul-form calls, see ``tune_tiles``), then the
    fastest of the timed tiles whose stream passes the layer's check on the functional model (at most
    ``checks`` tried; the library's own tiles are the last resort and are used unchecked)."""
    from .loop_schedule import library_params, tune_tiles
    from .vendor import stream
    from .vendor.run import run_vendor

    try:
        ls = tune_tiles(layer.workload, mapping, arch, scale=1.0, budget=budget, vendor=library_calls(layer),
                        chooser=chooser)
    except CodegenError as exc:       # a mapping the code generator cannot emit: the library's own tiles
        from . import isa
        from .config import GemminiConfig
        from .sim.timing import timing

        config = GemminiConfig.from_arch(arch)
        vendor = library_calls(layer)
        lib = float(timing(isa.decode_stream(stream(vendor, library_params(config))), config).cycles)
        return LayerTiles(None, lib, lib, {}, f"no tile search: {exc}")
    rejected = {}
    own = ls.vendor != library_calls(layer)   # cosa's own calls (``cosa_layer_calls``) with these tiles
    for tiles in sorted((t for t in ls.tried if t is not None and ls.tried[t] < ls.library_cycles),
                        key=lambda t: (ls.tried[t], t))[:checks]:
        run = run_vendor(ls.vendor, seed=seed, tiles=tiles)
        if run.verified:
            return LayerTiles(tiles, ls.tried[tiles], ls.library_cycles, rejected, own_calls=own)
        rejected[tiles] = run.mismatches
    return LayerTiles(None, ls.library_cycles, ls.library_cycles, rejected)


#: input positions of (y_scale, bias, zero points) per op (QGemm: A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale,
#: y_zp; QLinearConv: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B; QLinearMatMul: no bias)
_POSITIONS = {"QLinearConv": (6, 8, (2, 5, 7)), "QGemm": (7, 6, (2, 5, 8)), "QLinearMatMul": (6, None, (2, 5, 7))}


def _scale(net: Network, step: Step) -> np.float32:
    """The mvout scale as ONNX Runtime computes it: float32 (x_scale * w_scale) / y_scale."""
    y_at, _, zps = _POSITIONS[step.op]
    if y_at >= len(step.inputs) or not step.inputs[y_at]:
        raise CodegenError("a float output (no y_scale) is not placed on Gemmini", source=f"{net.source}: node "
                           f"{step.name}", field="y_scale")
    for i in (1, 4, y_at):
        if np.size(_scalar(net, step.inputs[i])) != 1:
            raise CodegenError("a per-channel scale: Gemmini applies one scale per layer output (quantize per "
                               "tensor: 'cosa quantize')", source=f"{net.source}: node {step.name}",
                               field=step.inputs[i])
    sx, sw, sy = (np.float32(_scalar(net, step.inputs[i])) for i in (1, 4, y_at))
    for i in zps:
        if i < len(step.inputs) and int(np.max(np.abs(_scalar(net, step.inputs[i])))) != 0:
            raise CodegenError("Gemmini has no zero points: quantize with 'cosa quantize' (symmetric)",
                               source=f"{net.source}: node {step.name}", field=step.inputs[i])
    return np.float32(np.float32(sx * sw) / sy)


@dataclass(frozen=True)
class CompiledLayer:
    """A Gemmini step ready to run: ``vendor`` (the calls), ``tiles`` (None: the library's own) and
    ``constants``: its weight and bias buffers laid out on the host as the calls read them (computed once
    from the model's constants)."""

    vendor: object
    tiles: tuple | None
    constants: dict


def block_diagonal(w: np.ndarray, pack: int) -> np.ndarray:
    """ONNX depthwise weights [C, 1, KH, KW] as ``depthwise_packed``'s buffer [KH, KW, pack, C]: entry
    [kh, kw, c % pack, c] is w[c, 0, kh, kw], every other entry 0."""
    c, one, kh, kw = w.shape
    if one != 1 or c % pack:
        raise CodegenError(f"weights {list(w.shape)} are not depthwise in groups of {pack}",
                           source="block_diagonal", field="w")
    out = np.zeros((kh, kw, pack, c), dtype=w.dtype)
    out[:, :, np.arange(c) % pack, np.arange(c)] = np.transpose(w[:, 0], (1, 2, 0))
    return out


def compile_layer(net: Network, layer: GemminiLayer, sched, scheduler: str) -> CompiledLayer:
    """The calls, tiles and host-side constant buffers of ``layer`` under ``scheduler`` (``sched``: its
    ``LayerTiles``; cosa's own calls when ``sched.own_calls``)."""
    step = layer.step
    scale = float(_scale(net, step))
    w, bias = layer_constants(net, layer)
    vendor, tiles = library_calls(layer, relu=step.relu, scale=scale), None
    if scheduler != "gemmini-default":
        tiles = sched.tiles
        if sched.own_calls:
            vendor = cosa_layer_calls(layer, relu=step.relu, scale=scale)
    if layer.kind == "conv":
        if vendor.layer.get("weights_layout") == "block_diagonal":
            weights = block_diagonal(w, vendor.buffer("weights").shape[2])
        elif vendor.layer["kind"] == "depthwise":
            weights = w[:, 0]
        else:
            weights = np.transpose(w, (2, 3, 1, 0))
        return CompiledLayer(vendor, tiles, {"weights": np.ascontiguousarray(weights), "bias": bias})
    return CompiledLayer(vendor, tiles, {"B": np.ascontiguousarray(w), "D": bias})


def layer_constants(net: Network, layer: GemminiLayer) -> tuple:
    """(weights, int32 bias) of ``layer`` from the model's constants: a convolution's weights as ONNX holds
    them ([K, C/groups, KH, KW]), a matmul's as B [K, N] (a QGemm with transB transposed back); a missing
    bias is zeros."""
    step = layer.step
    w = net.constants[step.inputs[3]]
    at = _POSITIONS[step.op][1]
    bias_name = step.inputs[at] if at is not None and at < len(step.inputs) else ""
    if layer.kind != "conv" and step.op == "QGemm" and step.attrs.get("transB", 0):
        w = w.T
    width = w.shape[0] if layer.kind == "conv" else w.shape[1]
    bias = net.constants[bias_name] if bias_name else np.zeros(width, np.int32)
    return w, np.asarray(bias).astype(np.int32)


def layer_inputs(layer: GemminiLayer, compiled: CompiledLayer, x: np.ndarray) -> dict:
    """The operands of ``compiled``'s calls by buffer name for the activation ``x`` (NCHW for a convolution,
    whose input is NHWC as Gemmini's library takes it; 2-D for a matmul) and the layer's constants."""
    if layer.kind == "conv":
        return dict(compiled.constants, input=np.ascontiguousarray(np.transpose(x, (0, 2, 3, 1))))
    return dict(compiled.constants, A=x)


def gemmini_operands(net: Network, layer: GemminiLayer, x: np.ndarray, sched=None,
                     scheduler: str = "gemmini-default") -> tuple:
    """(the calls ``layer`` runs under ``scheduler``, their operands by buffer name) for the activation ``x``
    (``layer_inputs``); ``sched``: the layer's ``LayerTiles`` (cosa's own calls when ``sched.own_calls``).  The
    weights and bias come from the model's constants in the layout the calls read (``compile_layer``)."""
    compiled = compile_layer(net, layer, sched, scheduler)
    return compiled.vendor, layer_inputs(layer, compiled, x)


def _run_gemmini(layer: GemminiLayer, compiled: CompiledLayer, values: dict) -> tuple:
    from .vendor.run import run_vendor

    inputs = layer_inputs(layer, compiled, values[layer.step.inputs[0]])
    vendor, tiles = compiled.vendor, compiled.tiles
    run = run_vendor(vendor, inputs, tiles=tiles, with_timing=True)
    out = run.outputs
    if layer.kind == "conv":
        out = np.ascontiguousarray(np.transpose(out, (0, 3, 1, 2)))
    return out, run, tiles


def _run_host(net: Network, step: Step, values: dict) -> np.ndarray:
    s, a, v = step, step.attrs, values
    sc = lambda i: _scalar(net, s.inputs[i]) if i < len(s.inputs) else 0  # noqa: E731
    if s.op == "QuantizeLinear":
        return ops.quantize_linear(v[s.inputs[0]], sc(1), sc(2), net.dtypes[s.output])
    if s.op == "DequantizeLinear":
        return ops.dequantize_linear(v[s.inputs[0]], sc(1), sc(2))
    if s.op == "Relu":
        return np.maximum(v[s.inputs[0]], np.zeros((), v[s.inputs[0]].dtype))
    if s.op == "QLinearAdd":
        if any(int(sc(i)) != 0 for i in (2, 5, 7)):
            raise CodegenError("zero points must be 0 (quantize with 'cosa quantize')",
                               source=f"{net.source}: node {s.name}", field="zero_point")
        return ops.qlinear_add(v[s.inputs[0]], sc(1), v[s.inputs[3]], sc(4), sc(6), relu=s.relu)
    if s.op == "MaxPool":
        return ops.max_pool(v[s.inputs[0]], a, f"{net.source}: node {s.name}")
    if s.op == "QLinearGlobalAveragePool":
        return ops.qlinear_global_average_pool(v[s.inputs[0]], sc(1), sc(3), sc(2), sc(4))
    if s.op == "GlobalAveragePool":
        return ops.global_average_pool(v[s.inputs[0]])
    if s.op == "Flatten":
        return ops.flatten(v[s.inputs[0]], int(a.get("axis", 1)))
    if s.op == "Reshape":
        return ops.reshape(v[s.inputs[0]], net.constants[s.inputs[1]], int(a.get("allowzero", 0)))
    raise CodegenError(f"no host operator {s.op}", source=f"{net.source}: node {s.name}", field="op")


def _compile_isa(net: Network, layer: GemminiLayer, sched):
    from .network_isa import isa_layer

    src = f"{net.source}: node {layer.step.name}"
    if layer.step.pool is not None:
        raise CodegenError("a max-pool fused into the store path has no explicit-command form (plan the network "
                           "with store_pool=False)", source=src, field="pool")
    w, bias = layer_constants(net, layer)
    return isa_layer(layer.workload, layer.kind, sched, scale=_scale(net, layer.step), relu=layer.step.relu,
                     weights=w, bias=bias, source=src)


def _reference_step(layer: GemminiLayer, compiled, scheduler: str, style: str, values: dict) -> tuple:
    """(output, LayerRun) of one Gemmini step computed by the NumPy reference of its program or calls."""
    x = values[layer.step.inputs[0]]
    if style == "isa":
        from .codegen.data import reference_output

        nhwc_x = np.transpose(x, (0, 2, 3, 1)) if layer.kind == "conv" else x
        out = reference_output(compiled.program, dict(compiled.constants, input=np.ascontiguousarray(nhwc_x)))
    else:
        from .vendor.run import reference

        out = reference(compiled.vendor, layer_inputs(layer, compiled, x))
    if layer.kind == "conv":
        out = np.ascontiguousarray(np.transpose(out, (0, 3, 1, 2)))
    step = layer.step
    return out, LayerRun(step.name, step.op, "gemmini", scheduler, None, "none (NumPy reference)",
                         fused=list(step.fused))


def _isa_calls(program) -> str:
    """What an explicit-command step runs: its command count and the rewrite, if any."""
    from .codegen.lowering import lowering_of

    text = f"explicit commands ({len(program.commands):,})"
    low = lowering_of(program.workload)
    if low is None:
        return text
    return text + (", im2col fold" if low.kind == "fold" else f", packed groups of {low.m}")


def _gemmini_step_run(layer: GemminiLayer, compiled, sched, scheduler: str, style: str, values: dict) -> tuple:
    """(output, LayerRun) of one Gemmini step on the functional and timing models."""
    step = layer.step
    if style == "isa":
        from .network_isa import run_isa_layer

        out, run = run_isa_layer(compiled, values[step.inputs[0]], layer.kind)
        return out, LayerRun(step.name, step.op, "gemmini", scheduler, float(run.cycles), "timing model",
                             layer_verified=bool(run.verified), fused=list(step.fused),
                             calls=_isa_calls(compiled.program))
    out, run, tiles = _run_gemmini(layer, compiled, values)
    return out, LayerRun(step.name, step.op, "gemmini", scheduler, float(run.cycles), "timing model",
                         list(tiles) if tiles else None,
                         None if sched is None else float(sched.library_cycles), bool(run.verified),
                         list(step.fused),
                         [] if sched is None else [{"tiles": list(t), "mismatches": m}
                                                   for t, m in sched.rejected.items()],
                         None if sched is None else sched.note, calls_summary(compiled.vendor))


def run_network(net: Network, feeds: dict, schedules: dict, scheduler: str = "cosa",
                steps: list | None = None, style: str = "loops", compute: str = "simulate") -> NetworkRun:
    """Run ``net`` on ``feeds`` (graph input -> float32 array).  ``style`` "loops": schedules: layer key ->
    ``LayerTiles`` (``tiles_for``; not needed for "gemmini-default", which runs the library's own tiles);
    "isa" (cosa only): layer key -> ``network_isa.LayerMapping``, every Gemmini step an explicit-command
    program (kept in the run's ``isa_layers`` for the network program) and every max-pool on the host.
    ``compute`` "simulate": every Gemmini step on the functional and timing models (its cycles, its output
    checked against its NumPy reference); "reference": by that NumPy reference alone (no cycles: the run's
    ``cycles`` is None), seconds instead of minutes per input for a network, for accuracy over many inputs
    (the integer semantics the simulated programs reproduce bit for bit)."""
    if compute not in ("simulate", "reference"):
        raise CodegenError(f"compute must be simulate or reference, got {compute!r}", source=net.source,
                           field="compute")
    if scheduler not in SCHEDULERS:
        raise CodegenError(f"unknown scheduler {scheduler!r} (one of {', '.join(SCHEDULERS)})", source=net.source,
                           field="--scheduler")
    if style not in STYLES:
        raise CodegenError(f"unknown style {style!r} (one of {', '.join(STYLES)})", source=net.source,
                           field="--style")
    if style == "isa" and scheduler != "cosa":
        raise CodegenError("--style isa runs cosa's mappings as explicit commands; the library's own tiles are its "
                           "loop instructions (--style loops)", source=net.source, field="--scheduler")
    steps = plan(net, store_pool=style == "loops") if steps is None else steps
    layers = {layer.step.name: layer for layer in gemmini_layers(net, steps)}
    compiled = {}
    for name, layer in layers.items():     # calls, tiles and constant buffers, once before any input runs
        sched = schedules.get(layer.key)
        if scheduler != "gemmini-default" and sched is None:
            raise CodegenError("no schedule for this layer", source=f"{net.source}: node {name}",
                               field="schedules")
        compiled[name] = (_compile_isa(net, layer, sched) if style == "isa" else
                          compile_layer(net, layer, sched, scheduler))
    values = {k: np.asarray(v) for k, v in feeds.items()}
    runs, total = [], 0.0
    for step in steps:
        if step.on == "gemmini":
            layer = layers[step.name]
            if compute == "reference":
                out, layer_run = _reference_step(layer, compiled[step.name], scheduler, style, values)
            else:
                out, layer_run = _gemmini_step_run(layer, compiled[step.name], schedules.get(layer.key),
                                                   scheduler, style, values)
                total += layer_run.cycles
            runs.append(layer_run)
        else:
            out = _run_host(net, step, values)
            runs.append(LayerRun(step.name, step.op, "host", fused=list(step.fused)))
        expected = net.shapes.get(step.output)
        if expected is not None and tuple(out.shape) != tuple(expected):
            raise SimulationError(f"computed shape {out.shape}, the model says {expected}",
                                  source=f"{net.source}: node {step.name}", field=step.output)
        values[step.output] = out
    return NetworkRun(values, runs, total if compute == "simulate" else None, arena_plan(net, steps),
                      compiled if style == "isa" else {})


def compared_tensors(net: Network) -> list[str]:
    """The int8 tensors compared with ONNX Runtime: each graph output's, or the int8 input of the
    DequantizeLinear that makes it."""
    out = []
    for o in net.outputs:
        prod = [n for n in net.graph.nodes if o in net.graph.nodes[n]["outputs"]]
        node = net.graph.nodes[prod[0]] if prod else None
        out.append(node["inputs"][0] if node is not None and node["op"] == "DequantizeLinear" else o)
    return out


def onnxruntime_values(net: Network, feeds: dict, tensors: list[str]) -> dict:
    """``tensors`` as ONNX Runtime computes them on the host (CPU provider, one thread, all optimizations)."""
    import onnx

    from .onnx_quantize import require_onnxruntime

    ort = require_onnxruntime()
    model = onnx.ModelProto()
    model.CopyFrom(net.model)
    have = {o.name for o in model.graph.output}
    for t in tensors:
        if t not in have:
            model.graph.output.append(onnx.helper.make_tensor_value_info(
                t, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(net.dtypes[t])), list(net.shapes[t])))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    got = session.run(tensors, feeds)
    return dict(zip(tensors, got))


def compare(net: Network, run: NetworkRun, reference: dict) -> dict:
    """max_abs_diff (int8 LSBs) over the compared tensors, top1_equal (argmax of the last axis of each)."""
    diff, top1 = 0, True
    for t, ref in reference.items():
        ours = run.values[t]
        diff = max(diff, int(np.max(np.abs(ours.astype(np.int64) - np.asarray(ref).astype(np.int64)))))
        top1 &= bool(np.array_equal(np.argmax(ours.reshape(ours.shape[0], -1), axis=-1),
                                    np.argmax(np.asarray(ref).reshape(ours.shape[0], -1), axis=-1)))
    return {"max_abs_diff_vs_onnxruntime": diff, "top1_equal": top1}
