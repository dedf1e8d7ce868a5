"""Per-row transfer cost (``Level`` read/write row cycles, ``max_transfer_row_bytes``)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

import workloads as W
from costmodel import ArchError, Level, arch_from_dict, arch_to_dict, evaluate, preset
from costmodel.transfers import transfer_row_words
from mappings import LevelMapping as LM, Mapping

GEMMINI = preset("gemmini")
FLAT = GEMMINI.with_levels(DRAM=dict(read_row_extra_cycles=0.0, write_row_min_cycles=0.0))
MM = W.matmul(M=64, N=128, K=256)


def ws(dram: dict, order: tuple, acc: dict, spatial: dict, regs_m: int, sp: dict | None = None) -> Mapping:
    """A Gemmini WS mapping of MM (A: M x K input, B: K x N weight, C: M x N output)."""
    return Mapping((LM(temporal=dram, order=order), LM(temporal=sp or {}), LM(temporal=acc, spatial=spatial),
                    LM(temporal={"M": regs_m})))


def test_row_cycles_of_a_level():
    lv = Level("D", read_bandwidth=16.0, write_bandwidth=16.0, read_row_extra_cycles=1.0, write_row_min_cycles=1.5)
    assert lv.row_transfer_costed
    assert lv.row_transfer_cycles(64, write=False) == 5  # 4 beats + 1
    assert lv.row_transfer_cycles(16, write=False) == 2
    assert lv.row_transfer_cycles(3, write=False) == 2  # a partial beat is a whole beat
    assert lv.row_transfer_cycles(16, write=True) == 1.5  # one-beat rows: 2 per 3 cycles
    assert lv.row_transfer_cycles(64, write=True) == 4
    assert not Level("D").row_transfer_costed


def test_other_presets_charge_no_rows():
    for name in ("simba", "eyeriss", "cpu", "cluster"):
        assert not any(lv.row_transfer_costed for lv in preset(name).levels), name
    assert GEMMINI.levels[0].row_transfer_costed
    assert preset("gemmini-os").levels[0].row_transfer_costed  # the same DMA (OS rows: outputs only)


def test_row_words_follow_the_row_axis_the_cap_and_narrow_blocks():
    full = ws({"K": 2, "N": 2}, ("N", "K"), {"K": 8, "N": 4}, {"K": 16, "N": 16}, 64)
    a, b, c = MM.tensors
    assert transfer_row_words(full, MM, GEMMINI, 1, a) == (128, 64)  # 128 channels in rows of 64 bytes
    assert transfer_row_words(full, MM, GEMMINI, 1, b) == (64, 64)  # 64 output channels in one row
    assert transfer_row_words(full, MM, GEMMINI, 2, c) == (64, 16)  # one 16-column int32 block per row
    narrow = ws({"K": 4, "N": 2}, ("N", "K"), {"K": 8, "N": 8}, {"K": 8, "N": 8}, 64)
    assert transfer_row_words(narrow, MM, GEMMINI, 1, a) == (8, 8)  # an 8-wide block moves alone
    assert transfer_row_words(narrow, MM, GEMMINI, 2, c) == (8, 8)


def test_hand_counted_rows_and_cycles():
    """K outermost at DRAM: the output spills; every row counted by hand."""
    m = ws({"K": 2, "N": 2}, ("K", "N"), {"K": 8, "N": 4}, {"K": 16, "N": 16}, 64)
    cost, flat = evaluate(MM, GEMMINI, m), evaluate(MM, FLAT, m)
    # A: 64 x 256 words once, lines of 128 channels in rows of 64: 64 * 2 lines * 2 rows
    # B: 256 x 128 once per (K, N) tile = once: lines of 64 in one row each: 256 * 2 rows
    # C: 64 x 128 words written twice (one spill, one final) and read back once, rows of 16; and every
    # word's int32 bias moved in once when its tile opens (init_fill_bits), rows of 16
    a_rows, b_rows, c_rows = 64 * 256 // 64, 256 * 128 // 64, (64 * 128 * 4) // 16
    assert cost.transfer_rows["DRAM"] == {"A": a_rows, "B": b_rows, "C": c_rows}
    spill_rows = fill_rows = 64 * 128 // 16
    # reads: one cycle more per 64-byte row (partial sums and bias fills alike); 64-byte partial-sum
    # writes cost their 4 beats; final one-beat writes 1.5 cycles instead of 1
    extra = a_rows + b_rows + spill_rows + spill_rows * 0.5 + fill_rows
    assert cost.transfer_cycles["DRAM"] == pytest.approx(flat.transfer_cycles["DRAM"] + extra)
    assert cost.accesses == flat.accesses and cost.dram_bytes == flat.dram_bytes  # rows change no counts
    assert cost.cycles == pytest.approx(flat.cycles + extra)  # DRAM stalls the array on Gemmini


@settings(max_examples=25, deadline=None, derandomize=True)
@given(k_block=st.sampled_from([2, 4, 8, 16]), n_block=st.sampled_from([2, 4, 8, 16]),
       acc_k=st.sampled_from([1, 2, 4]), acc_n=st.sampled_from([1, 2, 4]))
def test_rows_never_cost_less_than_bytes_and_narrow_blocks_cost_more(k_block, n_block, acc_k, acc_n):
    """Row cycles >= bytes / bandwidth (every row costs at least its beats); and a mapping whose blocks are
    narrower costs at least as much per byte at DRAM as the same tiles with full blocks."""
    dram_k, dram_n = 256 // (k_block * acc_k), 128 // (n_block * acc_n)
    m = ws({"K": dram_k, "N": dram_n}, ("N", "K"), {"K": acc_k, "N": acc_n}, {"K": k_block, "N": n_block}, 64)
    cost, flat = evaluate(MM, GEMMINI, m), evaluate(MM, FLAT, m)
    assert cost.transfer_cycles["DRAM"] >= flat.transfer_cycles["DRAM"] - 1e-9
    rows = sum(cost.transfer_rows["DRAM"].values())
    assert cost.transfer_cycles["DRAM"] - flat.transfer_cycles["DRAM"] >= 0.5 * rows - 1e-6
    per_byte = cost.transfer_cycles["DRAM"] / cost.dram_bytes
    full = ws({"K": 256 // (16 * acc_k), "N": 128 // (16 * acc_n)}, ("N", "K"), {"K": acc_k, "N": acc_n},
              {"K": 16, "N": 16}, 64)
    full_cost = evaluate(MM, GEMMINI, full)
    assert per_byte >= full_cost.transfer_cycles["DRAM"] / full_cost.dram_bytes - 1e-9


def test_fields_round_trip_and_bad_values_are_named():
    doc = arch_to_dict(GEMMINI)
    assert doc["levels"][0]["read_row_extra_cycles"] == 1.0 and doc["levels"][0]["write_row_min_cycles"] == 1.5
    assert doc["levels"][1]["max_transfer_row_bytes"] == 64
    assert "read_row_extra_cycles" not in arch_to_dict(preset("simba"))["levels"][0]
    back = arch_from_dict(doc)
    m = ws({"K": 2, "N": 2}, ("K", "N"), {"K": 8, "N": 4}, {"K": 16, "N": 16}, 64)
    assert evaluate(MM, back, m).cycles == evaluate(MM, GEMMINI, m).cycles
    bad = dict(doc, levels=[dict(doc["levels"][0], read_row_extra_cycles=-1)] + doc["levels"][1:])
    with pytest.raises(ArchError, match="read_row_extra_cycles"):
        arch_from_dict(bad)
    with pytest.raises(ArchError, match="max_transfer_row_bytes"):
        GEMMINI.with_levels(Scratchpad=dict(max_transfer_row_bytes=0))
    with pytest.raises(ArchError, match="write_row_min_cycles"):
        GEMMINI.with_levels(DRAM=dict(write_row_min_cycles=math.inf))
