"""algorithms.randnla against SciPy/NumPy: least squares on planted problems, low-rank factorizations."""


import numpy as np
import pytest
import scipy.linalg as sl
import scipy.sparse as sp

from algorithms import randnla as R
from algorithms.sketch import SketchError


M, N = 2000, 40


def _err(x, xs):
    return np.linalg.norm(x - xs) / np.linalg.norm(xs)


def test_planted_problem_is_what_it_says():
    a, b, xs = R.synthetic_lstsq(500, 20, 1e6, residual=1e-3, seed=2)
    s = np.linalg.svd(a, compute_uv=False)
    assert abs(s[0] - 1) < 1e-12 and abs(s[0] / s[-1] / 1e6 - 1) < 1e-6
    r = b - a @ xs
    assert np.linalg.norm(a.T @ r) < 1e-13 * np.linalg.norm(r) * 50
    np.testing.assert_allclose(np.linalg.norm(r), 1e-3 * np.linalg.norm(xs), rtol=1e-10)


@pytest.mark.parametrize("cond", [1e2, 1e6, 1e10])
@pytest.mark.parametrize("sketch", ["sjlt", "gaussian", "srft", "countsketch"])
def test_sketch_and_precondition_is_backward_stable(sketch, cond):
    a, b, xs = R.synthetic_lstsq(M, N, cond, residual=1e-4, seed=1)
    out = R.sketch_and_precondition(a, b, sketch=sketch, seed=3)
    ref = sl.lstsq(a, b)[0]
    assert R.backward_error(a, b, out.x, norm_a=1.0) <= 1e-12
    assert _err(out.x, xs) <= 10 * max(_err(ref, xs), 1e-15)
    assert 0 < out.iterations < 200 and out.d == 4 * N


def test_sketch_and_precondition_on_sparse_a():
    a, b, xs = R.synthetic_lstsq(M, N, 1e4, residual=1e-4, seed=4, density=0.05)
    assert sp.issparse(a)
    out = R.sketch_and_precondition(a, b, sketch="sjlt", seed=1)
    ref = sl.lstsq(a.toarray(), b)[0]
    assert R.backward_error(a, b, out.x) <= 1e-12
    assert _err(out.x, xs) <= 10 * max(_err(ref, xs), 1e-15)


def test_sketch_and_solve_is_near_optimal_not_exact():
    a, b, xs = R.synthetic_lstsq(M, N, 1e2, residual=1e-1, seed=5)
    out = R.sketch_and_solve(a, b, sketch="gaussian", d=8 * N, seed=2)
    best = np.linalg.norm(b - a @ xs)
    got = np.linalg.norm(b - a @ out.x)
    assert best < got <= (1 + 2 * np.sqrt(N / (8 * N))) * best     # (1 + eps) residual, eps ~ sqrt(n/d)
    assert out.iterations == 0


@pytest.mark.parametrize("kwargs, field", [({"d": N - 1}, "d"), ({"sketch": "nope"}, "sketch"),
                                           ({"d": M + 1}, "d")])
def test_bad_least_squares_input(kwargs, field):
    a, b, _ = R.synthetic_lstsq(M, N, 10, seed=0)
    with pytest.raises(SketchError) as e:
        R.sketch_and_precondition(a, b, **kwargs)
    assert e.value.field == field


def test_nan_in_b_is_refused():
    a, b, _ = R.synthetic_lstsq(200, 5, 10, seed=0)
    b[7] = np.inf
    with pytest.raises(SketchError, match="NaN or Inf"):
        R.sketch_and_solve(a, b)


def test_rsvd_is_within_twice_the_optimal_error():
    a, sigma = R.decaying_matrix(300, decay=0.9, seed=1)
    k = 20
    u, s, vt = R.rsvd(a, k, power=2, seed=0)
    err = np.linalg.norm(a - (u * s) @ vt, 2)
    assert err <= 2 * sigma[k]
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False)[:k], rtol=1e-4)
    np.testing.assert_allclose(u.T @ u, np.eye(k), atol=1e-12)


def test_power_iterations_help():
    a, sigma = R.decaying_matrix(300, decay=0.97, seed=2)
    errs = []
    for q in (0, 2):
        qm = R.range_finder(a, 15, oversample=5, power=q, seed=0)
        errs.append(np.linalg.norm(a - qm @ (qm.T @ a), 2))
    assert errs[1] < errs[0] and errs[1] <= 2 * sigma[15]


def test_qb_of_sparse_a():
    a = sp.random(200, 120, density=0.05, format="csr", random_state=3)
    q, bm = R.qb(a, 30, oversample=10, power=1, seed=0)
    np.testing.assert_allclose(bm, q.T @ a.toarray(), atol=1e-12)
    s = np.linalg.svd(a.toarray(), compute_uv=False)
    assert np.linalg.norm(a.toarray() - q @ bm, 2) <= 3 * s[30]


def _assert_qr(a, q, r):
    n = a.shape[1]
    assert np.linalg.norm(q.T @ q - np.eye(n)) < 1e-13
    assert np.linalg.norm(a - q @ r) <= 1e-14 * n           # ||A||_2 = 1
    assert np.allclose(np.tril(r, -1), 0)


@pytest.mark.parametrize("sketch", ["sjlt", "gaussian"])
@pytest.mark.parametrize("cond", [1e12, 1e15])
def test_randomized_cholesky_qr_is_orthonormal_across_seeds(cond, sketch):
    """Seeds 0-19 at condition 1e12 and 1e15: Q orthonormal to ~u, A = QR to ~u ||A||."""
    for seed in range(20):
        a, _, _ = R.synthetic_lstsq(1000, 30, cond, seed=seed)
        q, r = R.randomized_cholesky_qr(a, sketch=sketch, seed=seed)
        _assert_qr(a, q, r)


def test_cholesky_pass_shifts_where_the_gram_matrix_is_indefinite():
    """Without the sketch's preconditioner, a cond-1e10 A has a Gram matrix of condition ~1e20 that
    Cholesky refuses: the pass shifts it, and two further passes make Q orthonormal (shifted
    CholeskyQR3)."""
    a, _, _ = R.synthetic_lstsq(600, 20, 1e10, seed=4)
    with pytest.raises(np.linalg.LinAlgError):
        sl.cholesky(a.T @ a)
    q, c1, shifted = R._cholesky_pass(a)
    assert shifted
    q, c2, _ = R._cholesky_pass(q)
    q, c3, _ = R._cholesky_pass(q)
    _assert_qr(a, q, c3 @ c2 @ c1)


def test_randomized_cholesky_qr_refuses_a_singular_a_with_its_condition():
    """A column repeated: rank deficient at working precision, refused with the sketch's condition.  (A of
    condition 1e18 but full rank in floating point still gets an orthonormal Q with A = QR to ~u.)"""
    a, _, _ = R.synthetic_lstsq(500, 20, 1e3, seed=0)
    a[:, 7] = a[:, 3]
    with pytest.raises(SketchError, match=r"condition ~\d"):
        R.randomized_cholesky_qr(a, seed=0)


