"""targets.cpu.calibrate: the probes behind the core's facts the micro-kernel issue model reads."""

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
