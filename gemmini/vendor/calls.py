"""Library calls and the main-memory layout they address.

A ``LibCall`` is one call of a function of Gemmini's C library with its
arguments named and ordered as in gemmini.h / gemmini_nn.h (ucb-bar/
gemmini-rocc-tests 180c468).  A pointer argument is a ``Ptr`` (a buffer of
the layout and a byte offset into it) or None (NULL).  A ``VendorProgram``
is a layer as the library runs it: the buffers and the calls, in order.

The layer builders say which call Gemmini's own networks make for each layer
kind (``imagenet/resnet50.c``, ``imagenet/mobilenet.c``):

* a KxK convolution (K > 1), ResNet-50's 7x7 stride-2 first layer included
  (with its 3x3 stride-2 max-pool fused, as resnet50.c calls it, or without):
  ``tiled_conv_auto``;
* a 1x1 stride-1 convolution: ``tiled_matmul_nn_auto`` on the image as an
  [N*H*W, C] matrix (bias repeated over rows);
* a 1x1 stride-2 convolution ("downsample"): ``tiled_conv_downsample``, one
  ``tiled_matmul_auto`` per output row, as resnet50.c calls it for its first
  two downsampling branches, or ``tiled_conv_auto`` (its last one), whose
  loop instruction then runs the hardware's downsample path;
* a depthwise convolution: ``tiled_conv_dw_auto``;
* a grouped convolution: one ``tiled_conv_stride_auto`` per group, on the
  group's channel slices (row strides of the whole tensors);
* a fully connected layer: ``tiled_matmul_nn_auto`` with a per-row bias
  matrix (repeating_bias false), as both networks' last layer;
* a GEMM (BERT): ``tiled_matmul_auto`` with row strides K, N, N, N.

Layout (``make_layout``): buffers one after another from ``ARENA_BASE``,
each starting at a multiple of ``ALIGN`` bytes, in the order given.  The
recorder maps the same arena at the same address, so recorded and generated
addresses compare as integers.  Tensors are row-major (NHWC images; conv
weights [KH, KW, C, K]; depthwise weights [C, KH, KW]); int8 except the
int32 bias.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import CodegenError

ARENA_BASE = 0x100000
"""Address of the first buffer (1 MiB: above Linux's mmap_min_addr, far from a PIE program's mappings)."""
ALIGN = 64
OS, WS = 0, 1  #: enum tiled_matmul_type_t
NO_ACTIVATION, RELU = 0, 1

# parameter names in the C functions' order; kinds: i integer, b bool, f float, p pointer
_SIG = {
    "tiled_matmul_auto": "dim_I:i dim_J:i dim_K:i A:p B:p D:p C:p stride_A:i stride_B:i stride_D:i stride_C:i "
                         "A_scale_factor:f B_scale_factor:f D_scale_factor:f act:i scale:f bert_scale:f "
                         "repeating_bias:b transpose_A:b transpose_B:b full_C:b low_D:b weightA:i "
                         "tiled_matmul_type:i",
    "tiled_matmul_nn_auto": "dim_I:i dim_J:i dim_K:i A:p B:p D:p C:p act:i scale:f repeating_bias:b "
                            "tiled_matmul_type:i check:b",
    "tiled_conv_auto": "batch_size:i in_row_dim:i in_col_dim:i in_channels:i out_channels:i out_row_dim:i "
                       "out_col_dim:i stride:i input_dilation:i kernel_dilation:i padding:i kernel_dim:i wrot180:b "
                       "trans_output_1203:b trans_input_3120:b trans_weight_1203:b trans_weight_0132:b input:p "
                       "weights:p bias:p output:p act:i scale:f pool_size:i pool_stride:i pool_padding:i "
                       "tiled_conv_type:i",
    "tiled_conv_stride_auto": "batch_size:i in_row_dim:i in_col_dim:i in_channels:i out_channels:i out_row_dim:i "
                              "out_col_dim:i stride:i input_dilation:i kernel_dilation:i padding:i kernel_dim:i "
                              "in_stride:i weight_stride:i out_stride:i wrot180:b trans_output_1203:b "
                              "trans_input_3120:b trans_weight_1203:b trans_weight_0132:b input:p weights:p bias:p "
                              "output:p act:i scale:f pool_size:i pool_stride:i pool_padding:i tiled_conv_type:i",
    "tiled_conv_dw_auto": "batch_size:i in_row_dim:i in_col_dim:i channels:i out_row_dim:i out_col_dim:i stride:i "
                          "padding:i kernel_dim:i input:p weights:p bias:p output:p act:i scale:f pool_size:i "
                          "pool_stride:i pool_padding:i tiled_conv_type:i",
    "tiled_conv_downsample": "batch_size:i in_row_dim:i in_col_dim:i in_channels:i out_channels:i out_row_dim:i "
                             "out_col_dim:i in_stride:i weight_stride:i out_stride:i input:p weights:p bias:p "
                             "output:p act:i scale:f tiled_conv_type:i",
}
SIGNATURES = {fn: tuple(tuple(p.split(":")) for p in spec.split()) for fn, spec in _SIG.items()}


@dataclass(frozen=True)
class Ptr:
    """A pointer argument: ``offset`` bytes into buffer ``buffer``."""

    buffer: str
    offset: int = 0


@dataclass(frozen=True)
class BufferSpec:
    """A main-memory buffer: ``offset`` bytes from the arena base, ``nbytes``, numpy ``dtype``, ``shape``."""

    name: str
    offset: int
    nbytes: int
    dtype: str
    shape: tuple

    def to_dict(self, base: int) -> dict:
        return {"name": self.name, "address": base + self.offset, "bytes": self.nbytes, "dtype": self.dtype,
                "shape": list(self.shape)}


@dataclass(frozen=True)
class LibCall:
    """One library call: function name and its arguments by parameter name (all parameters given)."""

    fn: str
    args: tuple  # ((name, value), ...) in the function's parameter order

    @staticmethod
    def make(fn: str, **kwargs) -> "LibCall":
        if fn not in SIGNATURES:
            raise CodegenError(f"unknown library function {fn!r} (known: {sorted(SIGNATURES)})", source="LibCall",
                               field="fn")
        names = [n for n, _ in SIGNATURES[fn]]
        missing = [n for n in names if n not in kwargs]
        extra = [n for n in kwargs if n not in names]
        if missing or extra:
            raise CodegenError(f"missing {missing}, unknown {extra}", source=f"call {fn}", field="args")
        return LibCall(fn, tuple((n, kwargs[n]) for n in names))

    @property
    def kw(self) -> dict:
        return dict(self.args)

    def to_dict(self) -> dict:
        out = {}
        for name, value in self.args:
            out[name] = [value.buffer, value.offset] if isinstance(value, Ptr) else value
        return {"fn": self.fn, "args": out}

    @staticmethod
    def from_dict(d: dict) -> "LibCall":
        kinds = dict(SIGNATURES.get(d["fn"], ()))
        args = {n: (Ptr(*v) if kinds.get(n) == "p" and v is not None else v) for n, v in d["args"].items()}
        return LibCall.make(d["fn"], **args)


@dataclass(frozen=True)
class VendorProgram:
    """A layer as Gemmini's library runs it: ``calls`` on ``buffers`` placed from ``base``."""

    name: str
    buffers: tuple  # BufferSpec, ...
    calls: tuple  # LibCall, ...
    base: int = ARENA_BASE
    layer: dict = field(default_factory=dict, compare=False)
    """What the calls compute, for the NumPy reference (``gemmini.vendor.run``): kind (matmul, conv,
    depthwise), bias, relu, scale; for convolutions stride, padding, dilation, groups, pool."""

    @property
    def arena_bytes(self) -> int:
        return max((b.offset + b.nbytes for b in self.buffers), default=0)

    def buffer(self, name: str) -> BufferSpec:
        for b in self.buffers:
            if b.name == name:
                return b
        raise CodegenError(f"no buffer {name!r}", source=f"program {self.name}", field="buffer")

    def address(self, value) -> int:
        """A pointer argument's address (0 for NULL)."""
        if value is None:
            return 0
        return self.base + self.buffer(value.buffer).offset + int(value.offset)

    def layout(self) -> list:
        """The buffers as dicts (name, address, bytes, dtype, shape)."""
        return [b.to_dict(self.base) for b in self.buffers]

    def to_dict(self) -> dict:
        return {"name": self.name, "base": self.base, "layer": dict(self.layer), "buffers": self.layout(),
                "calls": [c.to_dict() for c in self.calls]}

    @staticmethod
    def from_dict(d: dict) -> "VendorProgram":
        base = int(d["base"])
        bufs = tuple(BufferSpec(b["name"], int(b["address"]) - base, int(b["bytes"]), b["dtype"], tuple(b["shape"]))
                     for b in d["buffers"])
        return VendorProgram(d["name"], bufs, tuple(LibCall.from_dict(c) for c in d["calls"]), base,
                             dict(d.get("layer") or {}))


def make_layout(specs) -> tuple:
    """``[(name, dtype, shape)]`` -> BufferSpecs placed one after another, each at a multiple of ALIGN."""
    out, offset = [], 0
    for name, dtype, shape in specs:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        out.append(BufferSpec(name, offset, nbytes, dtype, tuple(int(s) for s in shape)))
        offset += -(-nbytes // ALIGN) * ALIGN
    return tuple(out)


def _act(relu: bool) -> int:
    return RELU if relu else NO_ACTIVATION


def _io(name: str, a_shape, b_shape, bias_shape, c_shape, bias: bool):
    specs = [("A", "int8", a_shape), ("B", "int8", b_shape)] + ([("D", "int32", bias_shape)] if bias else [])
    return make_layout(specs + [("C", "int8", c_shape)])


# --- layer builders ------------------------------------------------------------------

def _mm_layer(bias: bool, relu: bool, scale: float) -> dict:
    return {"kind": "matmul", "bias": bool(bias), "relu": bool(relu), "scale": float(scale)}


def _conv_layer(kind, bias, relu, scale, stride, padding, dilation, groups, pool) -> dict:
    return {"kind": kind, "bias": bool(bias), "relu": bool(relu), "scale": float(scale), "stride": int(stride),
            "padding": int(padding), "dilation": int(dilation), "groups": int(groups),
            "pool": None if pool is None else [int(v) for v in pool]}


def gemm(name: str, M: int, N: int, K: int, *, bias: bool = True, relu: bool = False, scale: float = 1.0,
         dataflow: str = "ws", repeating_bias: bool = True, batch: int = 0) -> VendorProgram:
    """C[M, N] = A[M, K] @ B[K, N] (+ bias) through ``tiled_matmul_auto`` (row strides K, N, N, N).

    ``batch`` > 0: one call per batch entry on [batch, ...] buffers (bias [batch, N])."""
    df = {"ws": WS, "os": OS}.get(dataflow)
    if df is None:
        raise CodegenError(f"dataflow must be 'ws' or 'os', got {dataflow!r}", source=f"layer {name}",
                           field="dataflow")
    lead = (batch,) if batch else ()
    if batch and not repeating_bias:
        raise CodegenError("a batched GEMM repeats its bias row", source=f"layer {name}", field="repeating_bias")
    bufs = _io(name, lead + (M, K), lead + (K, N), lead + ((N,) if repeating_bias else (M, N)), lead + (M, N), bias)
    calls = tuple(LibCall.make(
        "tiled_matmul_auto", dim_I=M, dim_J=N, dim_K=K, A=Ptr("A", g * M * K), B=Ptr("B", g * K * N),
        D=Ptr("D", 4 * g * N) if bias else None, C=Ptr("C", g * M * N), stride_A=K, stride_B=N, stride_D=N,
        stride_C=N, A_scale_factor=1.0, B_scale_factor=1.0, D_scale_factor=1.0, act=_act(relu), scale=scale,
        bert_scale=0.0, repeating_bias=repeating_bias, transpose_A=False, transpose_B=False, full_C=False,
        low_D=False, weightA=0, tiled_matmul_type=df) for g in range(max(batch, 1)))
    return VendorProgram(name, bufs, calls, layer=dict(_mm_layer(bias, relu, scale), **({"batched": True} if batch else {})))


def matmul_nn(name: str, M: int, N: int, K: int, *, bias: bool = True, relu: bool = False, scale: float = 1.0,
              repeating_bias: bool = True, dataflow: str = "ws") -> VendorProgram:
    """``tiled_matmul_nn_auto`` (1x1 stride-1 convs with repeating bias; fc layers with a bias matrix)."""
    bufs = _io(name, (M, K), (K, N), (N,) if repeating_bias else (M, N), (M, N), bias)
    call = LibCall.make("tiled_matmul_nn_auto", dim_I=M, dim_J=N, dim_K=K, A=Ptr("A"), B=Ptr("B"),
                        D=Ptr("D") if bias else None, C=Ptr("C"), act=_act(relu), scale=scale,
                        repeating_bias=repeating_bias, tiled_matmul_type=WS if dataflow == "ws" else OS, check=False)
    return VendorProgram(name, bufs, (call,), layer=_mm_layer(bias, relu, scale))


def _conv_out(size: int, k: int, stride: int, padding: int, dilation: int = 1) -> int:
    return (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1


def _conv_buffers(batch, rows, cols, C, K, orows, ocols, k, bias, weight_shape=None):
    specs = [("input", "int8", (batch, rows, cols, C)), ("weights", "int8", weight_shape or (k, k, C, K))]
    if bias:
        specs.append(("bias", "int32", (K,)))
    specs.append(("output", "int8", (batch, orows, ocols, K)))
    return make_layout(specs)


def conv(name: str, batch: int, rows: int, cols: int, C: int, K: int, kernel: int, *, stride: int = 1,
         padding: int = 0, dilation: int = 1, bias: bool = True, relu: bool = False, scale: float = 1.0,
         pool: tuple | None = None, downsample_call: bool = False, conv_call: bool = False) -> VendorProgram:
    """A dense convolution as resnet50.c runs it.

    ``pool``: (size, stride, padding) of a max-pool fused into the call, or
    None.  ``downsample_call``: run a 1x1 stride-2 layer through
    ``tiled_conv_downsample`` (else a 1x1 stride-2 layer goes to
    ``tiled_conv_auto``).  A 1x1 stride-1 layer goes to ``tiled_matmul_nn_auto``, or with ``conv_call`` to
    ``tiled_conv_auto`` (as a program calling that directly does: one LOOP_CONV_WS per tile).
    """
    orows, ocols = _conv_out(rows, kernel, stride, padding, dilation), _conv_out(cols, kernel, stride, padding, dilation)
    layer = _conv_layer("conv", bias, relu, scale, stride, padding, dilation, 1, pool)
    if kernel == 1 and stride == 1 and padding == 0 and pool is None and not conv_call:
        bufs = _conv_buffers(batch, rows, cols, C, K, orows, ocols, kernel, bias)
        call = LibCall.make("tiled_matmul_nn_auto", dim_I=batch * rows * cols, dim_J=K, dim_K=C, A=Ptr("input"),
                            B=Ptr("weights"), D=Ptr("bias") if bias else None, C=Ptr("output"), act=_act(relu),
                            scale=scale, repeating_bias=True, tiled_matmul_type=WS, check=False)
        return VendorProgram(name, bufs, (call,), layer=layer)
    psize, pstride, ppad = pool if pool is not None else (1, 0, 0)
    if pool is not None:
        orows_p = (orows + 2 * ppad - psize) // pstride + 1
        ocols_p = (ocols + 2 * ppad - psize) // pstride + 1
    else:
        orows_p, ocols_p = orows, ocols
    bufs = _conv_buffers(batch, rows, cols, C, K, orows_p, ocols_p, kernel, bias)
    common = dict(input=Ptr("input"), weights=Ptr("weights"), bias=Ptr("bias") if bias else None,
                  output=Ptr("output"), act=_act(relu), scale=scale, tiled_conv_type=WS)
    if downsample_call:
        if kernel != 1 or stride != 2 or padding != 0 or pool is not None:
            raise CodegenError("tiled_conv_downsample runs 1x1 stride-2 unpadded convolutions without pooling",
                               source=f"layer {name}", field="downsample_call")
        call = LibCall.make("tiled_conv_downsample", batch_size=batch, in_row_dim=rows, in_col_dim=cols,
                            in_channels=C, out_channels=K, out_row_dim=orows, out_col_dim=ocols, in_stride=C,
                            weight_stride=K, out_stride=K, **common)
        return VendorProgram(name, bufs, (call,), layer=layer)
    call = LibCall.make("tiled_conv_auto", batch_size=batch, in_row_dim=rows, in_col_dim=cols, in_channels=C,
                        out_channels=K, out_row_dim=orows, out_col_dim=ocols, stride=stride, input_dilation=1,
                        kernel_dilation=dilation, padding=padding, kernel_dim=kernel, wrot180=False,
                        trans_output_1203=False, trans_input_3120=False, trans_weight_1203=False,
                        trans_weight_0132=False, pool_size=psize, pool_stride=pstride, pool_padding=ppad, **common)
    return VendorProgram(name, bufs, (call,), layer=layer)


def depthwise(name: str, batch: int, rows: int, cols: int, C: int, kernel: int, *, stride: int = 1,
              padding: int = 0, bias: bool = True, relu: bool = False, scale: float = 1.0) -> VendorProgram:
    """A depthwise convolution through ``tiled_conv_dw_auto`` (weights [C, KH, KW]), as mobilenet.c."""
    orows, ocols = _conv_out(rows, kernel, stride, padding), _conv_out(cols, kernel, stride, padding)
    bufs = _conv_buffers(batch, rows, cols, C, C, orows, ocols, kernel, bias, weight_shape=(C, kernel, kernel))
    call = LibCall.make("tiled_conv_dw_auto", batch_size=batch, in_row_dim=rows, in_col_dim=cols, channels=C,
                        out_row_dim=orows, out_col_dim=ocols, stride=stride, padding=padding, kernel_dim=kernel,
                        input=Ptr("input"), weights=Ptr("weights"), bias=Ptr("bias") if bias else None,
                        output=Ptr("output"), act=_act(relu), scale=scale, pool_size=1, pool_stride=0,
                        pool_padding=0, tiled_conv_type=WS)
    return VendorProgram(name, bufs, (call,), layer=_conv_layer("depthwise", bias, relu, scale, stride, padding, 1, C,
                                                                None))


def depthwise_packed(name: str, batch: int, rows: int, cols: int, C: int, kernel: int, *, pack: int = 16,
                     stride: int = 1, padding: int = 0, bias: bool = True, relu: bool = False,
                     scale: float = 1.0) -> VendorProgram:
    """A depthwise convolution as packed groups of ``pack`` channels: one ``tiled_conv_stride_auto`` per group,
    a dense ``pack`` -> ``pack`` convolution whose weights are block-diagonal (weights [KH, KW, pack, C]: entry
    [kh, kw, i, c] is the depthwise weight [c, kh, kw] where i = c % pack, zero elsewhere).  The array then
    streams ``pack`` channels per weight block instead of the one ``tiled_conv_dw_auto`` streams; the zeros are
    MACs the array does for nothing.  The weight buffer is the depthwise weights laid out so (``layer``:
    ``weights_layout`` "block_diagonal"); the reference is the depthwise convolution of its diagonal."""
    if C % pack:
        raise CodegenError(f"{C} channels do not split into groups of {pack}", source=f"layer {name}",
                           field="channels")
    orows, ocols = _conv_out(rows, kernel, stride, padding), _conv_out(cols, kernel, stride, padding)
    bufs = _conv_buffers(batch, rows, cols, C, C, orows, ocols, kernel, bias, weight_shape=(kernel, kernel, pack, C))
    calls = tuple(LibCall.make(
        "tiled_conv_stride_auto", batch_size=batch, in_row_dim=rows, in_col_dim=cols, in_channels=pack,
        out_channels=pack, out_row_dim=orows, out_col_dim=ocols, stride=stride, input_dilation=1, kernel_dilation=1,
        padding=padding, kernel_dim=kernel, in_stride=C, weight_stride=C, out_stride=C, wrot180=False,
        trans_output_1203=False, trans_input_3120=False, trans_weight_1203=False, trans_weight_0132=False,
        input=Ptr("input", g * pack), weights=Ptr("weights", g * pack), bias=Ptr("bias", 4 * g * pack) if bias else None,
        output=Ptr("output", g * pack), act=_act(relu), scale=scale, pool_size=1, pool_stride=0, pool_padding=0,
        tiled_conv_type=WS) for g in range(C // pack))
    layer = dict(_conv_layer("depthwise", bias, relu, scale, stride, padding, 1, C, None),
                 weights_layout="block_diagonal")
    return VendorProgram(name, bufs, calls, layer=layer)


def grouped(name: str, batch: int, rows: int, cols: int, C: int, K: int, kernel: int, groups: int, *,
            stride: int = 1, padding: int = 0, bias: bool = True, relu: bool = False,
            scale: float = 1.0) -> VendorProgram:
    """A grouped convolution: one ``tiled_conv_stride_auto`` per group on its channel slices.

    Weights are [KH, KW, C/groups, K] (group g owns output channels
    g*K/groups..); the call for group g reads input channels g*C/groups..
    with row stride C and writes output channels with row stride K; its
    weight rows have stride K."""
    if C % groups or K % groups:
        raise CodegenError(f"channels {C} -> {K} do not split into {groups} groups", source=f"layer {name}",
                           field="groups")
    cg, kg = C // groups, K // groups
    orows, ocols = _conv_out(rows, kernel, stride, padding), _conv_out(cols, kernel, stride, padding)
    bufs = _conv_buffers(batch, rows, cols, C, K, orows, ocols, kernel, bias, weight_shape=(kernel, kernel, cg, K))
    calls = tuple(LibCall.make(
        "tiled_conv_stride_auto", batch_size=batch, in_row_dim=rows, in_col_dim=cols, in_channels=cg,
        out_channels=kg, out_row_dim=orows, out_col_dim=ocols, stride=stride, input_dilation=1, kernel_dilation=1,
        padding=padding, kernel_dim=kernel, in_stride=C, weight_stride=K, out_stride=K, wrot180=False,
        trans_output_1203=False, trans_input_3120=False, trans_weight_1203=False, trans_weight_0132=False,
        input=Ptr("input", g * cg), weights=Ptr("weights", g * kg), bias=Ptr("bias", 4 * g * kg) if bias else None,
        output=Ptr("output", g * kg), act=_act(relu), scale=scale, pool_size=1, pool_stride=0, pool_padding=0,
        tiled_conv_type=WS) for g in range(groups))
    return VendorProgram(name, bufs, calls, layer=_conv_layer("conv", bias, relu, scale, stride, padding, 1, groups,
                                                              None))


def fc(name: str, batch: int, in_features: int, out_features: int, *, bias: bool = True, relu: bool = False,
       scale: float = 1.0) -> VendorProgram:
    """A fully connected layer as resnet50.c's fc_54: ``tiled_matmul_nn_auto`` with a [batch, out] bias."""
    return matmul_nn(name, batch, out_features, in_features, bias=bias, relu=relu, scale=scale,
                     repeating_bias=False)


# The zoo's ResNet-50 layers that Gemmini's imagenet/resnet50.c runs through ``tiled_conv_downsample`` (one
# ``tiled_matmul_auto`` per output row) instead of ``tiled_conv_auto``: conv_15 (res3a_branch1) and conv_28
# (res4a_branch1) in gemmini-rocc-tests 180c468; its res5a_branch1 (conv_47) goes to ``tiled_conv_auto``.
RESNET50_C_DOWNSAMPLE = frozenset({"res3a_branch1", "res4a_branch1"})


def from_workload(workload, *, dataflow: str = "ws", bias: bool = True, relu: bool = False, scale: float = 1.0,
                  downsample_call: bool | None = None, packed_depthwise: bool = False) -> VendorProgram:
    """The library's calls for a ``workloads`` layer (``workload.op`` from ``workloads.conv2d``/``matmul``).

    Convolutions are weight-stationary only (the library exits on OS
    convolutions), except 1x1 stride-1 layers, which are matmuls.
    ``downsample_call``: None = as resnet50.c calls the layer of that name
    (``RESNET50_C_DOWNSAMPLE``), True/False to force or refuse
    ``tiled_conv_downsample`` for a 1x1 stride-2 layer.  ``packed_depthwise``: a depthwise layer as packed
    groups (``depthwise_packed``, by the largest divisor of C up to 16) instead of mobilenet.c's
    ``tiled_conv_dw_auto``."""
    if downsample_call is None:
        downsample_call = workload.name in RESNET50_C_DOWNSAMPLE
    op = getattr(workload, "op", None) or {}
    src = f"workload {workload.name}"
    d = workload.dims
    if op.get("kind") == "matmul":
        return gemm(workload.name, d["M"], d["N"], d["K"], bias=bias, relu=relu, scale=scale, dataflow=dataflow,
                    batch=d.get("batch", 0))
    if op.get("kind") != "conv2d":
        raise CodegenError("the library's calls are known for matmuls and 2-D convolutions only "
                           f"(op {op.get('kind')!r})", source=src, field="op")
    (sh, sw), (dh, dw), (ph, pw) = op["stride"], op["dilation"], op["padding"]
    if sh != sw or dh != dw or ph != pw or d["R"] != d["S"]:
        raise CodegenError("the library takes one stride, dilation, padding and kernel size for rows and cols",
                           source=src, field="op")
    groups = int(op.get("groups", 1))
    rows, cols = op["input_hw"]
    C, K = d["C"] * groups, d["K"] * groups
    kw = dict(stride=sh, padding=ph, bias=bias, relu=relu, scale=scale)
    pointwise = d["R"] == 1 and sh == 1 and ph == 0 and groups == 1
    if dataflow != "ws" and not pointwise:
        raise CodegenError("Gemmini's library runs convolutions weight-stationary only", source=src,
                           field="dataflow")
    if groups == 1:
        if pointwise and dataflow != "ws":
            prog = conv(workload.name, d["N"], rows, cols, C, K, 1, bias=bias, relu=relu, scale=scale)
            call = prog.calls[0]
            return VendorProgram(prog.name, prog.buffers, (LibCall.make(call.fn, **dict(call.kw,
                                                                                        tiled_matmul_type=OS)),),
                                 layer=prog.layer)
        return conv(workload.name, d["N"], rows, cols, C, K, d["R"], dilation=dh, downsample_call=downsample_call
                    and d["R"] == 1 and sh == 2 and ph == 0 and rows % 2 == 0 and rows == cols, **kw)
    if dh != 1:
        raise CodegenError("dilated depthwise/grouped convolutions have no library call", source=src,
                           field="dilation")
    if groups == C == K:
        if packed_depthwise:  # groups of the most channels up to DIM that split C evenly
            pack = max(p for p in range(1, 17) if C % p == 0)
            if pack < 2:
                raise CodegenError(f"{C} channels have no divisor from 2 to 16 to pack by", source=src,
                                   field="channels")
            return depthwise_packed(workload.name, d["N"], rows, cols, C, d["R"], pack=pack, **kw)
        return depthwise(workload.name, d["N"], rows, cols, C, d["R"], **kw)
    return grouped(workload.name, d["N"], rows, cols, C, K, d["R"], groups, **kw)
