"""Code generation: mappings -> Gemmini command streams that compute the NumPy reference bit for bit."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemmini import isa
from gemmini.codegen import generate
from gemmini.config import SMALL_CONFIG, GemminiConfig
from gemmini.errors import CodegenError, SimulationError
from gemmini.run import example_inputs, reference_output, run_program
from mappings import Mapping
from workloads import FrameworkError, conv2d, einsum, matmul

from gemmini_mappings import (MM, MM_OS, MM_WS, MM_WS_SPILL, check, check_or_refused_for_capacity, lm,
                              random_gemmini_mapping)

CFG = SMALL_CONFIG  # DIM 4, 1024 scratchpad rows, 128 accumulator rows


# --- hand-built mappings ---------------------------------------------------------------------



@pytest.mark.parametrize("mapping,flow", [(MM_WS, "ws"), (MM_WS_SPILL, "ws"), (MM_OS, "os")])
@pytest.mark.parametrize("bias,relu,scale", [(True, True, 0.05), (False, False, 1.0), (True, False, 0.003)])
def test_matmul_hand_mappings_bit_exact(mapping, flow, bias, relu, scale):
    program = generate(MM, mapping, CFG, dataflow=flow, bias=bias, relu=relu, scale=scale)
    check(program)
    assert program.commands[-1].funct == isa.FENCE
    assert program.counts()["config_ex"] == 1


def test_spilling_mapping_moves_partial_sums_through_main_memory():
    program = generate(MM, MM_WS_SPILL, CFG, dataflow="ws")
    assert "partials" in program.buffers
    full_reads = [c for c in program.commands if c.funct == isa.MVOUT
                  and isa.LocalAddr.decode(c.rs2 & 0xFFFFFFFF).full]
    assert full_reads  # partial sums leave as int32
    assert "partials" not in generate(MM, MM_WS, CFG, dataflow="ws").buffers


@pytest.mark.parametrize("mapping,flow", [(MM_WS, "ws"), (MM_WS_SPILL, "ws"), (MM_OS, "os")])
def test_bias_is_moved_into_the_accumulator_rows_and_computes_read_only_the_scratchpad(mapping, flow):
    # Gemmini reads A, B and D only from the scratchpad: the int32 bias is broadcast into the output's
    # accumulator rows (overwrite) before the first compute, which then accumulates onto it
    program = generate(MM, mapping, CFG, dataflow=flow)
    bias_mvins = [c for c in program.commands if c.funct == isa.MVIN3]
    assert bias_mvins
    for c in bias_mvins:
        local = isa.LocalAddr.decode(c.rs2 & 0xFFFFFFFF)
        assert local.is_acc and not local.accumulate
    for c in program.commands:
        if c.is_compute:
            for word in (c.rs1, c.rs2):
                local = isa.LocalAddr.decode(word & 0xFFFFFFFF)
                assert local.is_garbage or not local.is_acc
        if c.funct == isa.PRELOAD:
            local = isa.LocalAddr.decode(c.rs1 & 0xFFFFFFFF)
            assert local.is_garbage or not local.is_acc
    check(program)


def test_weights_stay_in_the_array_across_streamed_rows():
    # level-2 order (K, N, M): M innermost, so each weight block is preloaded once per 3 computes
    mapping = Mapping((lm(), lm(), lm({"M": 3, "N": 2, "K": 4}, {"K": 4, "N": 4}, ("K", "N", "M")), lm({"M": 4})))
    program = generate(MM, mapping, CFG, dataflow="ws")
    counts = program.counts()
    assert counts["compute_preloaded"] == 8 and counts["compute_accumulated"] == 16
    check(program)


def test_folding_gives_full_height_computes():
    # M split 4 (level 2, innermost) x 3 (level 3): computes stream 12 rows in chunks of DIM=4
    wl = matmul("mm", M=12, N=4, K=4)
    mapping = Mapping((lm(), lm(), lm({"M": 4}, {"K": 4, "N": 4}), lm({"M": 3})))
    program = generate(wl, mapping, CFG, dataflow="ws")
    rows = [(c.rs1 >> 48) & 0xFFFF for c in program.commands if c.is_compute]
    assert rows == [4, 4, 4]
    check(program)


def test_a_runs_short_compute_goes_first():
    # runs of 10 rows at DIM 4 under each of the 2 weight blocks: 2 + 4 + 4, so that the next block's weight
    # shift, which overlaps only the compute before it, overlaps a full one
    wl = matmul("mm", M=10, N=8, K=4)
    mapping = Mapping((lm(), lm(), lm({"N": 2}, {"K": 4, "N": 4}), lm({"M": 10})))
    program = generate(wl, mapping, CFG, dataflow="ws")
    computes = [c for c in program.commands if c.is_compute]
    assert [(c.rs1 >> 48) & 0xFFFF for c in computes] == [2, 4, 4] * 2
    assert [c.funct == isa.COMPUTE_PRELOADED for c in computes] == [True, False, False] * 2
    check(program)


CONV_CASES = [((1, 0, 1), (7, 6)), ((1, 1, 1), (7, 6)), ((2, 1, 1), (7, 6)), ((1, 2, 2), (7, 6)), ((2, 0, 1), (7, 7)),
              ((2, 1, 2), (9, 8))]


@pytest.mark.parametrize("stride_pad_dil,hw", CONV_CASES)
def test_conv_ws_hand_mappings_bit_exact(stride_pad_dil, hw):
    stride, pad, dil = stride_pad_dil
    wl = conv2d("cv", N=2, C=8, K=8, H=hw[0], W=hw[1], R=3, S=3, stride=stride, padding=pad, dilation=dil)
    q, p = wl.dims["Q"], wl.dims["P"]
    mappings = [
        Mapping((lm({"N": 2, "S": 3}, order=("N", "S")), lm({"Q": q}),
                 lm({"R": 3, "C": 2, "K": 2}, {"C": 4, "K": 4}, ("K", "R", "C")), lm({"P": p}))),
        Mapping((lm({"K": 2, "C": 2}, order=("C", "K")), lm({"N": 2}),
                 lm({"R": 3, "S": 3, "Q": q}, {"C": 4, "K": 4}, ("R", "Q", "S")), lm({"P": p}))),
        Mapping((lm(), lm({"N": 2, "C": 2}, order=("C", "N")), lm({"R": 3, "S": 3, "K": 2}, {"C": 4, "K": 4}),
                 lm({"P": p, "Q": q}))),
    ]
    for i, mapping in enumerate(mappings):
        program = generate(wl, mapping, CFG, dataflow="ws", bias=i != 1, relu=True, scale=0.01)
        check(program, seed=i)
        if pad:
            assert "zeros" in program.buffers


def test_conv_os_unrolls_output_columns():
    wl = conv2d("cv", N=1, C=8, K=4, H=6, W=10, R=3, S=3, padding=1)
    mapping = Mapping((lm({"Q": 6}), lm({"P": 10 // 5}), lm({"S": 3}, {"P": 5, "K": 4}), lm({"R": 3, "C": 8})))
    program = generate(wl, mapping, GemminiConfig(dim=8, sp_kib=8, acc_kib=4), dataflow="os", scale=0.02)
    check(program)


@pytest.mark.parametrize("orientation", ["rows", "columns", "auto"])
def test_column_orientation_is_bit_exact_and_streams_tall_strips(orientation):
    wl = conv2d("strip", N=1, C=4, K=4, H=12, W=8, R=3, S=3, padding=1)
    mapping = Mapping((lm({"P": 4}), lm(), lm({"R": 3, "S": 3, "Q": 12}, {"C": 4, "K": 4}), lm({"P": 2})))
    program = generate(wl, mapping, CFG, dataflow="ws", orientation=orientation, relu=True, scale=0.02)
    check(program)
    rows = [(c.rs1 >> 48) & 0xFFFF for c in program.commands if c.is_compute]
    if orientation != "rows":  # 12 output rows of one column stream as 4 + 4 + 4
        assert program.plan.problem.transposed and max(rows) == CFG.dim
    else:
        assert max(rows) == 2


def test_equal_computes_either_way_the_orientation_with_longer_accumulator_moves_wins():
    # tiles 2 pixels wide (P) and 8 tall (Q) of a 1x1 conv: both orientations stream computes of DIM = 4 rows,
    # but walked down the image columns an output block leaves in 4-row mvouts (a tile column has 8 pixels),
    # along the image rows in 2-row ones (a tile row has 2 pixels, and the next row is not contiguous)
    wl = conv2d("pw", C=4, K=4, P=8, Q=8)
    mapping = Mapping((lm({"P": 4}), lm(), lm({}, {"C": 4, "K": 4}), lm({"P": 2, "Q": 8})))
    mvouts = {o: generate(wl, mapping, CFG, dataflow="ws", orientation=o).counts()["mvout"] for o in ("rows", "columns")}
    assert mvouts == {"rows": 32, "columns": 16}
    program = generate(wl, mapping, CFG, dataflow="ws")
    assert program.plan.problem.transposed and program.counts()["mvout"] == 16
    check(program)


def test_rectangular_strided_dilated_conv_both_orientations():
    wl = conv2d("rect", N=2, C=4, K=8, H=11, W=9, R=3, S=2, padding=(1, 2), stride=(2, 1), dilation=(1, 2))
    d = wl.dims
    mapping = Mapping((lm({"N": 2}), lm(), lm({"R": 3, "S": 2, "K": 2, "P": d["P"]}, {"C": 4, "K": 4}),
                       lm({"Q": d["Q"]})))
    for orientation in ("rows", "columns"):
        check(generate(wl, mapping, CFG, dataflow="ws", orientation=orientation, relu=True, scale=0.02))


def test_conv_os_unrolling_output_rows_runs_down_columns():
    wl = conv2d("cv", N=1, C=8, K=4, H=10, W=6, R=3, S=3, padding=1)
    mapping = Mapping((lm({"P": 6}), lm({"Q": 2}), lm({"S": 3}, {"Q": 5, "K": 4}), lm({"R": 3, "C": 8})))
    program = generate(wl, mapping, GemminiConfig(dim=8, sp_kib=8, acc_kib=4), dataflow="os", scale=0.02)
    assert program.plan.problem.transposed
    check(program)


# --- random valid mappings (a small in-test generator, independent of the schedulers) --------------

def random_mapping(wl, flow, dim, rng):
    return random_gemmini_mapping(wl, flow, dim, rng)


RANDOM_WORKLOADS = [
    (matmul("mm_r", M=12, N=8, K=20), "ws"),
    (matmul("mm_r", M=8, N=12, K=12), "os"),
    (conv2d("cv_r", N=2, C=6, K=4, H=6, W=5, R=3, S=2, padding=1), "ws"),
    (conv2d("cv_r2", N=1, C=4, K=6, H=9, W=9, R=3, S=3, stride=2, dilation=1), "ws"),
]


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(range(len(RANDOM_WORKLOADS))), seed=st.integers(0, 10_000), bias=st.booleans())
def test_random_mappings_bit_exact_or_refused_for_capacity(case, seed, bias):
    wl, flow = RANDOM_WORKLOADS[case]
    check_or_refused_for_capacity(wl, random_mapping(wl, flow, CFG.dim, random.Random(seed)), CFG, flow, seed, bias)


# --- schedules from the project's schedulers ---------------------------------------------------------

SCHED_WORKLOADS = [matmul("mm_s", M=24, N=12, K=20), conv2d("cv_s", N=1, C=8, K=8, H=6, W=6, R=3, S=3, padding=1),
                   conv2d("cv_s2", N=2, C=6, K=4, H=7, W=7, R=3, S=3, stride=2)]


def _schedulers():
    from cosa.baselines import gemmini_default, random_search
    from cosa.scheduler import schedule

    return {"gemmini-default": lambda wl, arch: gemmini_default(wl, arch),
            "random": lambda wl, arch: random_search(wl, arch, samples=60, seed=3),
            "cosa": lambda wl, arch: schedule(wl, arch, time_limit_s=20)}


@pytest.mark.parametrize("scheduler", ["gemmini-default", "random", "cosa"])
@pytest.mark.parametrize("flow", ["ws", "os"])
def test_schedulers_mappings_bit_exact(scheduler, flow):
    arch = CFG.arch(flow)
    for wl in SCHED_WORKLOADS:
        if flow == "os" and wl.op["kind"] == "conv2d":
            continue  # the preset's OS conv mappings may unroll rows the generator does not support
        sched = _schedulers()[scheduler](wl, arch)
        program = generate(wl, sched.mapping, arch, bias=True, relu=True, scale=0.01)
        assert program.dataflow == flow
        result = check(program)
        assert result.cycles and result.cycles >= result.ideal_cycles


# --- results and accounting ---------------------------------------------------------------------------

def test_run_result_fields_and_dram_bytes():
    program = generate(MM, MM_WS, CFG, dataflow="ws")
    result = check(program)
    assert result.ideal_cycles == 12 * 8 * 16 / CFG.dim ** 2
    assert result.utilization == pytest.approx(result.ideal_cycles / result.cycles)
    assert result.instructions == len(program.commands)
    # inputs and weights are each read once (no refetch in this mapping), bias rows, int8 outputs
    minimum = 12 * 16 + 16 * 8 + 12 * 8
    assert minimum <= result.dram_bytes == program.dram_bytes()
    assert set(result.to_dict()) == {"verified", "mismatches", "cycles", "ideal_cycles", "utilization",
                                     "instructions", "dram_bytes", "busy"}
    # the timing model's per-unit busy cycles: each unit works at most the whole run, the array at least its slots
    assert set(result.busy) == {"load", "execute", "store"}
    assert all(0 < b <= result.cycles for b in result.busy.values())
    assert result.busy["execute"] >= sum(max((c.rs1 >> 48) & 0xFFFF, 1) for c in program.commands if c.is_compute)


def test_a_wrong_output_is_reported_not_verified():
    program = generate(MM, MM_WS, CFG, dataflow="ws")
    inputs = example_inputs(program, seed=5)
    expected = reference_output(program, inputs)
    broken = type(program)(**{**program.__dict__, "commands": tuple(
        c for c in program.commands if not (c.funct == isa.MVOUT))})
    result = run_program(broken, inputs)
    assert not result.verified and result.mismatches == int(np.count_nonzero(expected))


def test_double_buffering_alternates_scratchpad_halves():
    program = generate(MM, MM_WS, CFG, dataflow="ws", double_buffer=True)
    assert program.plan.sp_double and len(program.plan.a_bases) == 2
    locals_ = {isa.LocalAddr.decode(c.rs2 & 0xFFFFFFFF).row for c in program.commands if c.funct == isa.MVIN}
    assert any(r >= program.plan.a_bases[1] for r in locals_) and any(r < program.plan.a_bases[1] for r in locals_)
    single = generate(MM, MM_WS, CFG, dataflow="ws", double_buffer=False)
    assert not single.plan.sp_double
    check(single)


def test_preset_arch_decides_dataflow_and_buffering():
    arch = CFG.arch("ws")
    program = generate(MM, MM_WS, arch)
    assert program.dataflow == "ws" and program.plan.sp_double == arch.levels[1].double_buffered


# --- bad input -----------------------------------------------------------------------------------------

def test_not_the_gemmini_preset_is_refused():
    from costmodel import presets

    with pytest.raises(CodegenError, match="not the Gemmini preset"):
        generate(MM, MM_WS, presets.eyeriss())


def test_dataflow_mismatch_with_preset_is_refused():
    with pytest.raises(CodegenError, match="dataflow"):
        generate(MM, MM_WS, CFG.arch("ws"), dataflow="os")


@pytest.mark.parametrize("wl", [einsum("ij,jk->ik", {"i": 4, "j": 4, "k": 4}),
                                matmul("wide", M=4, N=4, K=4, bits=16)])
def test_unsupported_workloads_are_refused(wl):
    with pytest.raises(CodegenError) as info:
        generate(wl, Mapping((lm(),) * 4), CFG, dataflow="ws")
    assert isinstance(info.value, FrameworkError) and wl.name in str(info.value)


@pytest.mark.parametrize("mapping,match", [
    (Mapping((lm({"M": 3}), lm({"K": 2}), lm({"N": 2, "K": 2}, {"M": 4, "N": 4}), lm({"K": 4}))), "cannot unroll"),
    (Mapping((lm({"M": 3}), lm({"K": 2}), lm({"N": 2, "K": 2}, {"K": 4, "N": 4}), lm({"M": 2}))), "multiply"),
    (Mapping((lm({"M": 3}), lm(), lm({"N": 2, "K": 4}, {"K": 4, "N": 4}), lm({"M": 2, "K": 1, "N": 1}))), "multiply"),
    (Mapping((lm({"M": 3}), lm(), lm({"N": 2}, {"K": 4, "N": 4}), lm({"M": 4, "K": 4}))), "Registers"),
    (Mapping((lm({"M": 3}), lm(), lm({"N": 2, "K": 4}, {"K": 4, "N": 4}))), "levels"),
])
def test_bad_mappings_name_the_problem(mapping, match):
    with pytest.raises(CodegenError, match=match):
        generate(MM, mapping, CFG, dataflow="ws")


def test_tiles_that_do_not_fit_are_refused():
    big = matmul("big", M=64, N=64, K=256)
    mapping = Mapping((lm(), lm(), lm({"M": 16, "N": 16, "K": 64}, {"K": 4, "N": 4}), lm({"M": 4})))
    with pytest.raises(CodegenError, match="Scratchpad.capacity"):
        generate(big, mapping, CFG, dataflow="ws")


def test_bad_inputs_to_run_are_refused():
    program = generate(MM, MM_WS, CFG, dataflow="ws")
    inputs = example_inputs(program)
    with pytest.raises(SimulationError, match="weights"):
        run_program(program, {**inputs, "weights": inputs["weights"][:, :4]})
    with pytest.raises(SimulationError, match="missing"):
        run_program(program, {"input": inputs["input"]})
