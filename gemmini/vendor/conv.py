"""Convolutions as Gemmini's C library runs them: ``tiled_conv_auto`` and relatives.

Reproduces gemmini.h (ucb-bar/gemmini-rocc-tests 180c468):

* ``tiled_conv_stride_auto`` / ``tiled_conv_auto`` (in_stride = in_channels,
  weight_stride = out_stride = out_channels): the tile arguments [batches,
  porows, pocols, pochs, krows, kcols, kchs] by the greedy shrink-then-grow
  rules (``costmodel.gemmini_library_tiles.tiled_conv_auto_tiles``, pooling and the downsample
  footprint included), then ``tiled_conv``;
* ``tiled_conv``: config_st, config_ex, then the tile walk batch, porow,
  pocol, poch, krow, kcol, kch (kch innermost) with ragged last tiles, edge
  padding per tile, bias on the first (krow, kcol, kch) slice, the output
  pointer on the last one, ``a_reuse``/``b_reuse`` (NULL input/weight
  pointers and scratchpad ids 1/2 when the other operand's tile count is at
  most 2), the hardware downsample flag for 1x1 stride-2 layers on even
  images; each tile is one ``gemmini_loop_conv_ws`` (``sp_tiled_conv``);
* ``tiled_conv_dw_auto`` / ``tiled_conv_dw``: tiles with one channel, then
  one loop instruction per channel and tile;
* ``tiled_conv_downsample``: one ``tiled_matmul_auto`` per pair of input
  rows (A row stride 2*in_stride, bias repeated).

No fence ends a convolution in the library; none is emitted here.  The
training-only options (wrot180, transposes, input dilation) are refused.
"""

from __future__ import annotations

from . import encode as E
from .encode import refuse
from .matmul import tiled_matmul_auto
from .params import DEFAULT_PARAMS, LibParams


def _cdiv_int(a: int, b: int) -> int:
    """gemmini.h's ``ceil_divide_int`` (1 when a < b)."""
    c = a // b if a % b == 0 else a // b + 1
    return 1 if a < b else c


def _auto_tiles(src: str, batch, prows, pcols, och, ich, kernel, params: LibParams, *, stride, kernel_dilation,
                pool_size, pool_stride, pool_padding, downsample) -> tuple:
    from costmodel.gemmini_library_tiles import LibraryTileError, tiled_conv_auto_tiles

    try:
        t = tiled_conv_auto_tiles(batch, prows, pcols, och, ich, kernel, kernel, params.tile_config(),
                                  stride=stride, kernel_dilation=kernel_dilation, pool_size=pool_size,
                                  pool_stride=pool_stride, pool_padding=pool_padding, downsample=downsample)
    except LibraryTileError as err:
        refuse(src, err.field or "args", err.reason)
    return t.batches, t.porows, t.pocols, t.pochs, t.krows, t.kcols, t.kchs


def _check_supported(src: str, a: dict) -> None:
    for flag in ("wrot180", "trans_output_1203", "trans_input_3120", "trans_weight_1203", "trans_weight_0132"):
        if a.get(flag):
            refuse(src, flag, "training-only options are not reproduced")
    if a.get("input_dilation", 1) != 1:
        refuse(src, "input_dilation", "only input_dilation 1 is reproduced")
    if a.get("tiled_conv_type", 1) != 1:
        refuse(src, "tiled_conv_type", "Gemmini convs run weight-stationary (WS = 1) only")


def tiled_conv_auto(a: dict, params: LibParams = DEFAULT_PARAMS) -> list:
    return tiled_conv_stride_auto(with_strides(a), params)


def with_strides(a: dict) -> dict:
    """A ``tiled_conv_auto`` call's arguments with the row strides ``tiled_conv`` takes (dense NHWC)."""
    return dict(a, in_stride=a["in_channels"], weight_stride=a["out_channels"], out_stride=a["out_channels"])


def tiled_conv_given(a: dict, tiles, params: LibParams = DEFAULT_PARAMS) -> list:
    """``tiled_conv`` with explicit tile arguments (batches, porows, pocols, pochs, krows, kcols, kchs), as a
    program calling it with its own tiles runs (``a``: a ``tiled_conv_stride_auto`` call's arguments)."""
    _check_supported("tiled_conv", a)
    no_pool = a["pool_stride"] == 0
    psize, pstride, ppad = (1, 1, 0) if no_pool else (a["pool_size"], a["pool_stride"], a["pool_padding"])
    b = dict(a, pool_size=psize, pool_stride=0 if no_pool else pstride, pool_padding=ppad)
    return tiled_conv(b, *tiles, params=params)


def auto_conv_tiles(a: dict, params: LibParams = DEFAULT_PARAMS, src: str = "tiled_conv_stride_auto") -> tuple:
    """The tile arguments ``tiled_conv_stride_auto`` picks for a call with arguments ``a``."""
    no_pool = a["pool_stride"] == 0
    psize, pstride, ppad = (1, 1, 0) if no_pool else (a["pool_size"], a["pool_stride"], a["pool_padding"])
    downsample = (a["stride"] == 2 and a["kernel_dim"] == 1 and a["padding"] == 0 and no_pool
                  and a["in_row_dim"] % 2 == 0 and a["in_col_dim"] % 2 == 0)
    return _auto_tiles(src, a["batch_size"], a["out_row_dim"], a["out_col_dim"], a["out_channels"],
                       a["in_channels"], a["kernel_dim"], params, stride=a["stride"],
                       kernel_dilation=a["kernel_dilation"], pool_size=psize, pool_stride=pstride,
                       pool_padding=ppad, downsample=downsample)


def tiled_conv_stride_auto(a: dict, params: LibParams = DEFAULT_PARAMS) -> list:
    src = "tiled_conv_stride_auto"
    _check_supported(src, a)
    no_pool = a["pool_stride"] == 0
    psize, pstride, ppad = (1, 1, 0) if no_pool else (a["pool_size"], a["pool_stride"], a["pool_padding"])
    tiles = auto_conv_tiles(a, params, src)
    b = dict(a, pool_size=psize, pool_stride=0 if no_pool else pstride, pool_padding=ppad)
    return tiled_conv(b, *tiles, params=params)


def _footprint(params: LibParams, stride, kernel_dilation, downsample, args, pool_size, pool_stride):
    from costmodel.gemmini_library_tiles import conv_rows

    return conv_rows(args, params.tile_config(), stride, kernel_dilation, pool_size, pool_stride, downsample)


def tiled_conv(a: dict, batches, porows, pocols, pochs, krows, kcols, kchs, params: LibParams = DEFAULT_PARAMS) -> list:
    src = "tiled_conv"
    _check_supported(src, a)
    bias = a["bias"]
    no_bias = bias == 0
    if no_bias:
        bias = 1  # the library's dummy non-NULL pointer
    psize, pstride, ppad = a["pool_size"], a["pool_stride"], a["pool_padding"]
    no_pool = pstride == 0
    if no_pool:
        psize, pstride, ppad = 1, 1, 0
    stride, padding, kdim, kdil = a["stride"], a["padding"], a["kernel_dim"], a["kernel_dilation"]
    in_rows, in_cols = a["in_row_dim"], a["in_col_dim"]
    downsample = (stride == 2 and kdim == 1 and in_rows % 2 == 0 and in_cols % 2 == 0 and padding == 0
                  and no_pool)
    spad, acc = _footprint(params, stride, kdil, downsample, [batches, porows, pocols, pochs, krows, kcols, kchs],
                           psize, pstride)
    if spad > params.sp_rows // 2:
        refuse(src, "tiles", f"not enough scratchpad space to store inputs and weights, {spad}")
    if acc > params.acc_rows // 2:
        refuse(src, "tiles", "not enough accumulator space to store outputs")
    if kdim <= padding:
        refuse(src, "padding", "kernel_dim must be larger than padding")
    in_stride, weight_stride, out_stride = a["in_stride"], a["weight_stride"], a["out_stride"]
    out = [E.config_st(out_stride, a["act"], a["scale"]),
           E.config_ex(1, 0, 0, 0.0, 1, stride >> int(downsample), 0, 0)]
    out_rows, out_cols = a["out_row_dim"], a["out_col_dim"]
    prd = (out_rows + 2 * ppad - psize) // pstride + 1
    pcd = (out_cols + 2 * ppad - psize) // pstride + 1
    batch_size, in_ch, out_ch = a["batch_size"], a["in_channels"], a["out_channels"]
    num_kch, num_poch = _cdiv_int(in_ch, kchs), _cdiv_int(out_ch, pochs)
    num_b, num_porow, num_pocol = _cdiv_int(batch_size, batches), _cdiv_int(prd, porows), _cdiv_int(pcd, pocols)
    num_krow, num_kcol = _cdiv_int(kdim, krows), _cdiv_int(kdim, kcols)
    b_reuse = num_kch * num_poch * num_krow * num_kcol <= 2
    a_reuse = num_kch * num_krow * num_kcol * num_b * num_porow * num_pocol <= 2
    a_id = b_id = 0
    inp, wts, outp = a["input"], a["weights"], a["output"]
    common = dict(batch_size=batch_size, in_row_dim=in_rows, in_col_dim=in_cols, in_channels=in_ch,
                  out_channels=out_ch, out_row_dim=out_rows, out_col_dim=out_cols, pool_out_row_dim=prd,
                  pool_out_col_dim=pcd, stride=stride, padding=padding, kernel_dim=kdim, kernel_dilation=kdil,
                  in_stride=in_stride, weight_stride=weight_stride, out_stride=out_stride, pool_size=psize,
                  pool_stride=pstride, pool_padding=ppad, act=a["act"], no_bias=no_bias, no_pool=no_pool,
                  downsample=downsample, dw=False)
    for b in range(0, batch_size, batches):
        for porow in range(0, prd, porows):
            orow = porow * pstride - ppad
            for pocol in range(0, pcd, pocols):
                ocol = pocol * pstride - ppad
                for poch in range(0, out_ch, pochs):
                    for krow in range(0, kdim, krows):
                        irow = max(orow, 0) * stride + krow * kdil - padding
                        for kcol in range(0, kdim, kcols):
                            icol = max(ocol, 0) * stride + kcol * kdil - padding
                            for kch in range(0, in_ch, kchs):
                                if a_reuse:
                                    a_id = 1 if kch + krow + kcol + b + porow + pocol == 0 else 2
                                if b_reuse:
                                    b_id = 1 if kch + poch + krow + kcol == 0 else 2
                                o = outp + (b * prd * pcd + porow * pcd + pocol) * out_stride + poch
                                if krow + krows < kdim or kcol + kcols < kdim or kch + kchs < in_ch:
                                    o = 0
                                bias_ = bias + 4 * poch
                                if krow > 0 or kcol > 0 or kch > 0:
                                    bias_ = 0
                                t = _edges(dict(batches=min(batches, batch_size - b), porows=min(porows, prd - porow),
                                                pocols=min(pocols, pcd - pocol), pochs=min(pochs, out_ch - poch),
                                                krows=min(krows, kdim - krow), kcols=min(kcols, kdim - kcol),
                                                kchs=min(kchs, in_ch - kch)),
                                           orow, ocol, irow, icol, psize, pstride, out_rows, out_cols, stride, kdil,
                                           in_rows, in_cols)
                                w = wts + (krow * kdim * in_ch + kcol * in_ch + kch) * weight_stride + poch
                                i = inp + (b * in_rows * in_cols + (irow + t["upad"]) * in_cols
                                           + (icol + t["lpad"])) * in_stride + kch
                                if b_reuse and pocol + porow + b > 0:
                                    w = 0
                                if a_reuse and poch > 0:
                                    i = 0
                                out += sp_tiled_conv(dict(common, **t, input=i, weights=w, output=o, bias=bias_,
                                                          a_spad_id=a_id, b_spad_id=b_id), params)
    return out


def _edges(t: dict, orow, ocol, irow, icol, psize, pstride, out_rows, out_cols, stride, kdil, in_rows, in_cols):
    """A tile's pooled-output and input padding (plpad..pdpad, lpad..dpad), as tiled_conv computes them."""
    ocols_ = t["pocols"] * pstride + psize - 1
    orows_ = t["porows"] * pstride + psize - 1
    plpad = -ocol if ocol < 0 else 0
    prpad = ocol + ocols_ - out_cols if ocol + ocols_ > out_cols else 0
    pupad = -orow if orow < 0 else 0
    pdpad = orow + orows_ - out_rows if orow + orows_ > out_rows else 0
    dkrows = t["krows"] + (kdil - 1) * (t["krows"] - 1)
    dkcols = t["kcols"] + (kdil - 1) * (t["kcols"] - 1)
    icols_ = (ocols_ - plpad - prpad) * stride + dkcols - 1
    irows_ = (orows_ - pupad - pdpad) * stride + dkrows - 1
    return dict(t, plpad=plpad, prpad=prpad, pupad=pupad, pdpad=pdpad,
                lpad=-icol if icol < 0 else 0, rpad=icol + icols_ - in_cols if icol + icols_ > in_cols else 0,
                upad=-irow if irow < 0 else 0, dpad=irow + irows_ - in_rows if irow + irows_ > in_rows else 0)


def sp_tiled_conv(t: dict, params: LibParams = DEFAULT_PARAMS) -> list:
    """``sp_tiled_conv``: one ``gemmini_loop_conv_ws`` for a tile (``t``: every argument by name)."""
    dim = params.dim
    kchs, pochs = (1, 1) if t["dw"] else (t["kchs"], t["pochs"])
    orows = t["porows"] * t["pool_stride"] + t["pool_size"] - 1 - t["pupad"] - t["pdpad"]
    ocols = t["pocols"] * t["pool_stride"] + t["pool_size"] - 1 - t["plpad"] - t["prpad"]
    if t["downsample"] or t["kernel_dilation"] > 1 or kchs > dim:
        max_pixels = 1
    else:
        max_pixels = dim // kchs
    max_pixels = min(max_pixels, t["kcols"])
    args = dict(t, kchs=kchs, pochs=pochs, orows=orows, ocols=ocols, max_pixels_per_row=max_pixels,
                activation=t["act"], no_bias=int(t["no_bias"]), no_pool=int(t["no_pool"]),
                downsample=int(t["downsample"]), dw=int(t["dw"]), wrot180=0, input_dilated=0, trans_output_1203=0,
                trans_weight_1203=0, trans_weight_0132=0, trans_input_3120=0)
    return E.loop_conv_ws(args, params.loop_conv_layout)


def tiled_conv_dw_auto(a: dict, params: LibParams = DEFAULT_PARAMS) -> list:
    src = "tiled_conv_dw_auto"
    _check_supported(src, a)
    no_pool = a["pool_stride"] == 0
    psize, pstride, ppad = (1, 1, 0) if no_pool else (a["pool_size"], a["pool_stride"], a["pool_padding"])
    batches, porows, pocols, _, krows, kcols, _ = _auto_tiles(
        src, a["batch_size"], a["out_row_dim"], a["out_col_dim"], 1, 1, a["kernel_dim"], params, stride=a["stride"],
        kernel_dilation=1, pool_size=psize, pool_stride=pstride, pool_padding=ppad, downsample=False)
    return tiled_conv_dw(dict(a, pool_size=psize, pool_stride=0 if no_pool else pstride, pool_padding=ppad),
                         batches, porows, pocols, krows, kcols, params)


def tiled_conv_dw(a: dict, batches, porows, pocols, krows, kcols, params: LibParams = DEFAULT_PARAMS) -> list:
    src = "tiled_conv_dw"
    bias = a["bias"]
    no_bias = bias == 0
    if no_bias:
        bias = 1
    psize, pstride, ppad = a["pool_size"], a["pool_stride"], a["pool_padding"]
    no_pool = pstride == 0
    if no_pool:
        psize, pstride, ppad = 1, 1, 0
    stride, padding, kdim = a["stride"], a["padding"], a["kernel_dim"]
    spad, acc = _footprint(params, stride, 1, False, [batches, porows, pocols, 1, krows, kcols, 1], psize, pstride)
    if spad > params.sp_rows // 2:
        refuse(src, "tiles", f"not enough scratchpad space to store inputs and weights, {spad}")
    if acc > params.acc_rows // 2:
        refuse(src, "tiles", "not enough accumulator space to store outputs")
    if kdim <= padding:
        refuse(src, "padding", "kernel_dim must be larger than padding")
    ch = a["channels"]
    out = [E.config_st(ch, a["act"], a["scale"]), E.config_ex(1, 0, 0, 0.0, 1, stride, 0, 0)]
    in_rows, in_cols, out_rows, out_cols = a["in_row_dim"], a["in_col_dim"], a["out_row_dim"], a["out_col_dim"]
    prd = (out_rows + 2 * ppad - psize) // pstride + 1
    pcd = (out_cols + 2 * ppad - psize) // pstride + 1
    batch_size = a["batch_size"]
    common = dict(batch_size=batch_size, in_row_dim=in_rows, in_col_dim=in_cols, in_channels=ch, out_channels=ch,
                  out_row_dim=out_rows, out_col_dim=out_cols, pool_out_row_dim=prd, pool_out_col_dim=pcd,
                  stride=stride, padding=padding, kernel_dim=kdim, kernel_dilation=1, in_stride=ch, weight_stride=1,
                  out_stride=ch, pool_size=psize, pool_stride=pstride, pool_padding=ppad, act=a["act"],
                  no_bias=no_bias, no_pool=no_pool, downsample=False, dw=True, a_spad_id=0, b_spad_id=0)
    for b in range(0, batch_size, batches):
        for porow in range(0, prd, porows):
            orow = porow * pstride - ppad
            for pocol in range(0, pcd, pocols):
                ocol = pocol * pstride - ppad
                for c in range(ch):
                    for krow in range(0, kdim, krows):
                        irow = max(orow, 0) * stride + krow - padding
                        for kcol in range(0, kdim, kcols):
                            icol = max(ocol, 0) * stride + kcol - padding
                            o = a["output"] + (b * prd * pcd + porow * pcd + pocol) * ch + c
                            if krow + krows < kdim or kcol + kcols < kdim:
                                o = 0
                            bias_ = 0 if krow > 0 or kcol > 0 else bias + 4 * c
                            t = _edges(dict(batches=min(batches, batch_size - b), porows=min(porows, prd - porow),
                                            pocols=min(pocols, pcd - pocol), pochs=1, krows=min(krows, kdim - krow),
                                            kcols=min(kcols, kdim - kcol), kchs=1),
                                       orow, ocol, irow, icol, psize, pstride, out_rows, out_cols, stride, 1,
                                       in_rows, in_cols)
                            w = a["weights"] + (c * kdim + krow) * kdim + kcol
                            i = a["input"] + (b * in_rows * in_cols + (irow + t["upad"]) * in_cols
                                              + (icol + t["lpad"])) * ch + c
                            out += sp_tiled_conv(dict(common, **t, input=i, weights=w, output=o, bias=bias_), params)
    return out


def tiled_conv_downsample(a: dict, params: LibParams = DEFAULT_PARAMS) -> list:
    src = "tiled_conv_downsample"
    if a["in_row_dim"] != a["in_col_dim"] or a["out_row_dim"] != a["out_col_dim"]:
        refuse(src, "in_row_dim", "rectangular convolutions are not supported by tiled_conv_downsample")
    in_dim, out_dim = a["in_row_dim"], a["out_row_dim"]
    out = []
    for b in range(a["batch_size"]):
        for irow in range(0, in_dim, 2):
            orow = irow // 2
            call = dict(dim_I=a["in_col_dim"] // 2, dim_J=a["out_channels"], dim_K=a["in_channels"],
                        A=a["input"] + (b * in_dim + irow) * in_dim * a["in_stride"], B=a["weights"], D=a["bias"],
                        C=a["output"] + (b * out_dim + orow) * out_dim * a["out_stride"],
                        stride_A=a["in_stride"] * 2, stride_B=a["weight_stride"], stride_D=a["out_stride"],
                        stride_C=a["out_stride"], A_scale_factor=1.0, B_scale_factor=1.0, D_scale_factor=1.0,
                        act=a["act"], scale=a["scale"], bert_scale=0.0, repeating_bias=True, transpose_A=False,
                        transpose_B=False, full_C=False, low_D=False, weightA=0,
                        tiled_matmul_type=a["tiled_conv_type"])
            out += tiled_matmul_auto(call, params)
    return out
