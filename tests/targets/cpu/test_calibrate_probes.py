"""targets.cpu.calibrate: the probes behind the core's facts the micro-kernel issue model reads."""

import pytest

from targets.cpu import calibrate


def test_a_shared_level_keeps_the_better_of_all_cores_and_one(monkeypatch):
    # all cores together wait for a busy one (low); one core alone is a lower bound on the level
    got = {2: (10e9, 3e9), 1: (70e9, 60e9)}
    monkeypatch.setattr(calibrate, "bandwidth", lambda lib, size, threads, quick=False: got[threads])
    assert calibrate.shared_bandwidth(None, 1 << 20, 2) == (70e9, 60e9)
    got[2] = (120e9, 50e9)
    assert calibrate.shared_bandwidth(None, 1 << 20, 2) == (120e9, 60e9)
    assert calibrate.shared_bandwidth(None, 1 << 20, 1) == got[1]


def test_fma_chains_is_latency_times_pipes_on_this_machine():
    lib, _ = calibrate._probes()
    chains = calibrate.fma_chains(lib, quick=True)
    assert 2 <= chains <= 16  # every x86 core with vector FMAs: latency 4-5 cycles, 1-2 pipes


def test_the_core_clock_is_a_clock():
    lib, _ = calibrate._probes()
    assert 0.3e9 < calibrate.core_clock_hz(lib, quick=True) < 8e9


def test_cycles_are_those_of_the_clock_the_fma_probe_ran_at():
    arch = calibrate.calibrate(quick=True)
    p = arch.params
    lanes, pipes, hz = p["simd_lanes"], p["fma_per_cycle"], p["frequency_hz"]
    assert arch.frequency_hz == hz and p["reported_frequency_hz"] > 0
    # the FMA pipes at that clock give the measured peak, whatever clock the kernel reports
    assert pipes * 2 * lanes * hz / 1e9 == pytest.approx(p["peak_gflops_per_core"], rel=1e-3)
    l1 = next(lv for lv in arch.levels if lv.name == "L1")
    assert l1.read_bandwidth == pytest.approx(p["bandwidth_gb_s"]["L1"]["read"] * 1e9 / hz, rel=0.01)
