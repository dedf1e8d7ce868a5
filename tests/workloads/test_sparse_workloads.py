"""Sparse kernels over real patterns: generators, Matrix Market files, the short form."""

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import workloads
from workloads import WorkloadError, dump_short, fusedmm, load_one, sddmm, sparse_matrix, spmm
from workloads.sparse import erdos_renyi, flops, nnz, rmat


def test_erdos_renyi_rows_and_totals():
    s = erdos_renyi(50, 40, nnz_per_row=6, seed=3)
    assert s.shape == (50, 40) and set(s.getnnz(axis=1)) == {6}
    assert s.has_sorted_indices and s.indices.dtype == np.int32
    t = erdos_renyi(50, 40, nnz=123, seed=3)
    assert t.nnz == 123 and np.all(np.abs(t.data) <= 1)
    assert (erdos_renyi(50, 40, nnz=123, seed=3) != t).nnz == 0           # seeded
    assert (erdos_renyi(50, 40, nnz=123, seed=4) != t).nnz > 0


def test_rmat_is_skewed_and_exact():
    s = rmat(256, 256, 2000, seed=1)
    assert s.nnz == 2000 and s.shape == (256, 256)
    rows = np.sort(s.getnnz(axis=1))[::-1]
    assert rows[0] > 8 * np.median(rows)                                  # power law: a few heavy rows
    assert rows[:26].sum() > 0.3 * s.nnz
    with pytest.raises(WorkloadError, match="abc"):
        rmat(8, 8, 4, abc=[0.9, 0.2, 0.1])


def test_builders_carry_the_pattern_and_its_density():
    nest = spmm(m=64, n=32, r=8, nnz_per_row=4, seed=2)
    s = sparse_matrix(nest)
    assert nnz(nest) == s.nnz == 256
    assert nest.tensors[0].density == 256 / (64 * 32)
    assert [t.name for t in nest.tensors] == ["S", "B", "C"] and nest.dims == {"M": 64, "N": 32, "R": 8}
    assert flops(nest) == 2 * 256 * 8
    f = fusedmm(m=64, n=32, r=8, density=0.1)
    assert nnz(f) == round(0.1 * 64 * 32) and flops(f) == 4 * nnz(f) * 8
    assert {t.name for t in sddmm(m=8, n=8, r=2, nnz=5).tensors} == {"S", "A", "Bt", "O"}


def test_fusedmm_nest_is_the_two_stage_kernel():
    """The one-nest form sum_{N,R} S A Bt B equals (S o A B^T) B."""
    nest = fusedmm(m=6, n=5, r=3, nnz=9, seed=1)
    s = sparse_matrix(nest).toarray()
    rng = np.random.default_rng(0)
    a, b = rng.random((6, 3)), rng.random((5, 3))
    assert np.allclose(np.einsum("mn,mr,rn,nq->mq", s, a, b.T, b), (s * (a @ b.T)) @ b)


def test_short_form_round_trip(tmp_path):
    for nest in (spmm(m=30, n=20, r=4, nnz=50, generator="rmat", seed=5), sddmm(m=10, n=10, r=2, nnz_per_row=3)):
        path = tmp_path / f"{nest.name}.yaml"
        path.write_text(dump_short(nest))
        back = load_one(str(path))
        assert back.dims == nest.dims and back.op == nest.op
        assert (sparse_matrix(back) != sparse_matrix(nest)).nnz == 0


def test_matrix_market_file(tmp_path):
    dense = np.zeros((5, 7))
    dense[0, 1], dense[3, 6], dense[4, 0] = 1.5, -2.0, 3.0
    scipy.io.mmwrite(str(tmp_path / "a.mtx"), sp.coo_matrix(dense))
    (tmp_path / "k.yaml").write_text("kind: spmm\nmatrix: a.mtx\nr: 4\n")
    nest = load_one(str(tmp_path / "k.yaml"))
    assert nest.op["m"] == 5 and nest.op["n"] == 7 and nnz(nest) == 3
    assert np.array_equal(sparse_matrix(nest).toarray(), dense)
    with pytest.raises(WorkloadError, match="rows, not 6"):
        spmm(m=6, r=2, matrix=tmp_path / "a.mtx")
    (tmp_path / "bad.mtx").write_text("this is not a matrix\n")
    with pytest.raises(WorkloadError, match="bad.mtx.*matrix"):
        spmm(r=2, matrix=tmp_path / "bad.mtx")


def test_bad_input_is_one_line(tmp_path):
    with pytest.raises(WorkloadError, match="exactly one of density, nnz, nnz_per_row"):
        spmm(m=4, n=4, r=2)
    (tmp_path / "k.yaml").write_text("kind: sddmm\nm: 4\nn: 4\nr: 2\ndensity: 0.5\ncolour: red\n")
    with pytest.raises(WorkloadError, match="colour"):
        load_one(str(tmp_path / "k.yaml"))
    (tmp_path / "k.yaml").write_text("kind: fusedmm\nm: 4\nn: 4\nr: 2\ndensity: 1.5\n")
    with pytest.raises(WorkloadError, match="density"):
        load_one(str(tmp_path / "k.yaml"))
    assert workloads.spmm is spmm
