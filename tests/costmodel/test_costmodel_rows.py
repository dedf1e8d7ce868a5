"""Row-addressed buffers (``Level.row_bytes`` / ``row_axes``): rows per tile, capacity, footprint.

Gemmini stores tiles in rows of DIM words, one block of the dim unrolled on the array per row: a block
narrower than DIM still takes a whole row.  The hand-computed cases spell the rows out; the property
checks the cost model's rows against the code generator's own layout (``make_plan``) at DIM 4.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

import workloads as W
from workloads import FrameworkError
from costmodel import Arch, ArchError, Level, SpatialAxis, arch_from_dict, arch_to_dict, evaluate
from costmodel.presets import gemmini
from gemmini import GemminiConfig
from gemmini.codegen import generate
from gemmini.codegen.tiling import make_plan, problem_of
from mappings import LevelMapping as LM, Mapping, MappingError, tile_bytes, tile_rows, validate, violations
from mappings.validate import stored_box_words

from gemmini_mappings import random_gemmini_mapping

DIM = 4
TINY = gemmini(dim=DIM, scratchpad_kib=1, accumulator_kib=1)  # 256 rows of 4 B; 64 rows of 16 B
WORDS = TINY.with_levels(Scratchpad=dict(row_bytes=None, row_axes=()), Accumulator=dict(row_bytes=None, row_axes=()))


def names_by_role(workload) -> dict:
    return {t.role: t.name for t in workload.tensors}


# --- hand-computed rows ------------------------------------------------------------------------------

MM = W.matmul("mm", M=8, N=8, K=12)
# K: 2 (DRAM) x 2 (Scratchpad) x 3 (array rows); N: 2 x 4 (array columns); M: 2 (DRAM) x 4 (Registers)
MM_MAP = Mapping((LM(temporal={"M": 2, "K": 2}), LM(temporal={"K": 2}),
                  LM(temporal={"N": 2}, spatial={"K": 3, "N": 4}), LM(temporal={"M": 4})))


def test_matmul_rows_hold_one_block_of_the_unrolled_dim():
    # Scratchpad tile: M 4, K 6, N 8.  A: 24 words in blocks of 3 (K on the rows) -> 8 rows, not 24/4 = 6.
    # B: 48 words in blocks of 4 (N on the columns) -> 12 rows.  Accumulator tile M 4, N 8: 32 / 4 = 8 rows.
    assert tile_rows(MM_MAP, MM, TINY, 1) == {"A": 8, "B": 12}
    assert tile_rows(MM_MAP, MM, TINY, 2) == {"C": 8}
    assert tile_rows(MM_MAP, MM, TINY, 0) is None  # DRAM is not row-addressed
    assert tile_bytes(MM_MAP, MM, TINY, 1) == {"A": 32, "B": 48}
    assert tile_bytes(MM_MAP, MM, TINY, 2) == {"C": 128}
    assert tile_bytes(MM_MAP, MM, WORDS, 1) == {"A": 24, "B": 48}  # the word count, for comparison
    plan = make_plan(problem_of(MM), MM_MAP, GemminiConfig.from_arch(TINY), "ws", source="test")
    assert (plan.a_rows, plan.b_rows, plan.acc_rows) == (8, 12, 8)


def test_cost_footprint_counts_rows_at_row_addressed_levels():
    cost = evaluate(MM, TINY, MM_MAP)
    assert cost.footprint_rows == {"Scratchpad": {"A": 8, "B": 12, "C": 0},
                                   "Accumulator": {"A": 0, "B": 0, "C": 8}}
    assert cost.footprint_bytes["Scratchpad"] == {"A": 32, "B": 48, "C": 0}
    assert cost.footprint_bytes["Accumulator"]["C"] == 8 * 16
    assert cost.footprint_words["Scratchpad"]["A"] == 24  # words are still words
    plain = evaluate(MM, WORDS, MM_MAP)
    assert plain.footprint_rows == {}
    assert plain.footprint_bytes["Scratchpad"]["A"] == 24
    assert plain.footprint_bytes["DRAM"] == cost.footprint_bytes["DRAM"]
    assert cost.to_dict()["footprint_rows"]["Accumulator"]["C"] == 8


DW = W.depthwise_conv2d("dw", C=4, H=6, W=6, R=3, S=3, padding=1)  # G 4, C = K = 1, P = Q = 6
DW_MAP = Mapping((LM(), LM(temporal={"Q": 2}), LM(temporal={"G": 4, "R": 3, "S": 3}),
                  LM(temporal={"P": 6, "Q": 3})))


def test_depthwise_rows_hold_one_word_and_keep_the_padding():
    # Scratchpad tile: G 4, Q 6, P 6, R 3, S 3.  Inputs: 4 groups x (6+3-1) x (6+3-1) padded pixels, one
    # channel per row -> 256 rows (the words clipped to the 6 x 6 image would be 144).  Weights 4 x 9 = 36.
    # Accumulator tile G 4, Q 3, P 6: 72 outputs, one int32 per 16-byte row.
    assert tile_rows(DW_MAP, DW, TINY, 1) == {"Weights": 36, "Inputs": 256}
    assert tile_rows(DW_MAP, DW, TINY, 2) == {"Outputs": 72}
    plan = make_plan(problem_of(DW), DW_MAP, GemminiConfig(dim=DIM, sp_kib=64, acc_kib=64), "ws", source="test")
    assert (plan.a_rows, plan.b_rows, plan.acc_rows) == (256, 36, 72)


def test_capacity_in_rows_refuses_what_fits_in_words():
    assert not violations(DW_MAP, DW, WORDS)  # 2 x (144 + 36) bytes of 1024: fits in words
    found = violations(DW_MAP, DW, TINY)
    assert [e.field for e in found] == ["Scratchpad.capacity", "Accumulator.capacity"]
    text = str(found[0])
    # level, tensors, rows needed vs available
    for part in ("level 1 (Scratchpad)", "584 rows of 4 bytes", "Inputs 256 rows (1 word(s) per row)",
                 "Weights 36 rows", "x2 (double buffered)", "has 256 rows (1024 bytes)"):
        assert part in text
    assert "144 rows of 16 bytes" in str(found[1]) and "has 64 rows" in str(found[1])
    with pytest.raises(MappingError, match="Scratchpad"):
        validate(DW_MAP, DW, TINY)
    with pytest.raises(MappingError, match="Scratchpad.capacity"):
        evaluate(DW, TINY, DW_MAP)
    # the generator agrees: its tiles do not fit even in one buffer (256 + 36 rows of 256)
    with pytest.raises(FrameworkError, match="292 rows|256 \\(inputs\\) \\+ 36 \\(weights\\)"):
        generate(DW, DW_MAP, TINY, validate=False)


def test_strided_window_stores_only_the_inputs_it_reads():
    # 1x1 stride-2 convolution: a 5 x 5 output tile reads every other input of a 9 x 9 image: 25 pixels of
    # 3 channels (one row each), not the 9 x 9 range.
    conv = W.conv2d("s2", C=3, K=4, H=9, W=9, stride=2)
    mapping = Mapping((LM(), LM(), LM(spatial={"C": 3, "K": 4}), LM(temporal={"P": 5, "Q": 5})))
    assert tile_rows(mapping, conv, TINY, 1) == {"Weights": 3, "Inputs": 25}
    inputs = conv.tensor("Inputs")
    assert stored_box_words(inputs, {"C": 3, "P": 5, "Q": 5, "R": 1, "S": 1, "N": 1, "K": 4}) == 75
    assert inputs.tile_words({"C": 3, "P": 5, "Q": 5, "R": 1, "S": 1, "N": 1, "K": 4}) == 243
    plan = make_plan(problem_of(conv), mapping, GemminiConfig.from_arch(TINY), "ws", source="test")
    assert (plan.a_rows, plan.b_rows, plan.acc_rows) == (25, 3, 25)


def test_blocks_wider_than_a_row_and_packed_roles():
    # a generic buffer of 2-byte rows: inputs in blocks of the 4 lanes (2 rows per block); weights and
    # outputs have no row axis and are packed densely
    lanes = SpatialAxis("lanes", 4, dims=frozenset({"K"}))
    arch = Arch("rowbuf", (Level("DRAM"), Level("Buf", 64, word_bits=8, fanout=4, spatial_axes=(lanes,),
                                                row_bytes=2, row_axes={"input": "lanes"})))
    mm = W.matmul("mm4", M=4, N=3, K=4)
    mapping = Mapping((LM(), LM(temporal={"M": 4, "N": 3}, spatial={"K": 4})))
    # A: 16 words = 4 blocks x 2 rows; B: 12 bytes / 2 = 6 rows; C: 12 bytes / 2 = 6 rows
    assert tile_rows(mapping, mm, arch, 1) == {"A": 8, "B": 6, "C": 6}
    assert evaluate(mm, arch, mapping).footprint_bytes["Buf"] == {"A": 16, "B": 12, "C": 12}
    small = arch.with_levels(Buf=dict(capacity_bytes=39))  # 19 rows < 20
    with pytest.raises(MappingError, match=r"20 rows of 2 bytes.*A 8 rows \(4 word\(s\) per row\).*B 6 rows "
                                           r"\(packed\).*has 19 rows"):
        validate(mapping, mm, small)


def test_gemmini_presets_and_yaml_round_trip():
    ws, os_ = gemmini(), gemmini(dataflow="os")
    assert (ws.levels[1].row_bytes, dict(ws.levels[1].row_axes)) == (16, {"input": "rows", "weight": "cols"})
    assert (ws.levels[2].row_bytes, dict(ws.levels[2].row_axes)) == (64, {"output": "cols"})
    assert os_.levels[1].row_bytes is None and os_.levels[2].row_bytes == 64
    for arch in (ws, os_):
        doc = arch_to_dict(arch)
        assert arch_from_dict(doc) == arch
    assert arch_to_dict(ws)["levels"][1]["row_axes"] == {"input": "rows", "weight": "cols"}
    assert "row_bytes" not in arch_to_dict(W_ARCH_PLAIN)["levels"][1]


W_ARCH_PLAIN = Arch("plain", (Level("DRAM"), Level("L1", 64)))


@pytest.mark.parametrize("changes, field, match", [
    (dict(row_bytes=0), "Buf.row_bytes", "positive integer"),
    (dict(row_bytes=True), "Buf.row_bytes", "positive integer"),
    (dict(row_axes={"input": "lanes"}), "Buf.row_axes", "need row_bytes"),
    (dict(row_bytes=4, row_axes={"input": "cols"}), "Buf.row_axes", "no spatial axis named 'cols'"),
    (dict(row_bytes=4, row_axes={"psum": "lanes"}), "Buf.row_axes", "unknown role 'psum'"),
])
def test_bad_row_descriptions_are_refused(changes, field, match):
    lanes = SpatialAxis("lanes", 4)
    with pytest.raises(ArchError, match=match) as info:
        Arch("bad", (Level("DRAM"), Level("Buf", 64, fanout=4, spatial_axes=(lanes,), **changes)))
    assert info.value.field == field


def test_row_axes_that_are_not_pairs_are_refused():
    with pytest.raises(ArchError, match="role -> spatial axis name pairs") as info:
        Level("Buf", 64, row_bytes=4, row_axes="rows")
    assert info.value.field == "Buf.row_axes"
    assert Level("Buf", 64, row_bytes=4, row_axes=[("weight", "b"), ("input", "a")]).row_axes == \
        (("input", "a"), ("weight", "b"))


def test_bad_row_axes_in_yaml_are_refused():
    doc = arch_to_dict(TINY)
    doc["levels"][1]["row_axes"] = ["rows"]
    with pytest.raises(ArchError, match="role -> spatial axis") as info:
        arch_from_dict(doc)
    assert info.value.field == "levels.Scratchpad.row_axes"
    doc["levels"][1]["row_axes"] = {"inputs": "rows"}
    with pytest.raises(ArchError, match="unknown roles"):
        arch_from_dict(doc)


# --- the cost model's rows are the code generator's rows ------------------------------------------------

ROOMY = gemmini(dim=DIM, scratchpad_kib=256, accumulator_kib=256)
ROOMY_OS = gemmini(dim=DIM, scratchpad_kib=256, accumulator_kib=256, dataflow="os")
CASES = [
    W.matmul("mm", M=12, N=8, K=20),
    W.matmul("bmm", M=6, N=4, K=6, batch=3),
    W.conv2d("pad", N=2, C=6, K=4, H=6, W=5, R=3, S=2, padding=1),
    W.conv2d("s2", C=4, K=6, H=9, W=9, R=3, S=3, stride=2),
    W.conv2d("s2x1", C=3, K=4, H=11, W=11, stride=2),
    W.conv2d("s3", C=3, K=4, H=11, W=11, R=3, S=3, stride=3),
    W.conv2d("dil", C=2, K=2, H=9, W=9, R=3, S=3, dilation=2, padding=2),
    W.depthwise_conv2d("dw", C=6, H=7, W=7, R=3, S=3, padding=1, stride=2),
]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(case=st.sampled_from(range(len(CASES))), seed=st.integers(0, 10_000))
def test_cost_model_rows_equal_the_generator_plan_ws(case, seed):
    workload = CASES[case]
    mapping = random_gemmini_mapping(workload, "ws", DIM, random.Random(seed))
    cost = evaluate(workload, ROOMY, mapping)
    plan = make_plan(problem_of(workload), mapping, GemminiConfig.from_arch(ROOMY), "ws", source="test")
    role = names_by_role(workload)
    rows = cost.footprint_rows
    assert (rows["Scratchpad"][role["input"]], rows["Scratchpad"][role["weight"]], rows["Accumulator"][role["output"]]) \
        == (plan.a_rows, plan.b_rows, plan.acc_rows)
    assert cost.footprint_bytes["Scratchpad"][role["input"]] == plan.a_rows * DIM


@settings(max_examples=15, deadline=None, derandomize=True)
@given(case=st.sampled_from([0, 2, 3]), seed=st.integers(0, 10_000))
def test_cost_model_accumulator_rows_equal_the_generator_plan_os(case, seed):
    workload = CASES[case]
    mapping = random_gemmini_mapping(workload, "os", DIM, random.Random(seed))
    plan = make_plan(problem_of(workload), mapping, GemminiConfig.from_arch(ROOMY_OS), "os", source="test")
    assert tile_rows(mapping, workload, ROOMY_OS, 2) == {names_by_role(workload)["output"]: plan.acc_rows}


# --- the scheduler returns what the generator accepts -------------------------------------------------

@pytest.mark.parametrize("workload, kib", [
    (W.conv2d("c3", C=3, K=8, H=16, W=16, R=3, S=3, padding=1, stride=2), 2),  # three channels per row
    (W.depthwise_conv2d("dw4", C=4, H=16, W=16, R=3, S=3, padding=1), 1),  # one channel per row
])
def test_cosa_schedules_fit_the_generator(workload, kib):
    from cosa.scheduler import schedule

    arch = gemmini(dim=DIM, scratchpad_kib=kib, accumulator_kib=kib, pipelined=False)
    words = arch.with_levels(Scratchpad=dict(row_bytes=None, row_axes=()),
                             Accumulator=dict(row_bytes=None, row_axes=()))
    by_words = schedule(workload, words, time_limit_s=30, bound=False)
    # counted in words, a tile needs fewer bytes than the rows it takes (a row holds fewer channels than
    # DIM): a schedule made in words may overflow the row-addressed buffers, so the rows are what counts
    role = names_by_role(workload)
    in_rows = tile_rows(by_words.mapping, workload, arch, 1)[role["input"]] * arch.levels[1].row_bytes
    assert in_rows > tile_bytes(by_words.mapping, workload, words, 1)[role["input"]]
    if violations(by_words.mapping, workload, arch):
        with pytest.raises(MappingError, match="rows"):
            validate(by_words.mapping, workload, arch)
    sched = schedule(workload, arch, time_limit_s=30, bound=False)
    program = generate(workload, sched.mapping, arch)
    rows = sched.cost.footprint_rows
    assert (rows["Scratchpad"][role["input"]], rows["Scratchpad"][role["weight"]], rows["Accumulator"][role["output"]]) \
        == (program.plan.a_rows, program.plan.b_rows, program.plan.acc_rows)
