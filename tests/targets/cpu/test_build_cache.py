"""The kernel cache: keyed by source, compiler and flags; processes asking for one kernel at once compile
it once and load the same file."""

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SOURCE = "double cosa_probe(double x) { return 2.0 * x + %d; }\n"


@pytest.fixture
def counting_cc(tmp_path):
    """A compiler wrapper that records each compile (not ``--version``) before running gcc."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed (Debian package 'gcc')")
    log = tmp_path / "compiles.txt"
    cc = tmp_path / "cc-wrapper"
    cc.write_text(f'#!/bin/sh\ncase "$1" in --version|-dM|-march=native) ;; *) echo x >> {log} ;; esac\n'
                  f'exec {gcc} "$@"\n')
    cc.chmod(cc.stat().st_mode | stat.S_IEXEC)
    return cc, log


def test_key_changes_with_source_compiler_and_flags(counting_cc):
    from targets.cpu.build import FLAGS, kernel_key

    cc, _ = counting_cc
    gcc = shutil.which("gcc")
    base = kernel_key(SOURCE % 1, gcc, FLAGS)
    assert base == kernel_key(SOURCE % 1, gcc, FLAGS)
    assert len({base, kernel_key(SOURCE % 2, gcc, FLAGS), kernel_key(SOURCE % 1, str(cc), FLAGS),
                kernel_key(SOURCE % 1, gcc, FLAGS + ("-g",))}) == 4


def test_ranks_building_one_kernel_at_once_compile_it_once(tmp_path, counting_cc):
    cc, log = counting_cc
    code = ("import sys\nfrom targets.cpu.build import build, load\n"
            f"lib = build({SOURCE % 7!r})\n"
            "import ctypes\nf = ctypes.CDLL(str(lib)).cosa_probe\nf.restype = ctypes.c_double\n"
            "f.argtypes = [ctypes.c_double]\nprint(lib, f(1.5))\n")
    env = {**os.environ, "COSA_CACHE_DIR": str(tmp_path / "cache"), "COSA_CC": str(cc), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert len({o for o, _ in outs}) == 1 and outs[0][0].split()[1] == "10.0"
    assert log.read_text().count("x") == 1
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert again.stdout == outs[0][0] and log.read_text().count("x") == 1   # a second run compiles nothing
    files = sorted(f.name for f in (tmp_path / "cache" / "cpu").iterdir())
    assert [f.rsplit(".", 1)[1] for f in files] == ["c", "lock", "log", "so"], files


def test_openmp_threads_spin_briefly_then_sleep_unless_the_user_says_otherwise(monkeypatch):
    from targets.cpu.build import WAIT_SPINS, openmp_waits

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    openmp_waits()
    assert os.environ["OMP_WAIT_POLICY"] == "passive" and os.environ["GOMP_SPINCOUNT"] == str(WAIT_SPINS)
    monkeypatch.setenv("GOMP_SPINCOUNT", "5")  # the user's spin count stays
    monkeypatch.delenv("OMP_WAIT_POLICY")
    openmp_waits()
    assert os.environ["GOMP_SPINCOUNT"] == "5" and os.environ["OMP_WAIT_POLICY"] == "passive"
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")  # the user's policy: nothing added
    monkeypatch.delenv("GOMP_SPINCOUNT")
    openmp_waits()
    assert os.environ["OMP_WAIT_POLICY"] == "active" and "GOMP_SPINCOUNT" not in os.environ
