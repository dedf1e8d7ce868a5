"""algorithms.pencil: the inverse-free divide-and-conquer pencil eigensolver against scipy.linalg.eig."""


import numpy as np
import pytest
import scipy.linalg as sl

from algorithms import pencil as P


def _check(a, b, res, eps, within=1.0):
    ea, eb = P.backward_errors(a, b, res)
    assert ea <= 10 * eps and eb <= 10 * eps, (ea, eb)
    match = P.eig_match(a, b, res.eigenvalues, eps)
    assert match["max_over_prediction"] <= within, match
    return match


@pytest.mark.parametrize("n, kind, eps", [(64, "random", 1e-8), (48, "planted", 1e-10), (40, "ill-conditioned", 1e-6),
                                          (40, "random", 1e-12)])
def test_diagonalizes_to_the_requested_backward_error(n, kind, eps):
    a, b, _ = P.test_pencil(n, kind, seed=1)
    res = P.diagonalize(a, b, eps=eps, seed=2, threshold=8)
    # first-order perturbation theory: |dlambda| <= kappa (1 + |lambda|) eps; at kappa ~ 1e10 (ill-conditioned)
    # and eps = 1e-6 second-order terms count too
    _check(a, b, res, eps, within=1.0 if kind != "ill-conditioned" else 10.0)
    st = res.stats
    assert st.qz_fallbacks == 0 and st.splits and all(0 < s < 1 for s in st.splits)
    assert st.max_deflation_residual < eps
    assert len(res.eigenvalues) == n and res.S.shape == res.T.shape == (n, n)


def test_planted_eigenvalues_are_found():
    a, b, lam = P.test_pencil(32, "planted", seed=4)
    res = P.diagonalize(a * 3.0, b * 3.0, eps=1e-10, seed=0, threshold=4)     # scale does not matter
    from scipy.optimize import linear_sum_assignment

    cost = np.abs(lam[:, None] - res.eigenvalues[None, :])
    r, c = linear_sum_assignment(cost)
    assert cost[r, c].max() < 1e-6
    assert res.scale > 1


def test_threshold_makes_qz_do_everything():
    a, b, _ = P.test_pencil(12, "random", seed=0)
    res = P.diagonalize(a, b, eps=1e-8, threshold=12)
    assert res.stats.qz_calls == 1 and res.stats.lines_checked == 0 and res.stats.splits == []
    _check(a, b, res, 1e-8)


def test_repeated_squaring_squares_the_pencil():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((6, 6)) / 3, np.eye(6) + rng.standard_normal((6, 6)) / 6
    ap, bp = P._irs(a.astype(complex), b.astype(complex), 3, "numpy", P.PencilStats())
    m = np.linalg.solve(b, a)
    np.testing.assert_allclose(np.linalg.solve(bp, ap), np.linalg.matrix_power(m, 8), atol=1e-10)


def test_grurv_leading_columns_span_the_projector_range():
    rng = np.random.default_rng(4)
    x = np.linalg.qr(rng.standard_normal((8, 8)))[0]
    proj = x[:, :3] @ np.linalg.inv(x)[:3]                      # oblique projector of rank 3
    s = rng.standard_normal((8, 8)) + 4 * np.eye(8)
    w, ratios = P._grurv(s.astype(complex), (s @ proj).astype(complex), rng)
    assert np.sum(ratios >= 1e-3) == 3
    u = w[:, :3]
    assert np.linalg.norm(proj @ u - u) < 1e-12                # range(u) inside range(proj)


def test_scheduled_kernels_give_the_numpy_answer():
    a, b, _ = P.test_pencil(20, "random", seed=5)
    ours = P.diagonalize(a, b, eps=1e-10, seed=1, threshold=6, kernels="cosa")
    ref = P.diagonalize(a, b, eps=1e-10, seed=1, threshold=6, kernels="numpy")
    _check(a, b, ours, 1e-10)
    assert ours.stats.splits == ref.stats.splits
    np.testing.assert_allclose(np.sort_complex(ours.eigenvalues), np.sort_complex(ref.eigenvalues), atol=1e-9)


def test_singular_pencil_is_refused():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((6, 6)), rng.standard_normal((6, 6))
    d = np.diag([1.0, 2, 3, 4, 5, 0])
    e = np.diag([1.0, 1, 1, 1, 1, 0])
    with pytest.raises(P.PencilError, match="singular"):
        P.diagonalize(x @ d @ y, x @ e @ y)


@pytest.mark.parametrize("a, b, kwargs, field", [
    (np.ones((3, 4)), np.ones((3, 4)), {}, "A"), (np.eye(3), np.eye(2), {}, "A"),
    (np.full((2, 2), np.nan), np.eye(2), {}, "A"), (np.eye(2), np.eye(2), {"eps": 2.0}, "eps"),
    (np.eye(2), np.eye(2), {"kernels": "blas"}, "kernels")])
def test_bad_input(a, b, kwargs, field):
    with pytest.raises(P.PencilError) as e:
        P.diagonalize(a, b, **kwargs)
    assert e.value.field == field


def test_eig_match_against_scipy_is_zero_for_scipys_own_answer():
    a, b, _ = P.test_pencil(10, "random", seed=2)
    w = sl.eigvals(a, b)
    assert P.eig_match(a, b, w, 1e-8)["max_abs_diff"] < 1e-12
