"""A layer run by Gemmini's own loop instructions, with tile arguments chosen by cosa.

On a Gemmini SoC the core issues every command of an explicit stream itself, one RoCC instruction after
another, while the loop instructions (LOOP_WS, LOOP_CONV_WS) are unrolled into commands by the
accelerator.  Measured on Gemmini's real RTL (Chipyard), that issue cost is what makes an explicit stream
slower than the library's loop-instruction stream for the same layer.  This module therefore schedules
into the library's form: the library call Gemmini's networks make for the layer
(``gemmini.vendor.calls.from_workload``) run with tile arguments chosen here instead of the library's own
(``gemmini.vendor.given_tiles_stream``).  The library's loop order, inner loops and double buffering stay
the library's; only the tile sizes change, so the library itself is the exact baseline.

With a ``chooser`` (the command line passes ``cosa.mip.loop_tiles``: a MIP over the library call's tile
arguments on ``costmodel.gemmini_loops``'s model of the loop unrollers, and ``cosa.mip.conv_tiles`` on
``costmodel.gemmini_conv_loops``'s for the convolution calls) a call takes the chooser's tiles, timed once
beside the library's own for the report; ``budget`` > 0 then polishes them (the convolution model covers a
max-pool fused into the stores, as ``resnet50.c``'s first layer).  Without one, or for a call the models do
not cover (a dilated convolution), ``tune_tiles`` starts from the mapping's
scratchpad tile (``codegen.c.library_tile_space``; the MIP's when
the mapping comes from cosa) and from the library's own choice, climbs through neighbouring tile
arguments that the library accepts (each argument doubled, halved, one more or one less; channel
arguments by DIM), and keeps the stream with the fewest cycles on our timing model
(``gemmini.sim.timing``).  The library's own stream is always a candidate, so on the timing model the
result is never slower than the library; on real hardware that is a measurement, not a guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from . import isa
from .codegen import generate
from .codegen.c import library_tile_space
from .config import GemminiConfig
from .errors import CodegenError
from .sim.timing import timing
from .vendor import DEFAULT_PARAMS, LibParams, stream
from .vendor.calls import VendorProgram, from_workload

#: Library calls whose tile arguments a program may choose (``gemmini.vendor.given_tiles_stream``).
TILED_CALLS = ("tiled_matmul_auto", "tiled_matmul_nn_auto", "tiled_conv_auto", "tiled_conv_stride_auto")
DEFAULT_BUDGET = 48
CONV_BUDGET = 16
"""Streams timed for a call the chooser does not model (a dilated convolution) when the budget is 0."""


@dataclass(frozen=True)
class LoopSchedule:
    """The library's calls for a layer with chosen tile arguments.

    vendor: the calls that run (``VendorProgram``; its buffers, inputs and reference are the library's): the
    library's own, or where the library's calls take no tile arguments cosa's own calls (``cosa_calls``: the
    downsample path through ``tiled_conv_auto``, depthwise layers as packed groups: ``cosa_calls``) when
    those win.
    tiles: the chosen tile arguments (None: the library's own choice won).  cycles: timing-model cycles of
    the chosen stream; library_cycles: of the library's own choice.  start: the mapping's tile as library
    arguments (None when the layer's call takes no tile arguments).  evaluated: streams timed.
    tried: tiles -> cycles of every stream timed (None: the library's own).  params: the library's
    configuration the streams were generated for (``library_params`` of the hardware's config).
    found_from: the start whose descent reached the chosen tiles ("mapping": the mapping's tile;
    "library": the library's own tile arguments; "library's own": nothing timed beat the library).
    """

    vendor: VendorProgram
    tiles: tuple | None
    cycles: float
    library_cycles: float
    start: tuple | None
    evaluated: int
    tried: dict = field(default_factory=dict, compare=False, repr=False)
    params: LibParams = DEFAULT_PARAMS
    found_from: str = "library's own"
    tile_seconds: float = 0.0

    def stream(self) -> list:
        """The command triples (loop instructions included) the SoC runs."""
        return stream(self.vendor, self.params, tiles=self.tiles)

    @property
    def speedup(self) -> float:
        """Library cycles over chosen cycles on the timing model (>= 1)."""
        return self.library_cycles / self.cycles

    def to_dict(self) -> dict:
        return {"layer": self.vendor.name, "tiles": list(self.tiles) if self.tiles else None,
                "model_cycles": self.cycles, "library_model_cycles": self.library_cycles,
                "start": list(self.start) if self.start else None, "evaluated": self.evaluated,
                "found_from": self.found_from, "tile_seconds": round(self.tile_seconds, 3)}


def _neighbours(tiles: tuple, limits: list, channel_step: tuple) -> list:
    channels, step = channel_step or ((), 1)
    out = []
    for i, t in enumerate(tiles):
        unit = step if i in channels else 1
        for v in (t * 2, t // 2, t + unit, t - unit):
            v = min(max(unit if i in channels else 1, v), limits[i])
            if v != t:
                out.append(tiles[:i] + (v,) + tiles[i + 1:])
    return out


def _clamp(tiles, limits) -> tuple:
    return tuple(max(1, min(int(t), lim)) for t, lim in zip(tiles, limits))


def tune_tiles(workload, mapping, arch, *, config: GemminiConfig | None = None, bias: bool = True,
               relu: bool = False, scale: float | str = "auto", budget: int = DEFAULT_BUDGET,
               vendor: VendorProgram | None = None, chooser=None) -> LoopSchedule:
    """The library's calls for ``workload`` with the tile arguments that give the fewest timing-model
    cycles among those ``tune_tiles`` visits (module docstring), starting from ``mapping``'s tile.

    ``budget``: the most streams timed (the library's own included).  Deterministic: the same inputs
    visit the same tiles in the same order.  A layer whose library call takes no tile arguments
    (depthwise, the downsample path) gets the library's own stream (``tiles`` None), or with a ``chooser``
    cosa's own calls (``cosa_calls``) when those win.  ``vendor``: the library's calls when they are not
    ``from_workload``'s for the layer (a network's layer; a convolution with the max-pool of the next layer
    fused, as ``resnet50.c`` calls its first layer).  ``chooser(problem, machine)``
    -> tile arguments, for ``problem`` = ``loop_problem(vendor)``: picks the calls' tiles (module docstring);
    with it ``budget`` may be 0 (no search: the chooser's tiles run)."""
    import time

    timed_s = [0.0]  # seconds spent on timing-model runs (the report's, not the choice's)
    if not isinstance(budget, int) or budget < (0 if chooser else 1):
        raise CodegenError(f"must be a {'non-negative' if chooser else 'positive'} number of streams, got "
                           f"{budget!r}", source="tune_tiles", field="budget")
    program = generate(workload, mapping, arch, bias=bias, scale=scale)
    config = config or program.config
    vendor = vendor or from_workload(workload, dataflow=program.dataflow, bias=program.bias,
                                     relu=relu or program.relu, scale=program.scale)
    params = library_params(config)
    if replace(params, loop_conv_layout=DEFAULT_PARAMS.loop_conv_layout) != DEFAULT_PARAMS:
        raise CodegenError("the library's streams are reproduced for gemmini_params.h's defaults only (DIM 16, "
                           "256 KiB scratchpad in 4 banks, 64 KiB accumulator, 64-byte mvin rows)",
                           source=f"workload {workload.name}", field="config")
    tried: dict = {}
    library_vendor = vendor

    def cycles(tiles):
        if tiles not in tried:
            t0 = time.perf_counter()
            program_ = library_vendor if tiles is None else vendor
            tried[tiles] = float(timing(isa.decode_stream(stream(program_, params, tiles=tiles)), config).cycles)
            timed_s[0] += time.perf_counter() - t0
        return tried[tiles]

    library = cycles(None)
    library_s = timed_s[0]
    if chooser is not None:     # cosa's own calls where the library's take no tile arguments (a network's too)
        vendor = cosa_calls(workload, vendor, dataflow=program.dataflow, bias=program.bias,
                            relu=relu or program.relu, scale=program.scale) or vendor
    fns = {call.fn for call in vendor.calls}
    if not fns <= set(TILED_CALLS):
        return LoopSchedule(vendor, None, library, library, None, len(tried), tried, params)  # no tile arguments
    as_matmul = program.kind != "matmul" and fns <= {"tiled_matmul_auto", "tiled_matmul_nn_auto"}
    start, fits, limits, channel_step = library_tile_space(program, as_matmul)
    start = _clamp(start, limits)
    starts = [("mapping", start)] + ([("library", own)] if (own := _library_choice(vendor, params)) else [])
    origin = {None: "library's own"}
    problem = loop_problem(vendor)
    if chooser is not None and problem is not None:
        t0 = time.perf_counter()
        chosen = tuple(chooser(problem, loop_machine(config)))
        chooser_s = time.perf_counter() - t0
        origin[chosen] = "mip"
        here = _timed(cycles, chosen)
        if here is None:
            raise CodegenError(f"the library refuses the chosen tiles {chosen}", source=f"workload {workload.name}",
                               field="tiles")
        if budget == 0:  # the chooser's tiles, unless the library's own (timed for the report anyway) are faster
            best = chosen if here <= library else None
            return LoopSchedule(vendor if best else library_vendor, best, tried[best], library, start, len(tried),
                                tried, params, origin[best], chooser_s)
        starts = [("mip", chosen)] + starts
    else:
        chooser_s = 0.0
    if budget == 0:
        budget = CONV_BUDGET         # no chooser, or a call it does not model (dilation): the search decides
    stop = budget
    for name, point in starts:         # steepest descent from each start, while the budget lasts
        if not fits(point) or len(tried) >= stop:
            continue
        here = _timed(cycles, point)
        origin.setdefault(point, name)
        while here is not None and len(tried) < stop:
            step = None
            for t in _neighbours(point, limits, channel_step):
                if len(tried) >= stop:
                    break
                if fits(t) and t not in tried and (c := _timed(cycles, t)) is not None:
                    origin.setdefault(t, name)
                    if c < (step or (0, here))[1]:
                        step = (t, c)
            if step is None:
                break
            point, here = step
    best = min(tried, key=lambda t: (tried[t], t is not None))  # a tie keeps the library's own tiles
    # the choice's seconds: the chooser's and the search's timing runs (the library's own stream is timed for
    # the report either way)
    return LoopSchedule(vendor if best is not None else library_vendor, best, tried[best], library, start,
                        len(tried), tried, params, origin[best],
                        chooser_s + timed_s[0] - library_s)


def cosa_calls(workload, vendor: VendorProgram, **kw) -> VendorProgram | None:
    """cosa's own calls where the library's (``vendor``) take no tile arguments (None: the library's calls,
    tiled); ``kw``: ``from_workload``'s dataflow, bias, relu and scale:

    * ``tiled_conv_downsample`` (resnet50.c's res3a/res4a_branch1) -> ``tiled_conv_auto`` on the hardware's
      downsample path, as resnet50.c runs its last such layer;
    * ``tiled_conv_dw_auto`` (one channel per loop instruction) -> packed groups of up to DIM channels (the
      largest divisor of the channels) with block-diagonal weights (``gemmini.vendor.calls.depthwise_packed``)."""
    fns = {call.fn for call in vendor.calls}
    if fns == {"tiled_conv_downsample"}:
        return from_workload(workload, downsample_call=False, **kw)
    if fns == {"tiled_conv_dw_auto"}:
        try:
            return from_workload(workload, packed_depthwise=True, **kw)
        except CodegenError:        # a prime number of channels above DIM: no group to pack
            return None
    return None


def loop_machine(config: GemminiConfig):
    """``costmodel.gemmini_loops.LoopMachine`` of the hardware ``config`` describes."""
    from costmodel.gemmini_loops import LoopMachine

    gemmini = config.gemmini_units  # Gemmini's load unit: no cycle between rows, repeated rows fetched once
    return LoopMachine(dim=config.dim, sp_rows=config.sp_rows, acc_rows=config.acc_rows,
                       input_bytes=config.input_bytes, acc_bytes=config.acc_bytes,
                       max_mvin_bytes=config.max_mvin_bytes, dma_bytes_per_cycle=config.dma_bytes_per_cycle,
                       row_gap_cycles=0 if gemmini else 1, repeated_row_fetched_once=gemmini,
                       line_fill_cycles=config.soc_line_fill_cycles, line_bytes=config.soc_line_bytes)


def loop_problem(vendor: VendorProgram):
    """What a tile chooser models for ``vendor``'s calls: (dim_I, dim_J, dim_K) for one weight-stationary
    ``tiled_matmul`` call, a ``costmodel.gemmini_conv_loops.ConvLayer`` for ``tiled_conv`` calls of one shape
    (a grouped layer calls it once per group; a fused max-pool included) without dilation, else None."""
    shape = matmul_call_shape(vendor)
    if shape is not None:
        return shape
    from costmodel.gemmini_conv_loops import ConvLayer

    fns = {call.fn for call in vendor.calls}
    if not vendor.calls or not fns <= {"tiled_conv_auto", "tiled_conv_stride_auto"}:
        return None
    layers = set()
    for call in vendor.calls:
        a = dict(call.args)
        if a["kernel_dilation"] != 1 or a["input_dilation"] != 1:
            return None
        pool = (a["pool_size"], a["pool_stride"], a["pool_padding"]) if a["pool_stride"] else (1, 1, 0)
        layers.add(ConvLayer(a["batch_size"], a["in_row_dim"], a["in_col_dim"], a["in_channels"], a["out_channels"],
                             a["kernel_dim"], a["stride"], a["padding"], *pool))
    return layers.pop() if len(layers) == 1 else None


def matmul_call_shape(vendor: VendorProgram) -> tuple | None:
    """(dim_I, dim_J, dim_K) when ``vendor`` is weight-stationary ``tiled_matmul_auto`` /
    ``tiled_matmul_nn_auto`` calls of one shape (the calls ``costmodel.gemmini_loops`` models; the library's
    stride-2 1x1 path makes one per pair of input rows), else None."""
    shapes = set()
    for call in vendor.calls:
        if call.fn not in ("tiled_matmul_auto", "tiled_matmul_nn_auto"):
            return None
        args = dict(call.args)
        if args["tiled_matmul_type"] != 1 or args.get("transpose_A") or args.get("transpose_B"):
            return None
        shapes.add((args["dim_I"], args["dim_J"], args["dim_K"]))
    return shapes.pop() if len(shapes) == 1 else None


def library_params(config: GemminiConfig) -> LibParams:
    """gemmini_params.h's values for the hardware ``config`` describes (the library's tile arithmetic)."""
    return LibParams(dim=config.dim, bank_num=config.sp_banks, bank_rows=config.sp_rows // config.sp_banks,
                     acc_rows=config.acc_rows, max_bytes=config.max_mvin_bytes,
                     loop_conv_layout=config.loop_conv_layout)


def _timed(cycles, tiles) -> float | None:
    try:
        return cycles(tiles)
    except CodegenError:        # the library refuses these tiles (a limit its fit test does not state)
        return None


def _library_choice(vendor: VendorProgram, params: LibParams) -> tuple | None:
    """The library's own tile arguments for a matmul call (None for convolutions: their search starts
    from the mapping only, the library's own stream stays a candidate)."""
    call = vendor.calls[0]
    if call.fn not in ("tiled_matmul_auto", "tiled_matmul_nn_auto"):
        return None
    return library_tiles(vendor, params)


def library_tiles(vendor: VendorProgram, params: LibParams = DEFAULT_PARAMS) -> tuple | None:
    """The tile arguments the library picks itself for ``vendor``'s (first) call: ``tiled_matmul_auto``'s
    (tile_I, tile_J, tile_K) or ``tiled_conv_stride_auto``'s seven; None for a call without them."""
    call = vendor.calls[0]
    args = dict(call.args)
    if call.fn in ("tiled_matmul_auto", "tiled_matmul_nn_auto"):
        from .vendor.matmul import auto_tiles

        return tuple(auto_tiles(args["dim_I"], args["dim_J"], args["dim_K"], args["tiled_matmul_type"], params))
    if call.fn in ("tiled_conv_auto", "tiled_conv_stride_auto"):
        from .vendor.conv import auto_conv_tiles

        return tuple(auto_conv_tiles(args, params))
    return None
