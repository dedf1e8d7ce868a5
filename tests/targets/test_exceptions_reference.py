"""The reference libraries on the NaN/Inf cases of ``test_exceptions_matrix.py``, recorded beside ours.

OpenBLAS (SciPy's ``scipy.linalg.blas``) and NumPy run the same rules; where they deviate from the
policy (``targets.exceptions``) the deviation is recorded here as observed, keyed by what the library
runs: its version and the kernel set it picked for this CPU (threadpoolctl's ``architecture``; it follows
``OPENBLAS_CORETYPE`` where that is set).  A test checks the record of the library at hand and skips,
naming version and kernels, where nothing was recorded for them; the tests of our own policy run
everywhere.  Observed (not hidden), with SciPy's wheel (OpenBLAS 0.3.30) and NumPy's (0.3.31):

* xGEMV follows every product rule on every case and every kernel set recorded (beta = 0 does not read
  C, alpha = 0 does not read A and B, zeros are not skipped); so do NumPy's matmul and SciPy's CSR @
  dense on the SpMM cases (alpha = 1, beta = 0: they have no alpha/beta).
* xGEMM follows them with the Haswell, Sandybridge, Nehalem and Katmai kernels; with the SkylakeX
  kernels (AVX-512 machines, OpenBLAS's default there) alpha = 0 still reads A and B, so a NaN or Inf in
  them gives NaN in C (rules ``alpha0_nan_ab`` and ``alpha0_beta0_zeros``, both precisions, every size).
* IxAMAX ignores NaNs unless one is first: ``[1, NaN, Inf, NaN]`` gives 0 (the policy: 1, the first
  NaN), ``[Inf, 2, NaN]`` gives 0 (the policy: 2, NaN beats Inf); on 1001 entries with an Inf at 500 and a
  NaN at 700 idamax gives 0 and isamax 500 (the policy: 700).
* NumPy's ``np.linalg.norm`` squares without scaling: ``[1e200, 1e200]`` gives Inf and ``[1e-200,
  1e-200]`` gives 0 (spurious overflow and underflow; the policy and OpenBLAS's xNRM2: 1.414e200,
  1.414e-200).  NumPy's ``argmax(abs(x))`` follows the IxAMAX rules (first NaN wins).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg.blas as blas

from targets.exceptions import iamax, nrm2

sys.path.insert(0, str(Path(__file__).parent))
from test_exceptions_matrix import NP, RULES, assert_policy_equal, policy_reference  # noqa: E402

# SciPy's xGEMM / xGEMV: (version, kernel set) -> {routine: rules on which it deviates from the policy};
# a key absent here has no record.  Kernel names as threadpoolctl reports them (OPENBLAS_CORETYPE=Prescott
# runs "Katmai"; Zen runs Haswell's kernels, CooperLake and SapphireRapids SkylakeX's).
_ALPHA0 = frozenset({"alpha0_nan_ab", "alpha0_beta0_zeros"})
PRODUCT_RECORDS = {
    ("0.3.30", "Haswell"): {},
    ("0.3.30", "Sandybridge"): {},
    ("0.3.30", "Nehalem"): {},
    ("0.3.30", "Katmai"): {},
    ("0.3.30", "SkylakeX"): {"gemm": _ALPHA0},
}
# NumPy's matmul on the plain-product cases: (version, kernel set) on which it was seen to follow the policy
MATMUL_RECORDS = {(version, kernels) for version in ("0.3.30", "0.3.31")
                  for kernels in ("Haswell", "Sandybridge", "Nehalem", "Katmai", "SkylakeX")}
# (version, kernel set) on which the IxAMAX / xNRM2 observations below were recorded
VECTOR_RECORDS = {("0.3.30", kernels) for kernels in ("Haswell", "Sandybridge", "Nehalem", "Katmai", "SkylakeX")}


def openblas_running(package: str) -> tuple[str, str] | None:
    """(version, kernel set) of the OpenBLAS that ``package`` (``scipy`` or ``numpy``) calls, as
    threadpoolctl reads them from the loaded library; None where it calls no OpenBLAS.  The version keeps
    OpenBLAS's three numbers (the wheels' ``0.3.31.188.0`` is 0.3.31)."""
    import importlib

    from threadpoolctl import threadpool_info

    importlib.import_module("scipy.linalg.blas" if package == "scipy" else "numpy")
    libs = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
    own = [i for i in libs if f"{package}.libs" in i["filepath"] or f"/{package}/" in i["filepath"]]
    pick = own or (libs if len(libs) == 1 else [])
    if not pick:
        return None
    version = ".".join(str(pick[0].get("version") or "?").split(".")[:3])
    return version, str(pick[0].get("architecture"))


def _record_or_skip(package: str, records):
    running = openblas_running(package)
    if running not in records:
        pytest.skip(f"no record for {package}'s BLAS as it runs here: {running or 'not OpenBLAS'} "
                    f"(recorded: {sorted(records)})")
    return running


@pytest.fixture(scope="module")
def recorded():
    """The vector records apply: SciPy's OpenBLAS runs a (version, kernel set) they were observed on."""
    _record_or_skip("scipy", VECTOR_RECORDS)


SIZES = {"1": (1, 1, 1), "odd": (7, 9, 5), "large": (48, 64, 40)}


def _follows(out, want, dtype, rule) -> bool:
    try:
        assert_policy_equal(np.asarray(out), want, dtype, rule)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_openblas_gemm_gemv_as_recorded(dtype, size, rule):
    """OpenBLAS xGEMM / xGEMV on every product rule: each follows the policy except where the record of
    the version and kernels at hand says it deviates, and then it does deviate."""
    deviations = PRODUCT_RECORDS[_record_or_skip("scipy", PRODUCT_RECORDS)]
    m, n, k = SIZES[size]
    rng = np.random.default_rng(0)
    dt = NP[dtype]
    a, b, c = ((rng.random(s) * 2 - 1).astype(dt) for s in ((m, k), (k, n), (m, n)))
    alpha, beta, _ = RULES[rule](a, b, c, dtype)
    gemm = blas.sgemm if dtype == "float32" else blas.dgemm
    gemv = blas.sgemv if dtype == "float32" else blas.dgemv
    with np.errstate(all="ignore"):
        want = policy_reference(np.einsum("ik,kj->ij", a.astype(np.float64), b.astype(np.float64), optimize=False),
                                alpha, beta, c, dtype)
        got = gemm(alpha, a, b, beta=beta, c=np.asfortranarray(c))
        x, y = b[:, 0].copy(), c[:, 0].copy()
        want_v = policy_reference(np.einsum("ik,k->i", a.astype(np.float64), x.astype(np.float64), optimize=False),
                                  alpha, beta, y, dtype)
        got_v = gemv(alpha, a, x, beta=beta, y=y.copy())
    assert _follows(got, want, dtype, rule) == (rule not in deviations.get("gemm", ()))
    assert _follows(got_v, want_v, dtype, rule) == (rule not in deviations.get("gemv", ()))


def _plain_product(rule: str) -> bool:
    """The rule's case has alpha = 1 and beta = 0, the only case a plain product (``a @ b``) expresses."""
    x = np.ones((2, 2))
    return RULES[rule](x, x.copy(), x.copy(), "float64")[:2] == (1.0, 0.0)


@pytest.mark.parametrize("rule", [r for r in RULES if _plain_product(r)])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_numpy_matmul_as_recorded(dtype, size, rule):
    """NumPy's matmul (its own OpenBLAS) on the alpha = 1, beta = 0 cases: as recorded for its kernels."""
    _record_or_skip("numpy", MATMUL_RECORDS)
    m, n, k = SIZES[size]
    rng = np.random.default_rng(0)
    dt = NP[dtype]
    a, b, c = ((rng.random(s) * 2 - 1).astype(dt) for s in ((m, k), (k, n), (m, n)))
    alpha, beta, _ = RULES[rule](a, b, c, dtype)
    with np.errstate(all="ignore"):
        want = policy_reference(np.einsum("ik,kj->ij", a.astype(np.float64), b.astype(np.float64), optimize=False),
                                alpha, beta, c, dtype)
        assert _follows(a @ b, want, dtype, rule)


@pytest.mark.parametrize("rule", [r for r in RULES if r in ("beta0_nan_c", "nan_x0", "zero_times_inf",
                                                             "inf_minus_inf", "overflow")])
@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_scipy_csr_times_dense_follows_product_rules(dtype, rule):
    """SciPy's CSR @ dense (alpha = 1, beta = 0 only) on the SpMM cases: recorded as following the policy
    (stored zeros multiplied, structural zeros not operands), like our SpMM kernel."""
    import scipy.sparse as sp

    from test_exceptions_matrix import _sparse_reference

    rng = np.random.default_rng(3)
    mask = rng.random((7, 5)) < 0.5
    mask[0, 0] = True
    s = sp.csr_matrix((rng.random((7, 5)) * mask + mask).astype(NP[dtype]))
    b = (rng.random((5, 9)) * 2 - 1).astype(NP[dtype])
    c = np.zeros((7, 9), NP[dtype])
    alpha, beta, _ = RULES[rule](s.data, b, c, dtype)
    with np.errstate(all="ignore"):
        want = policy_reference(_sparse_reference("spmm", s, [b]), alpha, beta, c, dtype)
        got = np.asarray(s @ b)
    assert_policy_equal(got, want, dtype, rule)


INF, NAN = math.inf, math.nan


def _long(background: float) -> np.ndarray:
    x = np.full(1001, background)
    x[500], x[700] = INF, NAN
    return x


# name: (x, the policy's IxAMAX, OpenBLAS idamax, isamax as observed, NumPy argmax(abs))
IAMAX = {
    "empty": ([], -1, None, None, None),
    "one": ([-3.0], 0, 0, 0, 0),
    "odd_plain": ([0.5, -2, 1, 2, -0.25, 1.5, 0], 1, 1, 1, 1),
    "tie_first": ([1, -3, 3], 1, 1, 1, 1),
    "inf_max": ([1, -INF, 3], 1, 1, 1, 1),
    "first_nan": ([1, NAN, INF, NAN], 1, 0, 0, 1),
    "nan_beats_inf": ([INF, 2, NAN], 2, 0, 0, 2),
    "nan_first": ([NAN, 5, INF], 0, 0, 0, 0),
    "large_inf_nan": (_long(1.0), 700, 0, 500, 700),
}


@pytest.mark.parametrize("name", IAMAX)
@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_iamax(name, dtype):
    x, want, _, _, _ = IAMAX[name]
    assert iamax(np.asarray(x, dtype=NP[dtype])) == want
    assert iamax(np.asarray(x, dtype=NP[dtype]) + 0j) == want     # complex: |Re| + |Im|


@pytest.mark.parametrize("name", [n for n in IAMAX if n != "empty"])
@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_iamax_references_as_recorded(recorded, name, dtype):
    x, _, openblas_d, openblas_s, numpy_argmax = IAMAX[name]
    a = np.asarray(x, dtype=NP[dtype])
    fn = blas.isamax if dtype == "float32" else blas.idamax
    assert int(fn(a)) == (openblas_s if dtype == "float32" else openblas_d)
    assert int(np.argmax(np.abs(a))) == numpy_argmax


HUGE = {"float32": 1e30, "float64": 1e200}
TINY = {"float32": 1e-30, "float64": 1e-200}


def _nrm2_cases(dtype):
    h, t = HUGE[dtype], TINY[dtype]
    odd = np.array([3.0, -4.0, 12.0, 0.0, 0.0, 0.0, 84.0])                   # norm 85
    return {  # name: (x, the policy's NRM2, NumPy's np.linalg.norm as observed)
        "empty": ([], 0.0, 0.0),
        "one": ([-3.0], 3.0, 3.0),
        "odd": (odd, 85.0, 85.0),
        "large": (np.full(1001, 2.0), 2 * math.sqrt(1001), 2 * math.sqrt(1001)),
        "huge_no_overflow": ([h, h], math.sqrt(2) * h, INF),
        "tiny_no_underflow": ([t, t], math.sqrt(2) * t, 0.0),
        "inf": ([1, -INF], INF, INF),
        "nan_beats_inf": ([INF, NAN, 1], NAN, NAN),
        "nan_huge_large": (np.where(np.arange(1001) == 500, NAN, h), NAN, NAN),
    }


def _same(a, b, rel):
    if math.isnan(b) or math.isinf(b):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return abs(a - b) <= rel * abs(b)


@pytest.mark.parametrize("name", list(_nrm2_cases("float64")))
@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_nrm2(name, dtype):
    x, want, _ = _nrm2_cases(dtype)[name]
    assert _same(nrm2(np.asarray(x, dtype=NP[dtype])), want, 1e-6 if dtype == "float32" else 1e-14)


@pytest.mark.parametrize("name", [n for n in _nrm2_cases("float64") if n != "empty"])
@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_nrm2_references_as_recorded(recorded, name, dtype):
    """OpenBLAS xNRM2 follows the policy on every case; NumPy's norm as recorded (spurious over/underflow)."""
    x, want, numpy_norm = _nrm2_cases(dtype)[name]
    a = np.asarray(x, dtype=NP[dtype])
    fn = blas.snrm2 if dtype == "float32" else blas.dnrm2
    rel = 1e-6 if dtype == "float32" else 1e-14
    assert _same(float(fn(a)), want, rel)
    with np.errstate(all="ignore"):
        assert _same(float(np.linalg.norm(a)), numpy_norm, rel)
