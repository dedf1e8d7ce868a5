"""algorithms.cp: tensors, MTTKRP (scheduled CPU kernel and sparse), the exact Khatri-Rao leverage
sampler checked as a sampler, CP-ALS against TensorLy, randomized ALS reaching the planted fit."""

import numpy as np
import pytest

from algorithms.cp.als import cp, fit_of, init_factors, svd_init
from algorithms.cp.mttkrp import krp, mttkrp_bound, mttkrp_dense, mttkrp_sparse
from algorithms.cp.sampler import KrpSampler, leverage_scores, product_leverage_draw
from algorithms.cp.tensors import (CpError, dense_from_factors, make_sparse, planted_sparse, powerlaw_sparse,
                                   read_tns, write_tns)


def _einsum_mttkrp(x, factors, n):
    letters = "abcdefgh"[:x.ndim]
    spec = letters + "," + ",".join(f"{c}z" for k, c in enumerate(letters) if k != n) + "->" + letters[n] + "z"
    return np.einsum(spec, x, *[u for k, u in enumerate(factors) if k != n])


def test_tns_round_trip_and_duplicates(tmp_path):
    t, _ = planted_sparse((5, 6, 7), 2, density=0.5, seed=3)
    p = tmp_path / "x.tns"
    write_tns(t, p)
    back = read_tns(p, shape=t.shape)
    assert back.shape == t.shape and np.array_equal(back.indices, t.indices)
    assert np.allclose(back.values, t.values)
    dup = make_sparse((2, 2), [[0, 1], [0, 1], [1, 0]], [1.0, 2.0, 5.0])
    assert dup.nnz == 2 and np.allclose(dup.to_dense(), [[0, 3], [5, 0]])


@pytest.mark.parametrize("text, reason", [("1 2 3 1.0\n1 2 x\n", "line 2"), ("1 2 3 1.0\n1 2 1.0\n", "line 2"),
                                          ("1 0 1 2.0\n", "one-based"), ("3 1.0\n", "at least 2 indices"),
                                          ("# nothing\n", "no nonzeros")])
def test_tns_bad_input_names_the_line(tmp_path, text, reason):
    p = tmp_path / "bad.tns"
    p.write_text(text)
    with pytest.raises(CpError, match=reason):
        read_tns(p)


def test_planted_is_exactly_low_rank_and_noise_sets_the_fit():
    t, f = planted_sparse((8, 9, 10), 3, density=0.4, seed=1)
    assert np.allclose(t.to_dense(), dense_from_factors(f))
    assert t.nnz < 8 * 9 * 10
    assert fit_of(t, np.ones(3), f) == pytest.approx(1.0, abs=1e-7)
    tn, fn = planted_sparse((8, 9, 10), 3, density=0.4, noise=0.1, seed=1)
    assert fit_of(tn, np.ones(3), fn) == pytest.approx(0.9, abs=5e-3)


def test_powerlaw_is_skewed():
    t = powerlaw_sparse((200, 200, 200), 4000, alpha=1.5, seed=0)
    per_slice = np.bincount(t.indices[:, 0], minlength=200)
    assert t.nnz > 1000 and per_slice.max() > 10 * t.nnz / 200


def test_order_one_and_bad_shapes_are_refused():
    with pytest.raises(CpError, match="order >= 2"):
        make_sparse((5,), [[1]], [1.0])
    with pytest.raises(CpError, match="outside the shape"):
        make_sparse((2, 2), [[0, 2]], [1.0])
    with pytest.raises(CpError, match="order >= 2"):
        cp(np.ones(4), 2)


def test_dense_mttkrp_kernel_matches_numpy_every_mode():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5, 4, 3))
    factors = [rng.standard_normal((s, 4)) for s in x.shape]
    for n in range(4):
        ref = _einsum_mttkrp(x, factors, n)
        assert np.allclose(mttkrp_dense(x, factors, n, "cpu"), ref, atol=1e-12)
        assert np.allclose(mttkrp_dense(x, factors, n, "numpy"), ref, atol=1e-12)


def test_sparse_mttkrp_matches_dense_and_bound_is_reported():
    t, _ = planted_sparse((9, 8, 7), 3, density=0.5, seed=2)
    rng = np.random.default_rng(1)
    factors = [rng.standard_normal((s, 5)) for s in t.shape]
    for n in range(3):
        assert np.allclose(mttkrp_sparse(t, factors, n), _einsum_mttkrp(t.to_dense(), factors, n), atol=1e-12)
    b = mttkrp_bound(64, 64, 64, 16, memory="32KiB")
    assert b["s_hbl"] == pytest.approx(5 / 3) and b["bound_words"] > 0


def _expected_tv(p, draws):
    """E[TV] of an empirical distribution of ``draws`` samples (normal approximation per cell)."""
    return 0.5 * np.sum(np.sqrt(2 * p * (1 - p) / (np.pi * draws)))


@pytest.mark.parametrize("shape, r", [((7, 9, 11), 3), ((40, 50), 4), ((6, 5, 4, 3), 5), ((30, 20, 12), 6)])
def test_krp_sampler_draws_the_exact_leverage_distribution(shape, r):
    rng = np.random.default_rng(11)
    factors = [rng.standard_normal((s, r)) for s in shape]
    factors[0][:2] *= 6.0  # a few high-leverage rows
    p = leverage_scores(factors)
    draws = 100_000
    idx, prob, rows = KrpSampler(factors).draw(draws, np.random.default_rng(5))
    lin = np.ravel_multi_index(tuple(idx.T), shape)
    assert np.allclose(prob, p[lin], rtol=1e-9, atol=1e-15)
    assert np.allclose(rows, krp(factors)[lin])
    tv = 0.5 * np.abs(np.bincount(lin, minlength=p.size) / draws - p).sum()
    assert tv < 1.2 * _expected_tv(p, draws)


def test_krp_sampler_is_biased_detectably_when_wrong():
    """The TV test has power: uniform draws of the same KRP fail it."""
    rng = np.random.default_rng(11)
    factors = [rng.standard_normal((s, 3)) for s in (7, 9, 11)]
    factors[0][:2] *= 6.0
    p = leverage_scores(factors)
    lin = rng.integers(0, p.size, 100_000)
    tv = 0.5 * np.abs(np.bincount(lin, minlength=p.size) / lin.size - p).sum()
    assert tv > 3 * _expected_tv(p, lin.size)


def test_product_leverage_draw_probabilities():
    rng = np.random.default_rng(2)
    factors = [rng.standard_normal((s, 3)) for s in (10, 12)]
    idx, prob, rows = product_leverage_draw(factors, 50_000, np.random.default_rng(0))
    p0 = leverage_scores([factors[0]])
    p1 = leverage_scores([factors[1]])
    assert np.allclose(prob, p0[idx[:, 0]] * p1[idx[:, 1]])
    emp = np.bincount(idx[:, 0], minlength=10) / idx.shape[0]
    assert 0.5 * np.abs(emp - p0).sum() < 1.5 * _expected_tv(p0, idx.shape[0])
    assert np.allclose(rows, factors[0][idx[:, 0]] * factors[1][idx[:, 1]])


def test_cp_als_matches_tensorly_parafac():
    tl = pytest.importorskip("tensorly")
    from tensorly.cp_tensor import CPTensor
    from tensorly.decomposition import parafac

    t, _ = planted_sparse((12, 10, 8), 4, density=0.6, noise=0.05, seed=4)
    x = t.to_dense()
    init = svd_init(x, 4)  # TensorLy's default init, given to both
    ours = cp(x, 4, iters=25, init=[u.copy() for u in init], backend="cpu")
    _, errs = parafac(tl.tensor(x), 4, n_iter_max=25, init=CPTensor((np.ones(4), [u.copy() for u in init])),
                      tol=0, return_errors=True)
    assert ours.fit == pytest.approx(1 - errs[-1], abs=1e-3)
    assert ours.fit == pytest.approx(1 - 0.05, abs=5e-3)
    assert np.allclose(ours.fit_per_iter[-1], 1 - errs[-1], atol=1e-6)


@pytest.mark.parametrize("method, samples", [("als", None), ("arls-lev", 300), ("sts-cp", 300)])
def test_sparse_cp_reaches_the_planted_fit(method, samples):
    t, _ = planted_sparse((40, 50, 30), 5, density=0.3, noise=0.05, seed=1)
    als = cp(t, 5, iters=15, seed=0)
    assert als.fit > 0.95 - 2e-3
    r = cp(t, 5, method=method, iters=15, samples=samples, seed=0)
    assert r.fit > 0.99 * als.fit
    assert len(r.fit_per_iter) == 15 and len(r.seconds_per_iter) == 15
    dense = cp(t.to_dense(), 5, method=method, iters=15, samples=samples, seed=0, backend="numpy")
    assert dense.fit > 0.99 * als.fit


def test_random_init_matches_tensorly_too():
    tl = pytest.importorskip("tensorly")
    from tensorly.cp_tensor import CPTensor
    from tensorly.decomposition import parafac

    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 6, 5))
    init = init_factors(x.shape, 3, seed=1)
    ours = cp(x, 3, iters=10, init=[u.copy() for u in init], backend="numpy")
    _, errs = parafac(tl.tensor(x), 3, n_iter_max=10, init=CPTensor((np.ones(3), [u.copy() for u in init])),
                      tol=0, return_errors=True)
    assert np.allclose(ours.fit_per_iter, 1 - np.array(errs), atol=1e-8)


def test_cp_refuses_bad_parameters():
    t, _ = planted_sparse((6, 5, 4), 2, seed=0)
    with pytest.raises(CpError, match="rank"):
        cp(t, 0)
    with pytest.raises(CpError, match="samples must be >= rank"):
        cp(t, 4, method="sts-cp", samples=3)
    with pytest.raises(CpError, match="unknown method"):
        cp(t, 2, method="hals")
