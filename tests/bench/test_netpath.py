"""The network path bench/casgd.py makes (bench/netpath.py), built for real where this machine allows it
(root, ip, /dev/net/tun; netem also needs the kernel's sch_netem), skipped with the reason otherwise:
the added delay is really on the path, a failing rank still ends the job, and nothing is left behind."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import netpath  # noqa: E402

from targets.mpi import launch  # noqa: E402
from targets.mpi.launch import MpiError  # noqa: E402

ENTRIES = str(ROOT / "tests" / "targets" / "mpi")
DELAY = 300e-6


def _namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout


def _path_or_skip(kind: str, delay: float):
    """A context manager of the path, or a skip naming what is missing (found by building it once)."""
    missing = netpath.missing_tools(kind, delay)
    if missing:
        pytest.skip(f"{kind} path: missing {missing}")
    try:
        with netpath.latency_path(kind, delay):
            pass
    except netpath.PathUnavailable as exc:
        pytest.skip(f"{kind} path: missing {exc.missing}")
    return netpath.latency_path(kind, delay)


def _commands() -> str:
    """Every process's command line, one a line (from /proc: no ps needed)."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            out.append((d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return "\n".join(out)


def _kw(path) -> dict:
    kw = dict(path.launch_kw)
    kw["extra_env"] = {**kw["extra_env"], "PYTHONPATH": ENTRIES}
    return kw


@pytest.mark.parametrize("kind", netpath.KINDS)
def test_the_added_delay_is_on_the_path_and_the_path_is_removed(kind):
    with _path_or_skip(kind, DELAY) as path:
        names = path.namespaces
        assert all(n in _namespaces() for n in names)
        res = launch("targets.mpi.calibrate:pingpong", 2, {"sizes": [1], "reps": 5, "stat": "min"}, timeout_s=60,
                     **path.launch_kw)
    # the fastest of 5 round trips, halved, cannot beat the delay each packet is held (load only adds)
    assert res[0]["1"] >= DELAY
    assert not any(n in _namespaces() for n in names)


def test_a_failing_dying_or_hung_rank_ends_the_job_across_namespaces():
    with _path_or_skip("delayline", 0.0) as path:
        with pytest.raises(MpiError, match=r"rank 1: RuntimeError"):
            launch("mpi_entries:fail_on", 2, {"rank": 1}, timeout_s=60, **_kw(path))
        with pytest.raises(MpiError, match=r"rank 1 died"):
            launch("mpi_entries:die_on", 2, {"rank": 1}, timeout_s=60, **_kw(path))
        with pytest.raises(MpiError, match=r"timed out after 4 s: rank 1 \(in phase 'stuck'\)"):
            launch("mpi_entries:hang_on", 2, {"rank": 1}, timeout_s=4, **_kw(path))
        script = path.launch_kw["mpiexec_args"][3]
        for _ in range(50):  # the proxies (and the hung rank under one) end once mpiexec is gone
            ps = _commands()
            if script not in ps:
                break
            time.sleep(0.1)
        assert script not in ps


def test_the_path_is_removed_when_the_body_fails():
    with pytest.raises(ZeroDivisionError):
        with _path_or_skip("delayline", 0.0) as path:
            names = path.namespaces
            1 / 0
    assert not any(n in _namespaces() for n in names)


def test_a_terminated_run_still_removes_its_path(tmp_path):
    """SIGTERM (a deadline's kill) inside the path: the namespaces and the forwarder go with the process."""
    _path_or_skip("delayline", 0.0)
    script = tmp_path / "hold.py"
    script.write_text("import sys, time\nsys.path.insert(0, sys.argv[1])\nimport netpath\n"
                      "with netpath.latency_path('delayline', 0.0) as p:\n"
                      "    print(' '.join(p.namespaces), flush=True)\n    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, str(script), str(ROOT / "bench")], stdout=subprocess.PIPE, text=True)
    names = proc.stdout.readline().split()
    assert len(names) == 2 and all(n in _namespaces() for n in names)
    proc.terminate()
    assert proc.wait(timeout=30) == 128 + 15
    assert not any(n in _namespaces() for n in names)
    assert f"delayline {names[0]} {names[1]}" not in _commands()
