"""``--deadline S``: every command's wall-time limit; reaching it is one line and exit 1.  ``--exhaustive-limit N``:
the exhaustive baseline's limit from the command line."""

import contextlib
import io
import signal
import threading
import time
from pathlib import Path

import pytest

from cosa.cli import main
from cosa.cli_common import split_deadline
from cosa.deadline import DEFAULT_DEADLINE_S, RETRY_S, DeadlineExceeded, deadline, raise_if_expired, remaining_s
from workloads import FrameworkError

ROOT = Path(__file__).resolve().parents[2]
CONV = str(ROOT / "examples" / "conv3x3.yaml")


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue(), time.monotonic() - start


def test_split_deadline_anywhere_on_the_line():
    assert split_deadline(["show", "x"]) == (DEFAULT_DEADLINE_S, ["show", "x"])
    assert split_deadline(["show", "--deadline", "7", "x"]) == (7.0, ["show", "x"])
    assert split_deadline(["--deadline=2.5", "run", "cpu"]) == (2.5, ["run", "cpu"])
    assert split_deadline(["run", "mpi", "--", "--deadline", "3"]) == (DEFAULT_DEADLINE_S,
                                                                        ["run", "mpi", "--", "--deadline", "3"])
    for bad in (["--deadline"], ["--deadline", "0"], ["--deadline", "-1"], ["--deadline=abc"], ["--deadline", "nan"],
                ["--deadline", "inf"]):
        with pytest.raises(FrameworkError, match="--deadline"):
            split_deadline(bad)


def test_bad_deadline_is_one_line_exit_2():
    code, out, err, _ = _run(["show", CONV, "--deadline", "zero"])
    assert code == 2 and out == "" and err.count("\n") == 1 and "--deadline" in err


def test_a_baseline_past_the_deadline_is_a_failed_run():
    """The random baseline's 1000 samples on a ResNet-50 layer take seconds; half a second stops it."""
    code, out, err, seconds = _run(["schedule", CONV, "--scheduler", "random", "--deadline", "0.5", "--json"])
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("cosa: deadline of 0.5 s reached")
    assert seconds < 10
    assert remaining_s() is None and signal.getitimer(signal.ITIMER_REAL)[0] == 0  # nothing left armed


def test_the_mip_past_the_deadline_is_a_failed_run():
    code, _, err, seconds = _run(["schedule", CONV, "--scheduler", "cosa-cold", "--time-limit", "60",
                                  "--deadline", "1"])
    assert (code, err.count("\n")) in ((1, 1), (0, 0))  # a solve may finish inside one second on a fast machine
    assert seconds < 15


def _in_a_thread(fn):
    """``fn()``'s result, run outside the main thread, where a deadline sends no signal (only its clock counts)."""
    box = {}

    def body():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001  (handed back to the test)
            box["error"] = exc

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(120)
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_a_solver_back_after_the_deadline_is_the_deadlines_failure(monkeypatch):
    """HiGHS given the deadline's last fraction of a second can come back after it with status 'error' and no
    solution, before the alarm's exception is raised: that is the deadline's failed run (exit 1), not a bad
    input (exit 2).  Here the solver comes back after the deadline, whatever it reports, and no alarm is sent."""
    from cosa.mip.solve import _HighsWithStart

    real = _HighsWithStart.solve

    def late(self, *args, **kwargs):
        result = real(self, *args, **kwargs)
        time.sleep(max(0.0, remaining_s()) + 0.01)
        return result

    monkeypatch.setattr(_HighsWithStart, "solve", late)
    code, out, err, _ = _in_a_thread(lambda: _run(["schedule", CONV, "--scheduler", "cosa-cold", "--deadline", "2"]))
    assert code == 1 and out == "" and err.startswith("cosa: deadline of 2 s reached"), (code, err)


def test_raise_if_expired_names_the_deadline_that_expired():
    def body():
        raise_if_expired()   # no deadline: nothing
        with deadline(30):
            raise_if_expired()   # time left: nothing
            with deadline(0.05):
                time.sleep(0.1)
                with pytest.raises(DeadlineExceeded, match=r"^deadline of 0\.05 s reached"):
                    raise_if_expired()
            raise_if_expired()   # the outer deadline's time is left
        return True

    assert _in_a_thread(body)


def test_compare_with_processes_stops_its_workers(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text("layers:\n"
                    "  - {kind: conv2d, name: a, C: 64, K: 64, H: 28, W: 28, R: 3, S: 3, padding: 1}\n"
                    "  - {kind: conv2d, name: b, C: 128, K: 64, H: 28, W: 28, R: 3, S: 3, padding: 1}\n")
    code, _, err, seconds = _run(["compare", str(path), "--schedulers", "random", "--random-samples", "100000",
                                  "--jobs", "2", "--deadline", "2"])
    assert code == 1 and "deadline of 2 s" in err and err.count("\n") == 1
    assert seconds < 20


def test_an_outer_alarm_is_kept():
    """A caller's earlier alarm still fires its own handler; a later one is re-armed on the way out."""
    fired = []

    def outer(signum, frame):
        fired.append(time.monotonic())
        raise KeyError("outer")

    previous = signal.signal(signal.SIGALRM, outer)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyError, match="outer"):
            with deadline(5):
                time.sleep(2)
        assert len(fired) == 1 and remaining_s() is None
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(DeadlineExceeded):
            with deadline(0.1):
                time.sleep(2)
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 0.3 < left < 1.0 and not fired[1:]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_exhaustive_limit_from_the_command_line(tmp_path):
    layer = tmp_path / "mm.yaml"
    layer.write_text("kind: matmul\nname: mm\nM: 2\nN: 4\nK: 2\n")
    arch = tmp_path / "small.yaml"
    from costmodel import dump_arch, preset

    arch.write_text(dump_arch(preset("gemmini", dim=2, scratchpad_kib=1, accumulator_kib=1)))
    code, _, err, _ = _run(["schedule", str(layer), "--arch", str(arch), "--scheduler", "exhaustive",
                            "--exhaustive-limit", "3"])
    assert code == 2 and "more than the limit 3" in err and "--exhaustive-limit" in err
    code, out, err, _ = _run(["schedule", str(layer), "--arch", str(arch), "--scheduler", "exhaustive",
                              "--exhaustive-limit", "100000", "--json"])
    assert code == 0 and err == ""
    import json

    assert json.loads(out)["space_size"] <= 100000


def test_a_swallowed_deadline_is_raised_again():
    """An exception raised inside a garbage-collector callback is ignored by Python (a CI run of the random
    baseline past its deadline finished with exit 0 that way); the alarm comes again until one propagates."""
    swallowed = 0
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        with deadline(0.2):
            while True:
                try:
                    time.sleep(0.01)
                except DeadlineExceeded:
                    swallowed += 1   # as a callback's exception would be
                    if swallowed > 1:
                        raise
    assert swallowed == 2 and time.monotonic() - start < 0.2 + 2 * RETRY_S + 0.5
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0   # nothing left armed
