"""bench/casgd.py without a network path: the measured-vs-model comparison, the path's alpha and beta
from ping-pong rounds, the model's best s against alpha, and the rows skipped (what is missing named) or
failed without ending the run."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import casgd as bench  # noqa: E402
import netpath  # noqa: E402

from algorithms import casgd_run as cr  # noqa: E402


def test_compare_takes_the_fastest_s_and_the_ratio_to_the_model():
    pred = {"best_s": 16, "speedup": 10.0}
    got = bench.compare(1.0, {1: 1.1, 8: 0.125, 16: 0.125, 32: 0.2}, pred)
    assert got["measured_best_s"] == 8  # a tie goes to the smaller s
    assert got["measured_speedup"] == pytest.approx(8.0) and got["ratio"] == pytest.approx(0.8)
    assert got["within"] and got["model_best_s"] == 16
    assert not bench.compare(1.0, {4: 0.25}, pred)["within"]  # 4 / 10: 60% under
    assert not bench.compare(1.0, {4: 0.07}, pred)["within"]  # 14.3 / 10: 43% over
    assert bench.compare(1.0, {4: 0.08}, pred)["within"]  # 12.5 / 10: exactly 25% over


def test_alpha_beta_come_from_the_quietest_round_per_size():
    line = {w: 300e-6 + 2e-9 * w for w in bench.PINGPONG_WORDS}
    noisy = {w: 3 * t for w, t in line.items()}
    alpha, beta, best = bench.path_alpha_beta([noisy, line, {**noisy, 4096: line[4096]}])
    assert best == line
    assert alpha == pytest.approx(300e-6 + 2e-9 * 8) and beta == pytest.approx(2e-9, rel=0.05)


def test_the_models_best_s_and_speedup_grow_with_the_paths_alpha():
    """The law the benchmark tests: more latency per message, fewer messages pay more."""
    prev = None
    for alpha in (1e-6, 3e-5, 2e-4, 5e-4, 2e-3):
        got = cr.best_s(256, 4, 2, 1024, 1.0, {"alpha": alpha, "beta": 5e-9, "gamma": 1e-10},
                        candidates=(1, 2, 4, 8, 16, 32, 64))
        if prev is not None:
            assert got["best_s"] >= prev["best_s"] and got["speedup"] >= prev["speedup"]
        prev = got
    assert prev["best_s"] >= 16 and prev["speedup"] > 10


def test_a_row_without_its_tools_is_skipped_and_the_others_run():
    def run_one(kind, delay, wait):
        if kind == "netem" and delay > 0:
            raise netpath.PathUnavailable("the kernel's sch_netem")
        if delay > 400e-6:
            from targets.mpi.launch import MpiError

            raise MpiError("rank 1: RuntimeError: boom", exit_code=1)
        return {"path": kind, "added_s": delay, "wait": wait, "pingpong_s": {"1": 1e-5}}

    said = []
    plan = [(k, d, "spin") for k in ("netem", "delayline") for d in (0.0, 200e-6, 500e-6)]
    rows, skipped, failed = bench.run_rows(plan, run_one, said.append)
    assert [(r["path"], r["added_s"]) for r in rows] == [("netem", 0.0), ("delayline", 0.0), ("delayline", 200e-6)]
    assert [(s["path"], s["missing"]) for s in skipped] == [("netem", "the kernel's sch_netem")] * 2
    assert [f["added_s"] for f in failed] == [500e-6] and "boom" in failed[0]["error"]
    assert any("netem +200 us, ranks spin skipped: missing the kernel's sch_netem" in line for line in said)


@pytest.mark.parametrize("kind,delay,which,euid,missing", [
    ("netem", 200e-6, {"ip", "tc"}, 1000, "permission to make network namespaces"),
    ("netem", 200e-6, {"tc"}, 0, "ip (Debian"),
    ("netem", 200e-6, {"ip"}, 0, "tc (Debian"),
    ("netem", 0.0, {"ip"}, 0, None),  # a plain veth pair needs no tc
    ("delayline", 200e-6, {"ip"}, 0, None),
    ("wire", 0.0, {"ip", "tc"}, 0, "unknown path kind"),
])
def test_missing_tools_names_what_is_missing(kind, delay, which, euid, missing):
    got = netpath.missing_tools(kind, delay, which=lambda name: f"/usr/sbin/{name}" if name in which else None,
                                euid=euid)
    assert got == missing if missing is None else got.startswith(missing)


def test_latency_path_raises_path_unavailable_when_tc_is_missing(monkeypatch):
    monkeypatch.setattr(netpath.shutil, "which", lambda name: None if name == "tc" else f"/usr/sbin/{name}")
    monkeypatch.setattr(netpath.os, "geteuid", lambda: 0)
    with pytest.raises(netpath.PathUnavailable) as err:
        with netpath.latency_path("netem", 300e-6):
            pass
    assert err.value.missing.startswith("tc ")


def test_commands_have_a_deadline_and_name_a_missing_tool():
    with pytest.raises(netpath.PathUnavailable, match="did not finish in 0.2 s"):
        netpath.run_cmd(["sleep", "5"], timeout_s=0.2)
    with pytest.raises(netpath.PathUnavailable, match="no-such-tool-here not found"):
        netpath.run_cmd(["no-such-tool-here"])


def test_subnets_are_private_and_distinct_for_distinct_tags():
    a, b = netpath._subnet("cz1234ab")
    assert a.startswith("10.231.") and b.startswith("10.231.") and a != b
    assert len({netpath._subnet(f"cz{pid}00") for pid in range(1000, 1100)}) > 90


def test_stale_namespaces_of_dead_runs_are_removed_and_live_ones_kept(monkeypatch):
    listed = "cz41x0fa (id: 3)\ncz41x0fb\ncz42x10a\nother\ncz7\n"
    deleted = []

    def fake(args, timeout_s=netpath.CMD_TIMEOUT_S, check=True):
        if args[:3] == ["ip", "netns", "del"]:
            deleted.append(args[3])
        return netpath.subprocess.CompletedProcess(args, 0, listed if args[2] == "list" else "", "")

    monkeypatch.setattr(netpath, "run_cmd", fake)
    assert netpath.remove_stale(alive=lambda pid: pid == 42) == ["cz41x0fa", "cz41x0fb"] == deleted
    assert netpath.unique_tag().startswith(f"cz{netpath.os.getpid()}x")
