"""ZigZag as a peer: LOMA's mapping read back and priced, our mappings priced by ZigZag's model, the refusals.

The tests that run ZigZag skip when the ``zigzag`` extra (zigzag-dse) is not installed."""

from __future__ import annotations

import sys

import pytest

from cosa import SchedulingError, compare, schedule
from cosa.baselines import zigzag_mapper
from cosa.baselines.zigzag_compare import MECHANISMS, count_differences, explain
from costmodel import evaluate, preset
from mappings import LevelMapping, Mapping, validate
from workloads import matmul

LAYER = matmul("mm", M=16, N=32, K=16)
needs_zigzag = pytest.mark.skipif(zigzag_mapper.zigzag_version() is None,
                                  reason="ZigZag is not installed (pip install cosa-framework[zigzag])")


def test_a_missing_zigzag_names_the_extra_and_is_bad_input(monkeypatch):
    monkeypatch.setitem(sys.modules, "zigzag", None)  # import zigzag now fails
    with pytest.raises(SchedulingError, match=r"pip install cosa-framework\[zigzag\]") as info:
        schedule(LAYER, preset("simba"), scheduler="zigzag", bound=False)
    assert info.value.exit_code == 2
    with pytest.raises(SchedulingError, match=r"cosa-framework\[zigzag\]"):
        compare([LAYER], preset("simba"), ["cosa", "zigzag"])


def test_the_cli_exits_2_with_one_line_when_zigzag_is_missing(monkeypatch, capsys):
    from cosa.cli import main

    monkeypatch.setitem(sys.modules, "zigzag", None)
    assert main(["schedule", "bert_base_128/attention_context", "--arch", "simba", "--scheduler", "zigzag"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cosa-framework[zigzag]" in err


@needs_zigzag
def test_a_zigzag_failure_is_one_line_naming_the_layer(monkeypatch):
    def broken(*args, **kwargs):
        raise AssertionError("No SpatialMappings found\nmore detail")

    monkeypatch.setattr(zigzag_mapper, "run_loma", broken)
    with pytest.raises(SchedulingError) as info:
        schedule(LAYER, preset("simba"), scheduler="zigzag", bound=False)
    text = str(info.value)
    assert info.value.exit_code == 1 and "\n" not in text and "layer mm" in text and "No SpatialMappings" in text


@needs_zigzag
def test_lomas_mapping_comes_back_validated_and_priced_in_both_models():
    arch = preset("simba")
    s = schedule(LAYER, arch, scheduler="zigzag", bound=False)
    validate(s.mapping, LAYER, arch)
    assert s.scheduler == "zigzag" and s.cost == evaluate(LAYER, arch, s.mapping)
    assert s.extra["exact"] and s.stats.status == "ok"
    again = zigzag_mapper.zigzag_evaluate(LAYER, arch, s.mapping)  # read back, ZigZag's model gives its own numbers
    assert again.cycles == s.extra["zigzag_cycles"] and again.energy_pj == pytest.approx(s.extra["zigzag_energy_pj"])


@needs_zigzag
def test_the_two_models_count_a_matmuls_dram_traffic_alike_and_name_each_difference():
    arch = preset("simba")
    m = Mapping((LevelMapping(), LevelMapping(spatial={"M": 2, "N": 2, "K": 4}),
                 LevelMapping(spatial={"M": 2, "N": 2, "K": 2}), LevelMapping(),
                 LevelMapping({"N": 2, "K": 2}, {"M": 2, "N": 4}), LevelMapping({"M": 2})))
    validate(m, LAYER, arch)
    ours = evaluate(LAYER, arch, m)
    theirs = zigzag_mapper.zigzag_evaluate(LAYER, arch, m)
    assert theirs.mac_energy_pj == pytest.approx(LAYER.macs * arch.mac_energy_pj)
    assert theirs.energy_pj == pytest.approx(ours.energy_pj, rel=0.01)
    _, _, _, hw = zigzag_mapper.build(LAYER, arch)
    diffs = count_differences(LAYER, arch, m, ours, theirs, hw)
    assert {d.mechanism for d in diffs} <= set(MECHANISMS)
    dram = [d for d in diffs if d.level == "DRAM"]
    assert all(d.mechanism == "rounding" for d in dram)  # 10-byte port: 51 whole accesses for 512 words
    assert any(d.level == "Registers" and d.mechanism == "stationary" for d in diffs)
    assert any(d.level == "AccumulationBuffer" and d.mechanism == "reduction" for d in diffs)
    assert "to fill" in explain(LAYER, arch, m, ours, theirs, hw)


def test_the_compare_table_marks_an_adapted_peer_mapping():
    from rich.console import Console

    from cosa.compare_rows import CompareResult, CompareRow
    from cosa.report import table

    rows = (CompareRow("mm", "cosa", cycles=10.0, energy_pj=1.0, ratio=1.0),
            CompareRow("mm", "zigzag", cycles=20.0, energy_pj=1.0, ratio=2.0, status="adapted"))
    console = Console(record=True, width=200)
    console.print(table(CompareResult(rows, ("mm",), ("cosa", "zigzag"), "simba", "latency")))
    assert "zigzag (adapted)" in console.export_text() and "cosa (adapted)" not in console.export_text()


@needs_zigzag
def test_zigzag_prices_a_compute_bound_eyeriss_schedule_as_ours_does_but_for_the_first_fill_and_last_drain():
    # one shared port per unlimited scratchpad made ZigZag price this 4x ours; a port per operand and
    # direction leaves only the fill before the loops and the drain after them
    arch, w = preset("eyeriss"), matmul("mm", M=64, N=96, K=256)
    s = schedule(w, arch, bound=False)
    z = zigzag_mapper.zigzag_evaluate(w, arch, s.mapping)
    assert z.stall_cycles == 0
    assert z.cycles == pytest.approx(s.cost.cycles + z.onload_cycles + z.offload_cycles)
    assert z.cycles / s.cost.cycles < 1.03


def test_a_stall_is_named_by_the_transfer_that_causes_it_and_its_mechanism():
    from cosa.baselines.zigzag_compare import cycle_mechanisms

    refill = zigzag_mapper.ZigZagStall("W", "DRAM", "WeightBuffer", "rd_out_to_low", 117_965, 1_152, 2, 116_813,
                                       False)
    burst = zigzag_mapper.ZigZagStall("I", "GlobalBuffer", "DRAM", "wr_in_by_high", 1_255, 126, 32, 39_515, True)
    zz = zigzag_mapper.ZigZagCost(600.0, 1.0, 0.0, {}, {}, {}, 300.0, 156_328.0, 10.0, 5.0, (refill, burst))
    text = " ".join(cycle_mechanisms(evaluate(LAYER, preset("simba"), _any_mapping()), zz, preset("simba")))
    assert "weights DRAM -> WeightBuffer take 117,965 cycles per period inside a 1,152-cycle window" in text
    assert "does not double-buffer WeightBuffer" in text
    assert "inputs DRAM -> GlobalBuffer take 1,255 cycles per period, longer than the 126-cycle period" in text
    assert "bandwidth" in text


def _any_mapping():
    m = Mapping((LevelMapping(dict(LAYER.dims), {}, tuple(LAYER.dims)),) + tuple(LevelMapping() for _ in range(5)))
    validate(m, LAYER, preset("simba"))
    return m
