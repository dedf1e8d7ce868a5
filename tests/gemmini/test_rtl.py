"""The Verilated RTL: bit-exact against NumPy and the functional model, same command stream, errors, cycles.

All cases use the small configuration (DIM 4, 1024 scratchpad rows, 128 accumulator rows), so one
Verilator build (cached) serves every test.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemmini import isa
from gemmini.codegen import generate
from gemmini.codegen.c import emit_c
from gemmini.config import SMALL_CONFIG, GemminiConfig
from gemmini.errors import SimulationError
from gemmini.numerics import requantize, scale_round
from gemmini.run import run_program
from gemmini import run_rtl
from gemmini.sim import functional, rtl
from mappings import LevelMapping, Mapping
from workloads import conv2d, matmul

CFG = SMALL_CONFIG
DIM = CFG.dim


def lm(temporal=None, spatial=None, order=()):
    return LevelMapping(temporal or {}, spatial or {}, tuple(order))


# --- generated programs: matmul and convolution, WS and OS, several mappings -------------------------

MM = matmul("mm", M=12, N=8, K=16)
MM_MAPPINGS = {
    "ws": Mapping((lm({"M": 3}, order=("M", "N", "K")), lm({"K": 2}),
                   lm({"N": 2, "K": 2}, {"K": 4, "N": 4}, ("N", "K")), lm({"M": 4}))),
    "ws-spill": Mapping((lm({"M": 3, "K": 2}, order=("K", "M", "N")), lm(),
                         lm({"N": 2, "K": 2}, {"K": 4, "N": 4}, ("N", "K")), lm({"M": 4}))),
    "os": Mapping((lm({"M": 3}, order=("N", "M", "K")), lm(),
                   lm({"N": 2, "K": 2}, {"M": 4, "N": 4}, ("N", "K")), lm({"K": 8}))),
}


def _check_against_functional(program, seed=0, mode="trace"):
    run = run_rtl.run_program_rtl(program, mode=mode, seed=seed)
    isa_result = run_program(program, seed=seed)
    assert run.result.verified and run.result.mismatches == 0          # against NumPy
    assert np.array_equal(run.result.outputs, isa_result.outputs)      # against the functional model
    assert run.report.instructions == len(program.commands)            # the same stream, all accepted
    assert run.report.cycles >= program.config.ideal_cycles(program.macs)  # never beats the peak
    assert isa_result.cycles and isa_result.cycles > 0                 # recorded beside the timing model
    return run, isa_result


@pytest.mark.parametrize("name", sorted(MM_MAPPINGS))
@pytest.mark.parametrize("bias,relu,scale", [(True, True, 0.05), (False, False, 1.0)])
def test_matmul_programs_bit_exact(name, bias, relu, scale):
    flow = "os" if name == "os" else "ws"
    program = generate(MM, MM_MAPPINGS[name], CFG, dataflow=flow, bias=bias, relu=relu, scale=scale)
    _check_against_functional(program, seed=len(name))


@pytest.mark.parametrize("stride,pad,dil", [(2, 1, 1), (1, 1, 1), (2, 0, 1), (1, 2, 2)])
def test_conv_programs_bit_exact(stride, pad, dil):
    wl = conv2d("cv", N=2, C=8, K=8, H=7, W=6, R=3, S=3, stride=stride, padding=pad, dilation=dil)
    q, p = wl.dims["Q"], wl.dims["P"]
    mappings = [
        Mapping((lm({"N": 2, "S": 3}, order=("N", "S")), lm({"Q": q}),
                 lm({"R": 3, "C": 2, "K": 2}, {"C": 4, "K": 4}, ("K", "R", "C")), lm({"P": p}))),
        Mapping((lm(), lm({"N": 2, "C": 2}, order=("C", "N")), lm({"R": 3, "S": 3, "K": 2}, {"C": 4, "K": 4}),
                 lm({"P": p, "Q": q}))),
    ]
    for i, mapping in enumerate(mappings):
        program = generate(wl, mapping, CFG, dataflow="ws", bias=i == 0, relu=True, scale=0.01)
        _check_against_functional(program, seed=i)


def test_conv_output_stationary_bit_exact():
    wl = conv2d("cv", N=1, C=8, K=4, H=6, W=8, R=3, S=3, stride=2, padding=1)
    p, q = wl.dims["P"], wl.dims["Q"]
    mapping = Mapping((lm({"Q": q}), lm(), lm({"S": 3}, {"P": p, "K": 4}), lm({"R": 3, "C": 8})))
    program = generate(wl, mapping, CFG, dataflow="os", scale=0.02, relu=True)
    _check_against_functional(program)


@pytest.mark.parametrize("flow", ["ws", "os"])
def test_compiled_c_program_drives_the_rtl(flow):
    """The emitted C, compiled natively, pushes the same commands into the model as the trace run."""
    name = "os" if flow == "os" else "ws"
    program = generate(MM, MM_MAPPINGS[name], CFG, dataflow=flow, bias=True, relu=True, scale=0.05)
    c_run = run_rtl.run_program_rtl(program, mode="c", seed=3)
    trace_run = run_rtl.run_program_rtl(program, mode="trace", seed=3)
    assert c_run.result.verified and np.array_equal(c_run.result.outputs, trace_run.result.outputs)
    assert c_run.report.instructions == trace_run.report.instructions == len(program.commands)
    assert c_run.report.cycles == trace_run.report.cycles  # same stream, same timing


def test_self_checking_c_program_passes_and_a_corrupted_one_fails():
    program = generate(MM, MM_MAPPINGS["ws"], CFG, dataflow="ws", bias=True, relu=False, scale=0.05)
    source = emit_c(program, with_main=True, seed=1)
    result = run_rtl.run_rtl(source, CFG)
    assert result.verified and result.instructions == len(program.commands)
    # flip the first expected value: the program's own check must now fail
    marker = "_expected["
    head, tail = source.split(marker, 1)
    body_start = tail.index("{") + 1
    first_end = min(tail.index(",", body_start), tail.index("}", body_start))
    first = int(tail[body_start:first_end])
    corrupted = head + marker + tail[:body_start] + str(first ^ 1 if first != -128 else 0) + tail[first_end:]
    assert not run_rtl.run_rtl(corrupted, CFG).verified


# --- random command streams against the functional model ------------------------------------------

def random_stream(seed: int, n_ops: int = 30):
    """A legal random stream: configs, mvins (scaled, shrunk, wide, accumulating), preload/compute pairs in
    both dataflows (garbage operands, strides, shifts, activations), mvouts (int8, scaled, full) and fences,
    ending with a dump of the whole accumulator."""
    rng = np.random.default_rng(seed)
    mem_bytes = 1 << 16
    memory = rng.integers(0, 256, mem_bytes, dtype=np.uint8)
    out_ptr = [1 << 15]

    def out_region(nbytes):
        addr = out_ptr[0]
        out_ptr[0] += -(-nbytes // 64) * 64
        return addr

    cmds, loads = [], {}
    for ident in range(3):
        stride = int(rng.integers(DIM, 200))
        shrunk = bool(ident == 2 and rng.integers(0, 2))
        block_stride = int(rng.choice([DIM, DIM + 1, 2 * DIM]))
        cmds.append(isa.config_ld(stride, scale=float(rng.choice([1.0, 0.5, 1.7, 0.013])), shrunk=shrunk,
                                  id=ident, local_stride=block_stride, config=CFG))
        loads[ident] = (stride, shrunk, block_stride)
    st_stride = 4 * DIM + int(rng.integers(0, 8))
    cmds.append(isa.config_st(st_stride, activation=int(rng.integers(0, 2)),
                              acc_scale=float(rng.choice([1.0, 0.25, 0.0071])), config=CFG))

    def config_ex():
        a_stride, c_stride = int(rng.choice([1, 1, 2])), int(rng.choice([1, 1, 2]))
        cmd = isa.config_ex(str(rng.choice(["ws", "os"])), activation=int(rng.integers(0, 2)), a_stride=a_stride,
                            acc_scale=float(rng.choice([1.0, 0.1])), c_stride=c_stride,
                            os_shift=int(rng.choice([0, 0, 1, 3])), config=CFG)
        return cmd, a_stride, c_stride

    cmd, a_stride, c_stride = config_ex()
    cmds.append(cmd)
    loaded = False

    def sp_row(rows, stride=1):
        return int(rng.integers(0, CFG.sp_rows - (rows - 1) * stride - 1))

    def acc_row(rows, stride=1):
        return int(rng.integers(0, CFG.acc_rows - (rows - 1) * stride - 1))

    def dims():
        return int(rng.integers(1, DIM + 1)), int(rng.integers(1, DIM + 1))

    for _ in range(n_ops):
        kind = rng.random()
        if kind < 0.25:
            ident = int(rng.integers(0, 3))
            stride, shrunk, block_stride = loads[ident]
            to_acc = rng.random() < 0.35
            rows = int(rng.integers(1, DIM + 1))
            cols = int(rng.integers(1, (CFG.max_mvin_cols_acc if to_acc else CFG.max_mvin_cols_sp) + 1))
            extent = (-(-cols // DIM) - 1) * block_stride + rows
            elem = 4 if to_acc and not shrunk else 1
            dram = int(rng.integers(0, (1 << 15) - rows * stride - cols * elem))
            if to_acc:
                local = isa.ACC_BIT | int(rng.integers(0, CFG.acc_rows - extent)) \
                    | (isa.ACCUMULATE_BIT if rng.random() < 0.5 else 0)
            else:
                local = int(rng.integers(0, CFG.sp_rows - extent))
            cmds.append(isa.mvin(dram, local, rows, cols, id=ident, config=CFG))
        elif kind < 0.7:
            (ar, ac), (br, bc), (cr, cc), (pr, pc) = dims(), dims(), dims(), dims()
            bd = isa.GARBAGE if rng.random() < 0.3 else sp_row(br)
            pre = isa.GARBAGE if rng.random() < 0.2 else sp_row(pr)
            r = rng.random()
            if r < 0.15:
                c = isa.GARBAGE
            elif r < 0.45:
                c = sp_row(cr, c_stride)
            else:
                c = isa.ACC_BIT | acc_row(cr, c_stride) | (isa.ACCUMULATE_BIT if rng.random() < 0.6 else 0)
            cmds.append(isa.preload(pre, c, pr, pc, cr, cc, config=CFG))
            a = sp_row(ar, a_stride)
            if rng.random() < 0.5 or not loaded:
                cmds.append(isa.compute_preloaded(a, bd, ar, ac, br, bc, config=CFG))
                loaded = True
            else:
                cmds.append(isa.compute_accumulated(a, bd, ar, ac, br, bc, config=CFG))
        elif kind < 0.9:
            rows, cols = dims()
            r = rng.random()
            if r < 0.3:
                local = sp_row(rows)
            elif r < 0.6:
                local = isa.ACC_BIT | isa.FULL_BIT | acc_row(rows)
            else:
                local = isa.ACC_BIT | acc_row(rows)
            cmds.append(isa.mvout(out_region(rows * st_stride), local, rows, cols, config=CFG))
        elif kind < 0.95:
            cmds.append(isa.fence())
        else:
            cmd, a_stride, c_stride = config_ex()
            cmds.append(cmd)
            loaded = False
    cmds.append(isa.config_st(4 * DIM, config=CFG))
    for row in range(0, CFG.acc_rows, DIM):
        cmds.append(isa.mvout(out_region(DIM * 4 * DIM), isa.ACC_BIT | isa.FULL_BIT | row, DIM, DIM, config=CFG))
    return cmds, memory


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_random_streams_match_the_functional_model(seed):
    cmds, memory = random_stream(seed)
    expected = memory.copy()
    functional.execute(cmds, expected, CFG)
    report = rtl.run_trace(cmds, memory, CFG, max_cycles=200_000)
    assert np.array_equal(memory, expected)
    assert report.instructions == len(cmds)


# --- scaling: the RTL rounds exactly as gemmini.numerics ---------------------------------------------

def test_scale_rounding_matches_numerics():
    rng = np.random.default_rng(7)
    scales = [0.5, 0.25, 1.5, 0.1, 3.7, 1e-3, 0.0078125, 0.3333333, 2.5e4]
    ints8 = np.concatenate([np.arange(-128, 128), rng.integers(-128, 128, 256)]).astype(np.int8)
    ints32 = np.concatenate([np.arange(-64, 64) * 2 + 1, rng.integers(-2**31, 2**31, 188),
                             [2**31 - 1, -2**31, 2**24 + 1, -(2**24) - 3]]).astype(np.int32)
    rows8 = ints8.reshape(-1, DIM)
    rows32 = ints32.reshape(-1, DIM)
    memory = np.zeros(1 << 17, dtype=np.uint8)
    memory[:ints8.size] = ints8.view(np.uint8)
    base32 = 4096
    memory[base32:base32 + ints32.nbytes] = ints32.view(np.uint8)
    out = 1 << 16
    cmds, expect = [], []
    for s_index, scale in enumerate(scales):
        cmds.append(isa.config_ld(DIM, scale=scale, id=0, config=CFG))
        cmds.append(isa.config_ld(4 * DIM, id=1, config=CFG))
        cmds.append(isa.config_st(DIM, acc_scale=scale, config=CFG))
        # int8 through a scaled mvin into the scratchpad and back out
        for block in range(0, rows8.shape[0], DIM):
            cmds.append(isa.mvin(block * DIM, (s_index % 4) * 256 + block, DIM, DIM, id=0, config=CFG))
            cmds.append(isa.mvout(out, (s_index % 4) * 256 + block, DIM, DIM, config=CFG))
            expect.append((out, scale_round(rows8[block:block + DIM], scale, out_bits=8)))
            out += DIM * DIM
        # int32 into the accumulator and out through the scaled read-out
        for block in range(0, min(rows32.shape[0], CFG.acc_rows), DIM):
            cmds.append(isa.mvin(base32 + block * 4 * DIM, isa.ACC_BIT | block, DIM, DIM, id=1, config=CFG))
            cmds.append(isa.mvout(out, isa.ACC_BIT | block, DIM, DIM, config=CFG))
            expect.append((out, requantize(rows32[block:block + DIM], scale, 0)))
            out += DIM * DIM
        cmds.append(isa.fence())
    reference = memory.copy()
    functional.execute(cmds, reference, CFG)
    rtl.run_trace(cmds, memory, CFG)
    assert np.array_equal(memory, reference)
    for addr, values in expect:
        got = memory[addr:addr + DIM * DIM].view(np.int8).reshape(DIM, DIM)
        assert np.array_equal(got, values)


# --- illegal streams stop with the command index, never hang --------------------------------------

def _prologue():
    return [isa.config_ld(DIM, id=0, config=CFG), isa.config_st(DIM, config=CFG), isa.config_ex("ws", config=CFG)]


def _row_count_over_dim():
    cmd = isa.mvin(0, 0, DIM, DIM, config=CFG)
    return _prologue() + [isa.Command(cmd.funct, cmd.rs1, cmd.rs2 + ((DIM + 1 - DIM) << 48))]


def _local_out_of_range():
    cmd = isa.mvin(0, 0, DIM, DIM, config=CFG)
    return _prologue() + [isa.Command(cmd.funct, cmd.rs1, (cmd.rs2 & ~0xFFFFFFFF) | (CFG.sp_rows - 1))]


def _compute_before_config():
    return [isa.config_ld(DIM, id=0, config=CFG), isa.mvin(0, 0, DIM, DIM, config=CFG),
            isa.preload(0, isa.ACC_BIT, DIM, DIM, DIM, DIM, config=CFG)]


def _compute_without_preload():
    return _prologue() + [isa.compute_preloaded(0, isa.GARBAGE, DIM, DIM, DIM, DIM, config=CFG)]


def _main_memory_out_of_range():
    return _prologue() + [isa.fence(), isa.mvin(4096 - 8, 0, DIM, DIM, config=CFG)]


def _d_from_the_accumulator():
    # a full-width int32 D read from the accumulator: not a Gemmini operation
    return _prologue() + [isa.preload(isa.sp(0), isa.acc(DIM), DIM, DIM, DIM, DIM, config=CFG),
                          isa.compute_preloaded(isa.sp(0), isa.acc(0, full=True), DIM, DIM, DIM, DIM, config=CFG)]


def _preload_from_the_accumulator():
    return _prologue() + [isa.preload(isa.acc(0), isa.acc(DIM), DIM, DIM, DIM, DIM, config=CFG)]


def _unknown_funct():
    return _prologue() + [isa.Command(22, 0, 0)]


@pytest.mark.parametrize("make", [_row_count_over_dim, _local_out_of_range, _compute_before_config,
                                  _compute_without_preload, _main_memory_out_of_range, _unknown_funct,
                                  _d_from_the_accumulator, _preload_from_the_accumulator])
def test_illegal_commands_stop_with_their_index(make):
    cmds = make()
    memory = np.zeros(4096, dtype=np.uint8)
    with pytest.raises(SimulationError) as functional_error:
        functional.execute(cmds, memory.copy(), CFG)
    with pytest.raises(SimulationError) as rtl_error:
        rtl.run_trace(cmds, memory, CFG, max_cycles=10_000)
    assert rtl_error.value.index == functional_error.value.index == len(cmds) - 1
    assert "RTL" in str(rtl_error.value)


def test_every_run_has_a_cycle_limit():
    program = generate(MM, MM_MAPPINGS["ws"], CFG, dataflow="ws")
    from gemmini.run import example_inputs, memory_image

    memory = memory_image(program, example_inputs(program))
    with pytest.raises(SimulationError, match="cycle limit"):
        rtl.run_trace(program.commands, memory, CFG, max_cycles=50)


def test_bad_arguments_raise_simulation_errors():
    with pytest.raises(SimulationError, match="uint8"):
        rtl.run_trace([], np.zeros(4, dtype=np.int32), CFG)
    with pytest.raises(SimulationError, match="max_cycles"):
        rtl.run_trace([], np.zeros(4, dtype=np.uint8), CFG, max_cycles=0)
    with pytest.raises(SimulationError, match="mode"):
        run_rtl.run_program_rtl(generate(MM, MM_MAPPINGS["ws"], CFG, dataflow="ws"), mode="spike")


# --- the build -------------------------------------------------------------------------------------

def test_build_is_cached_by_a_hash_of_rtl_harness_and_parameters():
    first = rtl.build(CFG)
    assert rtl.build(CFG).directory == first.directory and first.trace_sim.exists()
    other = GemminiConfig(dim=4, sp_kib=4, acc_kib=2, ld_queue=4)
    assert rtl.build_key(other) != rtl.build_key(CFG)
    assert "gemmini_isa_pkg" in rtl.isa_package() and f"FUNCT_MVIN3 = {isa.MVIN3};" in rtl.isa_package()


def test_run_program_with_the_rtl_reports_the_same_fields_as_the_functional_model():
    program = generate(MM, MM_MAPPINGS["ws"], CFG, dataflow="ws", bias=True, relu=True, scale=0.05)
    on_rtl, on_isa = run_program(program, sim="rtl", seed=2), run_program(program, seed=2)
    assert on_rtl.verified and np.array_equal(on_rtl.outputs, on_isa.outputs)
    assert on_rtl.to_dict().keys() == on_isa.to_dict().keys()
    assert on_rtl.instructions == on_isa.instructions and on_rtl.dram_bytes == on_isa.dram_bytes
