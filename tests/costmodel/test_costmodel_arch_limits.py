"""Zero or negative capacities and bandwidths, and non-finite numbers, are refused with the file and field
(null, never 0, is how an arch file says unbounded or unlimited)."""

import math

import pytest

from costmodel import Arch, ArchError, Level, dump_arch, load_arch, preset

GEMMINI = dump_arch(preset("gemmini"))


@pytest.mark.parametrize("old,new,field,reason", [
    ("read_bandwidth: 16.0", "read_bandwidth: 0", "levels.DRAM.read_bandwidth", "must be > 0"),
    ("write_bandwidth: 16.0", "write_bandwidth: -2", "levels.DRAM.write_bandwidth", "must be > 0"),
    ("read_bandwidth: 16.0", "read_bandwidth: .nan", "levels.DRAM.read_bandwidth", "finite"),
    ("read_bandwidth: 16.0", "read_bandwidth: .inf", "levels.DRAM.read_bandwidth", "finite"),
    ("capacity_bytes: 262144", "capacity_bytes: 0", "levels.Scratchpad.capacity_bytes", "must be > 0"),
    ("capacity_bytes: 262144", "capacity_bytes: -1", "levels.Scratchpad.capacity_bytes", "must be > 0"),
    ("capacity_bytes: 262144", "capacity_bytes: .inf", "levels.Scratchpad.capacity_bytes", "finite"),
    ("macs_per_cycle: 1", "macs_per_cycle: 0", "macs_per_cycle", "must be > 0"),
    ("frequency_hz: 1000000000.0", "frequency_hz: 0", "frequency_hz", "must be > 0"),
    ("mac_energy_pj: 0.30000000000000004", "mac_energy_pj: .nan", "mac_energy_pj", "finite"),
])
def test_file_values_are_refused_with_file_and_field(tmp_path, old, new, field, reason):
    assert old in GEMMINI
    path = tmp_path / "arch.yaml"
    path.write_text(GEMMINI.replace(old, new, 1))
    with pytest.raises(ArchError) as info:
        load_arch(path)
    message = str(info.value)
    assert str(path) in message and f"'{field}'" in message and reason in message


def test_null_still_means_unbounded_and_unlimited(tmp_path):
    path = tmp_path / "arch.yaml"
    path.write_text(GEMMINI.replace("read_bandwidth: 16.0", "read_bandwidth: null", 1))
    assert load_arch(path).levels[0].read_bandwidth is None


def test_cosa_v02_values_are_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("arch:\n  arithmetic: {name: MAC, instances: 4, word-bits: 8}\n  storage:\n"
                    "    - {name: Buf, entries: .nan, instances: 1, word-bits: 8}\n    - {name: DRAM, instances: 1}\n")
    with pytest.raises(ArchError, match=r"c\.yaml.*Buf\.entries.*finite"):
        load_arch(path)


@pytest.mark.parametrize("level,field", [
    (dict(capacity_bytes=0), "Buf.capacity_bytes"),
    (dict(capacity_bytes=1024, read_bandwidth=0.0), "Buf.read_bandwidth"),
    (dict(capacity_bytes=1024, write_bandwidth=math.nan), "Buf.write_bandwidth"),
])
def test_built_archs_are_checked_too(level, field):
    with pytest.raises(ArchError, match=field.replace(".", r"\.")):
        Arch("a", (Level("DRAM"), Level("Buf", **level)))
