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

The vendor's greedy tile rules themselves are ``costmodel.gemmini_library_tiles``
(``gemmini.vendor`` uses the same functions); a layer they cannot tile is a
``SchedulingError`` here.

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

import time
from dataclasses import dataclass

from costmodel.gemmini_library_tiles import (CONV_ARGS, GemminiTileConfig, LibraryTileError, tiled_conv_auto_tiles,
                                             tiled_matmul_auto_tiles)
from mappings import Mapping
from workloads import LoopNest

from ..schedule import Schedule, SchedulingError, SolverStats
from .gemmini_mapping import (CONV_ORDER, SHRINK_ORDER, check_preset, conv_mapping, fit_extents, matmul_mapping,
                              pointwise_mapping, unrollable, row_extents, tile_extent)

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
    try:
        return _library_mapping(workload, arch)
    except LibraryTileError as err:  # the library's rule cannot tile it: no schedule from this scheduler
        raise SchedulingError(err.reason, source=err.source, field=err.field) from None


def _library_mapping(workload: LoopNest, arch) -> tuple[Mapping, dict]:
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


__all__ = ["gemmini_default", "gemmini_default_mapping"]
