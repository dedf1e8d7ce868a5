"""Presets, the YAML forms and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import workloads as W
from costmodel import (ArchError, SpatialAxis, arch_to_dict, describe_arch, dump_arch, list_presets, load_arch,
                       preset)
from costmodel.archio import arch_from_dict

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "arch"


def test_gemmini_ws_structure():
    arch = preset("gemmini")
    assert arch.name == "gemmini" and arch.level_names == ("DRAM", "Scratchpad", "Accumulator", "Registers")
    dram, sp, acc, regs = arch.levels
    assert dram.capacity_bytes is None and dram.read_bandwidth == dram.write_bandwidth == 16.0
    assert sp.capacity_bytes == 256 * 1024 and sp.holds == {"input", "weight"} and sp.word_bits == 8
    assert acc.capacity_bytes == 64 * 1024 and acc.holds == {"output"} and acc.word_bits == 32
    assert acc.fanout == 256
    assert acc.spatial_axes == (SpatialAxis("rows", 16, frozenset({"input", "weight"}), False,
                                            excluded=frozenset({"R", "S"})),
                                SpatialAxis("cols", 16, frozenset({"weight", "output"})))
    assert regs.holds == {"weight"} and regs.capacity_bytes == 2  # two PE registers: preload overlaps compute
    assert arch.total_macs_per_cycle == 256
    assert arch.params == {"dim": 16, "scratchpad_kib": 256, "accumulator_kib": 64, "sp_banks": 4,
                           "acc_banks": 2, "dataflow": "ws", "compute_overhead_cycles": 0, "pipelined": True}
    assert dram.double_buffered  # the code generator pipelines: DRAM transfers overlap compute
    assert regs.compute_rows == 16 and regs.compute_overhead_cycles == 0 and regs.compute_quantum == 1
    conv = W.conv2d(C=32, K=32, P=8, Q=8, R=3, S=3)
    rows, cols = acc.spatial_axes
    assert rows.admits("C", conv) and not rows.admits("K", conv) and cols.admits("K", conv)
    assert not rows.admits("P", conv)


def test_gemmini_os_structure():
    arch = preset("gemmini-os", dim=8)
    assert arch.name == "gemmini-os" and arch.dataflow == "os"
    acc, regs = arch.levels[2], arch.levels[3]
    assert acc.fanout == 64
    assert acc.spatial_axes[0] == SpatialAxis("rows", 8, frozenset({"input", "output"}), True)
    assert regs.holds == {"output"} and regs.capacity_bytes == 8 and regs.word_bits == 32
    # OS uses the scratchpad and accumulator whole; only the PE's two registers overlap preload and compute
    assert [lv.name for lv in arch.levels if lv.double_buffered] == ["Registers"]


def test_simba_matches_cosa_file_and_has_1024_macs():
    arch = preset("simba")
    assert arch.total_macs_per_cycle == 1024
    assert arch.level_names == ("DRAM", "GlobalBuffer", "InputBuffer", "WeightBuffer", "AccumulationBuffer",
                                "Registers")
    caps = {lv.name: lv.capacity_bytes for lv in arch.levels}
    assert caps == {"DRAM": None, "GlobalBuffer": 65536, "InputBuffer": 4096, "WeightBuffer": 16384,
                    "AccumulationBuffer": 192, "Registers": 1}
    assert [arch.instances(i) for i in range(6)] == [1, 1, 16, 128, 128, 1024]
    assert arch.level("GlobalBuffer").holds == {"input", "output"}
    assert arch.level("DRAM").read_bandwidth == arch.level("DRAM").write_bandwidth == 10.0  # Timeloop: bandwidth/2 each way
    assert arch.level("DRAM").separate_channels
    from_file = load_arch(SHARED / "cosa-simba.yaml")
    assert from_file.levels == arch.levels and from_file.total_macs_per_cycle == 1024


@pytest.mark.parametrize("name", list_presets())
def test_every_preset_round_trips_through_yaml(name, tmp_path):
    arch = preset(name)
    path = tmp_path / f"{name}.yaml"
    dump_arch(arch, path)
    back = load_arch(path)
    assert back == arch
    described = describe_arch(arch)
    assert described["macs_per_cycle"] == arch.total_macs_per_cycle
    assert described["pes"] * described["macs_per_cycle_per_pe"] == arch.total_macs_per_cycle
    assert all(lv.read_energy_pj_per_byte > 0 for lv in arch.levels)


def test_preset_lookup_and_overrides():
    assert set(list_presets()) >= {"gemmini", "gemmini-ws", "gemmini-os", "simba", "eyeriss", "cpu", "cluster"}
    assert load_arch("gemmini:dim=8,dataflow=os").levels[2].fanout == 64
    cl = preset("cluster", nodes=3)
    assert cl.levels[0].name == "Network" and cl.levels[0].fanout == 3
    cpu = preset("cpu", cores=4, simd_lanes=8)
    assert cpu.total_macs_per_cycle == 4 * 8 * cpu.macs_per_cycle
    with pytest.raises(ArchError, match="unknown preset 'tpu'"):
        preset("tpu")
    with pytest.raises(ArchError, match="dataflow"):
        preset("gemmini", dataflow="rs")
    with pytest.raises(ArchError, match="bad arguments"):
        preset("simba", dim=3)


def _write(tmp_path, text, name="a.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_errors_name_file_field_and_reason(tmp_path):
    bad_yaml = _write(tmp_path, "levels: [\n  - name: DRAM\n", "bad.yaml")
    with pytest.raises(ArchError, match=r"bad\.yaml.*malformed YAML"):
        load_arch(bad_yaml)
    unknown = _write(tmp_path, "name: x\nlevels:\n  - {name: DRAM, colour: red}\n", "unk.yaml")
    with pytest.raises(ArchError, match=r"unk\.yaml.*levels\.DRAM\.colour.*unknown field"):
        load_arch(unknown)
    missing = _write(tmp_path, "name: x\nlevels:\n  - {name: DRAM}\n  - {name: Buf, fanout: 2}\n", "miss.yaml")
    with pytest.raises(ArchError, match=r"miss\.yaml.*levels\.Buf\.capacity_bytes.*missing capacity"):
        load_arch(missing)
    badnum = _write(tmp_path, "name: x\nlevels:\n  - {name: DRAM}\n  - {name: Buf, capacity_bytes: lots}\n",
                    "num.yaml")
    with pytest.raises(ArchError, match=r"num\.yaml.*capacity_bytes.*expected an integer"):
        load_arch(badnum)
    role = _write(tmp_path, "name: x\nlevels:\n  - {name: DRAM, holds: [input, bias]}\n", "role.yaml")
    with pytest.raises(ArchError, match=r"role\.yaml.*holds.*unknown roles"):
        load_arch(role)
    with pytest.raises(ArchError, match="no such file"):
        load_arch(tmp_path / "nothere.yaml")


def test_cosa_v02_errors(tmp_path):
    no_entries = _write(tmp_path, "arch:\n  arithmetic: {instances: 4}\n  storage:\n"
                                  "  - {name: Buf, instances: 1}\n  - {name: DRAM, instances: 1}\n", "c1.yaml")
    with pytest.raises(ArchError, match=r"c1\.yaml.*arch\.storage\.Buf\.entries.*missing capacity"):
        load_arch(no_entries)
    bad_inst = _write(tmp_path, "arch:\n  arithmetic: {instances: 4}\n  storage:\n"
                                "  - {name: Buf, entries: 16, instances: three}\n  - {name: DRAM}\n", "c2.yaml")
    with pytest.raises(ArchError, match=r"c2\.yaml.*Buf\.instances.*expected a number"):
        load_arch(bad_inst)
    unknown = _write(tmp_path, "arch:\n  arithmetic: {instances: 4}\n  storage:\n"
                               "  - {name: Buf, entries: 16, flavour: x}\n  - {name: DRAM}\n", "c3.yaml")
    with pytest.raises(ArchError, match=r"c3\.yaml.*flavour.*unknown field"):
        load_arch(unknown)


def test_our_form_minimal_and_dict():
    arch = arch_from_dict({"name": "tiny", "levels": [{"name": "DRAM"}, {"name": "Buf", "capacity_bytes": 64,
                                                                         "holds": ["input"], "fanout": 2}]})
    assert arch.level("Buf").holds == {"input"} and arch.total_macs_per_cycle == 2
    assert arch_to_dict(arch)["levels"][1]["capacity_bytes"] == 64


def test_gemmini_rows_never_take_a_kernel_dim_even_where_it_indexes_no_window():
    """On a 1x1 image a 3x3 kernel's R and S index the input directly (no window), so the role rule alone would
    put them on the WS rows; Gemmini's programs walk them in time, and the excluded list says so, through a
    file round trip too."""
    from workloads import conv2d

    arch = preset("gemmini")
    rows = arch.levels[2].spatial_axes[0]
    one_pixel = conv2d("dw", N=1, C=64, K=64, H=1, W=1, R=3, S=3, padding=1, groups=64, bits=8)
    dense = conv2d("c", N=1, C=64, K=64, H=1, W=1, R=3, S=3, padding=1, bits=8)
    assert "R" not in one_pixel.window_dims() and not rows.admits("R", one_pixel)
    assert rows.admits("C", dense) and not rows.admits("S", dense)
    assert SpatialAxis("rows", 16, frozenset({"input", "weight"})).admits("R", dense)   # the rule without the list
    again = arch_from_dict(arch_to_dict(arch))
    assert again.levels[2].spatial_axes[0].excluded == frozenset({"R", "S"})
    with pytest.raises(ArchError, match="excluded"):
        d = arch_to_dict(arch)
        d["levels"][2]["spatial_axes"][0]["excluded"] = "R"
        arch_from_dict(d)
