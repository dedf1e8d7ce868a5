"""gemmini-default runs what Gemmini's C library runs: our generator's command stream equals the one
recorded from the real gemmini.h (ucb-bar/gemmini-rocc-tests), instruction for instruction.

The committed streams (tests/data/gemmini_h/streams.json) were recorded with
``python -m gemmini.vendor.record --checkout <gemmini-rocc-tests at 180c468> --out
tests/data/gemmini_h/streams.json``.
With GEMMINI_ROCC_TESTS pointing to a checkout, fresh streams are recorded
for further shapes and compared too.
"""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

import gemmini.vendor as V
from gemmini import CodegenError
from gemmini.vendor import calls as C
from gemmini.vendor import encode as E

DATA = Path(__file__).resolve().parents[1] / "data" / "gemmini_h" / "streams.json"
DOC = json.loads(DATA.read_text())
CASES = {case["program"]["name"]: case for case in DOC["cases"]}
COMMIT = "180c46848eca06933df4a2ab8c1351ba1d005e09"


def first_difference(expected, got) -> str | None:
    """None when equal; else the first differing index with both disassemblies around it."""
    expected = [tuple(int(x) for x in c) for c in expected]
    got = [tuple(int(x) for x in c) for c in got]
    n = min(len(expected), len(got))
    idx = next((i for i in range(n) if expected[i] != got[i]), None)
    if idx is None and len(expected) == len(got):
        return None
    idx = n if idx is None else idx
    lines = [f"first difference at command {idx} (recorded {len(expected)} commands, generated {len(got)})"]
    for i in range(max(0, idx - 2), min(max(len(expected), len(got)), idx + 2)):
        rec = E.disassemble(expected[i]) if i < len(expected) else "-"
        gen = E.disassemble(got[i]) if i < len(got) else "-"
        lines.append(f"  [{i}] recorded  {rec}\n  [{i}] generated {gen}")
    return "\n".join(lines)


def test_recorded_data_names_its_commit_and_covers_the_shapes():
    assert DOC["gemmini_rocc_tests_commit"] == COMMIT
    assert len(CASES) >= 16
    fns = {c["fn"] for case in DOC["cases"] for c in case["program"]["calls"]}
    assert fns == {"tiled_matmul_auto", "tiled_matmul_nn_auto", "tiled_conv_auto", "tiled_conv_stride_auto",
                   "tiled_conv_dw_auto", "tiled_conv_downsample"}
    functs = {cmd[0] for case in DOC["cases"] for cmd in case["stream"]}
    # plain commands (OS), both loop instructions with all their config words, the fence
    assert {0, 2, 3, 4, 5, 6, 128} <= functs
    assert set(range(8, 14)) | set(range(15, 22)) <= functs


@pytest.mark.parametrize("name", sorted(CASES))
def test_generator_equals_recorded_stream(name):
    case = CASES[name]
    program = V.VendorProgram.from_dict(case["program"])
    assert program.to_dict() == case["program"]  # the layout and calls round-trip
    diff = first_difference(case["stream"], V.stream(program))
    assert diff is None, f"{name}: {diff}"


def test_builders_reproduce_the_recorded_programs():
    from gemmini.vendor.record import cases

    built = {p.name: p.to_dict() for p in cases()}
    assert built == {name: case["program"] for name, case in CASES.items()}


def test_first_difference_reports_index_and_disassembly():
    stream = CASES["mm_100x70x33_ws"]["stream"]
    changed = [list(c) for c in stream]
    changed[5][2] ^= 1 << 32  # K of the first LOOP_WS bounds
    msg = first_difference(stream, changed)
    assert "command 5" in msg and "loop_ws_config_bounds" in msg
    assert "command 18" in first_difference(stream, stream + [[128, 0, 0]])


def test_what_the_library_calls_for_each_layer_kind():
    assert C.conv("a", 1, 56, 56, 64, 256, 1).calls[0].fn == "tiled_matmul_nn_auto"  # 1x1 stride 1
    assert C.conv("b", 1, 56, 56, 64, 64, 3, padding=1).calls[0].fn == "tiled_conv_auto"
    assert C.conv("c", 1, 56, 56, 256, 512, 1, stride=2, downsample_call=True).calls[0].fn == "tiled_conv_downsample"
    assert C.depthwise("d", 1, 56, 56, 32, 3, padding=1).calls[0].fn == "tiled_conv_dw_auto"
    g = C.grouped("e", 1, 8, 8, 16, 32, 3, 4, padding=1)
    assert [c.fn for c in g.calls] == ["tiled_conv_stride_auto"] * 4
    assert [c.kw["input"].offset for c in g.calls] == [0, 4, 8, 12]
    assert [c.kw["output"].offset for c in g.calls] == [0, 8, 16, 24]


def test_layout_is_aligned_and_disjoint():
    for case in DOC["cases"]:
        bufs = sorted(case["program"]["buffers"], key=lambda b: b["address"])
        assert bufs[0]["address"] == C.ARENA_BASE
        for a, b in zip(bufs, bufs[1:]):
            assert a["address"] % C.ALIGN == 0 and a["address"] + a["bytes"] <= b["address"]


def test_downsample_flag_and_reuse_ids_appear_where_the_library_sets_them():
    # res5a_branch1 through tiled_conv_auto: 1x1 stride 2 on an even image -> LOOP_CONV_WS downsample bit
    starts = [c for c in CASES["resnet50_res5a_branch1"]["stream"] if c[0] == E.LOOP_CONV_WS]
    assert starts and all(c[2] & 2 for c in starts)
    odd = [c for c in CASES["conv_1x1_s2_odd_image"]["stream"] if c[0] == E.LOOP_CONV_WS]
    assert odd and not any(c[2] & 2 for c in odd)
    # a_reuse / b_reuse: scratchpad ids 1 then 2 in bits [19:16] of LOOP_WS rs1 (mm 100x70x33: I0*K0 = 2)
    ids = [(c[1] >> 18) & 3 for c in CASES["mm_100x70x33_ws"]["stream"] if c[0] == E.LOOP_WS]
    assert ids == [1, 2]


# --- refusals ----------------------------------------------------------------------

def test_loop_ws_fields_are_checked():
    E.loop_ws(65535, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0)
    with pytest.raises(CodegenError, match="field 'I'.*16-bit"):
        E.loop_ws(65536, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0)
    with pytest.raises(CodegenError, match="field 'pad_K'"):
        E.loop_ws(1, 1, 1, 0, 0, 1 << 16, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0)
    with pytest.raises(CodegenError, match="field 'A_stride'"):
        E.loop_ws(1, 1, 1, 0, 0, 0, 0, 0, 0, 0, -1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0)


def test_conv_loop_fields_are_checked():
    # 70000 input channels: in_stride and in_channels exceed LOOP_CONV_WS's 16-bit fields
    prog = C.conv("wide", 1, 2, 2, 70000, 16, 3, padding=1)
    with pytest.raises(CodegenError, match="gemmini_loop_conv_ws: field 'in_channels'"):
        V.stream(prog)
    # kernel dilation 1024 exceeds its 10-bit field
    prog = C.conv("dilated", 1, 1030, 1030, 1, 16, 2, dilation=1024)
    with pytest.raises(CodegenError, match="field 'kernel_dilation'"):
        V.stream(prog)
    # a batch of 70000 images exceeds the 16-bit batch_size field
    with pytest.raises(CodegenError, match="field 'batch_size'"):
        V.stream(C.conv("batched", 70000, 3, 3, 16, 16, 3, padding=1))


def test_library_assertions_are_refused():
    bad = C.LibCall.make("tiled_conv_auto", **dict(C.conv("x", 1, 8, 8, 16, 16, 3, padding=1).calls[0].kw,
                                                   tiled_conv_type=C.OS))
    prog = C.VendorProgram("os_conv", C.conv("x", 1, 8, 8, 16, 16, 3, padding=1).buffers, (bad,))
    with pytest.raises(CodegenError, match="tiled_conv_type"):
        V.stream(prog)
    mm = C.gemm("t", 32, 32, 32, dataflow="os").calls[0]
    prog = C.VendorProgram("os_t", C.gemm("t", 32, 32, 32).buffers,
                           (C.LibCall.make(mm.fn, **dict(mm.kw, transpose_A=True)),))
    with pytest.raises(CodegenError, match="transpose"):
        V.stream(prog)
    with pytest.raises(CodegenError, match="padding"):
        V.stream(C.conv("pad", 1, 8, 8, 16, 16, 3, padding=3))
    with pytest.raises(CodegenError, match="dataflow"):
        C.gemm("t", 16, 16, 16, dataflow="rs")


# --- live: record fresh streams from a user's checkout --------------------------------

CHECKOUT = os.environ.get("GEMMINI_ROCC_TESTS")
LIVE = [
    C.gemm("live_mm_17x300x129_ws", 17, 300, 129, relu=True, scale=0.3),
    C.gemm("live_mm_17x300x129_os", 17, 300, 129, dataflow="os", scale=0.3),
    C.gemm("live_bert_attn_scores", 128, 128, 64, bias=False, scale=0.05),
    C.conv("live_conv_31x17_c19_k3", 1, 31, 17, 19, 35, 3, padding=1, relu=True, scale=0.1),
    C.conv("live_conv_pool", 1, 30, 30, 16, 32, 3, padding=1, relu=True, scale=0.1, pool=(2, 2, 0)),
    C.conv("live_res3a_branch1", 1, 56, 56, 256, 512, 1, stride=2, scale=0.02, downsample_call=True),
    C.conv("live_res3a_branch1_auto", 1, 56, 56, 256, 512, 1, stride=2, scale=0.02),
    C.depthwise("live_dw_7x7_c48", 1, 14, 14, 48, 3, stride=1, padding=1, relu=True, scale=0.1),
    C.grouped("live_grouped_g2", 2, 9, 9, 24, 24, 3, 2, stride=2, padding=1, scale=0.1),
    C.fc("live_fc_b2", 2, 1280, 1000, scale=0.05),
]


@pytest.mark.skipif(not CHECKOUT, reason="set GEMMINI_ROCC_TESTS to a gemmini-rocc-tests checkout")
@pytest.mark.parametrize("program", LIVE, ids=[p.name for p in LIVE])
def test_live_recording_equals_generator(program):
    from gemmini.vendor.record import record

    recorded = record(program, CHECKOUT)
    assert recorded, "the recorder saw no command"
    diff = first_difference(recorded, V.stream(program))
    assert diff is None, f"{program.name}: {diff}"


@pytest.mark.skipif(not CHECKOUT, reason="set GEMMINI_ROCC_TESTS to a gemmini-rocc-tests checkout")
def test_live_committed_cases_still_record_the_same():
    from gemmini.vendor.record import checkout_commit, record

    if checkout_commit(CHECKOUT) != COMMIT:
        pytest.skip(f"checkout is not at {COMMIT}")
    for name in ("resnet50_res2a_branch2b", "mm_100x70x33_os", "mobilenet_dw_s2"):
        program = V.VendorProgram.from_dict(CASES[name]["program"])
        assert first_difference(CASES[name]["stream"], record(program, CHECKOUT)) is None, name


# --- the vendor's streams run on our functional model, bit-exact against NumPy ---------------

RUNNABLE = [
    C.gemm("run_mm_ws", 100, 70, 33, relu=True, scale=0.0013),
    C.gemm("run_mm_os", 100, 70, 33, dataflow="os", scale=0.0013),
    C.gemm("run_mm_os_nobias", 50, 40, 20, dataflow="os", bias=False, relu=True, scale=0.0016),
    C.fc("run_fc", 2, 96, 40, scale=0.0007),
    C.conv("run_1x1", 1, 6, 6, 24, 40, 1, relu=True, scale=0.0015),
    C.conv("run_3x3_s2_nobias", 1, 11, 11, 40, 24, 3, stride=2, padding=1, bias=False, scale=0.0004),
    C.conv("run_1x1_s2_hw_downsample", 1, 8, 8, 32, 48, 1, stride=2, scale=0.0013),
    C.conv("run_1x1_s2_downsample_call", 1, 8, 8, 32, 48, 1, stride=2, scale=0.0013, downsample_call=True),
    C.grouped("run_grouped_g2", 1, 6, 6, 32, 32, 3, 2, padding=1, relu=True, scale=0.0006),
    C.grouped("run_grouped_g4_narrow", 1, 6, 6, 32, 64, 3, 4, padding=1, scale=0.001),
    C.depthwise("run_dw_s2", 1, 10, 9, 20, 3, stride=2, padding=1, relu=True, scale=0.004),
    C.depthwise("run_dw_5x5", 1, 11, 11, 8, 5, padding=2, scale=0.003),
    C.conv("run_first_layer_7x7_s2", 1, 20, 20, 3, 16, 7, stride=2, padding=3, relu=True, scale=0.0015),
    C.conv("run_fused_maxpool", 1, 12, 12, 16, 16, 3, padding=1, relu=True, scale=0.0006, pool=(3, 2, 1)),
]


@pytest.mark.parametrize("program", RUNNABLE, ids=[p.name for p in RUNNABLE])
def test_vendor_stream_runs_bit_exact(program):
    pytest.importorskip("gemmini.sim.loops", reason="the functional model does not run loop instructions yet")
    from gemmini.vendor.run import run_vendor

    result = run_vendor(program, seed=3)
    assert result.verified, f"{program.name}: {result.mismatches} of {result.outputs.size} outputs differ"
    assert result.instructions == len(V.stream(program))
    saturated = np.mean((result.outputs == 127) | (result.outputs == -128))
    assert saturated < 0.2 and len(np.unique(result.outputs)) > 8  # a check that most outputs can fail


def test_reference_max_pool_counts_padding_as_zero():
    from gemmini.vendor.run import _maxpool

    x = np.array([[-5, -3], [-2, -7]], dtype=np.int8).reshape(1, 2, 2, 1)
    assert _maxpool(x, 2, 2, 0).ravel().tolist() == [-2]
    assert _maxpool(x, 3, 2, 1).ravel().tolist() == [0]


# --- layers of the zoo get the calls Gemmini's own networks make ------------------------------

def test_zoo_layers_map_to_the_library_calls():
    import workloads

    calls = {w.name: [c.fn for c in C.from_workload(w).calls] for w in workloads.load("resnet50")}
    assert calls["conv1"] == ["tiled_conv_auto"]
    assert calls["res2a_branch2a"] == ["tiled_matmul_nn_auto"]  # 1x1 stride 1
    assert calls["res2a_branch2b"] == ["tiled_conv_auto"]
    # 1x1 stride 2: resnet50.c calls tiled_conv_downsample (one tiled_matmul_auto per output row) for two
    # of the three branches and tiled_conv_auto's hardware downsample path for res5a_branch1
    assert calls["res4a_branch1"] == ["tiled_conv_downsample"]
    assert calls["res3a_branch1"] == ["tiled_conv_downsample"]
    assert calls["res5a_branch1"] == ["tiled_conv_auto"]
    res4 = next(w for w in workloads.load("resnet50") if w.name == "res4a_branch1")
    assert [c.fn for c in C.from_workload(res4, downsample_call=False).calls] == ["tiled_conv_auto"]
    mobilenet = {w.name: C.from_workload(w) for w in workloads.load("mobilenet_v2")}
    assert [c.fn for c in mobilenet["b1_dw"].calls] == ["tiled_conv_dw_auto"]
    bmm = C.from_workload(workloads.matmul("bmm", M=8, N=16, K=24, batch=3))
    assert [c.kw["A"].offset for c in bmm.calls] == [0, 192, 384]
    with pytest.raises(CodegenError, match="weight-stationary"):
        C.from_workload(workloads.conv2d("c", C=16, K=16, P=8, Q=8, R=3, S=3, padding=1), dataflow="os")
    assert C.from_workload(workloads.conv2d("p", C=16, K=16, P=8, Q=8, R=1, S=1),
                           dataflow="os").calls[0].kw["tiled_matmul_type"] == C.OS


def test_zoo_conv1_is_the_recorded_conv1():
    import workloads

    conv1 = next(w for w in workloads.load("resnet50") if w.name == "conv1")
    ours = C.from_workload(conv1, relu=True, scale=0.05).to_dict()
    recorded = CASES["resnet50_conv1"]["program"]
    assert ours["calls"] == recorded["calls"] and ours["buffers"] == recorded["buffers"]


@pytest.mark.skipif(not CHECKOUT, reason="set GEMMINI_ROCC_TESTS to a gemmini-rocc-tests checkout")
@pytest.mark.parametrize("net", ["resnet50", "mobilenet_v2", "bert_base_128"])
def test_live_every_zoo_layer_equals_the_library(net):
    import workloads
    from gemmini.vendor.record import record

    for w in workloads.load(net):
        program = C.from_workload(w, relu=True, scale=0.01)
        diff = first_difference(record(program, CHECKOUT), V.stream(program))
        assert diff is None, f"{net}/{w.name}: {diff}"


@pytest.mark.skipif(not CHECKOUT, reason="set GEMMINI_ROCC_TESTS to a gemmini-rocc-tests checkout")
def test_live_library_and_generator_refuse_the_same_call():
    from gemmini.vendor.record import RecorderError, record

    program = C.conv("pad", 1, 8, 8, 16, 16, 3, padding=3)
    with pytest.raises(RecorderError, match="kernel_dim must be larger than padding"):
        record(program, CHECKOUT)
    with pytest.raises(CodegenError, match="kernel_dim must be larger than padding"):
        V.stream(program)


def test_a_generated_programs_tiles_run_through_the_library_bit_exact():
    # the gemmini-h style on our models: the library's call for the layer with the mapping's tiles
    from cosa.scheduler import schedule
    from gemmini import GemminiConfig, codegen
    from gemmini.codegen.c import library_tiles
    from gemmini.vendor import stream
    from gemmini.vendor.calls import from_workload
    from gemmini.vendor.run import run_through_library
    import workloads

    arch = GemminiConfig().arch("ws")
    for wl in (workloads.matmul("mm_lib", M=72, N=40, K=56),
               workloads.conv2d("c3_lib", C=16, K=32, H=10, W=10, R=3, S=3, padding=1),
               workloads.conv2d("c1_lib", C=32, K=48, H=6, W=6, R=1, S=1)):
        program = codegen.generate(wl, schedule(wl, arch, time_limit_s=10, bound=False).mapping, arch, scale="auto")
        result = run_through_library(program)
        assert result.verified and result.cycles > 0
        if wl.name == "mm_lib":  # one LOOP_WS per tile of the mapping's tile sizes
            tiles, _ = library_tiles(program)
            blocks = [-(-v // 16) for v in (72, 40, 56)]
            expected = math.prod(-(-n // t) for n, t in zip(blocks, tiles))
            loops = [c for c in stream(from_workload(wl, scale=program.scale), tiles=tiles) if c[0] == 8]
            assert len(loops) == expected


# --- Gemmini f13847e's LOOP_CONV_WS words (LibParams.loop_conv_layout "f13847e") ------------------------------
# tests/data/gemmini_h/streams_ab748c5.json was recorded with ``python -m gemmini.vendor.record --checkout
# <gemmini-rocc-tests at ab748c5, the commit Gemmini f13847e pins> --cases square-conv --commit ab748c5...``.
OLD_DOC = json.loads((DATA.parent / "streams_ab748c5.json").read_text())
OLD_PARAMS = V.LibParams(loop_conv_layout="f13847e")


@pytest.mark.parametrize("case", OLD_DOC["cases"], ids=[c["program"]["name"] for c in OLD_DOC["cases"]])
def test_f13847e_streams_equal_the_ab748c5_recording(case):
    assert OLD_DOC["gemmini_rocc_tests_commit"] == "ab748c525a1152b7205c74aee0c24aa0463cf124"
    program = V.VendorProgram.from_dict(case["program"])
    old, new = V.stream(program, OLD_PARAMS), V.stream(program)
    assert first_difference(case["stream"], old) is None
    # the newer header differs in the first three conv configuration words only
    changed = {o[0] for o, n in zip(old, new) if o != n}
    assert len(old) == len(new) and changed == {16, 17, 18}


SQUARE_RUNNABLE = [p for p in RUNNABLE if p.name in ("run_3x3_s2_nobias", "run_1x1_s2_hw_downsample",
                                                     "run_first_layer_7x7_s2", "run_fused_maxpool", "run_dw_5x5")]
SQUARE_RUNNABLE.append(C.conv("run_1x1_conv_call", 1, 6, 6, 24, 40, 1, relu=True, scale=0.0015, conv_call=True))


@pytest.mark.parametrize("program", SQUARE_RUNNABLE, ids=[p.name for p in SQUARE_RUNNABLE])
def test_f13847e_vendor_stream_runs_bit_exact(program):
    import dataclasses

    from gemmini.config import DEFAULT_CONFIG
    from gemmini.vendor.run import run_vendor

    old = dataclasses.replace(DEFAULT_CONFIG, loop_conv_layout="f13847e")
    assert any(c[0] == E.LOOP_CONV_WS for c in V.stream(program, OLD_PARAMS))
    result = run_vendor(program, seed=3, config=old, with_timing=True)
    assert result.verified, f"{program.name}: {result.mismatches} of {result.outputs.size} outputs differ"
    assert result.cycles == run_vendor(program, seed=3, with_timing=True).cycles
    assert len(np.unique(result.outputs)) > 8


def test_f13847e_refuses_rectangular_images_and_unknown_layouts():
    for prog in (C.conv("rect", 1, 9, 7, 16, 16, 3, padding=1), C.depthwise("rect_dw", 1, 10, 9, 20, 3, padding=1)):
        V.stream(prog)
        with pytest.raises(CodegenError) as err:
            V.stream(prog, OLD_PARAMS)
        assert err.value.field == "in_col_dim" and "square" in str(err.value) and "\n" not in str(err.value)
        assert "gemmini_loop_conv_ws" in str(err.value) and err.value.exit_code == 2
    with pytest.raises(CodegenError) as err:
        V.LibParams(loop_conv_layout="v0.7.2")
    assert err.value.field == "loop_conv_layout"
