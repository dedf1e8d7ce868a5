"""The NumPy references: convolution against direct loops, layouts, input errors."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemmini import SimulationError, conv_ref, conv_weights_as_gemm, im2col, isa, matmul_acc, matmul_ref, numerics
from gemmini.config import SMALL_CONFIG as CFG
from gemmini.sim import execute


def _direct_conv_acc(x, w, bias, stride, padding, dilation):
    n, h, wid, c = x.shape
    r_size, s_size, _, k = w.shape
    p = (h + 2 * padding[0] - dilation[0] * (r_size - 1) - 1) // stride[0] + 1
    q = (wid + 2 * padding[1] - dilation[1] * (s_size - 1) - 1) // stride[1] + 1
    xp = np.pad(x.astype(np.int64), ((0, 0), (padding[0],) * 2, (padding[1],) * 2, (0, 0)))
    acc = np.zeros((n, p, q, k), dtype=np.int64)
    for nn, pp, qq, r, s in itertools.product(range(n), range(p), range(q), range(r_size), range(s_size)):
        acc[nn, pp, qq] += xp[nn, pp * stride[0] + r * dilation[0], qq * stride[1] + s * dilation[1]] @ w[r, s]
    if bias is not None:
        acc += bias
    return acc


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(1, 2), hw=st.tuples(st.integers(3, 7), st.integers(3, 7)),
       c=st.integers(1, 5), k=st.integers(1, 5), rs=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       stride=st.tuples(st.integers(1, 2), st.integers(1, 2)), padding=st.tuples(st.integers(0, 1), st.integers(0, 1)),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)), relu=st.booleans(),
       scale=st.floats(0.0009765625, 2, width=32), with_bias=st.booleans())
def test_conv_ref_equals_direct_loops(seed, n, hw, c, k, rs, stride, padding, dilation, relu, scale, with_bias):
    if any(hw[i] + 2 * padding[i] < dilation[i] * (rs[i] - 1) + 1 for i in range(2)):
        return  # the kernel does not fit: covered by test_conv_errors
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (n, *hw, c), dtype=np.int8)
    w = rng.integers(-128, 128, (*rs, c, k), dtype=np.int8)
    bias = rng.integers(-5000, 5000, k).astype(np.int32) if with_bias else None
    out = conv_ref(x, w, bias, stride, padding, dilation, scale, relu)
    expected = numerics.requantize(_direct_conv_acc(x, w, bias, stride, padding, dilation), scale, int(relu))
    np.testing.assert_array_equal(out, expected)
    assert out.dtype == np.int8


def test_weights_gemm_layout_and_im2col_order():
    w = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5).astype(np.int8)
    b = conv_weights_as_gemm(w)
    assert b.shape == (24, 5)
    assert (b[(1 * 3 + 2) * 4 + 3] == w[1, 2, 3]).all()  # row = (r, s, c)
    x = np.arange(1 * 3 * 3 * 2).reshape(1, 3, 3, 2).astype(np.int8)
    a = im2col(x, (2, 2))
    assert a.shape == (4, 8)
    assert list(a[3]) == list(np.concatenate([x[0, 1, 1], x[0, 1, 2], x[0, 2, 1], x[0, 2, 2]]))


def test_matmul_ref_wraps_and_saturates():
    a = np.full((1, 2), 127, dtype=np.int8)
    b = np.full((2, 1), 127, dtype=np.int8)
    assert matmul_acc(a, b, np.array([2**31 - 1 - 32258], dtype=np.int32))[0, 0] == 2**31 - 1
    assert matmul_acc(a, b, np.array([2**31 - 1], dtype=np.int32))[0, 0] == -(2**31) + 32257  # int32 wrap
    assert matmul_ref(a, b)[0, 0] == 127
    assert matmul_ref(-a, b, relu=True)[0, 0] == 0


@pytest.mark.parametrize("call, field", [
    (lambda: matmul_ref(np.zeros((2, 3), np.int8), np.zeros((4, 2), np.int8)), "B"),
    (lambda: matmul_ref(np.zeros((2, 3), np.int16) + 300, np.zeros((3, 2), np.int8)), "A"),
    (lambda: matmul_ref(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.int8)), "A"),
    (lambda: matmul_ref(np.zeros((2, 3), np.int8), np.zeros((3, 2), np.int8), np.zeros(3, np.int32)), "bias"),
    (lambda: conv_ref(np.zeros((1, 4, 4, 3), np.int8), np.zeros((3, 3, 2, 4), np.int8)), "w"),
    (lambda: conv_ref(np.zeros((1, 2, 2, 3), np.int8), np.zeros((3, 3, 3, 4), np.int8)), "w"),
    (lambda: conv_ref(np.zeros((4, 4, 3), np.int8), np.zeros((3, 3, 3, 4), np.int8)), "x"),
])
def test_reference_errors(call, field):
    with pytest.raises(SimulationError) as info:
        call()
    assert info.value.field == field


def test_ws_adds_d_from_the_scratchpad_and_refuses_it_from_the_accumulator():
    """C = A*B + D with D read as int8 from the scratchpad; a D in the accumulator is not Gemmini's."""
    rng = np.random.default_rng(4)
    a, b, d8 = (rng.integers(-9, 9, (4, 4), dtype=np.int8) for _ in range(3))
    d32 = rng.integers(-10**6, 10**6, (4, 4)).astype("<i4")
    mem = np.zeros(512, dtype=np.uint8)
    for addr, arr in ((0, a), (16, b), (32, d8), (64, d32)):
        mem[addr:addr + arr.nbytes] = arr.view(np.uint8).ravel()
    cmds = [isa.config_ex("ws", config=CFG), isa.config_ld(4, config=CFG), isa.config_ld(16, id=1, config=CFG),
            isa.config_st(16, config=CFG),
            isa.mvin(0, isa.sp(0), 4, 4, config=CFG), isa.mvin(16, isa.sp(4), 4, 4, config=CFG),
            isa.mvin(32, isa.sp(8), 4, 4, config=CFG), isa.mvin(64, isa.acc(8), 4, 4, id=1, config=CFG),
            isa.preload(isa.sp(4), isa.acc(0), 4, 4, 4, 4, config=CFG),
            isa.compute_preloaded(isa.sp(0), isa.sp(8), 4, 4, 4, 4, config=CFG),
            # the vendor's way to add a 32-bit D: it already sits in the output rows, accumulate onto it
            isa.preload(isa.GARBAGE, isa.acc(8, accumulate=True), 4, 4, 4, 4, config=CFG),
            isa.compute_accumulated(isa.sp(0), isa.GARBAGE, 4, 4, 4, 4, config=CFG),
            isa.mvout(128, isa.acc(0, full=True), 4, 4, config=CFG),
            isa.mvout(192, isa.acc(8, full=True), 4, 4, config=CFG)]
    execute(cmds, mem, CFG)
    ab = a.astype(np.int64) @ b
    np.testing.assert_array_equal(mem[128:192].view("<i4").reshape(4, 4), ab + d8)
    np.testing.assert_array_equal(mem[192:256].view("<i4").reshape(4, 4), ab + d32)
    bad = cmds[:10] + [isa.preload(isa.GARBAGE, isa.acc(4), 4, 4, 4, 4, config=CFG),
                       isa.compute_accumulated(isa.sp(0), isa.acc(8, full=True), 4, 4, 4, 4, config=CFG)]
    with pytest.raises(SimulationError, match="from the accumulator") as info:
        execute(bad, mem, CFG)
    assert info.value.index == 11
