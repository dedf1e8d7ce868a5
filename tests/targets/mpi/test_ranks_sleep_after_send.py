"""The sleep-based stall after each message sent in the counting wrapper (``Ledger.sleep_after_send_s``):
the sender sleeps, counts are unchanged.  It is not network latency (bench/netpath.py makes a real one)."""

from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

from targets.mpi import launch  # noqa: E402

ENV = {"PYTHONPATH": str(Path(__file__).resolve().parent)}


def test_sleep_after_send_stalls_each_sender_and_leaves_counts_alone():
    off = launch("mpi_entries:sleep_after_send", 2, {"sleep_s": 0.0, "rounds": 20}, timeout_s=60, extra_env=ENV)
    on = launch("mpi_entries:sleep_after_send", 2, {"sleep_s": 0.005, "rounds": 20}, timeout_s=60, extra_env=ENV)
    # 20 ring allreduces on 2 ranks: 2 (p - 1) = 2 messages sent per allreduce, 40 in all
    assert [r["msgs_sent"] for r in off] == [r["msgs_sent"] for r in on] == [40, 40]
    slept = min(r["seconds"] for r in on) - max(r["seconds"] for r in off)
    assert slept >= 40 * 0.005 * 0.9
