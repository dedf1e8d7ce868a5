"""The command stream Gemmini's own C library issues for a layer ("gemmini-default").

``stream(program)`` returns the ``(funct, rs1, rs2)`` triples that gemmini.h
(ucb-bar/gemmini-rocc-tests 180c468, default configuration) issues for the
calls of a ``VendorProgram``, instruction for instruction, with the DRAM
addresses of ``program.layout()``.  Builders in ``calls`` choose the call
that Gemmini's ResNet-50 and MobileNet programs make for each layer kind;
``record`` compiles a user's checkout of gemmini.h on the host with its RoCC
macros redirected and records the real stream for comparison.

The stream contains Gemmini's loop instructions (LOOP_WS, functs 8-13;
LOOP_CONV_WS, functs 15-21) and, at the end of every matmul call, the fence
pseudo-command (funct 128, ``gemmini.isa.FENCE``).  ``params.loop_conv_layout``
"f13847e" gives the LOOP_CONV_WS words of gemmini-rocc-tests ab748c5 (the
header Gemmini f13847e pins; square images only), the rest being the same.
"""

from __future__ import annotations

import importlib

from .calls import (ARENA_BASE, SIGNATURES, BufferSpec, LibCall, Ptr, VendorProgram, conv, depthwise, fc, gemm, grouped,
                    make_layout, matmul_nn)
from .encode import disassemble
from .params import DEFAULT_PARAMS, LibParams


def call_stream(program: VendorProgram, call: LibCall, params: LibParams = DEFAULT_PARAMS) -> list:
    """The triples of one library call of ``program``."""
    conv_mod = importlib.import_module(".conv", __name__)  # the module, not the ``conv`` builder exported here
    matmul_mod = importlib.import_module(".matmul", __name__)

    kinds = dict(SIGNATURES[call.fn])
    args = {n: (program.address(v) if kinds[n] == "p" else v) for n, v in call.args}
    fn = {
        "tiled_matmul_auto": matmul_mod.tiled_matmul_auto,
        "tiled_matmul_nn_auto": matmul_mod.tiled_matmul_nn_auto,
        "tiled_conv_auto": conv_mod.tiled_conv_auto,
        "tiled_conv_stride_auto": conv_mod.tiled_conv_stride_auto,
        "tiled_conv_dw_auto": conv_mod.tiled_conv_dw_auto,
        "tiled_conv_downsample": conv_mod.tiled_conv_downsample,
    }[call.fn]
    return fn(args, params)


def stream(program: VendorProgram, params: LibParams = DEFAULT_PARAMS, tiles: tuple | None = None) -> list:
    """Every call's triples, in order.  ``tiles``: run every call with these tile arguments instead of the
    library's own choice, as a program calling ``tiled_matmul`` (tile_I, tile_J, tile_K in DIM blocks) or
    ``tiled_conv`` (batches, porows, pocols, pochs, krows, kcols, kchs) with its own tiles does."""
    out = []
    for call in program.calls:
        out += call_stream(program, call, params) if tiles is None else given_tiles_stream(program, call, tiles,
                                                                                             params)
    return [tuple(int(x) for x in cmd) for cmd in out]


def given_tiles_stream(program: VendorProgram, call: LibCall, tiles: tuple, params: LibParams = DEFAULT_PARAMS) -> list:
    """The triples of ``call`` run with explicit ``tiles`` (see ``stream``); matmul and dense conv calls."""
    from ..errors import CodegenError

    conv_mod = importlib.import_module(".conv", __name__)
    matmul_mod = importlib.import_module(".matmul", __name__)
    kinds = dict(SIGNATURES[call.fn])
    args = {n: (program.address(v) if kinds[n] == "p" else v) for n, v in call.args}
    if call.fn == "tiled_matmul_auto":
        return matmul_mod.tiled_matmul(args, *tiles, params=params)
    if call.fn == "tiled_matmul_nn_auto":
        return matmul_mod.tiled_matmul(matmul_mod.nn_args(args), *tiles, params=params)
    if call.fn == "tiled_conv_auto":
        return conv_mod.tiled_conv_given(conv_mod.with_strides(args), tiles, params)
    if call.fn == "tiled_conv_stride_auto":
        return conv_mod.tiled_conv_given(args, tiles, params)
    raise CodegenError(f"{call.fn} takes no tile arguments here (matmul and dense conv calls only)",
                       source=f"program {program.name}", field="tiles")


__all__ = ["ARENA_BASE", "BufferSpec", "DEFAULT_PARAMS", "LibCall", "LibParams", "Ptr", "VendorProgram",
           "call_stream", "conv", "depthwise", "disassemble", "fc", "gemm", "given_tiles_stream", "grouped",
           "make_layout", "matmul_nn", "stream"]
