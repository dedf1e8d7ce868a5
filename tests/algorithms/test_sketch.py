"""algorithms.sketch: seekable operators (blocks bit for bit), kernels against NumPy, embedding quality."""


import numpy as np
import pytest
import scipy.sparse as sp

from algorithms import sketch as S


M, D, N = 300, 40, 7
A = np.random.default_rng(0).standard_normal((M, N))
BLOCKS = [(3, 17, 5, 260), (0, 40, 1, 2), (39, 40, 0, 300), (0, 1, 299, 300), (11, 12, 7, 8), (5, 5, 0, 9)]


def _op(kind, d=D, m=M, seed=3):
    kw = {"probabilities": S.leverage_scores(A, exact=True)} if kind == "leverage" else {}
    return S.make(kind, d, m, seed=seed, **kw)


def _dense(b):
    return b.toarray() if sp.issparse(b) else b


@pytest.mark.parametrize("kind", S.KINDS)
def test_every_block_equals_the_whole_operator_bit_for_bit(kind):
    op = _op(kind)
    whole = op.dense()
    assert whole.shape == (D, M) and np.all(np.isfinite(whole))
    for r0, r1, c0, c1 in BLOCKS:
        assert np.array_equal(_dense(op.block(r0, r1, c0, c1)), whole[r0:r1, c0:c1]), (r0, r1, c0, c1)
    # a fresh operator with the same seed is the same; another seed differs
    assert np.array_equal(_op(kind).dense(), whole)
    assert not np.array_equal(_op(kind, seed=4).dense(), whole)


def test_stream_ranges_are_seekable():
    whole = S.raw_words(7, 1, 0, 103)
    for a, b in ((0, 1), (1, 6), (5, 103), (4, 8), (77, 78)):
        assert np.array_equal(S.raw_words(7, 1, a, b - a), whole[a:b])
    g = S.gaussian_numbers(7, 1, 0, 101)
    for a, b in ((1, 2), (3, 50), (0, 101), (100, 101)):
        assert np.array_equal(S.gaussian_numbers(7, 1, a, b - a), g[a:b])


@pytest.mark.parametrize("kind", S.KINDS)
def test_apply_runs_the_kernels_and_matches_numpy(kind):
    op = _op(kind)
    y = op.apply(A, chunk=128)                  # 300 rows: blocks of 128, the last one padded
    ref = op.dense() @ A
    assert y.shape == (D, N)
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-12 * max(1.0, np.abs(ref).max()))


@pytest.mark.parametrize("kind", ["gaussian", "sjlt", "countsketch"])
def test_sparse_a_is_sketched_like_its_dense_copy(kind):
    a = sp.random(M, N, density=0.1, format="csr", random_state=1)
    op = _op(kind)
    np.testing.assert_allclose(op.apply(a, chunk=128), op.dense() @ a.toarray(), atol=1e-12)


def test_row_blocks_of_a_sum_to_the_sketch_like_ranks_would():
    """Each 'rank' owns rows c0:c1 of A and generates only columns c0:c1 of S."""
    op = S.make("gaussian", D, M, seed=11)
    parts = [S.gemm(op.block(0, D, c0, c1), A[c0:c1]) for c0, c1 in ((0, 100), (100, 200), (200, 300))]
    np.testing.assert_allclose(sum(parts), op.dense() @ A, atol=1e-12)


@pytest.mark.parametrize("kind", ["gaussian", "rademacher", "sjlt", "countsketch", "srft", "srht", "leverage"])
def test_subspace_embedding(kind):
    """With d = 40 >> n = 3 the sketched orthonormal basis keeps its singular values near 1."""
    q = np.linalg.qr(A[:, :3])[0]
    op = _op(kind, d=120)
    s = np.linalg.svd(op.apply(q), compute_uv=False)
    assert 0.4 < s.min() <= s.max() < 1.6, s


def test_gaussian_entries_have_the_right_moments():
    z = S.gaussian_numbers(1, 1, 0, 200_000)
    assert abs(z.mean()) < 0.01 and abs(z.var() - 1) < 0.01 and abs(np.mean(z**4) - 3) < 0.05


def test_sjlt_has_k_distinct_rows_per_column():
    op = S.make("sjlt", 16, 50, k=4, seed=2)
    b = op.dense()
    assert np.all((b != 0).sum(axis=0) == 4)
    np.testing.assert_allclose(np.abs(b[b != 0]), 0.5)


def test_fwht_is_orthonormal_hadamard():
    from scipy.linalg import hadamard

    x = np.random.default_rng(3).standard_normal((16, 3))
    np.testing.assert_allclose(S.fwht(x), hadamard(16) @ x / 4, atol=1e-14)


def test_complex_matmul_through_the_real_kernel():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((9, 6)) + 1j * rng.standard_normal((9, 6))
    b = rng.standard_normal((6, 4)) + 1j * rng.standard_normal((6, 4))
    np.testing.assert_allclose(S.matmul(a, b), a @ b, atol=1e-13)


@pytest.mark.parametrize("kwargs, field", [
    ({"kind": "magic", "d": 4, "m": 10}, "sketch"), ({"kind": "gaussian", "d": 0, "m": 10}, "d"),
    ({"kind": "sjlt", "d": 4, "m": 10, "k": 5}, "k"), ({"kind": "srft", "d": 11, "m": 10}, "d"),
    ({"kind": "leverage", "d": 4, "m": 10}, "probabilities")])
def test_bad_operators_are_refused(kwargs, field):
    with pytest.raises(S.SketchError) as e:
        S.make(**kwargs)
    assert e.value.field == field


def test_nan_input_is_refused():
    a = A.copy()
    a[3, 2] = np.nan
    with pytest.raises(S.SketchError, match="NaN"):
        S.make("gaussian", D, M).apply(a)
