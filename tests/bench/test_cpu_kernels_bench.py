"""bench/cpu_kernels.py: interleaved rounds rotate their order, and on several threads every timed call
starts after a quiet pause and an untimed call of itself (another library's spinning threads parked)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import bench.cpu_kernels as ck  # noqa: E402


def _recording(monkeypatch, warm_s: float = 0.0):
    log = []
    monkeypatch.setattr(ck.time, "sleep", lambda s: log.append(("sleep", s)))
    monkeypatch.setattr(ck, "WARM_S", warm_s)
    calls = {name: (lambda name=name: log.append(("call", name))) for name in ("ours", "cache", "numpy")}
    return log, calls


def test_each_round_times_every_call_once_and_no_call_always_follows_the_same_other(monkeypatch):
    log, calls = _recording(monkeypatch)
    times = ck.interleaved(calls, repeat=3, threads=1)
    assert {n: len(t) for n, t in times.items()} == {"ours": 3, "cache": 3, "numpy": 3}
    order = [name for kind, name in log if kind == "call"]
    assert order == ["ours", "cache", "numpy", "cache", "numpy", "ours", "numpy", "ours", "cache"]
    assert not [e for e in log if e[0] == "sleep"]  # one thread: nothing spins beside the timed call


def test_on_several_threads_a_timed_call_follows_a_pause_and_its_own_untimed_call(monkeypatch):
    log, calls = _recording(monkeypatch)
    ck.interleaved(calls, repeat=2, threads=2)
    assert len(log) == 2 * 3 * 3
    for k in range(0, len(log), 3):
        (kind0, pause), (kind1, warm), (kind2, timed) = log[k:k + 3]
        assert (kind0, kind1, kind2) == ("sleep", "call", "call") and pause == ck.SETTLE_S and warm == timed


def test_the_untimed_calls_last_at_least_warm_s(monkeypatch):
    """Each call takes 4 ms of a fake clock: 20 ms of warm-up is 5 untimed calls, then the timed one."""
    clock = [0.0]
    monkeypatch.setattr(ck.time, "perf_counter", lambda: clock[0])
    log, _ = _recording(monkeypatch, warm_s=0.02)

    def call():
        clock[0] += 0.004
        log.append(("call", "ours"))
    times = ck.interleaved({"ours": call}, repeat=1, threads=2)
    assert [k for k, _ in log] == ["sleep"] + ["call"] * 6 and times["ours"] == [pytest.approx(0.004)]


def test_warm_s_zero_is_one_untimed_call_and_a_negative_one_is_refused(monkeypatch):
    log, calls = _recording(monkeypatch, warm_s=0.02)
    ck.interleaved(calls, repeat=1, threads=2, warm_s=0.0)
    assert [k for k, _ in log] == ["sleep", "call", "call"] * 3
    with pytest.raises(SystemExit, match="--warm-s"):
        ck.main(["--warm-s", "-1", "--cases", "gemm256_32"])


def test_a_negative_stage_bytes_is_refused():
    with pytest.raises(SystemExit, match="--stage-bytes"):
        ck.main(["--stage-bytes", "-1", "--cases", "gemm256_32"])
