"""The functional model on hand-written command streams (DIM 4) against the NumPy references."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemmini import SimulationError, isa, matmul_ref, numerics
from gemmini.config import SMALL_CONFIG as CFG
from gemmini.sim import Machine, execute

DIM = CFG.dim


class Layout:
    """A bump allocator over a fresh main memory (64-byte aligned buffers)."""

    def __init__(self):
        self.chunks = []
        self.size = 0

    def put(self, array: np.ndarray) -> int:
        addr = self.size
        self.chunks.append((addr, np.ascontiguousarray(array)))
        self.size = -(-(addr + array.nbytes) // 64) * 64
        return addr

    def reserve(self, nbytes: int) -> int:
        return self.put(np.zeros(nbytes, dtype=np.uint8))

    def memory(self) -> np.ndarray:
        mem = np.zeros(self.size, dtype=np.uint8)
        for addr, array in self.chunks:
            mem[addr:addr + array.nbytes] = array.view(np.uint8).ravel()
        return mem


def _blocks(n):
    return [(start, min(DIM, n - start)) for start in range(0, n, DIM)]


def ws_matmul(a, b, bias, scale, relu, wide_mvin=False):
    """Tiled WS matmul: all of A and B in the scratchpad, C tiles accumulate in the accumulator."""
    m, k = a.shape
    n = b.shape[1]
    lay = Layout()
    a_addr, b_addr = lay.put(a), lay.put(b)
    bias_addr = lay.put(bias.astype("<i4")) if bias is not None else None
    c_addr = lay.reserve(m * n)
    cmds = [isa.config_ex("ws", 0, config=CFG), isa.config_ld(k, config=CFG), isa.config_ld(n, id=1, config=CFG),
            isa.config_ld(0, id=2, config=CFG), isa.config_st(n, 1 if relu else 0, scale, config=CFG)]
    a_row = {}
    b_row = {}
    next_row = 0
    for i0, rows in _blocks(m):
        if wide_mvin:  # one mvin moves up to 64 columns: K-blocks land DIM rows apart
            for k0 in range(0, k, CFG.max_mvin_cols_sp):
                cols = min(CFG.max_mvin_cols_sp, k - k0)
                cmds.append(isa.mvin(a_addr + i0 * k + k0, isa.sp(next_row), rows, cols, config=CFG))
                for kk in range(k0, k0 + cols, DIM):
                    a_row[i0, kk] = next_row
                    next_row += DIM
        else:
            for k0, cols in _blocks(k):
                cmds.append(isa.mvin(a_addr + i0 * k + k0, isa.sp(next_row), rows, cols, config=CFG))
                a_row[i0, k0] = next_row
                next_row += DIM
    for k0, rows in _blocks(k):
        for j0, cols in _blocks(n):
            cmds.append(isa.mvin(b_addr + k0 * n + j0, isa.sp(next_row), rows, cols, id=1, config=CFG))
            b_row[k0, j0] = next_row
            next_row += DIM
    acc_row = 0
    for i0, rows in _blocks(m):
        for j0, cols in _blocks(n):
            if bias is not None:  # stride 0: the bias row repeated down the tile
                cmds.append(isa.mvin(bias_addr + 4 * j0, isa.acc(acc_row), rows, cols, id=2, config=CFG))
            for k0, depth in _blocks(k):
                first = bias is None and k0 == 0
                cmds.append(isa.preload(isa.sp(b_row[k0, j0]), isa.acc(acc_row, accumulate=not first),
                                        depth, cols, rows, cols, config=CFG))
                cmds.append(isa.compute_preloaded(isa.sp(a_row[i0, k0]), isa.GARBAGE, rows, depth, rows, cols,
                                                  config=CFG))
            cmds.append(isa.mvout(c_addr + i0 * n + j0, isa.acc(acc_row), rows, cols, config=CFG))
            acc_row += DIM
    cmds.append(isa.fence())
    return cmds, lay.memory(), c_addr


def os_matmul(a, b, bias, scale, relu, out_via_acc=True):
    """Tiled OS matmul: the bias moved into the output's accumulator rows, the K loop accumulates in the
    PEs and the last compute adds its sums onto the bias (Gemmini preloads D only from the scratchpad)."""
    assert bias is None or out_via_acc
    m, k = a.shape
    n = b.shape[1]
    lay = Layout()
    a_addr, b_addr = lay.put(a), lay.put(b)
    bias_addr = lay.put(bias.astype("<i4")) if bias is not None else None
    c_addr = lay.reserve(m * n)
    act = 1 if relu else 0
    cmds = [isa.config_ex("os", act, os_shift=0, config=CFG), isa.config_ld(k, config=CFG),
            isa.config_ld(n, id=1, config=CFG), isa.config_ld(0, id=2, config=CFG),
            isa.config_st(n, act, scale, config=CFG)]
    next_row, acc_row, out_row = 0, 0, CFG.sp_rows - DIM
    for i0, rows in _blocks(m):
        for j0, cols in _blocks(n):
            d = isa.GARBAGE
            if bias is not None:
                cmds.append(isa.mvin(bias_addr + 4 * j0, isa.acc(acc_row), rows, cols, id=2, config=CFG))
            c = isa.acc(acc_row, accumulate=bias is not None) if out_via_acc else isa.sp(out_row)
            ks = _blocks(k)
            for step, (k0, depth) in enumerate(ks):
                a_local, b_local = isa.sp(next_row), isa.sp(next_row + DIM)
                next_row += 2 * DIM
                cmds.append(isa.mvin(a_addr + i0 * k + k0, a_local, rows, depth, config=CFG))
                cmds.append(isa.mvin(b_addr + k0 * n + j0, b_local, depth, cols, id=1, config=CFG))
                last = step == len(ks) - 1
                cmds.append(isa.preload(d if step == 0 else isa.GARBAGE, c if last else isa.GARBAGE,
                                        rows, cols, rows, cols, config=CFG))
                compute = isa.compute_preloaded if step == 0 else isa.compute_accumulated
                cmds.append(compute(a_local, b_local, rows, depth, depth, cols, config=CFG))
            cmds.append(isa.mvout(c_addr + i0 * n + j0, c, rows, cols, config=CFG))
            acc_row += DIM
    return cmds, lay.memory(), c_addr


def _operands(rng, m, k, n, with_bias=True):
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    bias = rng.integers(-20000, 20000, n).astype(np.int32) if with_bias else None
    return a, b, bias


def _run(builder, a, b, bias, scale, relu, **kw):
    cmds, mem, c_addr = builder(a, b, bias, scale, relu, **kw)
    result = execute(cmds, mem, CFG)
    m, n = a.shape[0], b.shape[1]
    return mem[c_addr:c_addr + m * n].view(np.int8).reshape(m, n), result


@pytest.mark.parametrize("shape", [(8, 8, 8), (6, 5, 7), (4, 12, 4), (1, 1, 1)])
@pytest.mark.parametrize("relu", [False, True])
def test_ws_matmul_equals_reference(shape, relu):
    rng = np.random.default_rng(sum(shape) + relu)
    a, b, bias = _operands(rng, *shape)
    scale = 0.0137
    out, result = _run(ws_matmul, a, b, bias, scale, relu)
    np.testing.assert_array_equal(out, matmul_ref(a, b, bias, scale, relu))
    assert result.useful_macs == np.prod(shape)


def test_ws_wide_mvin_and_no_bias():
    rng = np.random.default_rng(5)
    a, b, _ = _operands(rng, 5, 22, 6, with_bias=False)
    out, result = _run(ws_matmul, a, b, None, 0.02, False, wide_mvin=True)
    np.testing.assert_array_equal(out, matmul_ref(a, b, None, 0.02, False))
    assert result.counts["mvin"] == 2  # 22 int8 columns of 5 rows: one mvin per row block


@pytest.mark.parametrize("shape", [(8, 8, 8), (7, 9, 5)])
@pytest.mark.parametrize("relu", [False, True])
def test_os_matmul_equals_reference(shape, relu):
    rng = np.random.default_rng(100 + sum(shape) + relu)
    a, b, bias = _operands(rng, *shape)
    out, _ = _run(os_matmul, a, b, bias, 0.011, relu)
    np.testing.assert_array_equal(out, matmul_ref(a, b, bias, 0.011, relu))


def test_os_matmul_written_to_scratchpad_saturates_with_activation():
    rng = np.random.default_rng(9)
    a, b, _ = _operands(rng, 6, 6, 6)
    out, _ = _run(os_matmul, a, b, None, 1.0, True, out_via_acc=False)
    expected = numerics.saturate(numerics.relu(a.astype(np.int64) @ b), 8)
    np.testing.assert_array_equal(out, expected)


@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 9), k=st.integers(1, 9), n=st.integers(1, 9), seed=st.integers(0, 2**16),
       scale=st.floats(0.0009765625, 4, width=32), relu=st.booleans(), dataflow=st.sampled_from(["ws", "os"]))
def test_matmul_property(m, k, n, seed, scale, relu, dataflow):
    a, b, bias = _operands(np.random.default_rng(seed), m, k, n)
    out, _ = _run(ws_matmul if dataflow == "ws" else os_matmul, a, b, bias, scale, relu)
    np.testing.assert_array_equal(out, matmul_ref(a, b, bias, scale, relu))


def test_os_shift_rounds_half_to_even():
    a = np.array([[1], [3], [5], [-3]], dtype=np.int8)  # 4 x 1
    b = np.array([[1]], dtype=np.int8)
    mem = np.zeros(256, dtype=np.uint8)
    mem[0:4] = a.view(np.uint8).ravel()
    mem[16] = 1
    cmds = [isa.config_ex("os", os_shift=1, config=CFG), isa.config_ld(1, config=CFG), isa.config_st(1, config=CFG),
            isa.mvin(0, isa.sp(0), 4, 1, config=CFG), isa.mvin(16, isa.sp(8), 1, 1, config=CFG),
            isa.preload(isa.GARBAGE, isa.sp(16), 4, 1, 4, 1, config=CFG),
            isa.compute_preloaded(isa.sp(0), isa.sp(8), 4, 1, 1, 1, config=CFG),
            isa.mvout(64, isa.sp(16), 4, 1, config=CFG)]
    execute(cmds, mem, CFG)
    assert list(mem[64:68].view(np.int8)) == [0, 2, 2, -2]


def test_mvin_scale_and_full_width_mvout_and_accumulate():
    mem = np.zeros(512, dtype=np.uint8)
    mem[0:4] = np.array([3, 5, -7, 100], dtype=np.int8).view(np.uint8)
    mem[64:80] = np.array([10, -20, 2**31 - 1, 7], dtype="<i4").view(np.uint8)
    cmds = [isa.config_ld(4, scale=0.5, config=CFG), isa.config_ld(16, id=1, config=CFG),
            isa.config_st(16, config=CFG),
            isa.mvin(0, isa.sp(0), 1, 4, config=CFG),
            isa.mvin(64, isa.acc(0), 1, 4, id=1, config=CFG),
            isa.mvin(64, isa.acc(0, accumulate=True), 1, 4, id=1, config=CFG),
            isa.mvout(128, isa.acc(0, full=True), 1, 4, config=CFG),
            isa.mvout(192, isa.sp(0), 1, 4, config=CFG)]
    result = execute(cmds, mem, CFG)
    assert list(mem[192:196].view(np.int8)) == [2, 2, -4, 50]  # 1.5 -> 2, 2.5 -> 2, -3.5 -> -4
    assert list(mem[128:144].view("<i4")) == [20, -40, -2, 14]  # int32 wrap-around on accumulate
    assert result.counts == {"config_ld": 2, "config_st": 1, "mvin": 1, "mvin2": 2, "mvout": 2}


def test_ws_compute_accumulated_reuses_weights():
    rng = np.random.default_rng(3)
    a1, a2 = rng.integers(-5, 5, (2, 4, 4), dtype=np.int8)
    w = rng.integers(-5, 5, (4, 4), dtype=np.int8)
    lay = Layout()
    addrs = [lay.put(x) for x in (a1, a2, w)]
    out = lay.reserve(64)
    cmds = [isa.config_ex("ws", config=CFG), isa.config_ld(4, config=CFG), isa.config_st(16, config=CFG)]
    cmds += [isa.mvin(addr, isa.sp(4 * i), 4, 4, config=CFG) for i, addr in enumerate(addrs)]
    cmds += [isa.preload(isa.sp(8), isa.acc(0), 4, 4, 4, 4, config=CFG),
             isa.compute_preloaded(isa.sp(0), isa.GARBAGE, 4, 4, 4, 4, config=CFG),
             isa.preload(isa.GARBAGE, isa.acc(0, accumulate=True), 4, 4, 4, 4, config=CFG),
             isa.compute_accumulated(isa.sp(4), isa.GARBAGE, 4, 4, 4, 4, config=CFG),
             isa.mvout(out, isa.acc(0, full=True), 4, 4, config=CFG)]
    mem = lay.memory()
    execute(cmds, mem, CFG)
    expected = a1.astype(np.int32) @ w + a2.astype(np.int32) @ w
    np.testing.assert_array_equal(mem[out:out + 64].view("<i4").reshape(4, 4), expected)


def test_bytearray_memory_is_updated_in_place():
    mem = bytearray(64)
    mem[0] = 9
    execute([isa.config_ld(1, config=CFG), isa.config_st(1, config=CFG), isa.mvin(0, isa.sp(0), 1, 1, config=CFG),
             isa.mvout(32, isa.sp(0), 1, 1, config=CFG)], mem, CFG)
    assert mem[32] == 9


# --- errors name the command index ---------------------------------------------------
def _bad(cmds, mem_bytes=256):
    with pytest.raises(SimulationError) as info:
        execute(cmds, np.zeros(mem_bytes, dtype=np.uint8), CFG)
    return info.value


def test_unconfigured_units():
    err = _bad([isa.mvin(0, isa.sp(0), 1, 1, config=CFG)])
    assert err.index == 0 and "config_ld" in str(err)
    err = _bad([isa.config_ld(1, config=CFG), isa.mvin(0, isa.sp(0), 1, 1, id=1, config=CFG)])
    assert err.index == 1 and "id 1" in str(err)
    err = _bad([isa.config_ld(1, config=CFG), isa.mvout(0, isa.sp(0), 1, 1, config=CFG)])
    assert err.index == 1 and "config_st" in str(err)
    err = _bad([isa.flush(), isa.preload(isa.GARBAGE, isa.GARBAGE, 4, 4, 4, 4, config=CFG)])
    assert err.index == 1 and "config_ex" in str(err)


def test_protocol_errors():
    ex = isa.config_ex("ws", config=CFG)
    err = _bad([ex, isa.compute_preloaded(isa.sp(0), isa.GARBAGE, 4, 4, 4, 4, config=CFG)])
    assert err.index == 1 and "preload" in str(err)
    pre = isa.preload(isa.GARBAGE, isa.GARBAGE, 4, 4, 4, 4, config=CFG)
    err = _bad([ex, pre, isa.compute_accumulated(isa.sp(0), isa.GARBAGE, 4, 4, 4, 4, config=CFG)])
    assert err.index == 2 and "weights" in str(err)
    err = _bad([ex, pre, pre])
    assert err.index == 2
    err = _bad([isa.config_ex("os", a_transpose=True, config=CFG), pre,
                isa.compute_preloaded(isa.sp(0), isa.GARBAGE, 4, 4, 4, 4, config=CFG)])
    assert err.index == 1 and "transpose" in str(err)  # WS transposes are modelled (tests/gemmini/test_loops.py)


def test_out_of_range_errors_name_the_command():
    cfg_ld = isa.config_ld(1, config=CFG)
    err = _bad([cfg_ld, isa.mvin(250, isa.sp(0), 4, 8, config=CFG)])  # rows 250..261 past 256 bytes
    assert err.index == 1 and err.field == "dram_addr"
    # hand-made commands bypass the encoders' checks: the model re-checks them
    too_many_rows = isa.Command(isa.MVIN, 0, ((DIM + 1) << 48) | (1 << 32) | 0)
    err = _bad([cfg_ld, too_many_rows])
    assert err.index == 1 and err.field == "rows"
    past_sp = isa.Command(isa.MVIN, 0, (1 << 48) | (1 << 32) | CFG.sp_rows)
    err = _bad([cfg_ld, past_sp])
    assert err.index == 1 and err.field == "local"
    # a wide mvin whose last column block runs past the scratchpad
    err = _bad([isa.config_ld(0, config=CFG), isa.mvin(0, isa.sp(CFG.sp_rows - 2 * DIM), 1, 64, config=CFG)])
    assert err.index == 1 and "blocks" in str(err)
    # A rows with a stride that leaves the scratchpad
    err = _bad([isa.config_ex("ws", a_stride=CFG.sp_rows // 2, config=CFG),
                isa.preload(isa.GARBAGE, isa.GARBAGE, 4, 4, 4, 4, config=CFG),
                isa.compute_preloaded(isa.sp(0), isa.GARBAGE, 4, 4, 4, 4, config=CFG)])
    assert err.index == 2 and err.field == "a_local"
    err = _bad([isa.Command(22, 0, 0)])  # 8-13 and 15-21 are the loop instructions
    assert err.index == 0 and err.field == "funct"
    err = _bad([isa.config_st(1, config=CFG), isa.Command(0, (1 << 4) | 2, 0)])
    assert err.index == 1 and "pooling" in str(err)


def test_machine_state_is_inspectable():
    machine = Machine(CFG)
    mem = np.arange(16, dtype=np.uint8)
    machine.run([isa.config_ld(4, config=CFG), isa.mvin(0, isa.sp(5), 4, 4, config=CFG)], mem)
    np.testing.assert_array_equal(machine.scratchpad[5:9], np.arange(16, dtype=np.int8).reshape(4, 4))


def test_config_ex_keeps_weights_unless_the_dataflow_changes():
    mem = np.zeros(128, dtype=np.uint8)
    mem[0:16] = np.eye(4, dtype=np.int8).view(np.uint8).ravel()
    mem[16:32] = np.arange(16, dtype=np.int8).view(np.uint8)
    head = [isa.config_ex("ws", config=CFG), isa.config_ld(4, config=CFG), isa.config_st(16, config=CFG),
            isa.mvin(0, isa.sp(0), 4, 4, config=CFG), isa.mvin(16, isa.sp(4), 4, 4, config=CFG),
            isa.preload(isa.sp(0), isa.acc(0), 4, 4, 4, 4, config=CFG),
            isa.compute_preloaded(isa.sp(4), isa.GARBAGE, 4, 4, 4, 4, config=CFG)]
    tail = [isa.preload(isa.GARBAGE, isa.acc(0, accumulate=True), 4, 4, 4, 4, config=CFG),
            isa.compute_accumulated(isa.sp(4), isa.GARBAGE, 4, 4, 4, 4, config=CFG),
            isa.mvout(64, isa.acc(0, full=True), 4, 4, config=CFG)]
    execute(head + [isa.config_ex("ws", a_stride=1, c_stride=1, acc_scale=2.0, config=CFG)] + tail, mem, CFG)
    np.testing.assert_array_equal(mem[64:128].view("<i4"), 2 * np.arange(16))
    with pytest.raises(SimulationError) as info:
        execute(head + [isa.config_ex("os", config=CFG), isa.config_ex("ws", config=CFG)] + tail, mem, CFG)
    assert info.value.index == 10


@pytest.mark.parametrize("flow", ["ws", "os"])
@pytest.mark.parametrize("where", ["compute.a", "compute.bd", "preload.bd"])
def test_operands_in_the_accumulator_are_refused_with_the_command_index(flow, where):
    # Gemmini reads A, B and D from the scratchpad only (libgemmini throws, the RTL reads them at input width)
    acc = isa.acc(0, full=True)
    cmds = [isa.config_ex(flow, config=CFG), isa.config_ld(4, config=CFG)]
    pre_bd = acc if where == "preload.bd" else isa.sp(0)
    cmds.append(isa.preload(pre_bd, isa.acc(DIM), DIM, DIM, DIM, DIM, config=CFG))
    a = acc if where == "compute.a" else isa.sp(0)
    bd = acc if where == "compute.bd" else isa.GARBAGE
    cmds.append(isa.compute_preloaded(a, bd, DIM, DIM, DIM, DIM, config=CFG))
    with pytest.raises(SimulationError, match="accumulator") as info:
        execute(cmds, np.zeros(256, dtype=np.uint8), CFG)
    assert info.value.index == (2 if where == "preload.bd" else 3)

