"""Timeloop's meaning of its arch files: bandwidth channels, capacities, per-access energy tables,
sliding-window delta fetches (exact against the literal trace)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import workloads as W
from costmodel import ArchError, Level, arch_to_dict, evaluate, load_arch, preset, trace
from costmodel.archio import arch_from_dict
from costmodel.energy import load_energy_table, parse_energy_table
from mappings import LevelMapping as LM
from mappings import Mapping

sys.path.insert(0, str(Path(__file__).resolve().parent))
from costmodel_randmap import random_mapping, small_arch  # noqa: E402


def v02(dram: dict, buffer: dict | None = None) -> dict:
    buf = {"name": "Buffer", "entries": 1024, "instances": 1, "word-bits": 8}
    buf.update(buffer or {})
    return {"arch": {"arithmetic": {"instances": 1, "word-bits": 8},
                     "storage": [buf, {"name": "DRAM", "instances": 1, "word-bits": 8, **dram}]}}


MM = W.matmul(M=8, N=8, K=8)
# everything at DRAM moves through the buffer once: reads 128 (A, B), writes 64 (C)
ONE_TILE = Mapping((LM(), LM(temporal={"M": 8, "N": 8, "K": 8})))


def test_bandwidth_is_half_each_way_on_separate_channels():
    arch = arch_from_dict(v02({"bandwidth": 4}), "t.yaml")
    dram = arch.levels[0]
    assert (dram.read_bandwidth, dram.write_bandwidth, dram.separate_channels) == (2.0, 2.0, True)
    assert dram.transfer_cycles(128, 64) == 64  # max(128/2, 64/2), not the sum 96
    cost = evaluate(MM, arch, ONE_TILE)
    assert cost.cycles == max(512, 128 / 2, 64 / 2)


def test_read_write_and_shared_bandwidth():
    arch = arch_from_dict(v02({"read_bandwidth": 1, "write_bandwidth": 0.5}), "t.yaml")
    assert arch.levels[0].transfer_cycles(128, 64) == max(128, 128)
    shared = arch_from_dict(v02({"shared_bandwidth": 2}), "t.yaml").levels[0]
    assert not shared.separate_channels and shared.transfer_cycles(128, 64) == 96
    with pytest.raises(ArchError, match="shared_bandwidth with read_bandwidth"):
        arch_from_dict(v02({"shared_bandwidth": 2, "read_bandwidth": 1}), "t.yaml")


def test_presets_keep_one_shared_port():
    dram = preset("gemmini").levels[0]
    assert not dram.separate_channels
    assert dram.transfer_cycles(160, 16) == 160 / dram.read_bandwidth + 16 / dram.write_bandwidth


def test_capacity_from_sizekb_or_depth_and_width():
    doc = v02({})
    assert arch_from_dict(doc, "t").levels[1].capacity_bytes == 1024
    del doc["arch"]["storage"][0]["entries"]
    doc["arch"]["storage"][0]["sizeKB"] = 2
    assert arch_from_dict(doc, "t").levels[1].capacity_bytes == 2048
    doc["arch"]["storage"][0].pop("sizeKB")
    doc["arch"]["storage"][0].update(depth=256, width=64)
    assert arch_from_dict(doc, "t").levels[1].capacity_bytes == 2048


def test_separate_channels_round_trip_through_our_yaml():
    arch = load_arch("simba")
    back = arch_from_dict(arch_to_dict(arch), "x")
    assert back.levels == arch.levels and back.levels[0].separate_channels


def test_energy_table_prices_reads_fills_and_updates():
    table = {"DRAM": {"read": 100, "write": 120}, "Buffer": {"read": 1, "write": 2, "update": 3},
             "MAC": {"compute": 0.5}}
    arch = arch_from_dict(v02({"bandwidth": 4}) | {"energy_table": table}, "t.yaml")
    cost = evaluate(MM, arch, ONE_TILE)
    acc = cost.accesses
    expected = 0.5 * MM.macs
    for level, row in table.items():
        if level == "MAC":
            continue
        for a in acc[level].values():
            expected += a.reads * row["read"] + a.fills * row["write"] + (a.writes - a.fills) * row.get("update",
                                                                                                     row["write"])
    assert cost.energy_pj == pytest.approx(expected)
    assert cost.energy_breakdown_pj["DRAM"] == pytest.approx(128 * 100 + 64 * 120)


def test_accelergy_ert_form(tmp_path):
    ert = {"ERT": {"version": 0.3, "tables": [
        {"name": "system.chip.Buffer", "actions": [{"name": "read", "energy": 2.0}, {"name": "write", "energy": 3.0}]},
        {"name": "system.DRAM", "actions": [{"name": "read", "arguments": {"data_delta": 0}, "energy": 10.0},
                                            {"name": "read", "arguments": {"data_delta": 1}, "energy": 20.0},
                                            {"name": "write", "energy": 30.0}]},
        {"name": "system.chip.PE[0..1023].mac", "actions": [{"name": "mac_random", "energy": 0.6}]}]}}
    path = tmp_path / "ert.yaml"
    import yaml

    path.write_text(yaml.safe_dump(ert))
    table = load_energy_table(path)
    assert table["DRAM"] == {"read": 15.0, "write": 30.0, "update": 30.0}
    assert table["Buffer"]["update"] == 3.0 and table["MAC"] == {"compute": 0.6}


def test_energy_table_errors_name_the_field():
    with pytest.raises(ArchError, match="energy_table.DRAM.*needs 'read' and 'write'"):
        parse_energy_table({"energy_table": {"DRAM": {"read": 1}}}, "t.yaml")
    with pytest.raises(ArchError, match="unknown action 'erase'"):
        parse_energy_table({"energy_table": {"DRAM": {"read": 1, "write": 1, "erase": 2}}}, "t.yaml")
    arch = arch_from_dict(v02({}) | {"energy_table": {"DRAM": {"read": 1, "write": 1}, "MAC": {"compute": 1}}}, "t")
    with pytest.raises(ArchError, match=r"no per-access energies for level\(s\) \['Buffer'\]"):
        evaluate(MM, arch, ONE_TILE)


# --- sliding-window delta fetches -------------------------------------------------------------------

SLIDING = [
    W.conv2d(C=2, K=2, P=6, Q=4, R=3, S=3),
    W.conv2d(C=2, K=2, P=4, Q=3, R=3, S=2, stride=2),
    W.conv2d(C=2, K=2, P=4, Q=2, R=3, S=1, dilation=2),
    W.conv2d(C=2, K=2, P=4, Q=4, R=3, S=3, padding=1),
    W.depthwise_conv2d(C=4, P=4, Q=2, R=3, S=1),
]


def assert_exact(wl, arch, m, delta):
    ours, literal = evaluate(wl, arch, m, delta_fetch=delta).accesses, trace(wl, arch, m, delta_fetch=delta)
    assert ours == literal


@pytest.mark.parametrize("case", range(len(SLIDING)))
def test_delta_fetch_exact_against_trace(case):
    wl = SLIDING[case]
    for seed in range(3):
        arch = small_arch(3 + seed % 2, multicast=seed % 3 != 0)
        m = random_mapping(wl, arch, seed)
        assert_exact(wl, arch, m, True)
        assert_exact(wl, arch, m, False)


def test_sliding_window_fetches_only_the_new_rows():
    """A 1-D window of R=3 stepping along P through a buffer: whole-tile refetch moves 3 words per
    step, the delta one (Timeloop) 1 after the first."""
    wl = W.LoopNest("win", {"P": 8, "R": 3}, (W.tensor("In", ["P + R"]), W.tensor("Wt", ["R"], role="weight"),
                                               W.tensor("Out", ["P"], role="output")))
    arch = small_arch(2, fanout=1)
    m = Mapping((LM(temporal={"P": 8}), LM(temporal={"R": 3})))
    whole = evaluate(wl, arch, m, delta_fetch=False).accesses["L1"]["In"].fills
    delta = evaluate(wl, arch, m, delta_fetch=True).accesses["L1"]["In"].fills
    assert (whole, delta) == (8 * 3, 3 + 7)
    assert trace(wl, arch, m, delta_fetch=True)["L1"]["In"].fills == delta


def test_timeloop_files_fetch_deltas_and_presets_do_not():
    assert load_arch("simba").params.get("delta_fetch") is True
    assert not preset("gemmini").params.get("delta_fetch")
