"""``cosa compare`` on MPI ranks (mpi4py + the mpich wheel), launched for real with mpiexec.

The MPI table must equal the serial one (``--jobs 1``) row for row, timings aside.
Every launch runs on this machine only and is killed, with its ranks, after a timeout.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from cosa.cli import main
from workloads import dump_short, matmul

ARCH = "gemmini:dim=2,scratchpad_kib=1,accumulator_kib=1"
LAYERS = [matmul("a", M=2, N=4, K=2), matmul("b", M=4, N=4, K=8, repeat=2)]
SCHEDULERS = "cosa,gemmini-default"
LAUNCH_TIMEOUT_S = 150
REPO = Path(__file__).resolve().parents[2]
# what may differ between two runs of the same table: wall times and the run's own facts
TIMING_KEYS = {"seconds", "build_s", "solve_s", "total_s", "total_seconds"}


def _mpiexec() -> str:
    """The mpiexec of the mpich wheel (next to this Python's scripts), else the one on PATH."""
    candidates = [Path(sysconfig.get_path("scripts")) / "mpiexec",
                  Path(sysconfig.get_path("scripts", f"{os.name}_user")) / "mpiexec"]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which("mpiexec")
    assert found, "mpiexec not found: pip install mpi4py mpich (the 'test' extra installs them)"
    return found


def _launch(args: list[str]) -> str:
    """Run mpiexec in its own process group; on a timeout kill the whole group (mpiexec and its ranks)."""
    env = {k: v for k, v in os.environ.items()
           if k != "COSA_MPI" and not k.startswith(("PMI_", "OMPI_", "MPI_", "MV2_", "HYDRA_"))}
    env["HYDRA_LAUNCHER"] = "fork"  # MPICH's launcher: start the ranks here, never through ssh
    proc = subprocess.Popen([_mpiexec(), *args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"mpiexec {' '.join(args)} did not finish in {LAUNCH_TIMEOUT_S} s")
    assert proc.returncode == 0, f"mpiexec failed ({proc.returncode}): {err[-2000:]}"
    return out


def _table(doc: dict) -> dict:
    """The JSON report as flat ``path -> value`` pairs, without timings and run facts (meta)."""
    flat = {}

    def walk(value, path):
        if isinstance(value, dict):
            for k, v in value.items():
                if k not in TIMING_KEYS:
                    walk(v, f"{path}.{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")
        else:
            flat[path] = value

    walk({k: v for k, v in doc.items() if k != "meta"}, "")
    return flat


def _differences(a: dict, b: dict) -> list[str]:
    return [f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


@pytest.fixture(scope="module")
def layers_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("mpi") / "layers.yaml"
    path.write_text(dump_short(LAYERS))
    return path


def _cli_args(layers_file) -> list[str]:
    return ["compare", str(layers_file), "--arch", ARCH, "--schedulers", SCHEDULERS, "--seed", "3", "--json"]


@pytest.fixture(scope="module")
def serial(layers_file):
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main([*_cli_args(layers_file), "--jobs", "1"]) == 0
    doc = json.loads(buffer.getvalue())
    assert doc["meta"]["executor"] == "serial"
    # the layers differ, so a shuffled row order could not pass for the serial one
    assert doc["rows"][0]["cycles"] != doc["rows"][2]["cycles"]
    assert all(row["error"] is None for row in doc["rows"])
    return doc


def test_mpi4py_futures_pool_gives_the_serial_table(serial, layers_file):
    out = _launch(["-n", "3", sys.executable, "-m", "mpi4py.futures", "-m", "cosa.cli", *_cli_args(layers_file)])
    doc = json.loads(out)
    assert doc["meta"]["executor"] == "mpi" and doc["meta"]["mpi_workers"] == 2
    assert [(r["layer"], r["scheduler"]) for r in doc["rows"]] == [(r["layer"], r["scheduler"]) for r in serial["rows"]]
    assert not _differences(_table(doc), _table(serial))


def test_plain_mpiexec_reports_once_from_rank_0(serial, layers_file):
    out = _launch(["-n", "2", sys.executable, "-m", "cosa.cli", *_cli_args(layers_file)])
    doc = json.loads(out)  # one JSON document: the worker rank printed nothing
    assert doc["meta"]["executor"] == "mpi" and doc["meta"]["mpi_workers"] == 1
    assert not _differences(_table(doc), _table(serial))
