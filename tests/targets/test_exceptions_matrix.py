"""The NaN/Inf policy (``targets.exceptions``) case by case: every rule x every kernel family we emit x
fp32/fp64 x sizes (1, odd, larger; size 0 through ``empty_product``), in ``check`` mode (output and
status).  CPU kernels are built and run; OpenCL kernels run on PoCL; CUDA twins are compiled with nvcc.

Expected outputs come from ``policy_reference``: the nest in float64 by NumPy's own loops (no BLAS),
then the alpha/beta rules.  OpenBLAS's behaviour on the GEMM/GEMV cases is in
``test_exceptions_reference.py``.
"""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest
import scipy.sparse as sp

import costmodel
import workloads as W
from cosa.baselines.mapspace import random_mapping
from targets.cpu import compile_kernel
from targets.cpu.reference import reference
from targets.cpu.sparse import compile_sparse
from targets.exceptions import empty_product

CPU = costmodel.preset("cpu")
GPU = costmodel.preset("gpu", sms=8, lanes_per_sm=32, shared_kib=8, register_words=32)
DTYPES = ("float32", "float64")
NP = {"float32": np.float32, "float64": np.float64}
HUGE = {"float32": 1e30, "float64": 1e200}          # squares overflow


def _nest(family: str, size: str, dtype: str):
    bits = 32 if dtype == "float32" else 64
    name = f"{family}_{size}_{dtype}"
    if family in ("gemm", "gemm_scalar", "spmm", "sddmm"):
        m, n, k = {"1": (1, 1, 1), "2": (2, 3, 2), "odd": (7, 9, 5), "large": (48, 64, 40)}[size]
        if family in ("gemm", "gemm_scalar"):
            return W.matmul(name, M=m, N=n, K=k, bits=bits)
        if family == "spmm":
            return W.spmm(name, m=m, n=k, r=n, density=0.5, bits=bits)
        return W.sddmm(name, m=m, n=n, r=k, density=0.5, bits=bits)
    if family == "gemv":
        return W.einsum("ij,j->i", {"i": 9, "j": 7}, name=name, bits=bits)
    if family == "conv":
        return W.conv2d(name, C=3, K=4, H=7, W=7, R=3, S=3, padding=1, bits=bits)
    if family == "bmm":
        return W.matmul(name, M=5, N=7, K=3, batch=2, bits=bits)
    if family == "depthwise":
        return W.depthwise_conv2d(name, C=4, H=7, W=7, R=3, S=3, padding=1, stride=2, bits=bits)
    if family == "mttkrp":       # three inputs: the rules set the first two
        return W.einsum("ikl,kj,lj->ij", {"i": 7, "j": 5, "k": 3, "l": 4}, name=name, bits=bits)
    raise AssertionError(family)


# --- the rules --------------------------------------------------------------------------------------
# each: (alpha, beta, how the operands X0 (first input), X1 (second input) and C are set, expected status
# as (sign, which argument): sign -1 input, +1 created, 0 all finite)

def _r_beta0_nan_c(x0, x1, c, dt):
    c[...] = np.nan
    return 1.0, 0.0, (0, None)


def _r_alpha0_nan_ab(x0, x1, c, dt):
    x0.reshape(-1)[0] = np.nan
    x1.reshape(-1)[-1] = np.inf
    return 0.0, 1.0, (0, None)


def _r_alpha0_beta0_zeros(x0, x1, c, dt):
    x0.reshape(-1)[0] = np.nan
    c[...] = np.nan
    return 0.0, 0.0, (0, None)


def _r_nan_x0(x0, x1, c, dt):
    x0.reshape(-1)[0] = np.nan
    return 1.0, 0.0, (-1, "x0")


def _r_zero_times_inf(x0, x1, c, dt):
    x0[...] = 0
    x1.reshape(-1)[0] = np.inf
    return 1.0, 0.0, (-1, "x1")


def _r_inf_minus_inf(x0, x1, c, dt):
    x0.reshape(-1)[0] = np.inf
    x0.reshape(-1)[-1] = -np.inf
    x1[...] = np.abs(x1) + 0.5
    return 1.0, 0.0, (-1, "x0")


def _r_overflow(x0, x1, c, dt):
    x0[...] = HUGE[dt]
    x1[...] = HUGE[dt]
    return 1.0, 0.0, (1, "out")


def _r_nan_c_beta1(x0, x1, c, dt):
    c.reshape(-1)[0] = np.nan
    return 1.0, 1.0, (-1, "out")


def _r_alpha_beta_scale(x0, x1, c, dt):
    return -2.0, 0.5, (0, None)


def _r_nan_alpha(x0, x1, c, dt):
    return float("nan"), 0.0, (1, "out")


RULES = {f.__name__[3:]: f for f in (_r_beta0_nan_c, _r_alpha0_nan_ab, _r_alpha0_beta0_zeros, _r_nan_x0,
                                      _r_zero_times_inf, _r_inf_minus_inf, _r_overflow, _r_nan_c_beta1,
                                      _r_alpha_beta_scale, _r_nan_alpha)}


def policy_reference(product64, alpha, beta, c, dtype):
    """alpha * product + beta * C under the policy, rounded to ``dtype`` (the product in float64, no BLAS)."""
    dt = NP[dtype]
    if alpha == 0:
        return np.zeros_like(c) if beta == 0 else (dt(beta) * c).astype(dt)
    with np.errstate(all="ignore"):
        prod = product64.astype(dt)
        out = dt(alpha) * prod if alpha != 1 else prod
        return out if beta == 0 else out * 1 + dt(beta) * c


def assert_policy_equal(out, want, dtype, rule=""):
    """Same NaN positions, same signed Infs, finite values within rounding; exact zeros stay +0.  Overflow
    created inside a sum depends on the summation order (a tiled sum may meet +Inf and -Inf where the
    reference's sum overflowed once), so there only the non-finite positions must agree."""
    assert out.shape == want.shape
    if rule == "overflow":
        np.testing.assert_array_equal(np.isfinite(out), np.isfinite(want))
        return
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(out), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(out), np.isneginf(want))
    fin = np.isfinite(want)
    scale = max(1.0, float(np.max(np.abs(want[fin]))) if fin.any() else 1.0)
    tol = 1e-4 if dtype == "float32" else 1e-11
    assert float(np.max(np.abs(out[fin].astype(np.float64) - want[fin]), initial=0.0)) <= tol * scale
    zeros = want == 0
    if np.all(zeros):
        assert not np.any(np.signbit(out)), "alpha = beta = 0 must write +0"


def _check_status(status, expect, positions):
    sign, which = expect
    if sign == 0:
        assert status.code == 0, status
        return
    assert status.code == sign * positions[which], status
    assert status.where == ("input" if sign < 0 else "created")


# --- CPU dense ---------------------------------------------------------------------------------------

DENSE = [(f, s, d) for f, sizes in (("gemm", ("1", "odd", "large")), ("gemm_scalar", ("odd",)), ("gemv", ("odd",)),
                                    ("conv", ("odd",)), ("bmm", ("odd",)), ("depthwise", ("odd",)),
                                    ("mttkrp", ("odd",))) for s in sizes for d in DTYPES]


@pytest.fixture(scope="module")
def cpu_kernels():
    cache = {}

    def get(family, size, dtype):
        key = (family, size, dtype)
        if key not in cache:
            w = _nest(family, size, dtype)
            m = random_mapping(w, CPU, random.Random(zlib.crc32(w.name.encode())))
            cache[key] = (w, compile_kernel(w, m, CPU, scalar=family == "gemm_scalar"))
        return cache[key]

    return get


def _dense_case(w, shapes, dtype, rule, seed=0):
    rng = np.random.default_rng(seed)
    x0n, x1n = (t.name for t in w.inputs[:2])
    arrays = {t.name: (rng.random(shapes[t.name]) * 2 - 1).astype(NP[dtype]) for t in w.inputs}
    c = (rng.random(shapes[w.output.name]) * 2 - 1).astype(NP[dtype])
    alpha, beta, expect = RULES[rule](arrays[x0n], arrays[x1n], c, dtype)
    return arrays, c, alpha, beta, expect


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("family,size,dtype", DENSE, ids=["-".join(c) for c in DENSE])
def test_cpu_dense(cpu_kernels, family, size, dtype, rule):
    w, k = cpu_kernels(family, size, dtype)
    arrays, c, alpha, beta, expect = _dense_case(w, k.plan.shapes, dtype, rule)
    with np.errstate(all="ignore"):
        prod = reference(w, arrays, k.plan.shapes, dtype, blas=False)
    want = policy_reference(prod, alpha, beta, c, dtype)
    out, status = k(arrays, c.copy(), threads=2, alpha=alpha, beta=beta, exceptions="check")
    assert_policy_equal(out, want, dtype, rule)
    pos = {t.name: i + 1 for i, t in enumerate(w.tensors)}
    _check_status(status, expect, {"x0": pos[w.inputs[0].name], "x1": pos[w.inputs[1].name],
                                   "out": pos[w.output.name]})
    if rule == "nan_x0":  # ieee mode: same output, no scan
        again = k(arrays, np.empty_like(c), threads=2, alpha=alpha, beta=beta)
        np.testing.assert_array_equal(np.isnan(again), np.isnan(out))


# --- CPU sparse --------------------------------------------------------------------------------------

SPARSE = [(f, s, d) for f in ("spmm", "sddmm") for s in ("2", "odd") for d in DTYPES]  # 1 x 1 is dense


@pytest.fixture(scope="module")
def sparse_kernels():
    cache = {}

    def get(family, size, dtype):
        key = (family, size, dtype)
        if key not in cache:
            w = _nest(family, size, dtype)
            m = random_mapping(w, CPU, random.Random(zlib.crc32(w.name.encode())))
            cache[key] = (w, compile_sparse(w, m, CPU))
        return cache[key]

    return get


def _sparse_reference(family, s, dense):
    """The product in float64 over the stored entries only (structural zeros are not operands)."""
    rows = np.repeat(np.arange(s.shape[0]), np.diff(s.indptr))
    vals = s.data.astype(np.float64)
    if family == "spmm":
        b = dense[0].astype(np.float64)
        out = np.zeros((s.shape[0], b.shape[1]))
        np.add.at(out, rows, vals[:, None] * b[s.indices])
        return out
    a, b = (d.astype(np.float64) for d in dense)
    return vals * np.einsum("qk,kq->q", a[rows], b[:, s.indices], optimize=False)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("family,size,dtype", SPARSE, ids=["-".join(c) for c in SPARSE])
def test_cpu_sparse(sparse_kernels, family, size, dtype, rule):
    w, call = sparse_kernels(family, size, dtype)
    dims = w.dims
    st = next(t for t in w.inputs if t.density < 1)
    rows, cols = (dims[e.dims[0]] for e in st.indices)
    rng = np.random.default_rng(1)
    dense_mask = rng.random((rows, cols)) < 0.5
    dense_mask.reshape(-1)[0] = True                       # at least one stored entry
    s = sp.csr_matrix((rng.random((rows, cols)) * dense_mask + dense_mask).astype(NP[dtype]))
    s.indices, s.indptr = s.indices.astype(np.int32), s.indptr.astype(np.int32)
    s.sort_indices()
    others = [t for t in w.inputs if t is not st]
    dense = [(rng.random(tuple(dims[e.dims[0]] for e in t.indices)) * 2 - 1).astype(NP[dtype]) for t in others]
    out_shape = (rows, dims[w.output.indices[1].dims[0]]) if family == "spmm" else (s.nnz,)
    c = (rng.random(out_shape) * 2 - 1).astype(NP[dtype])
    alpha, beta, expect = RULES[rule](s.data, dense[0], c, dtype)
    with np.errstate(all="ignore"):
        prod = _sparse_reference(family, s, dense)
    want = policy_reference(prod, alpha, beta, c, dtype)
    out, status = call(s, dense, c.copy(), alpha=alpha, beta=beta, exceptions="check", threads=2)
    assert_policy_equal(out, want, dtype, rule)
    _check_status(status, expect, {"x0": 3, "x1": 4, "out": 4 + len(dense)})


# --- size 0 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0, 4, 3), (4, 0, 3), (4, 3, 0)], ids=["M0", "N0", "K0"])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (2.0, 1.0), (0.0, 0.0), (1.0, 3.0)])
def test_size_zero(shape, dtype, alpha, beta):
    """An empty dim: no kernel runs and no operand is read; K = 0 gives C := beta * C (beta = 0: zeros, C
    not read)."""
    m, n, k = shape
    c = np.full((m, n), 2.0, NP[dtype])
    c_nan = np.full((m, n), np.nan, NP[dtype])
    want = policy_reference(np.zeros((m, n)), alpha, beta, c, dtype)
    out, status = empty_product(alpha, beta, c.copy() if beta else c_nan, exceptions="check")
    assert_policy_equal(out, want, dtype)
    assert status.code == 0
    c[...] = np.nan
    if beta != 0 and c.size:
        out, status = empty_product(alpha, beta, c, exceptions="check")
        assert np.isnan(out).all() and status.code == -3 and status.where == "input"


# --- OpenCL on PoCL, CUDA compiled ---------------------------------------------------------------------

GPU_CASES = [("gemm", "1", "float32"), ("gemm", "odd", "float32"), ("gemm", "odd", "float64"),
             ("gemm", "large", "float32"), ("conv", "odd", "float32"), ("mttkrp", "odd", "float32")]


def _gpu_mapping(w):
    return random_mapping(w, GPU, random.Random(zlib.crc32(w.name.encode())))


@pytest.fixture(scope="module")
def opencl():
    from targets.gpu.opencl import available

    reason = available()
    if reason:  # .ci/run installs PoCL: a missing OpenCL platform fails, it does not skip
        pytest.fail(f"OpenCL is not available: {reason}")


def _gpu_case(language, family, size, dtype, rule, **options):
    """Run one case of the matrix through ``language``'s kernel and check output and status against the policy."""
    from targets.gpu import call
    from targets.gpu.layout import array_shape

    w = _nest(family, size, dtype)
    shapes = {t.name: array_shape(t, w.dims) for t in w.tensors}
    arrays, c, alpha, beta, expect = _dense_case(w, shapes, dtype, rule)
    with np.errstate(all="ignore"):
        want = policy_reference(reference(w, arrays, shapes, dtype, blas=False), alpha, beta, c, dtype)
    out, status = call(w, GPU, _gpu_mapping(w), arrays, language, alpha=alpha, beta=beta, c=c, exceptions="check",
                       **options)
    assert_policy_equal(out, want, dtype, rule)
    pos = {t.name: i + 1 for i, t in enumerate(w.tensors)}
    _check_status(status, expect, {"x0": pos[w.inputs[0].name], "x1": pos[w.inputs[1].name],
                                   "out": pos[w.output.name]})


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("family,size,dtype", GPU_CASES, ids=["-".join(c) for c in GPU_CASES])
def test_opencl(opencl, family, size, dtype, rule):
    _gpu_case("opencl", family, size, dtype, rule, optimize=False)


@pytest.mark.parametrize("family,size,dtype", GPU_CASES, ids=["-".join(c) for c in GPU_CASES])
def test_cuda_compiles_with_epilogue(family, size, dtype):
    from targets.gpu import emit
    from targets.gpu.cuda import compile_cuda

    w = _nest(family, size, dtype)
    desc, source = emit(w, GPU, _gpu_mapping(w), "cuda")
    assert f"{desc.name}_ab(" in source and "fast" not in source
    ptx = compile_cuda(source, "ptx").read_text()
    assert f"{desc.name}_ab" in ptx


@pytest.fixture(scope="module")
def cuda_device():
    from targets.gpu.cuda import available

    reason = available()
    if reason:  # no GPU here: the kernels above are still compiled with nvcc
        pytest.skip(reason)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("family,size,dtype", GPU_CASES, ids=["-".join(c) for c in GPU_CASES])
def test_cuda_runs_where_a_gpu_exists(cuda_device, family, size, dtype, rule):
    _gpu_case("cuda", family, size, dtype, rule)


# --- integers and compiler flags -------------------------------------------------------------------------

def test_int_kernels_take_alpha_beta_and_have_nothing_to_report(cpu_kernels):
    from workloads.dtypes import apply_dtype

    roles = {"input": "int8", "weight": "int8", "output": "int32"}
    w = apply_dtype(W.matmul("gemm_i8", M=6, N=10, K=7, bits={"input": 8, "weight": 8, "output": 32}), roles, True,
                    "test", "dtype")
    k = compile_kernel(w, random_mapping(w, CPU, random.Random(5)), CPU)
    rng = np.random.default_rng(0)
    arrays = {"A": rng.integers(-8, 8, (6, 7)).astype(np.int8), "B": rng.integers(-8, 8, (7, 10)).astype(np.int8)}
    c = rng.integers(-100, 100, (6, 10)).astype(np.int32)
    out, status = k(arrays, c.copy(), threads=2, alpha=3, beta=-2, exceptions="check")
    want = 3 * (arrays["A"].astype(np.int64) @ arrays["B"].astype(np.int64)) - 2 * c
    np.testing.assert_array_equal(out, want)
    assert status.code == 0


def test_no_flag_lets_a_compiler_assume_finite_math():
    from targets import TargetError
    from targets.cpu import build

    assert not set(build.FLAGS) & set(build.UNSAFE_FLAGS)
    with pytest.raises(TargetError, match="NaN"):
        build.build("void f(void) {}\n", ("-ffast-math",))
    import inspect

    from targets.gpu import cuda, opencl

    for module in (cuda, opencl):
        text = inspect.getsource(module)
        assert "fast-math" not in text and "fast_math" not in text and "finite-math" not in text


@pytest.mark.parametrize("family", ["gemm", "spmm"])
def test_verified_runs_report_their_status(family):
    from targets.cpu import run

    w = _nest(family, "odd", "float64")
    m = random_mapping(w, CPU, random.Random(2))
    checked = run(w, m, CPU, threads=2, repeat=1, exceptions="check").to_dict()
    assert checked["verified"] and checked["exception_status"]["code"] == 0
    assert checked["exception_status"]["mode"] == "check"
    plain = run(w, m, CPU, threads=2, repeat=1).to_dict()
    assert plain["exception_status"]["code"] is None and plain["exception_status"]["mode"] == "ieee"
