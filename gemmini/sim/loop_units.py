"""What each of Gemmini's loop sub-unrollers issues for one fired loop, in its own order.

``LoopMatmul`` (LOOP_WS) has five sub-unrollers: ldA (mvin, id 0), ldB
(mvin2, id 1), ldD (mvin3, id 2, into the accumulator), ex (preload +
compute pairs) and stC (mvout); ``LoopConv`` (LOOP_CONV_WS) has ld_bias,
ld_input, ld_weights (each a config_ld, then its mvins), ex and st.  The
functions here return each sub-unroller's command list with the iterator
values the hazard rules of ``gemmini.sim.loops`` compare; they follow
Gemmini's Scala (ucb-bar/gemmini, ``LoopMatmul.scala``, ``LoopConv.scala``)
address by address, including its quirks:

* ldB always moves DIM rows (its ragged-K test compares a bound with itself),
  so the last K block of B reads up to DIM rows; the preload then uses only
  the real ones.
* A block of padding (LOOP_CONV_WS) is an mvin from main-memory address 0,
  which Gemmini turns into zeros.
* A main-memory offset is taken modulo 2**32 (``castDramOffset``).

Addresses: LOOP_WS puts A at the loop slot's half of the scratchpad (or
the half its spad id names), B at the end of that half, D and C in the
accumulator half the unroller is at; LOOP_CONV_WS likewise with its
input, weights, bias and output.  Everything is in rows (local) and bytes
(main memory).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import isa
from ..config import GemminiConfig
from ..errors import SimulationError
from ..numerics import float32_bits

_MASK32 = 0xFFFFFFFF
#: the mvin scale LoopConv writes into its config_ld commands (1.0)
_SCALE_ONE = float32_bits(1.0)


@dataclass(frozen=True)
class Entry:
    """One command of a sub-unroller: the queue it enters ("load", "execute", "store"), the command and
    the iterator values (by name) that the hazard rules read while it is the next one to issue."""

    kind: str
    cmd: isa.Command
    tag: tuple = ()


def _floor_add(u: int, n: int, top: int) -> int:
    return 0 if u + n > top - 1 else u + n


def block_lens(cfg: GemminiConfig) -> tuple[int, int]:
    """DIM-blocks one mvin moves at input width and at accumulator width (Gemmini's max_block_len(_acc))."""
    row = cfg.dim
    return max(cfg.max_mvin_bytes // (row * cfg.input_bytes), 1), max(cfg.max_mvin_bytes // (row * cfg.acc_bytes), 1)


def _mvin(cfg, ident, dram, local, rows, cols, origin):
    try:
        return isa.mvin(dram, local, rows, cols, ident, config=cfg)
    except SimulationError as exc:
        raise SimulationError(f"the unrolled mvin is illegal: {exc}", source="gemmini loop unroller",
                              field=exc.field, index=origin) from None


def spad_bases(slot: int, a_spad_id: int, b_spad_id: int, cfg: GemminiConfig) -> tuple[int, int]:
    """(A start row, B end row) of a loop in ``slot`` (0/1): its half of the scratchpad, or the half a spad id
    names (1: the first, 2: the second)."""
    half = cfg.sp_rows // 2
    a_start = slot * half if a_spad_id == 0 else (a_spad_id - 1) * half
    b_end = (slot + 1) * half if b_spad_id == 0 else b_spad_id * half
    return a_start, b_end


# --- LOOP_WS ---------------------------------------------------------------------
def ws_units(f: dict, slot: int, d_start: int, c_start: int, st_start: int, cfg: GemminiConfig,
             origin: int) -> dict[str, list[Entry]]:
    """The commands of LOOP_WS with fields ``f`` (bounds, addresses, strides and start word) in ``slot``,
    with its D, C (execute) and C (store) accumulator rows starting at ``d_start``, ``c_start``, ``st_start``."""
    dim = cfg.dim
    blen, blen_acc = block_lens(cfg)
    I, J, K = f["I"], f["J"], f["K"]
    a_start, b_end = spad_bases(slot, f["a_spad_id"], f["b_spad_id"], cfg)
    b_start = b_end - K * J * dim
    if b_start < 0 or a_start + I * K * dim > cfg.sp_rows:
        raise SimulationError(f"A ({I}x{K} blocks) and B ({K}x{J} blocks) do not fit their scratchpad half",
                              source="gemmini loop unroller", field="loop_ws_config_bounds", index=origin)
    out: dict[str, list[Entry]] = {"ldA": [], "ldB": [], "ldD": [], "ex": [], "stC": []}

    def loads(name, ident, dram_base, stride, transpose, n_out, n_in, pad_out, pad_in, start, buggy_rows):
        """A (out = i, in = k) or B (out = k, in = j): the Scala steps the A/B-specific fast iterator first (i for
        A, j for B) and the other one when it wraps; the stored matrix has rows = out (in when transposed)."""
        max_rows, max_cols = (n_in, n_out) if transpose else (n_out, n_in)
        pad_rows, pad_cols = (pad_in, pad_out) if transpose else (pad_out, pad_in)
        max_blocks = min(max_cols, blen)
        fast_out = name == "ldA"  # ldA steps i (its out) fastest, ldB steps j (its in) fastest
        o = n = 0
        while True:
            r, c = (n, o) if transpose else (o, n)
            dram = dram_base + (((r * stride + c) * dim * cfg.input_bytes) & _MASK32)
            blocks = max_blocks if c + max_blocks <= max_cols else max_cols - c
            cols = blocks * dim - (pad_cols if c + blocks >= max_cols else 0)
            rows = dim if buggy_rows else dim - (pad_rows if r == max_rows - 1 else 0)
            cmd = _mvin(cfg, ident, dram, start + (r * max_cols + c) * dim, rows, cols, origin)
            out[name].append(Entry("load", cmd, (o, n)))
            o_step, n_step = (max_blocks if transpose else 1, 1 if transpose else max_blocks)
            if fast_out:
                o = _floor_add(o, o_step, n_out)
                n = _floor_add(n, n_step, n_in) if o == 0 else n
            else:
                n = _floor_add(n, n_step, n_in)
                o = _floor_add(o, o_step, n_out) if n == 0 else o
            if o == 0 and n == 0:
                return

    if f["A"]:  # tags (i, k)
        loads("ldA", 0, f["A"], f["A_stride"], bool(f["A_transpose"]), I, K, f["pad_I"], f["pad_K"], a_start, False)
    if f["B"]:  # tags (k, j)
        loads("ldB", 1, f["B"], f["B_stride"], bool(f["B_transpose"]), K, J, f["pad_K"], f["pad_J"], b_start, True)
    if f["D"]:
        d_blocks = min(J, blen if f["low_D"] else blen_acc)
        elem = cfg.input_bytes if f["low_D"] else cfg.acc_bytes
        for j in range(0, J, d_blocks):
            for i in range(I):
                blocks = min(d_blocks, J - j)
                cols = blocks * dim - (f["pad_J"] if j + blocks >= J else 0)
                rows = dim - (f["pad_I"] if i == I - 1 else 0)
                dram = f["D"] + (((i * f["D_stride"] + j) * dim * elem) & _MASK32)
                local = isa.acc(d_start + (i * J + j) * dim)
                out["ldD"].append(Entry("load", _mvin(cfg, 2, dram, local, rows, cols, origin), (i, j)))
    ta, tb = bool(f["A_transpose"]), bool(f["B_transpose"])
    for k in range(K):
        for j in range(J):
            for i in range(I):
                a_addr = a_start + ((k * I + i) if ta else (i * K + k)) * dim
                b_addr = b_start + ((j * K + k) if tb else (k * J + j)) * dim
                c_addr = c_start + (i * J + j) * dim
                k_rows = dim - (f["pad_K"] if k == K - 1 else 0)
                i_rows = dim - (f["pad_I"] if i == I - 1 else 0)
                j_cols = dim - (f["pad_J"] if j == J - 1 else 0)
                c_local = isa.acc(c_addr, accumulate=bool(f["ex_accumulate"]) or k != 0)
                pre = isa.preload(b_addr if i == 0 else isa.GARBAGE, c_local, k_rows, j_cols, i_rows, j_cols, config=cfg)
                comp = (isa.compute_preloaded if i == 0 else isa.compute_accumulated)(
                    a_addr, isa.GARBAGE, i_rows, k_rows, dim, dim, config=cfg)
                out["ex"] += [Entry("execute", pre, (k, j, i)), Entry("execute", comp, (k, j, i))]
    if f["C"]:
        full = bool(f["full_C"])
        c_blocks = 1 if full else min(J, blen)
        elem = cfg.acc_bytes if full else cfg.input_bytes
        for j in range(0, J, c_blocks):
            for i in range(I):
                blocks = min(c_blocks, J - j)
                cols = blocks * dim - (f["pad_J"] if j + blocks >= J else 0)
                rows = dim - (f["pad_I"] if i == I - 1 else 0)
                dram = f["C"] + (((i * f["C_stride"] + j) * dim * elem) & _MASK32)
                cmd = isa.mvout(dram, isa.acc(st_start + (i * J + j) * dim, full=full), rows, cols, config=cfg)
                out["stC"].append(Entry("store", cmd, (i, j, blocks)))
    return out


# --- LOOP_CONV_WS ------------------------------------------------------------------
def conv_derived(f: dict, cfg: GemminiConfig) -> dict:
    """LoopConv's derived parameters (image rows/cols with padding, local block strides, weight rows)."""
    dim, ds = cfg.dim, f["downsample"]
    dil = f["kernel_dilation"]
    irows = f["orows"] * f["stride"] + f["krows"] + (dil - 1) * (f["krows"] - 1) - 1
    icols = f["ocols"] * f["stride"] + f["kcols"] + (dil - 1) * (f["kcols"] - 1) - 1
    ochs, kchs = f["pochs"], f["kchs"]
    return {"irows": irows, "icols": icols, "irows_unpadded": irows - f["upad"] - f["dpad"],
            "icols_unpadded": icols - f["lpad"] - f["rpad"], "ochs": ochs,
            "bias_spad_stride": f["batches"] * f["orows"] * f["ocols"],
            "input_spad_stride": f["batches"] * (irows >> ds) * (icols >> ds),
            "weight_spad_stride": f["krows"] * f["kcols"] * kchs,
            "b_rows": -(-ochs // dim) * f["kcols"] * f["krows"] * kchs}


def _config_ld(ident: int, local_stride: int, pixel_repeats: int, stride_bytes: int) -> isa.Command:
    """The config_ld LoopConv issues (scale 1.0, not shrunk, its pixel-repeat field set)."""
    rs1 = (_SCALE_ONE << 32) | ((local_stride & 0xFFFF) << 16) | ((pixel_repeats & 0xFF) << 8) | (ident << 3) \
        | isa.CONFIG_LD
    return isa.Command(isa.CONFIG, rs1, stride_bytes)


def conv_units(f: dict, slot: int, bias_start: int, c_start: int, st_start: int, cfg: GemminiConfig,
               origin: int) -> dict[str, list[Entry]]:
    """The commands of LOOP_CONV_WS with fields ``f`` in ``slot`` (see ``ws_units`` for the starts)."""
    dim = cfg.dim
    blen, blen_acc = block_lens(cfg)
    d = conv_derived(f, cfg)
    ds = f["downsample"]
    ochs, kchs = d["ochs"], f["kchs"]
    batches, orows, ocols = f["batches"], f["orows"], f["ocols"]
    a_start, b_end = spad_bases(slot, f["a_spad_id"], f["b_spad_id"], cfg)
    b_start = b_end - d["b_rows"]
    if b_start < 0:
        raise SimulationError(f"the weights ({d['b_rows']} rows) do not fit their scratchpad half",
                              source="gemmini loop unroller", field="loop_conv_ws_config_3", index=origin)
    out: dict[str, list[Entry]] = {"ld_bias": [], "ld_input": [], "ld_weights": [], "ex": [], "st": []}
    pixel = orows * ocols
    if f["bias"]:
        out["ld_bias"].append(Entry("load", _config_ld(2, d["bias_spad_stride"], 1, 0)))
        step = min(ochs, blen_acc * dim)
        for b in range(batches):
            for orow in range(orows):
                for ocol in range(0, ocols, dim):
                    for och in range(0, ochs, step):
                        dram = 0 if f["no_bias"] else f["bias"] + ((och * cfg.acc_bytes) & _MASK32)
                        local = isa.acc(bias_start + (och // dim) * batches * pixel + b * pixel + orow * ocols + ocol)
                        cmd = _mvin(cfg, 2, dram, local, min(ocols - ocol, dim), min(ochs - och, step), origin)
                        out["ld_bias"].append(Entry("load", cmd))
    if f["input"]:
        out["ld_input"].append(Entry("load", _config_ld(0, d["input_spad_stride"], f["max_pixels_per_row"],
                                                        (f["in_stride"] * cfg.input_bytes) << ds)))
        step = min(kchs, blen * dim)
        iru, icu = d["irows_unpadded"], d["icols_unpadded"]
        cols_ds, rows_ds = d["icols"] >> ds, d["irows"] >> ds
        for b in range(batches):
            for irow in range(-f["upad"], iru + f["dpad"], 1 << ds):
                icol = -f["lpad"]
                while icol < icu + f["rpad"]:
                    if icol < 0:
                        width = min(-icol, dim)
                    elif icol >= icu:
                        width = min(icu + f["rpad"] - icol, dim)
                    else:
                        width = min(icu - icol, dim << ds)
                    zeros = irow < 0 or irow >= iru or icol < 0 or icol >= icu
                    for ich in range(0, kchs, step):
                        offset = (b * f["in_row_dim"] * f["in_col_dim"] + irow * f["in_col_dim"] + icol) \
                            * f["in_stride"] + ich
                        dram = 0 if zeros else f["input"] + ((offset * cfg.input_bytes) & _MASK32)
                        local = a_start + (ich // dim) * d["input_spad_stride"] + b * rows_ds * cols_ds \
                            + ((irow + f["upad"]) >> ds) * cols_ds + ((icol + f["lpad"]) >> ds)
                        cmd = _mvin(cfg, 0, dram, local, width >> ds, min(kchs - ich, step), origin)
                        out["ld_input"].append(Entry("load", cmd))
                    icol += width
    if f["weights"]:
        stride_bytes = (1 if f["dw"] else f["weight_stride"]) * cfg.input_bytes
        out["ld_weights"].append(Entry("load", _config_ld(1, d["weight_spad_stride"], 1, stride_bytes)))
        step = min(ochs, blen * dim)
        for och in range(0, ochs, step):
            for krow in range(f["krows"]):
                for kcol in range(f["kcols"]):
                    for kch in range(0, kchs, dim):
                        if f["dw"]:
                            offset = krow * f["kernel_dim"] + kcol
                        else:
                            offset = (krow * f["kernel_dim"] * f["in_channels"] + kcol * f["in_channels"] + kch) \
                                * f["weight_stride"] + och
                        dram = f["weights"] + ((offset * cfg.input_bytes) & _MASK32)
                        local = b_start + (och // dim) * d["weight_spad_stride"] + (krow * f["kcols"] + kcol) * kchs + kch
                        cmd = _mvin(cfg, 1, dram, local, min(kchs - kch, dim), min(ochs - och, step), origin)
                        out["ld_weights"].append(Entry("load", cmd))
    dil, stride = f["kernel_dilation"], f["stride"]
    pixels_max = max(1, f["max_pixels_per_row"])  # a row of A holds this many neighbouring pixels
    for och in range(0, ochs, dim):
        for krow in range(f["krows"]):
            for kcol in range(0, f["kcols"], pixels_max):
                for kch in range(0, kchs, dim):
                    new_weights = True
                    for b in range(batches):
                        for orow in range(orows):
                            for ocol in range(0, ocols, dim):
                                irow, icol = orow * stride + krow * dil, ocol * stride + kcol * dil
                                rows_i, cols_j = min(ocols - ocol, dim), min(ochs - och, dim)
                                k_rows = min(f["kcols"] - kcol, pixels_max) * min(kchs - kch, dim)
                                a_addr = a_start + (kch // dim) * d["input_spad_stride"] \
                                    + b * (d["irows"] >> ds) * (d["icols"] >> ds) + (irow >> ds) * (d["icols"] >> ds) \
                                    + (icol >> ds)
                                c_addr = c_start + (och // dim) * batches * pixel + b * pixel + orow * ocols + ocol
                                b_addr = b_start + (och // dim) * d["weight_spad_stride"] + (krow * f["kcols"] + kcol) \
                                    * kchs + kch
                                pre = isa.preload(b_addr if new_weights else isa.GARBAGE, isa.acc(c_addr, accumulate=True),
                                                  k_rows, cols_j, rows_i, cols_j, config=cfg)
                                comp = (isa.compute_preloaded if new_weights else isa.compute_accumulated)(
                                    a_addr, isa.GARBAGE, rows_i, k_rows, rows_i, cols_j, config=cfg)
                                out["ex"] += [Entry("execute", pre), Entry("execute", comp)]
                                new_weights = False
    if f["output"] and not f["no_pool"]:
        out["st"] = _pool_stores(f, d, st_start, cfg)
    elif f["output"]:
        for b in range(batches):
            for orow in range(orows):
                for ocol in range(0, ocols, dim):
                    for och in range(0, ochs, dim):
                        offset = (b * f["out_row_dim"] * f["out_col_dim"] + orow * f["out_col_dim"] + ocol) \
                            * f["out_stride"] + och
                        dram = f["output"] + ((offset * cfg.input_bytes) & _MASK32)
                        local = isa.acc(st_start + (och // dim) * batches * pixel + b * pixel + orow * ocols + ocol)
                        cmd = isa.mvout(dram, local, min(ocols - ocol, dim), min(ochs - och, dim), config=cfg)
                        out["st"].append(Entry("store", cmd))
    return out


def _config_st_pool(f: dict, pool: bool, cfg: GemminiConfig) -> isa.Command:
    """LoopSt's config_st around pooled stores: the pooling fields (or none), its activation, the output stride,
    and the scale left unchanged (0xFFFFFFFF)."""
    rs1 = ((f["activation"] & 3) << 2) | isa.CONFIG_ST
    if pool:
        for value, lo, mask in ((f["pool_stride"], 4, 3), (f["pool_size"], 6, 3), (f["pupad"], 8, 3),
                                (f["plpad"], 10, 3), (f["pool_out_col_dim"], 24, 0xFF), (f["porows"], 32, 0xFF),
                                (f["pocols"], 40, 0xFF), (f["orows"], 48, 0xFF), (f["ocols"], 56, 0xFF)):
            rs1 |= (value & mask) << lo
    return isa.Command(isa.CONFIG, rs1, (0xFFFFFFFF << 32) | (f["out_stride"] * cfg.input_bytes))


def _pool_stores(f: dict, d: dict, st_start: int, cfg: GemminiConfig) -> list[Entry]:
    """LoopConvSt with pooling: config_st with the pooling fields, one pooled mvout per (image, DIM channels), and
    config_st without them.  Gemmini leaves the pooled mvout's row count undefined; we write 1."""
    dim, batches, ochs = cfg.dim, f["batches"], d["ochs"]
    pixels = f["orows"] * f["ocols"]
    out = [Entry("store", _config_st_pool(f, True, cfg))]
    for b in range(batches):
        for och in range(0, ochs, dim):
            dram = f["output"] + (b * f["pool_out_row_dim"] * f["pool_out_col_dim"] * f["out_stride"] + och) \
                * cfg.input_bytes
            local = isa.acc(st_start + (och // dim) * batches * pixels + b * pixels)
            out.append(Entry("store", isa.Command(isa.MVOUT, dram, (1 << 48) | (min(ochs - och, dim) << 32) | local)))
    out.append(Entry("store", _config_st_pool(f, False, cfg)))
    return out
