"""Loop instructions (LOOP_WS, LOOP_CONV_WS): encodings, the unroller, the functional and timing models."""

from __future__ import annotations

import numpy as np
import pytest

from gemmini import isa, isa_loops as L, loop_commands as LC
from gemmini.config import DEFAULT_CONFIG
from gemmini.errors import IsaError, SimulationError
from gemmini.reference import conv_ref, matmul_ref
from gemmini.sim import execute, timing
from gemmini.sim.loops import Unroller, expand

DIM = DEFAULT_CONFIG.dim
SCALE = 0.05


# --- streams as gemmini.h's tiled_matmul / tiled_conv would issue them -------------------------------
def _layout(sizes: dict, base: int = 0x1000) -> tuple[dict, int]:
    """Buffers at nonzero, 64-byte-aligned addresses, with DIM rows of slack after each (ldB reads whole blocks)."""
    out, pos = {}, base
    for name, nbytes in sizes.items():
        out[name] = pos
        pos += -(-(nbytes + 64 * DIM) // 64) * 64
    return out, pos


def matmul_case(M, N, K, tiles, bias, a_t=False, b_t=False, seed=0, cfg=DEFAULT_CONFIG):
    """(commands, memory, buffers, expected C) of C = A @ B (+ bias rows) tiled into LOOP_WS calls."""
    rng = np.random.default_rng(seed)
    A = rng.integers(-20, 20, (M, K), dtype=np.int8)
    B = rng.integers(-20, 20, (K, N), dtype=np.int8)
    D = rng.integers(-300, 300, (M, N), dtype=np.int32) if bias else None
    a_store = np.ascontiguousarray(A.T) if a_t else A
    b_store = np.ascontiguousarray(B.T) if b_t else B
    bufs, size = _layout({"A": A.nbytes, "B": B.nbytes, "D": M * N * 4, "C": M * N})
    mem = np.zeros(size, dtype=np.uint8)
    mem[bufs["A"]:bufs["A"] + A.nbytes] = a_store.view(np.uint8).ravel()
    mem[bufs["B"]:bufs["B"] + B.nbytes] = b_store.view(np.uint8).ravel()
    if bias:
        mem[bufs["D"]:bufs["D"] + D.nbytes] = D.view(np.uint8).ravel()
    sa, sb = a_store.shape[1], b_store.shape[1]
    cmds = [isa.config_ex("ws", 0, a_t, b_t, 1, 1.0, 1, 0, config=cfg), isa.config_st(N, 0, SCALE, config=cfg),
            isa.config_ld(sa, config=cfg), isa.config_ld(sb, id=1, config=cfg), isa.config_ld(N * 4, id=2, config=cfg)]
    DIM = cfg.dim  # noqa: N806
    tI, tJ, tK = tiles
    Ip, Jp, Kp = (-(-x // DIM) for x in (M, N, K))
    for i0 in range(0, Ip, tI):
        for j0 in range(0, Jp, tJ):
            for k0 in range(0, Kp, tK):
                I, J, Kb = min(tI, Ip - i0), min(tJ, Jp - j0), min(tK, Kp - k0)
                pad_I = Ip * DIM - M if i0 + I == Ip else 0
                pad_J = Jp * DIM - N if j0 + J == Jp else 0
                pad_K = Kp * DIM - K if k0 + Kb == Kp else 0
                r, c, k = i0 * DIM, j0 * DIM, k0 * DIM
                a = bufs["A"] + ((k * sa + r) if a_t else (r * sa + k))
                b = bufs["B"] + ((c * sb + k) if b_t else (k * sb + c))
                d = bufs["D"] + (r * N + c) * 4 if bias and k0 == 0 else 0
                out = bufs["C"] + r * N + c if k0 + Kb == Kp else 0
                cmds += LC.loop_ws(I, J, Kb, pad_I, pad_J, pad_K, a, b, d, out, sa, sb, N, N, a_t, b_t, 0, 0,
                                  bool(d) or k0 > 0, 0, 0, 0, 0, config=cfg)
    cmds.append(isa.fence())
    expected = matmul_ref(A, B, D, scale=SCALE)
    return cmds, mem, bufs, expected


def run_c(cmds, mem, bufs, shape, cfg=DEFAULT_CONFIG):
    execute(cmds, mem, cfg)
    n = int(np.prod(shape))
    return mem[bufs["C"]:bufs["C"] + n].view(np.int8).reshape(shape)


# --- encodings ---------------------------------------------------------------------------------------
def test_loop_ws_words_are_gemmini_h_layouts():
    cmds = LC.loop_ws(2, 3, 4, 1, 2, 3, 0x1000, 0x2000, 0x3000, 0x4000, 64, 48, 40, 32, 1, 0, 1, 1, 1, 1, 2, 1, 0)
    assert [c.funct for c in cmds] == [9, 10, 11, 12, 13, 8]
    assert (cmds[0].rs1, cmds[0].rs2) == ((3 << 32) | (2 << 16) | 1, (4 << 32) | (3 << 16) | 2)
    assert (cmds[1].rs1, cmds[1].rs2, cmds[2].rs1, cmds[2].rs2) == (0x1000, 0x2000, 0x3000, 0x4000)
    assert (cmds[3].rs1, cmds[3].rs2, cmds[4].rs1, cmds[4].rs2) == (64, 48, 40, 32)
    assert cmds[5].rs1 == (2 << 18) | (1 << 16) | (1 << 8) | (1 << 2) | (1 << 1) | 1
    assert cmds[5].rs2 == 1


def test_loop_conv_words_are_gemmini_h_layouts():
    cmds = LC.loop_conv_ws(batch_size=2, in_row_dim=9, in_col_dim=7, in_channels=5, out_channels=6, out_row_dim=4,
                          out_col_dim=3, pool_out_row_dim=4, pool_out_col_dim=3, stride=2, padding=1, kernel_dim=3,
                          kernel_dilation=1, pool_size=1, pool_stride=1, batches=1, porows=4, pocols=3, pochs=6,
                          krows=3, kcols=3, kchs=5, lpad=1, rpad=0, upad=1, dpad=0, orows=4, ocols=3, weights=0x100,
                          output=0x200, bias=0x300, input=0x400, no_pool=1, activation=1, in_stride=5,
                          weight_stride=6, out_stride=6, max_pixels_per_row=1, a_spad_id=1)
    assert [c.funct for c in cmds] == [16, 17, 18, 19, 20, 21, 15]
    assert cmds[0].rs1 == (6 << 48) | (5 << 32) | (9 << 16) | 2
    assert cmds[0].rs2 == (1 << 56) | (2 << 48) | (3 << 32) | (4 << 16) | 4
    assert cmds[1].rs1 == (3 << 48) | (3 << 32) | (1 << 16) | (1 << 8)
    assert cmds[1].rs2 == (1 << 48) | (4 << 32) | (3 << 16) | 6
    assert cmds[2].rs1 == (3 << 48) | (3 << 32) | (5 << 16) | 1
    assert cmds[2].rs2 == (1 << 32) | 7
    assert cmds[3].rs1 == (4 << 48) | 1 and cmds[3].rs2 == (5 << 48) | (6 << 32) | (6 << 16) | 3
    assert (cmds[4].rs1, cmds[4].rs2, cmds[5].rs1, cmds[5].rs2) == (0x100, 0x200, 0x300, 0x400)
    assert cmds[6].rs1 == (1 << 18) | (1 << 8) and cmds[6].rs2 == (1 << 3) | 1


def test_round_trip_decode_disassemble():
    words = LC.loop_ws(I=3, J=2, K=5, pad_I=4, pad_K=15, A=0x40, B=0x80, C=0xC0, A_stride=80, B_stride=32,
                      C_stride=32, B_transpose=1, act=1)
    words += LC.loop_conv_ws(batches=1, porows=2, pocols=2, pochs=16, krows=1, kcols=1, kchs=8, orows=2, ocols=2,
                            stride=1, kernel_dim=1, dw=1, downsample=1, upad=3, pdpad=5, pupad=9)
    for cmd in words:
        again = isa.decode(cmd.funct, cmd.rs1, cmd.rs2)
        fields = isa.validate(again)
        assert again == cmd and fields["name"] == L.FUNCT_NAMES[cmd.funct]
        assert L.encode_word(cmd.funct, {k: v for k, v in fields.items() if k not in ("name", "funct")}) == \
            (cmd.rs1, cmd.rs2)
        assert str(cmd).startswith(L.FUNCT_NAMES[cmd.funct])
    assert isa.decode_stream(isa.encode_stream(words)) == tuple(words)


@pytest.mark.parametrize("kwargs, field", [
    (dict(I=1 << 16, J=1, K=1), "I"), (dict(I=1, J=1, K=1, pad_J=DIM), "pad_J"), (dict(I=0, J=1, K=1), "I"),
    (dict(I=1, J=1, K=1, A_transpose=1, B_transpose=1), "B_transpose"), (dict(I=1, J=1, K=1, a_spad_id=3), "a_spad_id"),
    (dict(I=1, J=1, K=1, act=256), "act"), (dict(I=1, J=1, K=1, A=1 << 64), "A"), (dict(I=1, J=1, K=1, Q=1), "Q")])
def test_loop_ws_field_overflow_is_refused(kwargs, field):
    with pytest.raises(IsaError) as err:
        LC.loop_ws(**kwargs)
    assert err.value.field == field


def test_loop_ws_argument_mistakes_are_refused():
    with pytest.raises(IsaError, match="positional"):
        LC.loop_ws(*range(1, 25))
    with pytest.raises(IsaError) as err:
        LC.loop_ws(1, 1, 1, I=2)
    assert err.value.field == "I"


@pytest.mark.parametrize("field, value", [("stride", 256), ("plpad", 256), ("kernel_dilation", 1024),
                                          ("pupad", 2048), ("activation", 4), ("orows", 1 << 16)])
def test_loop_conv_field_overflow_is_refused(field, value):
    args = dict(batches=1, porows=1, pocols=1, pochs=1, krows=1, kcols=1, kchs=1, orows=1, ocols=1, stride=1,
                kernel_dim=1)
    args[field] = value
    with pytest.raises(IsaError) as err:
        LC.loop_conv_ws(**args)
    assert err.value.field == field


# --- LOOP_WS on the functional model -------------------------------------------------------------------
@pytest.mark.parametrize("M, N, K, tiles, bias, a_t, b_t", [
    (16, 16, 16, (1, 1, 1), False, False, False),
    (40, 24, 50, (2, 2, 2), True, False, False),   # ragged I, J, K; two K tiles; bias on the first
    (64, 80, 48, (2, 4, 1), True, False, False),   # wide mvouts and bias mvins, 8 loops in flight in pairs
    (33, 17, 70, (3, 2, 4), False, True, False),   # A transposed
    (20, 45, 36, (2, 3, 2), True, False, True),    # B transposed
])
def test_loop_ws_matmul_is_bit_exact(M, N, K, tiles, bias, a_t, b_t):
    cmds, mem, bufs, expected = matmul_case(M, N, K, tiles, bias, a_t, b_t)
    got = run_c(cmds, mem, bufs, (M, N))
    np.testing.assert_array_equal(got, expected)
    assert np.count_nonzero(np.abs(expected.astype(int)) < 127) > expected.size // 2  # the check is not saturated


def _maxpool(x, size, stride, pad):
    """int8 NHWC max-pooling in which padding counts as 0 (as Gemmini's pooled mvout reads it)."""
    n, h, w, k = x.shape
    ph, pw = (h + 2 * pad - size) // stride + 1, (w + 2 * pad - size) // stride + 1
    padded = np.zeros((n, h + 2 * pad + size, w + 2 * pad + size, k), dtype=np.int16)
    padded[:, pad:pad + h, pad:pad + w] = x
    out = np.full((n, ph, pw, k), -128, dtype=np.int16)
    for r in range(size):
        for c in range(size):
            out = np.maximum(out, padded[:, r:r + (ph - 1) * stride + 1:stride, c:c + (pw - 1) * stride + 1:stride])
    return out.astype(np.int8)


def conv_case(n, h, w, c, k, r, stride, pad, tiles, bias=True, seed=0, pixels=1, dw=False, pool=None,
              cfg=DEFAULT_CONFIG):
    """(commands, memory, buffers, expected NHWC output) of a convolution (with max-pooling ``pool`` = (size,
    stride, padding)) tiled into LOOP_CONV_WS calls the way gemmini.h's tiled_conv walks its tiles (batch,
    pooled rows, pooled cols, out channels, kernel rows, cols, in channels)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-20, 20, (n, h, w, c), dtype=np.int8)
    wt = rng.integers(-20, 20, (r, r, c, k), dtype=np.int8)
    bv = rng.integers(-300, 300, (k,), dtype=np.int32)
    p, q = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - r) // stride + 1
    psize, pstride, ppad = pool or (1, 1, 0)
    prd, pcd = (p + 2 * ppad - psize) // pstride + 1, (q + 2 * ppad - psize) // pstride + 1
    bufs, size = _layout({"input": x.nbytes, "weights": wt.nbytes, "bias": bv.nbytes, "C": n * prd * pcd * k})
    mem = np.zeros(size, dtype=np.uint8)
    for name, arr in (("input", x), ("weights", wt), ("bias", bv)):
        mem[bufs[name]:bufs[name] + arr.nbytes] = arr.view(np.uint8).ravel()
    cmds = [isa.config_st(k, 0, SCALE, config=cfg), isa.config_ex("ws", 0, False, False, stride, 1.0, 1, 0, config=cfg)]
    tb, tpr, tpc, tpo, tkr, tkc, tkch = tiles
    for b0 in range(0, n, tb):
        for porow in range(0, prd, tpr):
            orow = porow * pstride - ppad
            for pocol in range(0, pcd, tpc):
                ocol = pocol * pstride - ppad
                for och in range(0, k, tpo):
                    for krow in range(0, r, tkr):
                        irow = max(orow, 0) * stride + krow - pad
                        for kcol in range(0, r, tkc):
                            icol = max(ocol, 0) * stride + kcol - pad
                            for kch in range(0, c, tkch):
                                nb, porows, pocols = min(tb, n - b0), min(tpr, prd - porow), min(tpc, pcd - pocol)
                                ochs, krows, kcols, kchs = min(tpo, k - och), min(tkr, r - krow), min(tkc, r - kcol), \
                                    min(tkch, c - kch)
                                orows, ocols = porows * pstride + psize - 1, pocols * pstride + psize - 1
                                pupad, plpad = max(-orow, 0), max(-ocol, 0)
                                pdpad, prpad = max(orow + orows - p, 0), max(ocol + ocols - q, 0)
                                irows = (orows - pupad - pdpad) * stride + krows - 1
                                icols = (ocols - plpad - prpad) * stride + kcols - 1
                                lpad, upad = max(-icol, 0), max(-irow, 0)
                                rpad, dpad = max(icol + icols - w, 0), max(irow + irows - h, 0)
                                last = krow + krows >= r and kcol + kcols >= r and kch + kchs >= c
                                first = krow == 0 and kcol == 0 and kch == 0
                                out = bufs["C"] + ((b0 * prd + porow) * pcd + pocol) * k + och if last else 0
                                bias_addr = (bufs["bias"] + och * 4 if bias else 1) if first else 0
                                inp = bufs["input"] + ((b0 * h + irow + upad) * w + icol + lpad) * c + kch
                                wts = bufs["weights"] + ((krow * r + kcol) * c + kch) * k + och
                                cmds += LC.loop_conv_ws(
                                    batch_size=n, in_row_dim=h, in_col_dim=w, in_channels=c, out_channels=k,
                                    out_row_dim=p, out_col_dim=q, pool_out_row_dim=prd, pool_out_col_dim=pcd,
                                    stride=stride, padding=pad, kernel_dim=r, kernel_dilation=1, pool_size=psize,
                                    pool_stride=pstride, pool_padding=ppad, batches=nb, porows=porows, pocols=pocols,
                                    pochs=ochs, krows=krows, kcols=kcols, kchs=kchs, lpad=lpad, rpad=rpad, upad=upad,
                                    dpad=dpad, plpad=plpad, prpad=prpad, pupad=pupad, pdpad=pdpad,
                                    orows=orows - pupad - pdpad, ocols=ocols - plpad - prpad, weights=wts, output=out,
                                    bias=bias_addr, input=inp, no_bias=not bias, no_pool=pool is None, in_stride=c,
                                    weight_stride=k, out_stride=k, max_pixels_per_row=pixels, dw=dw, config=cfg)
    cmds.append(isa.fence())
    expected = conv_ref(x, wt, bv if bias else None, stride, pad, scale=SCALE)
    if pool:
        expected = _maxpool(expected, psize, pstride, ppad)
    return cmds, mem, bufs, expected


CONV_CASES = {
    "3x3 padded, one loop": (1, 8, 8, 8, 16, 3, 1, 1, (1, 8, 8, 16, 3, 3, 8), True),
    "3x3 padded, tiled rows and channels": (2, 10, 9, 20, 24, 3, 1, 1, (1, 4, 9, 16, 3, 3, 16), True),
    "3x3 stride 2, kernel split": (1, 11, 11, 6, 10, 3, 2, 1, (1, 3, 6, 10, 2, 3, 6), False),
    "1x1": (1, 7, 7, 40, 36, 1, 1, 0, (1, 7, 7, 36, 1, 1, 40), True),
    # first-layer optimisation: 3 input channels, 5 pixels per row of A (gemmini.h: DIM / channels, at most kcols)
    "7x7 stride 2, 3 channels, 5 pixels per row": (1, 16, 14, 3, 16, 7, 2, 3, (1, 4, 7, 16, 7, 7, 3), True, 0, 5),
    # one channel of a depthwise convolution (the dw weight path), 3 pixels per row
    "depthwise channel, 3 pixels per row": (1, 9, 9, 1, 1, 3, 1, 1, (1, 9, 9, 1, 3, 3, 1), True, 0, 3, True),
    # max-pooled (3x3, stride 2, padding 1, as ResNet-50's conv1) in pooled-row tiles
    "3x3 then 3x3/2 max-pool": (2, 12, 12, 8, 20, 3, 1, 1, (1, 2, 6, 20, 3, 3, 8), True, 0, 1, False, (3, 2, 1)),
}


@pytest.mark.parametrize("name", sorted(CONV_CASES))
def test_loop_conv_is_bit_exact(name):
    cmds, mem, bufs, expected = conv_case(*CONV_CASES[name])
    got = run_c(cmds, mem, bufs, expected.shape)
    np.testing.assert_array_equal(got, expected)
    assert np.count_nonzero(np.abs(expected.astype(int)) < 127) > expected.size // 2


def _serialized(cmds):
    """The unrolled commands with a fence after each: nothing overlaps."""
    out = []
    for item in expand(cmds):
        out += [item.cmd, isa.fence()]
    return out


@pytest.mark.parametrize("case", ["matmul", "conv"])
def test_timing_overlaps_the_unrolled_commands(case):
    if case == "matmul":
        cmds, *_ = matmul_case(64, 64, 64, (2, 2, 2), True)
    else:
        cmds, *_ = conv_case(*CONV_CASES["3x3 padded, tiled rows and channels"])
    looped = timing(cmds)
    one_loop_at_a_time = timing(_one_loop_at_a_time(cmds))
    serial = timing(_serialized(cmds))
    assert looped.instructions == len(expand(cmds))
    assert looped.cycles < one_loop_at_a_time.cycles < serial.cycles


def _one_loop_at_a_time(cmds):
    """The unrolled commands with a fence between loops: no two loops in flight."""
    out, last = [], None
    for item in expand(cmds):
        if item.from_loop and last is not None and item.origin != last:
            out.append(isa.fence())
        out.append(item.cmd)
        last = item.origin if item.from_loop else None
    return out


def test_unrolled_order_matches_the_scala():
    """LOOP_WS I=2, J=1, K=1 without D, derived by hand from LoopMatmul.scala: the A/B arbiter takes B first
    (B's iterators at their start); ex (higher priority) goes as soon as ldA has issued past its (k, i); stC
    (highest) moves C row-block i once ex has moved on from it."""
    words = LC.loop_ws(2, 1, 1, 0, 0, 0, 0x1000, 0x2000, 0, 0x3000, 16, 16, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    got = [item.cmd for item in expand(list(words) * 2)]
    top = DEFAULT_CONFIG.sp_rows // 2 - DIM  # B sits at the end of the loop's half of the scratchpad
    first = [isa.mvin(0x2000, isa.sp(top), DIM, DIM, id=1), isa.mvin(0x1000, isa.sp(0), DIM, DIM),
             isa.preload(isa.sp(top), isa.acc(0), DIM, DIM, DIM, DIM),
             isa.compute_preloaded(isa.sp(0), isa.GARBAGE, DIM, DIM, DIM, DIM),
             isa.mvout(0x3000, isa.acc(0), DIM, DIM),
             isa.mvin(0x1000 + DIM * 16, isa.sp(DIM), DIM, DIM),
             isa.preload(isa.GARBAGE, isa.acc(DIM), DIM, DIM, DIM, DIM),
             isa.compute_accumulated(isa.sp(DIM), isa.GARBAGE, DIM, DIM, DIM, DIM),
             isa.mvout(0x3000 + DIM * 16, isa.acc(DIM), DIM, DIM)]
    assert got[:9] == first
    # the second loop runs in the other halves: A and B of slot 1, C in the upper accumulator half
    half, acc_half = DEFAULT_CONFIG.sp_rows // 2, DEFAULT_CONFIG.acc_rows // 2
    second = got[9:]
    assert len(second) == 9 and isa.mvin(0x2000, isa.sp(half + top), DIM, DIM, id=1) in second
    assert isa.mvin(0x1000, isa.sp(half), DIM, DIM) in second
    assert isa.mvout(0x3000, isa.acc(acc_half), DIM, DIM) in second


def test_step_by_step_holds_the_words_and_runs_the_loop_on_its_start_word():
    from gemmini.sim.functional import Machine

    cmds, mem, bufs, expected = matmul_case(40, 24, 50, (2, 2, 2), True)
    machine = Machine()
    for index, cmd in enumerate(cmds):
        machine.step(cmd, mem, index)
    got = mem[bufs["C"]:bufs["C"] + expected.size].view(np.int8).reshape(expected.shape)
    np.testing.assert_array_equal(got, expected)


def test_errors_name_the_loop_instruction():
    cmds, mem, *_ = matmul_case(16, 16, 16, (1, 1, 1), False)
    start = next(i for i, c in enumerate(cmds) if c.funct == L.LOOP_WS)
    bounds = next(i for i, c in enumerate(cmds) if c.funct == L.LOOP_WS_CONFIG_BOUNDS)
    too_big = list(cmds)
    too_big[bounds] = LC.loop_ws(I=1, J=1, K=600)[0]  # A and B no longer fit half the scratchpad
    for run in (lambda c: execute(c, mem.copy()), timing):
        with pytest.raises(SimulationError) as err:
            run(too_big)
        assert err.value.index == start
    rotated = list(cmds)
    rotated[-1:] = list(LC.loop_conv_ws(batches=1, porows=1, pocols=1, pochs=1, krows=1, kcols=1, kchs=1, orows=1,
                                       ocols=1, stride=1, kernel_dim=1, input=0x1000, no_pool=1, wrot180=1)) \
        + [isa.fence()]
    with pytest.raises(SimulationError, match="wrot180 is not modelled") as err:
        execute(rotated, mem.copy())
    assert err.value.index == len(rotated) - 2
    short = np.zeros(bufs_end(cmds) - 1, dtype=np.uint8)  # C's last row falls outside main memory
    with pytest.raises(SimulationError) as err:
        execute(cmds, short)
    assert err.value.index == start


def bufs_end(cmds):
    """One past the last main-memory byte the unrolled mvouts write."""
    ends = []
    for item in expand(cmds):
        f = isa.decode_fields(item.cmd)
        if item.cmd.funct == isa.MVOUT:
            ends.append(f["dram_addr"] + (f["rows"] - 1) * 16 + f["cols"])
    return max(ends)


# --- the header and C printing --------------------------------------------------------------------------
HOST_LOG = r"""
#include <stdio.h>
#include "gemmini_cosa.h"
void gemmini_host_issue(uint64_t funct, uint64_t rs1, uint64_t rs2) {
  printf("%llu 0x%llx 0x%llx\n", (unsigned long long)funct, (unsigned long long)rs1, (unsigned long long)rs2);
}
void gemmini_host_fence(void) { puts("fence"); }
"""


def _run_c(tmp_path, body: str) -> tuple:
    import subprocess
    from pathlib import Path

    import gemmini

    include = Path(gemmini.__file__).resolve().parent / "include"
    source = tmp_path / "loops.c"
    source.write_text(HOST_LOG + body)
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{include}", str(source), "-o",
                    str(tmp_path / "loops")], check=True, capture_output=True, text=True)
    return isa.decode_stream(subprocess.run([str(tmp_path / "loops")], check=True, capture_output=True,
                                            text=True).stdout)


def test_header_loop_macros_match_isa_loops(tmp_path):
    rng = np.random.default_rng(5)
    widths = {n: w for layout in L.LAYOUTS.values() for n, _, _, w in layout}
    rand = lambda names: {n: int(rng.integers(1, 1 << min(widths[n], 62))) for n in names}  # noqa: E731
    ws = rand(L.WS_ARGS)
    ws.update(pad_I=3, pad_J=0, pad_K=15, A_transpose=1, B_transpose=0, a_spad_id=2, b_spad_id=1)
    conv = rand(L.CONV_ARGS)
    conv.update(a_spad_id=2, b_spad_id=0)
    c_args = lambda names, vals: ", ".join(f"{vals[n]}ull" for n in names)  # noqa: E731
    body = ("int main(void) {\n"
            f"  gemmini_cosa_loop_ws({c_args(L.WS_ARGS, ws)});\n"
            f"  gemmini_cosa_loop_conv_ws({c_args(L.CONV_ARGS, conv)});\n"
            "  return 0;\n}\n")
    expected = LC.loop_ws(**ws) + LC.loop_conv_ws(**conv)
    assert _run_c(tmp_path, body) == tuple(expected)


def test_stream_with_loops_prints_as_c(tmp_path):
    from gemmini.codegen.c import stream_c

    cmds, *_ = matmul_case(40, 24, 50, (2, 2, 2), True, a_t=True)
    conv, *_ = conv_case(*CONV_CASES["3x3 stride 2, kernel split"])
    stream = tuple(cmds) + tuple(conv)
    text = stream_c(stream, name="vendor")
    logged = _run_c(tmp_path, text + "int main(void) { vendor(); return 0; }\n")
    assert logged == stream
    relative = stream_c(stream, name="vendor", spans=[(0x1000, 0x1000 + 50 * 40, "A")])
    assert "gemmini_cosa_loop_ws_config_addrs_ab(GEMMINI_COSA_PTR(A) + 0u" in relative


def test_riscv_issues_loop_words_as_rocc(tmp_path):
    import re
    import subprocess
    from pathlib import Path

    import gemmini
    from gemmini.codegen.c import stream_c

    gcc = "riscv64-unknown-elf-gcc"
    cmds, *_ = matmul_case(16, 16, 16, (1, 1, 1), False)
    conv, *_ = conv_case(*CONV_CASES["1x1"])
    source = tmp_path / "k.c"
    source.write_text('#include "gemmini_cosa.h"\n' + stream_c(tuple(cmds) + tuple(conv), name="k"))
    include = Path(gemmini.__file__).resolve().parent / "include"
    subprocess.run([gcc, "--specs=picolibc.specs", "-march=rv64gc", "-mcmodel=medany", "-O2", "-Wall", "-Werror",
                    f"-I{include}", "-c", str(source), "-o", str(tmp_path / "k.o")], check=True, capture_output=True,
                   text=True)
    dump = subprocess.run([gcc.replace("gcc", "objdump"), "-d", str(tmp_path / "k.o")], check=True,
                          capture_output=True, text=True).stdout
    words = [int(w, 16) for w in re.findall(r"^\s*[0-9a-f]+:\s+([0-9a-f]{8})\s", dump, flags=re.M)]
    functs = [w >> 25 for w in words if w & 0x7F == isa.OPCODE_CUSTOM3]
    assert functs == [c.funct for c in tuple(cmds) + tuple(conv) if c.funct != isa.FENCE]


# --- the RTL: LOOP_WS through its unroller (gemmini_loop_ws.sv), LOOP_CONV_WS unrolled on the host ---------
def test_rtl_runs_loop_streams_bit_exact():
    from gemmini.config import SMALL_CONFIG as SMALL
    from gemmini.sim import rtl

    cases = [("matmul", matmul_case(13, 10, 22, (2, 2, 3), True, cfg=SMALL)),
             ("matmul, 12 loops", matmul_case(40, 36, 30, (3, 4, 2), True, cfg=SMALL)),
             ("conv", conv_case(1, 6, 7, 5, 6, 3, 1, 1, (1, 3, 7, 6, 3, 3, 5), cfg=SMALL))]
    for name, (cmds, mem, bufs, expected) in cases:
        image = mem.copy()
        report = rtl.run_trace(cmds, image, SMALL)
        got = image[bufs["C"]:bufs["C"] + expected.size].view(np.int8).reshape(expected.shape)
        np.testing.assert_array_equal(got, expected, err_msg=name)
        if name.startswith("matmul"):  # the RTL's unroller reacts to its queues as the timing model's does
            model = timing(cmds, SMALL)
        else:  # unrolled on the host in the never-full-queue order
            model = timing([item.cmd for item in expand(cmds, SMALL)], SMALL)
        assert abs(report.cycles - model.cycles) <= 0.05 * report.cycles, (name, report.cycles, model.cycles)
    pooled, mem, *_ = conv_case(1, 6, 6, 4, 4, 3, 1, 1, (1, 2, 2, 4, 3, 3, 4), pool=(2, 2, 0), cfg=SMALL)
    with pytest.raises(SimulationError, match="pooling") as err:
        rtl.run_trace(pooled, mem.copy(), SMALL)
    assert pooled[err.value.index].funct == L.LOOP_CONV_WS
    repeats = [isa.Command(isa.CONFIG, isa.config_ld(4, config=SMALL).rs1 | (3 << 8), 4), isa.fence()]
    with pytest.raises(SimulationError) as err:  # config_ld pixel repeats: refused, not ignored
        rtl.run_trace(repeats, np.zeros(64, dtype=np.uint8), SMALL)
    assert err.value.index == 0
    bad, mem, *_ = matmul_case(8, 8, 8, (1, 1, 1), False, cfg=SMALL)  # A and B do not fit half the scratchpad
    bounds = next(i for i, c in enumerate(bad) if c.funct == L.LOOP_WS_CONFIG_BOUNDS)
    bad[bounds] = LC.loop_ws(I=1, J=1, K=200, config=SMALL)[0]
    with pytest.raises(SimulationError) as err:
        rtl.run_trace(bad, mem.copy(), SMALL)
    assert bad[err.value.index].funct == L.LOOP_WS


@pytest.mark.parametrize("case", ["matmul", "conv"])
def test_two_loops_in_flight_under_backpressure_stay_bit_exact(case):
    """With full queues now and then (seeded), the tail loop's loads go while the head loop computes, and the
    order the hazard rules allow still computes the right result."""
    from gemmini.sim.functional import Machine
    from gemmini.sim.loops import Unroller

    if case == "matmul":
        cmds, mem, bufs, expected = matmul_case(64, 48, 40, (2, 2, 1), True)
    else:
        cmds, mem, bufs, expected = conv_case(*CONV_CASES["3x3 padded, tiled rows and channels"])
    rng = np.random.default_rng(1)
    full = {kind: rng.random(200_000) < 0.6 for kind in ("load", "execute", "store")}
    order = list(Unroller().run(cmds, busy=lambda kind, t: bool(full[kind][t % 200_000])))
    loops_seen = [item.origin for item in order if item.from_loop]
    first_of = {o: loops_seen.index(o) for o in set(loops_seen)}
    last_of = {o: len(loops_seen) - 1 - loops_seen[::-1].index(o) for o in set(loops_seen)}
    starts = sorted(first_of)
    assert any(first_of[b] < last_of[a] for a, b in zip(starts, starts[1:]))  # two loops in flight
    machine = Machine()
    for item in order:
        machine._step_issued(item, mem)
    got = mem[bufs["C"]:bufs["C"] + expected.size].view(np.int8).reshape(expected.shape)
    np.testing.assert_array_equal(got, expected)


def test_c_program_with_loop_ws_runs_on_the_rtl():
    """A C program over gemmini_cosa.h issues gemmini_cosa_loop_ws with host pointers; its commands go into
    the RTL (through gemmini_loop_ws.sv) and its own check of C passes."""
    from gemmini.config import SMALL_CONFIG as SMALL
    from gemmini.sim import rtl

    M, N, K, dim = 10, 7, 9, SMALL.dim
    rng = np.random.default_rng(4)
    A = rng.integers(-20, 20, (M, K), dtype=np.int8)
    B = rng.integers(-20, 20, (K, N), dtype=np.int8)
    D = rng.integers(-300, 300, (M, N), dtype=np.int32)
    expected = matmul_ref(A, B, D, scale=SCALE)
    arr = lambda x: "{" + ", ".join(str(int(v)) for v in x.ravel()) + "}"  # noqa: E731
    blocks = [-(-x // dim) for x in (M, N, K)]
    pads = [b * dim - x for b, x in zip(blocks, (M, N, K))]
    source = f"""#include <stdint.h>
#include <stdio.h>
#include "gemmini_cosa.h"
static int8_t A[{A.size}] = {arr(A)};
static int8_t B[{B.size + K * dim}] = {arr(B)};  /* room for ldB's whole last block */
static int32_t D[{D.size}] = {arr(D)};
static const int8_t expected[{expected.size}] = {arr(expected)};
static int8_t C[{expected.size}];
int main(void) {{
  gemmini_cosa_config_ex(GEMMINI_COSA_WS, 0, 0, 0, 1u, 1.0f, 1u, 0u);
  gemmini_cosa_config_st({N}u, 0, {float(np.float32(SCALE)).hex()}f);
  gemmini_cosa_config_ld({K}u, 1.0f, 0, 0, {dim}u);
  gemmini_cosa_config_ld({N}u, 1.0f, 0, 1, {dim}u);
  gemmini_cosa_config_ld({N * 4}u, 1.0f, 0, 2, {dim}u);
  gemmini_cosa_loop_ws({blocks[0]}u, {blocks[1]}u, {blocks[2]}u, {pads[0]}u, {pads[1]}u, {pads[2]}u,
                       GEMMINI_COSA_PTR(A), GEMMINI_COSA_PTR(B), GEMMINI_COSA_PTR(D), GEMMINI_COSA_PTR(C),
                       {K}u, {N}u, {N}u, {N}u, 0u, 0u, 0u, 0u, 1u, 0u, 0u, 0u, 0u);
  gemmini_cosa_fence();
  int bad = 0;
  for (int n = 0; n < {expected.size}; n++) bad += C[n] != expected[n];
  printf("%s %d\\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}}
"""
    report = rtl.run_c(source, SMALL)
    assert report.exit_code == 0 and "PASS 0" in report.stdout, report.stdout
