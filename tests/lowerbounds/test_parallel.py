"""Matmul's tight constants and the parallel bounds of general nests."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowerbounds import bound, matmul_bound, parallel_bound
from lowerbounds.matmul import memory_independent_footprint
from workloads import WorkloadError, conv2d, matmul


def test_sequential_cosma_form():
    b = matmul_bound(1024, 512, 256, memory_words=4096)
    assert b.sequential_words == pytest.approx(2 * 1024 * 512 * 256 / 64 + 1024 * 512)
    assert b.leading_words == pytest.approx(1024 * 512 * 256 / 64)
    # outside the square-tile regime (k < sqrt(S)) the closed form is not claimed
    assert matmul_bound(1024, 1024, 1, memory_words=100).sequential_words is None


def test_parallel_memory_dependent_form():
    m = n = k = 4096
    p, s = 64, 2 ** 20
    b = matmul_bound(m, n, k, memory_words=s, processors=p)
    assert b.parallel_memory_dependent_words == pytest.approx(
        min(2 * m * n * k / (p * math.sqrt(s)) + s, 3 * (m * n * k / p) ** (2 / 3)))
    # memory below a 1/P share of the data: the form does not apply
    assert matmul_bound(m, n, k, memory_words=1024, processors=p).parallel_memory_dependent_words is None


@pytest.mark.parametrize("m,n,k,p,regime", [(2 ** 16, 256, 64, 16, 1), (2 ** 16, 256, 64, 512, 2),
                                            (2 ** 16, 256, 64, 2 ** 14, 3), (64, 2 ** 16, 256, 512, 2)])
def test_memory_independent_regimes(m, n, k, p, regime):
    b = matmul_bound(m, n, k, processors=p)
    assert b.regime == regime
    assert b.parallel_memory_independent_words == pytest.approx(b.footprint_words - (m * n + m * k + n * k) / p)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(0, 14), st.integers(0, 14), st.integers(0, 14))
def test_footprint_is_continuous_across_regimes(a, b, c):
    m, n, k = sorted((2 ** a, 2 ** b, 2 ** c), reverse=True)
    for p in (m / n, m * n / k ** 2):
        if p < 1:
            continue
        lo, _ = memory_independent_footprint(m, n, k, p * (1 - 1e-12))
        hi, _ = memory_independent_footprint(m, n, k, p * (1 + 1e-12))
        assert lo == pytest.approx(hi, rel=1e-6)


@pytest.mark.parametrize("m,n,k,p", [(4096, 4096, 4096, 64), (4096, 4096, 4096, 4096), (2 ** 16, 256, 64, 16),
                                     (2 ** 16, 256, 64, 512), (2 ** 16, 256, 64, 2 ** 14), (4096, 1024, 256, 8)])
def test_general_parallel_bound_reproduces_al_daas(m, n, k, p):
    """The HBL certificate for a general nest, applied to matmul, gives the tight footprint in every regime."""
    general = parallel_bound(matmul(M=m, N=n, K=k), p)
    closed = matmul_bound(m, n, k, processors=p)
    assert general.footprint_words == pytest.approx(closed.footprint_words, rel=1e-6)
    assert general.footprint_words <= closed.footprint_words * (1 + 1e-9)  # never above the attainable value
    assert general.memory_independent_words == pytest.approx(closed.parallel_memory_independent_words, rel=1e-5)


@pytest.mark.parametrize("stride,filt", [(1, 3), (2, 4), (3, 2)])
def test_parallel_convolution_formula_when_the_filter_is_small(stride, filt):
    """3 (p_I p_F p_O sigma' (|Z|/P)^2 / (R S))^(1/3) when C and K are large."""
    size = 256
    bits = {"input": 8, "weight": 16, "output": 32}
    nest = conv2d(N=size, C=size, K=size, P=size, Q=size, R=filt, S=filt, stride=stride, bits=bits)
    procs = 2 ** 18
    sigma = min(stride, filt) ** 2
    expected = 3 * (1 * 2 * 4 * sigma * (nest.macs / procs) ** 2 / (filt * filt)) ** (1 / 3)
    assert parallel_bound(nest, procs).footprint_bytes == pytest.approx(expected, rel=1e-5)


def test_one_processor_owns_everything_and_memory_dependent_is_sequential():
    nest = matmul(M=256, N=256, K=256)
    pb = parallel_bound(nest, 1, memory=4096)
    assert pb.memory_independent_bytes == 0.0
    seq = bound(nest, 4096)
    assert pb.memory_dependent_bytes == pytest.approx(max(seq.lp_bytes, seq.hbl_bytes))
    assert pb.bound_bytes == pb.memory_dependent_bytes


def test_parallel_footprint_shrinks_with_processors():
    nest = conv2d(N=4, C=64, K=64, P=28, Q=28, R=3, S=3)
    values = [parallel_bound(nest, p).footprint_bytes for p in (4, 64, 1024)]
    assert values[0] > values[1] > values[2] > 0


def test_bad_arguments():
    with pytest.raises(WorkloadError, match="processors"):
        parallel_bound(matmul(M=4, N=4, K=4), 0)
    with pytest.raises(WorkloadError, match="positive"):
        matmul_bound(4, 0, 4)
