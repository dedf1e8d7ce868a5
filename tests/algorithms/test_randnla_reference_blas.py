"""Randomized Cholesky QR with the reference BLAS and LAPACK (Netlib's, Debian's libblas3 / liblapack3)
instead of OpenBLAS: rounding differs from kernel set to kernel set, and the driver must not depend on it.

NumPy's wheel carries its own OpenBLAS, so the check runs in a second interpreter: the system Python with
Debian's NumPy and SciPy, with the reference libraries first on the loader's path.  There every product
is the reference BLAS's (the Gram matrix included: the scheduled GEMM kernel is replaced by ``np.dot``,
since the compiled kernel's rounding does not depend on the BLAS), and the script checks that the process
really mapped the reference libraries and no OpenBLAS.  `.ci/run` installs all of it."""

from __future__ import annotations

import json
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = Path("/usr/bin/python3")
MULTIARCH = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
REFERENCE = [Path(f"/usr/lib/{MULTIARCH}/blas"), Path(f"/usr/lib/{MULTIARCH}/lapack")]

SCRIPT = r"""
import json, sys
import numpy as np
import algorithms.randnla as R
mapped = open("/proc/self/maps").read()
assert "/blas/libblas.so.3" in mapped and "/lapack/liblapack.so.3" in mapped, "reference BLAS not mapped"
assert "openblas" not in mapped.lower(), "an OpenBLAS is mapped"
R.gemm = np.dot
worst = {}
for cond in (1e12, 1e15):
    for sketch in ("sjlt", "gaussian"):
        orth = resid = 0.0
        for seed in range(20):
            a, _, _ = R.synthetic_lstsq(1000, 30, cond, seed=seed)
            q, r = R.randomized_cholesky_qr(a, sketch=sketch, seed=seed)
            orth = max(orth, float(np.linalg.norm(q.T @ q - np.eye(30))))
            resid = max(resid, float(np.linalg.norm(a - q @ r)))
            assert np.allclose(np.tril(r, -1), 0)
        worst[f"{cond:.0e} {sketch}"] = (orth, resid)
print(json.dumps({"numpy": np.__version__, "worst": worst}))
"""


def _reference_stack_missing() -> str | None:
    if not SYSTEM_PYTHON.exists():
        return f"no {SYSTEM_PYTHON}"
    for lib, name in zip(REFERENCE, ("libblas.so.3", "liblapack.so.3")):
        if not (lib / name).exists():
            return f"no reference {lib / name} (Debian: libblas3, liblapack3)"
    probe = subprocess.run([str(SYSTEM_PYTHON), "-c", "import numpy, scipy.linalg, yaml"], capture_output=True,
                           timeout=60)
    if probe.returncode:
        return "the system Python lacks NumPy, SciPy or PyYAML (Debian: python3-numpy python3-scipy python3-yaml)"
    return None


def test_randomized_cholesky_qr_with_the_reference_blas():
    missing = _reference_stack_missing()
    if missing:
        pytest.skip(missing)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "LD_LIBRARY_PATH": ":".join(map(str, REFERENCE))}
    out = subprocess.run([str(SYSTEM_PYTHON), "-c", SCRIPT], capture_output=True, text=True, timeout=600, env=env,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    worst = json.loads(out.stdout.strip().splitlines()[-1])["worst"]
    assert len(worst) == 4
    for case, (orth, resid) in worst.items():
        assert orth < 1e-13 and resid <= 1e-14 * 30, (case, orth, resid)
