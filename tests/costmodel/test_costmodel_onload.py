"""The first fill and last drain (``params["fill_before_compute"]``, ``costmodel.onload``: ZigZag's onloading
and offloading in our tiles and bandwidths)."""

from __future__ import annotations

import dataclasses

import pytest

import workloads as W
from costmodel import Arch, Level, evaluate, preset
from costmodel.arch import ArchError
from costmodel.archio import arch_from_dict, arch_to_dict
from mappings import LevelMapping as LM, Mapping

MM = W.matmul(M=8, N=8, K=8)  # A (M, K) input, B (K, N) weight, C (M, N) output: 1-byte words
MAPPING = Mapping((LM(temporal={"M": 2, "N": 2, "K": 2}), LM(temporal={"M": 4, "K": 4}, spatial={"N": 4})))


def two_level(fill: bool, buffer_bandwidth: float | None = None) -> Arch:
    params = {"fill_before_compute": True} if fill else {}
    return Arch("two", (
        Level("DRAM", read_bandwidth=2.0, write_bandwidth=2.0, read_energy_pj_per_byte=100.0,
              write_energy_pj_per_byte=50.0, double_buffered=True),
        Level("Buffer", 4096, read_bandwidth=buffer_bandwidth, write_bandwidth=buffer_bandwidth,
              read_energy_pj_per_byte=1.0, write_energy_pj_per_byte=2.0, fanout=4),
    ), mac_energy_pj=0.5, params=params)


def _with(arch, **params):
    return dataclasses.replace(arch, params={**arch.params, **params})


def test_off_by_default_and_nothing_changes():
    plain = evaluate(MM, two_level(False), MAPPING)
    assert plain.fill_cycles == plain.drain_cycles == 0.0
    assert evaluate(MM, _with(two_level(False), fill_before_compute=False), MAPPING) == plain
    simba = preset("simba")
    assert "fill_before_compute" not in simba.params and "fill_before_compute" not in preset("eyeriss").params


def test_first_fill_and_last_drain_by_hand():
    """The Buffer's tiles: A 4x4 = 16 words, B 4x4 = 16, C 4x4 = 16, one byte each, at DRAM's 2 bytes per
    cycle (the Buffer's own bandwidth is unlimited): A and B fill side by side in 8 cycles (they share DRAM's
    port at one end only, as in ZigZag), C drains in 8; every tile changes during the run, so none is part
    of the loops' fill credit."""
    plain = evaluate(MM, two_level(False), MAPPING)
    cost = evaluate(MM, two_level(True), MAPPING)
    assert cost.fill_cycles == pytest.approx(8.0)
    assert cost.drain_cycles == pytest.approx(8.0)
    assert cost.cycles == pytest.approx(plain.cycles + 16.0)
    assert cost.to_dict()["fill_cycles"] == pytest.approx(8.0)


def test_inputs_sharing_ports_at_both_ends_fill_one_after_the_other():
    """With a 4-byte-per-cycle Buffer both ends of A's and B's links carry both inputs: their fills add up
    (8 + 8 cycles, each link set by DRAM's 8 cycles over the Buffer's 4)."""
    cost = evaluate(MM, two_level(True, buffer_bandwidth=4.0), MAPPING)
    assert cost.fill_cycles == pytest.approx(16.0)
    assert cost.drain_cycles == pytest.approx(8.0)


def test_archio_refuses_a_non_boolean_fill_before_compute():
    doc = arch_to_dict(two_level(True))
    assert arch_from_dict(doc).params["fill_before_compute"] is True
    doc["params"]["fill_before_compute"] = "yes"
    with pytest.raises(ArchError, match="params.fill_before_compute"):
        arch_from_dict(doc)


def test_a_weight_loaded_once_fills_in_the_loops_idle_port_time():
    """ZigZag's rule for a tile loaded once: it leaves the loops' transfers and borrows DRAM's idle port time,
    down to what its innermost holder needs first.  B's 64-word Buffer tile is loaded once (the only DRAM loop,
    M, is not B's): the loops take 128 compute cycles while DRAM moves A's and C's 128 bytes in 64, so B's
    32-cycle fill shrinks to its floor, the 4 words of the registers' tile (2 cycles); A's first 32-word tile
    takes 16 cycles and sets the fill, C's last one drains in 16."""
    arch = Arch("three", (
        Level("DRAM", read_bandwidth=2.0, write_bandwidth=2.0, double_buffered=True),
        Level("Buffer", 4096),
        Level("Reg", 64, frozenset({"weight"}), fanout=4),
    ), mac_energy_pj=0.5, params={"fill_before_compute": True})
    mapping = Mapping((LM(temporal={"M": 2}), LM(temporal={"M": 4, "K": 8, "N": 2}), LM(spatial={"N": 4})))
    plain = evaluate(MM, _with(arch, fill_before_compute=False), mapping)
    cost = evaluate(MM, arch, mapping)
    assert plain.cycles == plain.compute_cycles == 128
    assert cost.transfer_cycles["DRAM"] == pytest.approx(64.0)  # B's once-only load is the fill's
    assert cost.fill_cycles == pytest.approx(16.0)
    assert cost.drain_cycles == pytest.approx(16.0)
    assert cost.cycles == pytest.approx(160.0)
