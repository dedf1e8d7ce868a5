"""Calibration mechanisms of the cost model (issue #5): partial-sum word size, initial fills,
compute quanta, and the Gemmini preset checked against the Gemmini timing model on small cases."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings, strategies as st

import workloads as W
from costmodel import Arch, ArchError, Level, arch_from_dict, arch_to_dict, evaluate, preset, trace
from costmodel.cost import PartialSums
from costmodel.evaluate import quantized_iterations
from gemmini import GemminiConfig, codegen
from gemmini.sim import timing
from mappings import LevelMapping as LM, Mapping

SMALL = GemminiConfig(dim=4, sp_kib=4, acc_kib=2)
MM = W.matmul(M=16, N=8, K=32)


def gemmini_mapping(dram: dict, order: tuple, acc_k: int, regs_m: int) -> Mapping:
    """A DIM-4 WS mapping of MM: DRAM loops ``dram``, K x N unrolled 4 x 4 on the array."""
    return Mapping((LM(temporal=dram, order=order), LM(), LM(temporal={"K": acc_k}, spatial={"K": 4, "N": 4}),
                    LM(temporal={"M": regs_m})))


# K outside the output's tile at DRAM (order N, K: no spill), K outermost (spills), and a mixed one.
CASES = {
    "no_spill": gemmini_mapping({"K": 4, "N": 2}, ("N", "K"), 2, 16),
    "spill": gemmini_mapping({"K": 4, "N": 2}, ("K", "N"), 2, 16),
    "spill_m_tiles": gemmini_mapping({"K": 2, "N": 2, "M": 2}, ("K", "N", "M"), 4, 8),
}


def test_partial_sums_split_hand_counted_and_equal_to_the_trace():
    arch = SMALL.arch("ws")
    cost = evaluate(MM, arch, CASES["spill"])
    # C is 16 x 8 = 128 words; K outermost in 4 steps: 3 spills and 3 reloads of every word, one final write.
    assert cost.partial_sums["DRAM"]["C"] == PartialSums(reads=384, writes=384, final_writes=128)
    assert "Accumulator" not in cost.partial_sums  # no output holder below the accumulator
    _, literal = trace(MM, arch, CASES["spill"], partial_sums=True)
    assert cost.partial_sums == literal
    assert evaluate(MM, arch, CASES["no_spill"]).partial_sums["DRAM"]["C"] == PartialSums(0, 0, 128)


def test_partial_sum_bits_charges_spills_at_the_accumulator_word_size():
    # bytes over bandwidth only (the per-row DRAM cycles off): the extra bytes cost their cycles
    arch = SMALL.arch("ws").with_levels(DRAM=dict(read_row_extra_cycles=0.0, write_row_min_cycles=0.0))
    plain = arch.with_levels(Accumulator=dict(partial_sum_bits=None))
    wide, narrow = evaluate(MM, arch, CASES["spill"]), evaluate(MM, plain, CASES["spill"])
    assert wide.accesses == narrow.accesses  # word counts are unchanged; only their size at DRAM differs
    assert wide.dram_bytes - narrow.dram_bytes == (384 + 384) * (4 - 1)
    assert wide.transfer_cycles["DRAM"] - narrow.transfer_cycles["DRAM"] == pytest.approx(768 * 3 / 16)
    # per-row DMA (the preset): a DIM-4 partial-sum row is one 16-byte beat as int32 and as int8, so the
    # word size changes no cycles; the 768 partial-sum rows cost 1 beat + 1 (reads) or 1.5 (writes) each
    rows_on = SMALL.arch("ws")
    wide = evaluate(MM, rows_on, CASES["spill"])
    narrow = evaluate(MM, rows_on.with_levels(Accumulator=dict(partial_sum_bits=None)), CASES["spill"])
    assert wide.transfer_cycles["DRAM"] == pytest.approx(narrow.transfer_cycles["DRAM"])
    # spills, reloads, finals and the bias fill of every word (init_fill_bits), DIM-4 words a row
    assert wide.transfer_rows["DRAM"]["C"] == pytest.approx((384 + 384 + 128 + 128) / 4)
    # without spills the field changes nothing
    assert evaluate(MM, arch, CASES["no_spill"]).dram_bytes == evaluate(MM, plain, CASES["no_spill"]).dram_bytes


@pytest.mark.parametrize("case", sorted(CASES))
def test_dram_bytes_equal_the_timing_models_on_gemmini(case):
    """Cost-model DRAM bytes (partial sums as int32) == what the generated program moves (no bias)."""
    arch = SMALL.arch("ws")
    cost = evaluate(MM, arch, CASES[case])
    result = timing(codegen.generate(MM, CASES[case], arch, dataflow="ws").commands, SMALL)
    assert cost.dram_bytes == result.load_bytes + result.store_bytes


DEFAULT = GemminiConfig()  # DIM 16: DIM-4 programs are dominated by per-row DMA costs the preset does not model
MM16 = W.matmul(M=256, N=64, K=128)


def mapping16(dram: dict, order: tuple, acc: dict, regs_m: int, acc_order: tuple = ()) -> Mapping:
    return Mapping((LM(temporal=dram, order=order), LM(),
                    LM(temporal=acc, spatial={"K": 16, "N": 16}, order=acc_order), LM(temporal={"M": regs_m})))


CASES16 = {
    "no_spill": mapping16({"K": 4, "N": 2}, ("N", "K"), {"K": 2, "N": 2}, 256),
    "spill": mapping16({"K": 4, "N": 4}, ("K", "N"), {"K": 2}, 256),
    "m_tiles": mapping16({"K": 2, "N": 2, "M": 4}, ("K", "N", "M"), {"K": 4, "N": 2}, 64),
    # runs of 8 rows under new weights every compute: the weight fill, not the rows, sets the pace
    "short_runs": mapping16({"N": 2}, ("N",), {"K": 8, "N": 2, "M": 32}, 8, ("M", "N", "K")),
    "runs16": mapping16({"N": 4, "M": 4}, ("N", "M"), {"K": 8, "M": 4}, 16, ("M", "K")),
}


def test_cycles_track_the_timing_model_and_rank_alike():
    """Intentionally changed with the per-compute cost and the new timing model: DIM 16 cases (the DIM-4 ones
    are bound by per-row DMA costs), within 10% and ranked alike; the short runs are where the per-change
    fill overlap matters (the DIM-cycle quantum misses them by about 18%).  Intentionally changed again with
    the per-row DMA cost: DRAM transfers are now within 15% of the timing model's DMA busy cycles (below), and
    the totals within 10% again once the preset's per-compute overhead is 0 (back-to-back computes leave no
    bubble; what remains is the DMA the timing model overlaps with the queued computes at each tile change,
    which the preset charges as stalling).  Intentionally changed with the pipelined code generator: these
    checks calibrate the serial stream (``pipeline=False``) against the serial preset (``pipelined=False``);
    the pipelined pair is checked below."""
    arch = serial_arch()
    quantum = arch.with_levels(Registers=dict(compute_rows=None, compute_overhead_cycles=0, compute_quantum=16))
    model, measured = [], []
    for name, mapping in CASES16.items():
        program = codegen.generate(MM16, mapping, arch, dataflow="ws", pipeline=False)
        cost = evaluate(MM16, arch, mapping)
        assert cost.computes == sum(1 for c in program.commands if c.name.startswith("compute")), name
        model.append(cost.cycles)
        measured.append(timing(program.commands, DEFAULT).cycles)
    # Intentionally changed when every output tile started from its bias moved into the accumulator (the
    # only way Gemmini adds a 32-bit bias): the preset charges the bias mvins as DRAM time that stalls the
    # array, while the decoupled load queue overlaps part of them with the previous tile's computes, so the
    # model now errs high, by up to 21% here (runs16); within 10% without a bias.
    for m, t in zip(model, measured):
        assert -0.1 < m / t - 1 < 0.25, (model, measured)
    # ranked alike wherever the measured cycles differ by more than the 25% band
    for i, j in itertools.combinations(range(len(model)), 2):
        if abs(measured[i] / measured[j] - 1) > 0.25:
            assert (model[i] < model[j]) == (measured[i] < measured[j]), (list(CASES16)[i], list(CASES16)[j])
    short = list(CASES16).index("short_runs")
    old = evaluate(MM16, quantum, CASES16["short_runs"]).cycles
    # the run model beats the DIM-cycle quantum on the short runs (with the bias fill: 6.6% against 7.7%)
    assert abs(model[short] / measured[short] - 1) < min(0.08, abs(old / measured[short] - 1))


def serial_arch():
    """The preset for the serial stream: DRAM transfers stall the array."""
    from costmodel import presets

    return presets.gemmini(dim=DEFAULT.dim, scratchpad_kib=DEFAULT.sp_kib, accumulator_kib=DEFAULT.acc_kib,
                           pipelined=False)


def test_pipelined_cycles_track_the_timing_model():
    """The pipelined preset charges max(compute, DRAM transfers) (the DRAM level is double buffered); the
    pipelined program also pays its prologue (the first tiles' loads) and epilogue (the last tile's
    mvouts) and some imperfect overlap, which the preset does not charge: on these small cases, 2-8 DRAM
    tiles, the model errs low by up to 25% (no_spill 8 tiles of a load-bound GEMM: -25%; short_runs, 2
    tiles, half of its loads in the prologue: -22%; the others -10% to +6%), and it ranks alike wherever
    the measured cycles differ by more than 25%.  Against the serial preset it would err high by 20-50%."""
    arch = DEFAULT.arch("ws")
    assert arch.level("DRAM").double_buffered and arch.params["pipelined"]
    model, measured = [], []
    for name, mapping in CASES16.items():
        program = codegen.generate(MM16, mapping, arch, dataflow="ws")
        result = timing(program.commands, DEFAULT)
        cost = evaluate(MM16, arch, mapping)
        assert cost.cycles == max(cost.compute_cycles, cost.transfer_cycles["DRAM"]) or name == "short_runs"
        model.append(cost.cycles)
        measured.append(result.cycles)
        serial = timing(codegen.generate(MM16, mapping, arch, dataflow="ws", pipeline=False).commands, DEFAULT)
        assert result.cycles < serial.cycles, name
    for m, t in zip(model, measured):
        assert -0.27 < m / t - 1 < 0.08, (model, measured)
    for i, j in itertools.combinations(range(len(model)), 2):
        if abs(measured[i] / measured[j] - 1) > 0.25:
            assert (model[i] < model[j]) == (measured[i] < measured[j]), (list(CASES16)[i], list(CASES16)[j])


def test_dram_row_cycles_track_the_timing_models_dma_busy_cycles():
    """Per-row DMA cost: the cost model's DRAM transfer cycles against the timing model's load + store busy
    cycles (one shared DMA port) of the generated programs, within 15%, and closer than bytes / 16 B/cycle
    (which is 20-35% low: 16- and 64-byte rows cost a cycle more each, one-beat mvout rows 1.5 cycles).
    Measured on the serial stream: a pipelined program moves the same rows, but its load and store units
    share the DMA port while both are busy, so their busy cycles add up to more than the DMA's work (up to
    17% more here)."""
    arch = DEFAULT.arch("ws")
    flat = arch.with_levels(DRAM=dict(read_row_extra_cycles=0.0, write_row_min_cycles=0.0))
    for name, mapping in CASES16.items():
        result = timing(codegen.generate(MM16, mapping, arch, dataflow="ws", pipeline=False).commands, DEFAULT)
        dma = result.busy["load"] + result.busy["store"]
        rows = evaluate(MM16, arch, mapping).transfer_cycles["DRAM"]
        plain = evaluate(MM16, flat, mapping).transfer_cycles["DRAM"]
        assert abs(rows / dma - 1) < 0.15, (name, rows, dma)
        assert abs(rows / dma - 1) < abs(plain / dma - 1) - 0.05, (name, rows, plain, dma)


def quantum_arch(quantum: int) -> Arch:
    return Arch("q", (Level("DRAM"), Level("Buffer", 10_000, compute_quantum=quantum)))


def test_compute_quantum_rounds_each_residency_up():
    wl = W.matmul(M=7, N=3, K=1)
    mapping = Mapping((LM(temporal={"N": 3}), LM(temporal={"M": 7})))
    assert evaluate(wl, quantum_arch(1), mapping).compute_cycles == 21
    rounded = evaluate(wl, quantum_arch(4), mapping)
    assert rounded.compute_cycles == 3 * 8  # 7 iterations per residency take 8
    assert rounded.accesses == evaluate(wl, quantum_arch(1), mapping).accesses == trace(wl, quantum_arch(4), mapping)
    assert evaluate(wl, quantum_arch(7), mapping).compute_cycles == 21


@settings(max_examples=40, deadline=None, derandomize=True)
@given(outer=st.integers(1, 6), inner=st.integers(1, 12), quantum=st.integers(1, 8))
def test_compute_quantum_law(outer, inner, quantum):
    """ceil to the quantum per residency: between the plain count and one quantum more per residency."""
    mapping = Mapping((LM(temporal={"N": outer}), LM(temporal={"M": inner})))
    work = quantized_iterations(quantum_arch(quantum), mapping)
    assert work == outer * math.ceil(inner / quantum) * quantum
    assert outer * inner <= work < outer * (inner + quantum)
    assert (work == outer * inner) == (inner % quantum == 0)


def test_init_fill_bits_reads_an_initial_value_per_final_word():
    wl = W.matmul(M=4, N=4, K=4)
    base = Arch("two", (Level("DRAM", read_bandwidth=2.0, write_bandwidth=2.0), Level("Buffer", 1000)))
    biased = base.with_levels(Buffer=dict(init_fill_bits=32))
    spill = Mapping((LM(temporal={"K": 2, "M": 2}, order=("K", "M")), LM(temporal={"M": 2, "N": 4, "K": 2})))
    plain, init = evaluate(wl, base, spill), evaluate(wl, biased, spill)
    assert plain.partial_sums["DRAM"]["C"].final_writes == 16
    assert init.dram_bytes - plain.dram_bytes == 16 * 4  # one int32 per output word, however often it spills
    assert init.transfer_cycles["DRAM"] - plain.transfer_cycles["DRAM"] == pytest.approx(64 / 2.0)


@pytest.mark.parametrize("field,value", [("partial_sum_bits", 0), ("init_fill_bits", -8), ("compute_quantum", 0),
                                         ("compute_quantum", 2.5), ("compute_rows", 0), ("compute_rows", True)])
def test_bad_calibration_fields_raise_arch_error(field, value):
    with pytest.raises(ArchError, match=field):
        Arch("bad", (Level("DRAM"), Level("Buffer", 10, **{field: value})))


def test_only_the_gemmini_preset_sets_calibration_fields_and_they_round_trip():
    for name in ("simba", "eyeriss", "cpu", "cluster"):
        arch = preset(name)
        assert all(lv.partial_sum_bits is None and lv.init_fill_bits is None and lv.compute_quantum == 1
                   and lv.compute_rows is None and lv.compute_overhead_cycles == 0 for lv in arch.levels), name
        assert not any(k in lvd for lvd in arch_to_dict(arch)["levels"]
                       for k in ("partial_sum_bits", "init_fill_bits", "compute_quantum", "compute_rows",
                                 "compute_overhead_cycles"))
    for flow in ("ws", "os"):
        arch = preset("gemmini", dataflow=flow, dim=8)
        assert arch.level("Accumulator").partial_sum_bits == 32
        regs = arch.level("Registers")
        if flow == "ws":  # per-compute runs (their rows, no bubble between them) replace the DIM-cycle quantum
            assert (regs.compute_rows, regs.compute_overhead_cycles, regs.compute_quantum) == (8, 0, 1)
        else:  # OS streams the reduction: still DIM cycles per compute
            assert (regs.compute_rows, regs.compute_overhead_cycles, regs.compute_quantum) == (None, 0, 8)
        # DRAM overlaps compute where the code generator pipelines (WS: double-buffered tiles)
        assert arch.level("DRAM").double_buffered == (flow == "ws")
        assert not preset("gemmini", dataflow=flow, dim=8, pipelined=False).level("DRAM").double_buffered
        assert arch_from_dict(arch_to_dict(arch)) == arch
    assert preset("gemmini", compute_overhead_cycles=3).level("Registers").compute_overhead_cycles == 3


OS_CASES = {
    "one_pass": Mapping((LM(temporal={"N": 2}), LM(), LM(temporal={"M": 4}, spatial={"M": 4, "N": 4}),
                         LM(temporal={"K": 32}))),
    "spill": Mapping((LM(temporal={"N": 2, "K": 2}, order=("K", "N")), LM(),
                      LM(temporal={"M": 4}, spatial={"M": 4, "N": 4}), LM(temporal={"K": 16}))),
    "m_tiles": Mapping((LM(temporal={"N": 2, "M": 2}, order=("N", "M")), LM(),
                        LM(temporal={"M": 2}, spatial={"M": 4, "N": 4}), LM(temporal={"K": 32}))),
}


@pytest.mark.parametrize("case", sorted(OS_CASES))
def test_output_stationary_bytes_match_the_timing_model(case):
    """OS: the in-place partial sums are not throttled by a register bandwidth; bytes are exact."""
    arch = SMALL.arch("os")
    cost = evaluate(MM, arch, OS_CASES[case])
    result = timing(codegen.generate(MM, OS_CASES[case], arch, dataflow="os").commands, SMALL)
    assert cost.transfer_cycles["Registers"] == 0
    assert cost.dram_bytes == result.load_bytes + result.store_bytes


OS16 = W.matmul(M=128, N=64, K=256)
OS_CASES16 = {
    "one_pass": Mapping((LM(temporal={"N": 4}), LM(), LM(temporal={"M": 8}, spatial={"M": 16, "N": 16}),
                         LM(temporal={"K": 256}))),
    "spill": Mapping((LM(temporal={"N": 4, "K": 2}, order=("K", "N")), LM(),
                      LM(temporal={"M": 8}, spatial={"M": 16, "N": 16}), LM(temporal={"K": 128}))),
}


@pytest.mark.parametrize("case", sorted(OS_CASES16))
def test_output_stationary_cycles_within_the_modelled_range(case):
    """An OS compute takes DIM cycles when its A and B operands sit in different scratchpad banks (the code
    generator starts every buffer at a bank boundary), as the preset charges."""
    arch = DEFAULT.arch("os")
    cost = evaluate(OS16, arch, OS_CASES16[case])
    result = timing(codegen.generate(OS16, OS_CASES16[case], arch, dataflow="os").commands, DEFAULT)
    # intentionally changed with the bias moved into the accumulator rows: the bias mvins are charged as
    # stalling DRAM time, which the load queue partly overlaps (the model errs high by up to 26% here)
    assert -0.1 < cost.cycles / result.cycles - 1 < 0.3
