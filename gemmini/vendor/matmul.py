"""``tiled_matmul_auto`` as Gemmini's C library runs it: tiles, tile walk, commands.

Reproduces gemmini.h (ucb-bar/gemmini-rocc-tests 180c468) for the default
int8 configuration: ``tiled_matmul_auto`` picks the tile factors (the greedy
rules of ``costmodel.gemmini_library_tiles.tiled_matmul_auto_tiles``), ``tiled_matmul``
checks them, ``tiled_matmul_outer`` configures the unit and walks the tiles
i0, j0, k0 (k0 innermost) with a smaller last tile where a dimension does not
divide (``last_I``, the padding ``pad_I`` of the final DIM block) and with
``a_reuse``/``b_reuse`` (WS only: when I0*K0 <= 2 the A tile of a later j0 is
not moved in again, a NULL pointer, and alternates scratchpad ids 1/2; B
alike for J0*K0 <= 2).  Each tile is one ``gemmini_loop_ws`` in WS; in OS it
is ``sp_tiled_matmul_os``'s explicit mvin / preload / compute / mvout
sequence.  The walk ends with a fence.

Addresses are byte addresses; a NULL pointer is 0; with no bias the library
uses the dummy pointer 1 for D, which shows in OS bias offsets only.
"""

from __future__ import annotations

from . import encode as E
from ..errors import CodegenError
from .params import DEFAULT_PARAMS, LibParams

LAYERNORM, IGELU, SOFTMAX = 2, 3, 4


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def auto_tiles(dim_I: int, dim_J: int, dim_K: int, dataflow: int, params: LibParams = DEFAULT_PARAMS) -> tuple:
    """``tiled_matmul_auto``'s (tile_I, tile_J, tile_K) in DIM blocks."""
    from costmodel.gemmini_library_tiles import tiled_matmul_auto_tiles

    t = tiled_matmul_auto_tiles(dim_I, dim_J, dim_K, params.tile_config(), "ws" if dataflow == 1 else "os")
    return t.tile_I, t.tile_J, t.tile_K


def tiled_matmul_auto(a: dict, params: LibParams = DEFAULT_PARAMS) -> list:
    """The stream of one ``tiled_matmul_auto`` call (``a``: its arguments by name, pointers as addresses)."""
    src = "tiled_matmul_auto"
    if a["act"] in (LAYERNORM, SOFTMAX, IGELU):
        raise CodegenError("layernorm, softmax and I-GELU activations are not reproduced", source=src, field="act")
    if a["tiled_matmul_type"] not in (0, 1):
        raise CodegenError("only OS (0) and WS (1) run on Gemmini", source=src, field="tiled_matmul_type")
    tiles = auto_tiles(a["dim_I"], a["dim_J"], a["dim_K"], a["tiled_matmul_type"], params)
    return tiled_matmul(a, *tiles, params=params)


def tiled_matmul_nn_auto(a: dict, params: LibParams = DEFAULT_PARAMS) -> list:
    """gemmini_nn.h's wrapper: row strides K, J, J, J, unit scales, no transposes."""
    return tiled_matmul_auto(nn_args(a), params)


def nn_args(a: dict) -> dict:
    """The full ``tiled_matmul`` arguments of a ``tiled_matmul_nn_auto`` call."""
    J = a["dim_J"]
    full = dict(dim_I=a["dim_I"], dim_J=J, dim_K=a["dim_K"], A=a["A"], B=a["B"], D=a["D"], C=a["C"],
                stride_A=a["dim_K"], stride_B=J, stride_D=J, stride_C=J, A_scale_factor=1.0, B_scale_factor=1.0,
                D_scale_factor=1.0, act=a["act"], scale=a["scale"], bert_scale=0.0,
                repeating_bias=a["repeating_bias"], transpose_A=False, transpose_B=False, full_C=False, low_D=False,
                weightA=0, tiled_matmul_type=a["tiled_matmul_type"])
    return full


def tiled_matmul(a: dict, tile_I: int, tile_J: int, tile_K: int, params: LibParams = DEFAULT_PARAMS) -> list:
    """``tiled_matmul``'s checks, then ``tiled_matmul_outer``."""
    src = "tiled_matmul"
    dim = params.dim
    ws = a["tiled_matmul_type"] == 1
    padded = {n: _cdiv(a[f"dim_{n}"], dim) * dim for n in "IJK"}
    for n, t in (("I", tile_I), ("J", tile_J), ("K", tile_K)):
        if t <= 0 or t * dim > padded[n]:
            raise CodegenError(f"tile_{n} = {t} is not in 1..{padded[n] // dim}", source=src, field=f"tile_{n}")
        if t > 65535:
            raise CodegenError("tile factors must be below 65535 to fit the LOOP_WS fields", source=src,
                               field=f"tile_{n}")
    spad = params.sp_rows // (2 if ws else 1)
    acc = params.acc_rows // (2 if ws else 1)
    if (tile_I * tile_K + tile_K * tile_J) * dim > spad:
        raise CodegenError("not enough space in scratchpad to store A and B matrices", source=src, field="tiles")
    if tile_I * tile_J * dim > acc:
        raise CodegenError("not enough space in accumulator to store C", source=src, field="tiles")
    ta, tb = bool(a["transpose_A"]), bool(a["transpose_B"])
    if (not ws and (ta or tb)) or (ws and ta and tb):
        raise CodegenError(f"not implemented: transpose_A={ta}, transpose_B={tb}", source=src, field="transpose")
    if a["low_D"] and not ws:
        raise CodegenError("low_D is not implemented for OS", source=src, field="low_D")
    return _outer(a, tile_I, tile_J, tile_K, params)


def _outer(a: dict, tile_I: int, tile_J: int, tile_K: int, params: LibParams) -> list:
    dim = params.dim
    dataflow = int(a["tiled_matmul_type"])
    ws = dataflow == 1
    dim_I, dim_J, dim_K = a["dim_I"], a["dim_J"], a["dim_K"]
    Ip, Jp, Kp = (_cdiv(d, dim) * dim for d in (dim_I, dim_J, dim_K))
    I0, J0, K0 = _cdiv(Ip, tile_I * dim), _cdiv(Jp, tile_J * dim), _cdiv(Kp, tile_K * dim)
    last_I = tile_I if Ip % (tile_I * dim) == 0 else (Ip // dim) % tile_I
    last_J = tile_J if Jp % (tile_J * dim) == 0 else (Jp // dim) % tile_J
    last_K = tile_K if Kp % (tile_K * dim) == 0 else (Kp // dim) % tile_K
    padding_I, padding_J, padding_K = Ip - dim_I, Jp - dim_J, Kp - dim_K
    A, B, D, C = a["A"], a["B"], a["D"], a["C"]
    no_bias = D == 0
    if no_bias:
        D = 1  # the library's dummy non-NULL pointer
    low_D, full_C = bool(a["low_D"]), bool(a["full_C"])
    sizeof_D = 1 if low_D else 4
    sizeof_C = 4 if full_C else 1
    stride_A, stride_B, stride_D, stride_C = a["stride_A"], a["stride_B"], a["stride_D"], a["stride_C"]
    act, rep, ta, tb = int(a["act"]), bool(a["repeating_bias"]), int(bool(a["transpose_A"])), int(bool(a["transpose_B"]))
    out = [
        E.config_ex(dataflow, act & 3, 0, 1.0, 1, 1, ta, tb),
        E.config_st(stride_C * sizeof_C, act & 3, a["scale"]),
        E.config_ld(stride_A, a["A_scale_factor"], 0, dim, 1, 0),
        E.config_ld(stride_B, a["B_scale_factor"], 0, dim, 1, 1),
        E.config_ld(0 if rep else stride_D * sizeof_D, float(int(a["D_scale_factor"])), int(low_D), dim, 1, 2),
    ]
    b_reuse = J0 * K0 <= 2 and ws
    a_reuse = I0 * K0 <= 2 and ws
    a_id = b_id = 0
    for i0 in range(I0):
        for j0 in range(J0):
            for k0 in range(K0):
                if a_reuse:
                    a_id = 1 if i0 + k0 == 0 else 2
                if b_reuse:
                    b_id = 1 if j0 + k0 == 0 else 2
                if k0 != 0:
                    pre = 0
                else:
                    bias_row = 0 if rep else i0 * tile_I * dim
                    pre = D + (bias_row * stride_D + j0 * tile_J * dim) * sizeof_D
                c = C + (i0 * tile_I * dim * stride_C + j0 * tile_J * dim) * sizeof_C if k0 == K0 - 1 else 0
                I = tile_I if i0 < I0 - 1 else last_I
                J = tile_J if j0 < J0 - 1 else last_J
                K = tile_K if k0 < K0 - 1 else last_K
                pad_I = padding_I if i0 == I0 - 1 else 0
                pad_J = padding_J if j0 == J0 - 1 else 0
                pad_K = padding_K if k0 == K0 - 1 else 0
                if ta:
                    aa = A + k0 * tile_K * dim * stride_A + i0 * tile_I * dim
                else:
                    aa = A + i0 * tile_I * dim * stride_A + k0 * tile_K * dim
                if tb:
                    bb = B + j0 * tile_J * dim * stride_B + k0 * tile_K * dim
                else:
                    bb = B + k0 * tile_K * dim * stride_B + j0 * tile_J * dim
                if a_reuse and j0 >= 1:
                    aa = 0
                if b_reuse and i0 >= 1:
                    bb = 0
                tile = dict(A=aa, B=bb, D=pre, C=c, I=I, J=J, K=K, pad_I=pad_I, pad_J=pad_J, pad_K=pad_K,
                            A_row_stride=stride_A, B_row_stride=stride_B, D_row_stride=stride_D,
                            C_row_stride=stride_C, a_transpose=ta, b_transpose=tb, full_C=full_C, low_D=low_D,
                            no_bias=no_bias, repeating_bias=rep, act=act, a_spad_id=a_id, b_spad_id=b_id,
                            A_scale=a["A_scale_factor"], B_scale=a["B_scale_factor"],
                            D_scale=float(int(a["D_scale_factor"])))
                out += _sp_ws(tile) if ws else _sp_os(tile, params)
    out.append(E.fence())
    return out


def _sp_ws(t: dict) -> list:
    """``sp_tiled_matmul_ws``: one LOOP_WS."""
    return E.loop_ws(t["I"], t["J"], t["K"], t["pad_I"], t["pad_J"], t["pad_K"], t["A"], t["B"],
                     0 if t["no_bias"] else t["D"], t["C"], t["A_row_stride"], t["B_row_stride"],
                     0 if t["repeating_bias"] else t["D_row_stride"], t["C_row_stride"], t["a_transpose"],
                     t["b_transpose"], int(t["full_C"]), int(t["low_D"]), int(not t["no_bias"] or t["D"] == 0),
                     t["act"], t["a_spad_id"], t["b_spad_id"], 0)


def _sp_os(t: dict, params: LibParams) -> list:
    """``sp_tiled_matmul_os``: bias, B and A move-ins, preload/compute per block, C move-outs."""
    dim = params.dim
    I, J, K, pad_I, pad_J, pad_K = t["I"], t["J"], t["K"], t["pad_I"], t["pad_J"], t["pad_K"]
    A, B, D, C = t["A"], t["B"], t["D"], t["C"]
    max_block = params.max_bytes // dim
    max_block_acc = params.max_bytes // (dim * 4)
    a_start, b_start = 0, params.sp_rows - K * J * dim
    d_start = 1 << 31
    c_start = (3 << 30) | (int(t["full_C"]) << 29)
    a_blocks, b_blocks, d_blocks = min(K, max_block), min(J, max_block), min(J, max_block_acc)
    out = []
    if D != 0 and not t["no_bias"]:
        d_stride = 0 if t["repeating_bias"] else t["D_row_stride"] * 4
        out.append(E.config_ld(d_stride, t["D_scale"], 0, dim, 1, 0))
        for i in range(I):
            for j in range(0, J, d_blocks):
                bias_row = 0 if t["repeating_bias"] else i
                addr = D + (bias_row * t["D_row_stride"] + j) * dim * 4
                blocks = d_blocks if j + d_blocks <= J else J - j
                cols = blocks * dim - (pad_J if j + blocks >= J else 0)
                rows = dim - (pad_I if i == I - 1 else 0)
                out.append(E.mvin(E.MVIN, addr, d_start + (i * J + j) * dim, cols, rows))
    out.append(E.config_ld(t["B_row_stride"], t["B_scale"], 0, dim, 1, 0))
    for j in range(0, J, b_blocks):
        for k in range(K):
            blocks = b_blocks if j + b_blocks <= J else J - j
            cols = blocks * dim - (pad_J if j + blocks >= J else 0)
            rows = dim - (pad_K if k == K - 1 else 0)
            out.append(E.mvin(E.MVIN, B + (k * t["B_row_stride"] + j) * dim, b_start + (k * J + j) * dim, cols, rows))
    out.append(E.config_ld(t["A_row_stride"], t["A_scale"], 0, dim, 1, 0))
    for i in range(I):
        for k in range(0, K, a_blocks):
            blocks = a_blocks if k + a_blocks <= K else K - k
            cols = blocks * dim - (pad_K if k + blocks >= K else 0)
            rows = dim - (pad_I if i == I - 1 else 0)
            out.append(E.mvin(E.MVIN, A + (i * t["A_row_stride"] + k) * dim, a_start + (i * K + k) * dim, cols, rows))
    for i in range(I):
        for j in range(J):
            c_addr = c_start + (i * J + j) * dim
            for k in range(K):
                a_addr = a_start + (i * K + k) * dim
                b_addr = b_start + (k * J + j) * dim
                o = c_addr if k == K - 1 else E.GARBAGE_ADDR
                if t["no_bias"] and D != 0 and k == K - 1:
                    o &= ~(1 << 30) & 0xFFFFFFFF
                a_cols = dim - (pad_K if k == K - 1 else 0)
                a_rows = dim - (pad_I if i == I - 1 else 0)
                b_cols = dim - (pad_J if j == J - 1 else 0)
                b_rows = dim - (pad_K if k == K - 1 else 0)
                out.append(E.preload(E.GARBAGE_ADDR, o, dim, dim, b_cols, a_rows))
                out.append(E.compute(k == 0, a_addr, b_addr, a_cols, a_rows, b_cols, b_rows))
    if C != 0:
        size_c = 4 if t["full_C"] else 1
        for i in range(I):
            for j in range(J):
                addr = C + (i * t["C_row_stride"] + j) * dim * size_c
                cols = dim - (pad_J if j == J - 1 else 0)
                rows = dim - (pad_I if i == I - 1 else 0)
                out.append(E.mvout(addr, c_start + (i * J + j) * dim, cols, rows))
    return out
