"""The parallel bound of sparse kernels from the nonzero count (Loomis-Whitney with caps)."""

import pytest

from lowerbounds.sparse import least_sum, nest_parallel_bound, sparse_parallel_bound
from workloads import WorkloadError, fusedmm


def test_least_sum_by_hand():
    assert least_sum(8, [100, 100, 100]) == pytest.approx(12)          # 4 + 4 + 4, 4^3 = 8^2
    assert least_sum(100, [1, 1e9, 1e9]) == pytest.approx(1 + 2 * 100)  # x capped at 1: y z >= 10^4
    assert least_sum(100, [1, 4, 1e9]) == pytest.approx(1 + 4 + 2500)


def test_dense_pattern_bound_and_below_every_algorithm():
    from targets.mpi.choose import candidates

    b = sparse_parallel_bound("spmm", 64, 64, 64, 64 * 64, 4)
    assert b.iterations == 65536 and b.footprint_words == pytest.approx(3 * 65536 ** (2 / 3))
    assert b.memory_independent_words == pytest.approx(3 * 65536 ** (2 / 3) - 3 * 4096 / 4)
    assert b.memory_independent_words > 0
    assert all(cd.words >= b.memory_independent_words for cd in candidates("spmm", 64, 64, 64, 4096, 4))


def test_sparse_nest_and_bad_kernel():
    nest = fusedmm(m=32, n=32, r=4, nnz_per_row=2)
    assert nest_parallel_bound(nest, 2).iterations == 64 * 4 / 2
    with pytest.raises(WorkloadError, match="kernel"):
        sparse_parallel_bound("conv", 1, 1, 1, 1, 1)
