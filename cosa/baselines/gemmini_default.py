"""The vendor's tiling heuristic ("gemmini-default"): the tiles Gemmini's C library picks for a layer,
turned into a Mapping on the gemmini preset.

Which library call a layer gets follows Gemmini's own networks
(gemmini-rocc-tests ``imagenet/resnet50.c``, ``imagenet/mobilenet.c``): a
matmul goes to ``tiled_matmul_auto``; a 1x1 stride-1 unpadded convolution to
``tiled_matmul_nn_auto`` -> ``tiled_matmul_auto`` on the [N*H*W, C] image
(kind "conv-as-matmul"); every other dense convolution to
``tiled_conv_auto``, whose 1x1 stride-2 layers on even images take the
library's downsample path (half the input rows and columns moved in); a
depthwise one to ``tiled_conv_dw_auto``; a grouped one to one
``tiled_conv_stride_auto`` per group.
``extra["library_call"]`` names the call.  The exact command stream the
library issues for a layer, checked instruction for instruction against the
real gemmini.h, is ``gemmini.vendor``; this module only turns its tile
choice into a Mapping for the cost model and the MIP's warm start.

The tile functions reproduce the vendor's greedy rules step by step (units:
DIM-blocks for matmul, elements for conv; footprints in scratchpad and
accumulator rows) and are the ones ``gemmini.vendor`` uses.  One deliberate
reading: for the output-stationary matmul the starting ``tile_K`` is
``(BANK_NUM*BANK_ROWS/2/DIM) / floor(sqrt(ACC_ROWS/DIM))`` as in the vendor's
source (its ``partition_rows`` is half the scratchpad).

Turning tiles into a Mapping.  The vendor pads every dim to DIM blocks; a
Mapping's factors must multiply exactly to the loop bounds.  Rule: each tile
extent is a divisor of the loop bound that is <= the vendor's tile extent in
elements (``tile_blocks*DIM`` for matmul, the tile argument itself for conv):
for a dim the array unrolls, the divisor whose own largest divisor <= DIM is
largest, ties to the larger extent (N = 2304 with a vendor tile of 80
becomes 64, not 72 = 6 x 12 columns); for the other dims the largest
divisor.  The rows of a conv-as-matmul tile fill the flattened [N, Q, P]
image P first (``row_extents``).  Each spatial factor is the largest divisor
of its tile extent that is <= DIM.  Both the vendor's arguments and the
extents used are recorded in ``Schedule.extra``.

Loop structure on the gemmini preset (levels DRAM, Scratchpad, Accumulator,
Registers), following the order in which the vendor walks its tiles:

* matmul WS: DRAM walks tiles i, j, k (k innermost); the accumulator tile is
  the whole i x j tile; level 2 walks DIM x DIM weight blocks (j, then k)
  with k on the array rows and j on the columns; all i rows of the tile
  stream through each preloaded weight block (level 3).  A conv-as-matmul
  has i = (N, Q, P), j = K, k = C.
* matmul OS: DRAM as for WS; level 2 walks output blocks (i, then j) with i
  on the rows (P for a conv-as-matmul) and j on the columns; every k step of
  the tile accumulates in the PEs (level 3).
* conv (WS only): DRAM walks batch, porow, pocol, poch, krow, kcol, kch (kch
  innermost); level 2 walks output-channel blocks, kernel rows, kernel cols and
  input-channel blocks with kch on the rows and och on the columns; all pixels
  of the tile stream through each weight block.  Pooling is not modelled.
* grouped conv (one ``tiled_conv_stride_auto`` per group): G outermost at
  DRAM, then the conv walk on the group's channels; depthwise
  (``tiled_conv_dw_auto``, one channel at a time on one PE): G inside the
  pixel tiles (batch, porow, pocol, channel, krow, kcol), as the library.

How this Mapping still differs from the library's real stream, and which way
each difference biases a comparison against it:

* Divisor tiles instead of ragged ones.  The library keeps its tile size and
  runs a smaller last tile (and partial DIM blocks); the Mapping uses an exact
  divisor <= the vendor's extent, so its tiles are never larger and usually
  more numerous (M = 100 rows with a 112-row tile stays 100; 3136 rows with an
  80-row tile become 64).  More, smaller tiles mean more weight reloads and
  DRAM round trips, and a divisor below DIM leaves array columns idle where
  the library pads: biased against the vendor (the Mapping looks worse).
* Reuse.  The library skips a reload only under ``a_reuse``/``b_reuse``
  (I0*K0 <= 2, J0*K0 <= 2 for matmuls; the analogous tile counts for convs)
  and otherwise moves every tile in again; the cost model keeps any tile whose
  indices did not change resident.  Biased in the vendor's favour (fewer
  bytes charged than the library moves).
* Overlap.  The library issues LOOP_WS / LOOP_CONV_WS, whose unrollers keep
  two loops in flight: it halves the scratchpad and accumulator to overlap
  transfers with compute.  The Mapping pays the halved capacity (the tiles
  above) but the cost model and our code generator serialise DRAM with
  compute, so the vendor gets none of the overlap: biased against the vendor.
* Other calls.  resnet50.c runs two of its three 1x1 stride-2 branches
  through ``tiled_conv_downsample`` (one ``tiled_matmul_auto`` per output
  row); the Mapping models ``tiled_conv_auto``'s downsample path for all of
  them.  Fused pooling has a stream in ``gemmini.vendor`` but no Mapping.
* Depthwise layers use one PE in the Mapping; the library's loop unroller
  packs up to DIM / 1 kernel columns of one channel into the array rows
  (``max_pixels_per_row``), so a few rows work: biased against the vendor.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

from mappings import Mapping
from workloads import LoopNest

from ..schedule import Schedule, SchedulingError, SolverStats
from .gemmini_mapping import (CONV_ORDER, SHRINK_ORDER, check_preset, conv_mapping, fit_extents, matmul_mapping,
                              pointwise_mapping, unrollable, row_extents, tile_extent)
from .tile_shrink import MAX_SHRINK_STEPS, skip_rounds
from .tile_shrink import skip_run as _skip_run

ACC_BYTES_PER_ENTRY = 4
"""The accumulator stores int32 partial sums: one row is DIM * 4 bytes."""


@dataclass(frozen=True)
class GemminiTileConfig:
    """The sizes the vendor heuristic reads (all in rows of DIM elements).

    ``bank_rows``: rows per scratchpad bank (a row is DIM int8 = DIM bytes);
    ``acc_rows``: accumulator rows (a row is DIM int32 = 4*DIM bytes).
    """

    dim: int = 16
    bank_num: int = 4
    bank_rows: int = 4096
    acc_rows: int = 1024

    def __post_init__(self):
        for name in ("dim", "bank_num", "bank_rows", "acc_rows"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise SchedulingError(f"must be a positive integer, got {value!r}", source="GemminiTileConfig",
                                      field=name)

    @staticmethod
    def from_params(dim: int = 16, scratchpad_kib: float = 256, accumulator_kib: float = 64, sp_banks: int = 4,
                    acc_banks: int = 2) -> "GemminiTileConfig":
        """From the preset's parameters: BANK_ROWS = scratchpad rows / banks,
        ACC_ROWS = accumulator bytes / (DIM*4).  ``acc_banks`` does not enter the heuristic."""
        sp_rows = int(scratchpad_kib * 1024) // dim
        return GemminiTileConfig(dim=int(dim), bank_num=int(sp_banks), bank_rows=sp_rows // int(sp_banks),
                                 acc_rows=int(accumulator_kib * 1024) // (int(dim) * ACC_BYTES_PER_ENTRY))

    @staticmethod
    def from_arch(arch) -> "GemminiTileConfig":
        params = getattr(arch, "params", None) or {}
        missing = [k for k in ("dim", "scratchpad_kib", "accumulator_kib", "sp_banks") if k not in params]
        if missing:
            raise SchedulingError(
                f"the gemmini-default heuristic needs a gemmini preset; params lack {missing}",
                source=f"arch {getattr(arch, 'name', '?')}", field="params")
        return GemminiTileConfig.from_params(params["dim"], params["scratchpad_kib"], params["accumulator_kib"],
                                             params["sp_banks"], params.get("acc_banks", 2))


@dataclass(frozen=True)
class MatmulTiles:
    """``tiled_matmul_auto``'s choice, in DIM-blocks."""

    tile_I: int
    tile_J: int
    tile_K: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ConvTiles:
    """``tiled_conv_auto``'s choice, in elements (pooled output rows/cols, channels, kernel taps)."""

    batches: int
    porows: int
    pocols: int
    pochs: int
    krows: int
    kcols: int
    kchs: int

    def to_dict(self) -> dict:
        return asdict(self)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --- tiled_matmul_auto ------------------------------------------------------

def matmul_spad_rows(tile_I: int, tile_J: int, tile_K: int, dim: int) -> int:
    """Scratchpad rows of one A tile plus one B tile."""
    return (tile_I * tile_K + tile_K * tile_J) * dim


def matmul_acc_rows(tile_I: int, tile_J: int, dim: int) -> int:
    """Accumulator rows of one C tile."""
    return tile_I * tile_J * dim


def tiled_matmul_auto_tiles(I: int, J: int, K: int, config: GemminiTileConfig | None = None,
                            dataflow: str = "ws") -> MatmulTiles:
    """The vendor's tile choice for C[I, J] = A[I, K] * B[K, J] (sizes in elements).

    WS is double-buffered (half the scratchpad and accumulator); OS uses both whole.
    Start from the square-ish tile, then grow J, I, K by one block at a time
    while everything fits, until a full pass changes nothing.
    """
    config = config or GemminiTileConfig()
    for name, value in (("I", I), ("J", J), ("K", K)):
        if not isinstance(value, int) or value < 1:
            raise SchedulingError(f"must be a positive integer, got {value!r}", source="tiled_matmul_auto",
                                  field=name)
    dim = config.dim
    Ip, Jp, Kp = _ceil_div(I, dim), _ceil_div(J, dim), _ceil_div(K, dim)
    if dataflow == "ws":
        max_spad_rows = config.bank_num * config.bank_rows // 2
        max_acc_rows = config.acc_rows // 2
        max_tile_ij = math.isqrt(max_acc_rows // dim)
        max_tile_k = (max_spad_rows // 2 // dim) // max(max_tile_ij, 1)
    elif dataflow == "os":
        max_spad_rows = config.bank_num * config.bank_rows
        max_acc_rows = config.acc_rows
        max_tile_ij = math.isqrt(max_acc_rows // dim)
        max_tile_k = (max_spad_rows // 2 // dim) // max(max_tile_ij, 1)
    else:
        raise SchedulingError(f"dataflow must be 'ws' or 'os', got {dataflow!r}", source="tiled_matmul_auto",
                              field="dataflow")
    tile_I, tile_J, tile_K = min(Ip, max_tile_ij), min(Jp, max_tile_ij), min(Kp, max_tile_k)
    if min(tile_I, tile_J, tile_K) < 1:
        raise SchedulingError(f"the memories are too small for one DIM x DIM block ({config})",
                              source="tiled_matmul_auto", field="config")

    def fits(ti: int, tj: int, tk: int) -> bool:
        return (matmul_spad_rows(ti, tj, tk, dim) <= max_spad_rows
                and matmul_acc_rows(ti, tj, dim) <= max_acc_rows)

    while True:
        increased = False
        if tile_J + 1 <= Jp and fits(tile_I, tile_J + 1, tile_K):
            tile_J += 1
            increased = True
        if tile_I + 1 <= Ip and fits(tile_I + 1, tile_J, tile_K):
            tile_I += 1
            increased = True
        if tile_K + 1 <= Kp and matmul_spad_rows(tile_I, tile_J, tile_K + 1, dim) <= max_spad_rows:
            tile_K += 1
            increased = True
        if not increased:
            break
    return MatmulTiles(tile_I, tile_J, tile_K)


# --- tiled_conv_auto --------------------------------------------------------

CONV_ARGS = ("batches", "porows", "pocols", "pochs", "krows", "kcols", "kchs")
_POROWS, _POCOLS, _POCHS, _KCHS = 1, 2, 3, 6


def conv_rows(args, config: GemminiTileConfig, stride: int = 1, kernel_dilation: int = 1, pool_size: int = 1,
              pool_stride: int = 1, downsample: bool = False) -> tuple[int, int]:
    """(scratchpad rows of inputs + weights, accumulator rows of outputs) of one conv tile.

    ``downsample``: the library's stride-2 1x1 path, which moves in every other
    input row and column only (input rows and cols halved, rounding down)."""
    batches, porows, pocols, pochs, krows, kcols, kchs = args
    dim = config.dim
    orows = porows * pool_stride + pool_size - 1
    ocols = pocols * pool_stride + pool_size - 1
    krows_dilated = krows + (kernel_dilation - 1) * (krows - 1)
    kcols_dilated = kcols + (kernel_dilation - 1) * (kcols - 1)
    irows = orows * stride + krows_dilated - 1
    icols = ocols * stride + kcols_dilated - 1
    in_blocks, out_blocks = _ceil_div(kchs, dim), _ceil_div(pochs, dim)
    a_rows = in_blocks * batches * (irows >> int(downsample)) * (icols >> int(downsample))
    b_rows = out_blocks * kcols * krows * kchs
    c_rows = out_blocks * batches * orows * ocols
    return a_rows + b_rows, c_rows


def tiled_conv_auto_tiles(batch_size: int, out_rows: int, out_cols: int, out_channels: int, in_channels: int,
                          kernel_rows: int, kernel_cols: int | None = None, config: GemminiTileConfig | None = None,
                          *, stride: int = 1, kernel_dilation: int = 1, pool_size: int = 1,
                          pool_stride: int = 1, pool_padding: int = 0, downsample: bool = False) -> ConvTiles:
    """The vendor's tile choice for a WS convolution (sizes in elements, no pooling by default).

    ``out_rows``/``out_cols`` are the convolution's output (before pooling);
    pooling (size, stride, padding) tiles the pooled output, as the library
    does; ``downsample`` is its stride-2 1x1 path (see ``conv_rows``).

    Start from the whole layer; while the tile overflows half the scratchpad or
    half the accumulator, shrink the largest argument (ties: the earliest; skip
    pocols while pocols <= DIM and porows > 1): channels to the next lower
    multiple of DIM (by DIM when already one, never below 1), others by 1.
    Then grow pocols by 1 while it fits, then grow each argument in list order
    by 1 when it fits and stays within the layer, until a pass changes nothing.
    """
    config = config or GemminiTileConfig()
    kernel_cols = kernel_rows if kernel_cols is None else kernel_cols
    src = "tiled_conv_auto"
    values = dict(batch_size=batch_size, out_rows=out_rows, out_cols=out_cols, out_channels=out_channels,
                  in_channels=in_channels, kernel_rows=kernel_rows, kernel_cols=kernel_cols, stride=stride,
                  kernel_dilation=kernel_dilation, pool_size=pool_size, pool_stride=pool_stride)
    for name, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise SchedulingError(f"must be a positive integer, got {value!r}", source=src, field=name)
    if not isinstance(pool_padding, int) or pool_padding < 0:
        raise SchedulingError(f"must be a non-negative integer, got {pool_padding!r}", source=src,
                              field="pool_padding")
    dim = config.dim
    pool_out_rows = (out_rows + 2 * pool_padding - pool_size) // pool_stride + 1
    pool_out_cols = (out_cols + 2 * pool_padding - pool_size) // pool_stride + 1
    args = [batch_size, pool_out_rows, pool_out_cols, out_channels, kernel_rows, kernel_cols, in_channels]
    max_args = list(args)
    max_spad_rows = config.bank_num * config.bank_rows // 2
    max_acc_rows = config.acc_rows // 2

    def fits(candidate) -> bool:
        spad, acc = conv_rows(candidate, config, stride, kernel_dilation, pool_size, pool_stride, downsample)
        return spad <= max_spad_rows and acc <= max_acc_rows

    steps = 0
    while not fits(args):
        _skip_rounds(args, dim, fits)
        if fits(args):
            break
        steps += 1
        if steps > MAX_SHRINK_STEPS:  # several huge arguments shrinking in turn: give up rather than hang
            raise SchedulingError(f"the vendor's tile search takes more than {MAX_SHRINK_STEPS:,} shrink steps "
                                  f"on this layer (output {out_rows:,} x {out_cols:,}, {in_channels:,} -> "
                                  f"{out_channels:,} channels); use another scheduler", source=src, field="tiles")
        max_val, max_idx = -1, -1
        for i, value in enumerate(args):
            # the vendor keeps pocols (the array's streamed rows) when it can shrink porows instead
            if not (i == _POCOLS and value <= dim and args[_POROWS] > 1) and value > max_val:
                max_val, max_idx = value, i
        if max_val <= 1:
            raise SchedulingError(f"even a 1-element tile overflows the memories ({config})", source=src,
                                  field="config")
        if max_idx in (_POCHS, _KCHS):
            value = args[max_idx]
            value = (value // dim) * dim if value % dim else value - dim
            args[max_idx] = max(value, 1)
        else:
            args[max_idx] -= 1
        _skip_run(args, max_idx, dim if max_idx in (_POCHS, _KCHS) else 1, dim, fits)

    while args[_POCOLS] + 1 <= max_args[_POCOLS]:
        candidate = list(args)
        candidate[_POCOLS] += 1
        if not fits(candidate):
            break
        args = candidate

    changed = True
    while changed:
        changed = False
        for i in range(len(args)):
            candidate = list(args)
            candidate[i] += 1
            if candidate[i] <= max_args[i] and fits(candidate):
                args = candidate
                changed = True
    return ConvTiles(*args)


def _skip_rounds(args: list[int], dim: int, fits) -> None:
    skip_rounds(args, dim, fits, channels=(_POCHS, _KCHS))


# --- recognising the workload ----------------------------------------------

@dataclass(frozen=True)
class _MatmulShape:
    batch: tuple[str, ...]
    i: str
    j: str
    k: str


@dataclass(frozen=True)
class _ConvShape:
    stride: int
    dilation: int
    padding: tuple = (0, 0)  # (rows, cols)
    input_hw: tuple | None = None  # (rows, cols) of the input image when known

    @property
    def pointwise(self) -> bool:
        """A 1x1 stride-1 unpadded convolution: Gemmini's networks run it as a matmul."""
        return self.stride == 1 and self.padding == (0, 0)

    def downsample(self, kernel: int) -> bool:
        """The library's stride-2 1x1 path: unpadded, even input rows and cols (no pooling in our IR)."""
        hw = self.input_hw
        return (self.stride == 2 and kernel == 1 and self.padding == (0, 0) and hw is not None
                and hw[0] % 2 == 0 and hw[1] % 2 == 0)


def _matmul_shape(workload: LoopNest) -> _MatmulShape | None:
    """C[i, j] += A[i, k] * B[k, j] (plus dims indexing all three: batch), projective."""
    inputs = [t for t in workload.inputs if t.role == "input"]
    weights = [t for t in workload.inputs if t.role == "weight"]
    if len(inputs) != 1 or len(weights) != 1 or len(workload.tensors) != 3:
        return None
    a, b, c = inputs[0], weights[0], workload.output
    if not all(t.is_projective() for t in (a, b, c)):
        return None
    i = sorted((a.dims & c.dims) - b.dims)
    j = sorted((b.dims & c.dims) - a.dims)
    k = sorted((a.dims & b.dims) - c.dims)
    batch = tuple(d for d in workload.dims if d in a.dims and d in b.dims and d in c.dims)
    if len(i) != 1 or len(j) != 1 or len(k) != 1 or len(batch) + 3 != len(workload.dims):
        return None
    return _MatmulShape(batch, i[0], j[0], k[0])


_CONV_DIMS = {"N", "K", "C", "P", "Q", "R", "S"}


def _conv_shape(workload: LoopNest) -> _ConvShape | None:
    """A convolution with the builder's dim names (N K C P Q R S, plus G for grouped ones)."""
    if set(workload.dims) - {"G"} != _CONV_DIMS:
        return None
    inputs = [t for t in workload.inputs if t.role == "input"]
    if len(inputs) != 1 or len(workload.tensors) != 3:
        return None
    strides, dilations, pads = {}, {}, {}
    for expr in inputs[0].indices:
        for out_dim, k_dim in (("P", "R"), ("Q", "S")):
            if expr.coef(out_dim):
                strides[out_dim] = expr.coef(out_dim)
                dilations[k_dim] = expr.coef(k_dim) or 1
                pads[out_dim] = -expr.offset
    if set(strides) != {"P", "Q"}:
        return None
    if strides["P"] != strides["Q"] or dilations["R"] != dilations["S"]:
        raise SchedulingError("the vendor's tiled_conv_auto takes one stride and one dilation for rows and "
                              f"columns; got strides {strides} and dilations {dilations}",
                              source=f"workload {workload.name}", field="op")
    hw = (workload.op or {}).get("input_hw")
    return _ConvShape(strides["P"], dilations["R"], (pads["Q"], pads["P"]), tuple(hw) if hw else None)


# --- tiles to a Mapping: gemmini_mapping ------------------------------------

_CONV_ARG_DIM = dict(zip(CONV_ARGS, CONV_ORDER))


def gemmini_default_mapping(workload: LoopNest, arch) -> tuple[Mapping, dict]:
    """The vendor heuristic's Mapping on a gemmini preset and the facts behind it (``extra``)."""
    config = GemminiTileConfig.from_arch(arch)
    check_preset(arch)
    dataflow = str(arch.params.get("dataflow") or arch.dataflow or "ws").lower()
    src = f"workload {workload.name}"
    matmul = _matmul_shape(workload)
    if matmul is not None:
        i, j, k = matmul.i, matmul.j, matmul.k
        bounds = workload.dims
        tiles = tiled_matmul_auto_tiles(bounds[i], bounds[j], bounds[k], config, dataflow)
        vendor = {i: tiles.tile_I * config.dim, j: tiles.tile_J * config.dim, k: tiles.tile_K * config.dim}
        on_array = {j, k} if dataflow == "ws" else {i, j}
        extents = {d: tile_extent(bounds[d], vendor[d], config.dim, d in on_array) for d in (i, j, k)}
        names = {"i": i, "j": j, "k": k}
        shrink = {lv: tuple(names[n] for n in order) for lv, order in SHRINK_ORDER["matmul"].items()}
        mapping, extents, shrunk = fit_extents(
            workload, arch, extents, lambda e: matmul_mapping(workload, matmul, e, config.dim, dataflow), shrink,
            on_array, config.dim)
        kind, tile_args, call = "matmul", tiles.to_dict(), "tiled_matmul_auto"
    else:
        conv = _conv_shape(workload)
        if conv is None:
            raise SchedulingError("the gemmini-default heuristic handles matmuls (C[i,j] += A[i,k]*B[k,j]) and "
                                  "dense convolutions (dims N K C P Q R S) only", source=src, field="dims")
    b = workload.dims
    if matmul is None and b["R"] == 1 and b["S"] == 1 and conv.pointwise and b.get("G", 1) == 1:
        # resnet50.c / mobilenet.c: tiled_matmul_nn_auto on the [N*Q*P, C] image
        tiles = tiled_matmul_auto_tiles(b["N"] * b["Q"] * b["P"], b["K"], b["C"], config, dataflow)
        extents = row_extents(b, tiles.tile_I * config.dim)
        extents.update({d: tile_extent(b[d], t * config.dim, config.dim, d == "K" or dataflow == "ws")
                        for d, t in (("K", tiles.tile_J), ("C", tiles.tile_K))})
        extents.update(R=1, S=1)
        mapping, extents, shrunk = fit_extents(
            workload, arch, extents, lambda e: pointwise_mapping(workload, e, config.dim, dataflow),
            SHRINK_ORDER["conv"], {"K"} | ({"C"} if dataflow == "ws" else set()), config.dim)
        kind, tile_args, call = "conv-as-matmul", tiles.to_dict(), "tiled_matmul_nn_auto"
    elif matmul is None:
        if dataflow != "ws":
            raise SchedulingError("the vendor's tiled_conv_auto runs convolutions weight-stationary only; "
                                  f"the arch's dataflow is {dataflow!r}", source=f"arch {arch.name}",
                                  field="dataflow")
        groups = b.get("G", 1)
        depthwise = groups > 1 and b["K"] == 1 and b["C"] == 1
        if groups > 1 and conv.dilation != 1:
            raise SchedulingError("the library has no call for dilated grouped or depthwise convolutions",
                                  source=src, field="dilation")
        # tiled_conv_stride_auto (one call per group) takes the downsample path as tiled_conv_auto does
        downsample = b["S"] == 1 and conv.downsample(b["R"]) and not depthwise
        tiles = tiled_conv_auto_tiles(b["N"], b["Q"], b["P"], b["K"], b["C"], b["S"], b["R"], config,
                                      stride=conv.stride, kernel_dilation=conv.dilation, downsample=downsample)
        extents = {_CONV_ARG_DIM[name]: tile_extent(b[_CONV_ARG_DIM[name]], value, config.dim,
                                                    _CONV_ARG_DIM[name] in ("C", "K"))
                   for name, value in tiles.to_dict().items()}
        unroll = unrollable(arch, workload, ("C", "K"))
        if groups > 1 and not depthwise and len(unroll) < 2:
            raise SchedulingError(f"the preset cannot unroll a grouped layer's channels ({sorted({'C', 'K'} - unroll)}"
                                  "), so the library's per-group tiles do not map onto it; its command stream is "
                                  "gemmini.vendor.calls.grouped", source=src, field="G")
        mapping, extents, shrunk = fit_extents(
            workload, arch, extents, lambda e: conv_mapping(workload, e, config.dim, unroll), SHRINK_ORDER["conv"],
            {"C", "K"} & set(unroll), config.dim)
        kind = "depthwise" if depthwise else ("grouped" if groups > 1 else "conv")
        call = {"depthwise": "tiled_conv_dw_auto", "grouped": "tiled_conv_stride_auto per group"}.get(
            kind, "tiled_conv_auto")
        tile_args = tiles.to_dict()
    extra = {
        "kind": kind,
        "library_call": call,
        "dataflow": dataflow,
        "tile_args": tile_args,
        "tile_extents": extents,
        # tiles shrunk below the vendor's where exact divisor tiles overflow a level its padded ones fit
        "shrunk": {d: list(v) for d, v in shrunk.items()},
        "padding_rule": "tile extent = a divisor of the bound <= the vendor's tile extent (for dims on the "
                        "array: the one with the largest divisor <= DIM, then the largest; else the largest); "
                        "spatial factor = largest divisor of the tile extent <= DIM",
    }
    return mapping, extra


def gemmini_default(workload: LoopNest, arch) -> Schedule:
    """Schedule ``workload`` with the vendor's heuristic on a gemmini preset (validated and costed)."""
    from costmodel import evaluate
    from mappings import MappingError, validate

    start = time.perf_counter()
    mapping, extra = gemmini_default_mapping(workload, arch)
    build_s = time.perf_counter() - start
    try:
        validate(mapping, workload, arch)
    except MappingError as err:  # the heuristic's tile does not fit this preset
        raise SchedulingError(f"the vendor heuristic's mapping is not valid here: {err}",
                              source=f"workload {workload.name}", field="mapping") from err
    cost = evaluate(workload, arch, mapping)
    solve_s = time.perf_counter() - start - build_s
    stats = SolverStats(solver="heuristic", status="ok", build_s=build_s, solve_s=solve_s, evaluated=1,
                        objective=float(cost.cycles))
    return Schedule(workload, arch, mapping, cost, "gemmini-default", stats, extra)
