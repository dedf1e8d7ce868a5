"""Schedules on disk: a second process reads the mapping instead of solving; the key tracks the workload,
the arch and the options; a damaged entry is solved again."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import costmodel
import workloads
from cosa.schedule_cache import cached_mapping, entry_path, schedule_key

ROOT = Path(__file__).resolve().parents[2]


def _nest(m=32):
    return workloads.matmul(f"gemm_{m}", M=m, N=16, K=8, bits=64)


@pytest.fixture
def solves(monkeypatch, tmp_path):
    """Count the solver calls the cache lets through."""
    import cosa.scheduler

    monkeypatch.setenv("COSA_CACHE_DIR", str(tmp_path))
    calls = []
    real = cosa.scheduler.schedule

    def counting(*args, **kw):
        calls.append(args[0].name)
        return real(*args, **kw)
    monkeypatch.setattr(cosa.scheduler, "schedule", counting)
    return calls


def test_second_request_reads_the_entry(solves):
    arch = costmodel.preset("cpu")
    first = cached_mapping(_nest(), arch, time_limit_s=10, seed=0)
    again = cached_mapping(workloads.matmul("renamed", M=32, N=16, K=8, bits=64), arch, time_limit_s=10, seed=0)
    assert solves == ["gemm_32"] and again == first
    cached_mapping(_nest(64), arch, time_limit_s=10, seed=0)        # another workload
    cached_mapping(_nest(), arch, time_limit_s=10, seed=1)          # other options
    assert solves == ["gemm_32", "gemm_64", "gemm_32"]


def test_key_covers_the_arch_and_the_description():
    a, b = costmodel.preset("cpu"), costmodel.preset("cpu", cores=4)
    opts = {"seed": 0}
    assert schedule_key(_nest(), a, opts) == schedule_key(_nest(), a, dict(opts))
    assert schedule_key(_nest(), a, opts) != schedule_key(_nest(), b, opts)
    sparse = workloads.spmm(m=32, n=32, r=8, density=0.1)
    denser = workloads.spmm(m=32, n=32, r=8, density=0.2)
    assert schedule_key(sparse, a, opts) != schedule_key(denser, a, opts)


def test_a_damaged_entry_is_solved_again(solves):
    arch = costmodel.preset("cpu")
    good = cached_mapping(_nest(), arch, time_limit_s=10, seed=0)
    path = entry_path(_nest(), arch, time_limit_s=10, seed=0)
    path.write_text("{not json")
    assert cached_mapping(_nest(), arch, time_limit_s=10, seed=0) == good and len(solves) == 2
    assert json.loads(path.read_text())["mapping"]


def test_a_second_process_does_not_solve(tmp_path):
    """The entry one process wrote is what a fresh interpreter reads (no solver call there)."""
    env_code = ("import sys, costmodel, workloads, cosa.scheduler as s\n"
                "from cosa.schedule_cache import cached_mapping\n"
                "if sys.argv[1] == 'no-solve':\n"
                "    s.schedule = lambda *a, **k: sys.exit('solved again')\n"
                "m = cached_mapping(workloads.matmul('g', M=32, N=16, K=8, bits=64), costmodel.preset('cpu'),"
                " time_limit_s=10, seed=0)\n"
                "print(m.levels[0].temporal)\n")
    env = {"COSA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    outs = [subprocess.run([sys.executable, "-c", env_code, mode], capture_output=True, text=True, env=env,
                           timeout=120) for mode in ("solve", "no-solve")]
    assert [o.returncode for o in outs] == [0, 0], outs[1].stderr
    assert outs[0].stdout == outs[1].stdout
    assert len(list((tmp_path / "schedules").glob("*.json"))) == 1



def test_processes_asking_at_once_solve_once(tmp_path):
    code = ("import sys, costmodel, workloads, cosa.scheduler as s\n"
            "from cosa.schedule_cache import cached_mapping\n"
            "real = s.schedule\n"
            "def counted(*a, **k):\n"
            f"    open({str(tmp_path / 'solves.txt')!r}, 'a').write('x')\n"
            "    return real(*a, **k)\n"
            "s.schedule = counted\n"
            "m = cached_mapping(workloads.matmul('g', M=64, N=32, K=16, bits=64), costmodel.preset('cpu'),"
            " time_limit_s=10, seed=0)\n"
            "print(m.levels[0].temporal)\n")
    env = {"COSA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(3)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert len({o for o, _ in outs}) == 1 and (tmp_path / "solves.txt").read_text() == "x"
