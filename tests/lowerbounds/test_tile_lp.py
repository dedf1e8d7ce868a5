"""The Dinh-Demmel tile LP: closed forms, primal = dual, strided convolutions, mixed precision."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import ArchError
from lowerbounds import tile_lp
from lowerbounds.conv import sigma_prime
from lowerbounds.dual import bounded_systems, dual_khat
from lowerbounds.tile_lp import primal_tile
from workloads import WorkloadError, conv2d, einsum, matmul


def test_matmul_leading_term_is_mnk_over_sqrt_m():
    m, n, k, mem = 4096, 2048, 1024, 2 ** 12
    r = tile_lp(matmul(M=m, N=n, K=k), mem)
    assert r.khat == pytest.approx(1.5)
    assert r.bound == pytest.approx(m * n * k / math.sqrt(mem), rel=1e-9)
    assert r.tile == pytest.approx({"M": 64, "N": 64, "K": 64})


def test_gemv_gives_mn():
    r = tile_lp(matmul(M=4096, N=4096, K=1), 2 ** 10)
    assert r.khat == pytest.approx(1.0)
    assert r.bound == pytest.approx(4096 * 4096, rel=1e-9)


def test_skinny_gemm_at_2_to_15_words_gives_mn():
    r = tile_lp(matmul(M=4096, N=4096, K=16), 2 ** 15)
    assert r.khat == pytest.approx(1 + 4 / 15)
    assert r.bound == pytest.approx(4096 * 4096, rel=1e-9)
    assert r.tile["K"] == pytest.approx(16)


def test_mttkrp_exponent_five_thirds_when_loops_are_long():
    r = tile_lp(einsum("ijk,jr,kr->ir", {c: 2 ** 12 for c in "ijkr"}), 2 ** 9)
    assert r.khat == pytest.approx(5 / 3)


@pytest.mark.parametrize("stride,filt", [(1, 3), (1, 5), (2, 4), (2, 2), (3, 2), (3, 6), (4, 3)])
def test_convolution_leading_term_where_the_filter_fits(stride, filt):
    """W = N K C P Q sqrt(p_I p_F p_O sigma' R S / M) (bytes), with sigma' = min(stride, R) min(stride, S)."""
    big = 2 ** 11
    bits = {"input": 8, "weight": 16, "output": 32}
    nest = conv2d(N=big, C=big, K=big, P=big, Q=big, R=filt, S=filt, stride=stride, bits=bits)
    mem = 2 ** 20
    sigma = sigma_prime((stride, stride), (filt, filt))
    expected = big ** 5 * math.sqrt(1 * 2 * 4 * sigma * filt * filt / mem)
    assert tile_lp(nest, mem, unit="bytes").bound == pytest.approx(expected, rel=1e-6)


def test_stride_split_is_tighter_than_the_plain_window():
    nest = conv2d(N=64, C=64, K=64, P=64, Q=64, R=2, S=2, stride=4)
    plain = bounded_systems(nest)[-1]
    assert all(len(row) == 7 for m in plain.arrays for row in m.rows)  # the unsplit view is last
    r = tile_lp(nest, 2 ** 12)
    # stride 4 > R = 2: no input element is read twice, the image is as good as projective
    # (4p + r, 4q + s) with r, s < 4 is one-to-one: the image is indexed by (p, r, q, s)
    projective = tile_lp(einsum("ncprqs,kcrs->nkpq", {"n": 64, "c": 64, "k": 64, "p": 64, "q": 64, "r": 2, "s": 2}),
                         2 ** 12)
    assert r.khat == pytest.approx(projective.khat)


def test_dilation_is_split_too():
    big = 2 ** 11
    nest = conv2d(N=big, C=big, K=big, P=big, Q=big, R=3, S=3, dilation=2)
    mem = 2 ** 16
    assert tile_lp(nest, mem).bound == pytest.approx(big ** 5 * math.sqrt(9 / mem), rel=1e-6)


def test_mixed_precision_shrinks_what_fits():
    nest8 = matmul(M=2 ** 12, N=2 ** 12, K=2 ** 12, bits=8)
    nest32 = matmul(M=2 ** 12, N=2 ** 12, K=2 ** 12, bits=32)
    mem = 2 ** 16
    b8 = tile_lp(nest8, mem, unit="bytes").bound
    b32 = tile_lp(nest32, mem, unit="bytes").bound
    # four-byte elements: a quarter as many fit, traffic in bytes x 4 * sqrt(4)
    assert b32 == pytest.approx(8 * b8, rel=1e-9)
    assert tile_lp(nest32, mem, unit="words").bound == pytest.approx(b8, rel=1e-9)


projective_specs = ["ik,kj->ij", "ij,j->i", "ijk,jr,kr->ir", "i,j->ij", "bik,bkj->bij", "abc,cd,de->ae",
                    "ij,jk,kl->il"]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.sampled_from(projective_specs), st.data(), st.integers(3, 20), st.booleans())
def test_primal_equals_independent_dual(spec, data, log_mem, mixed):
    letters = sorted(set(spec) - set(",->"))
    bounds = {c: 2 ** data.draw(st.integers(0, 12)) for c in letters}
    n = spec.count(",") + 2
    bits = [data.draw(st.sampled_from([4, 8, 16, 32])) for _ in range(n)] if mixed else 8
    nest = einsum(spec, bounds, bits=bits)
    mem = 2.0 ** log_mem
    sizes = {t.name: t.bytes_per_word for t in nest.tensors} if mixed else None
    if sizes and max(sizes.values()) > mem:
        return
    primal, lambdas = primal_tile(nest, mem, sizes)
    dual = dual_khat(nest, mem, sizes)
    assert primal == pytest.approx(dual.value, abs=1e-7)
    # the primal tile is feasible: each array's tile holds at most M / p_j elements
    for t in nest.tensors:
        p = sizes[t.name] if sizes else 1.0
        assert sum(lambdas.get(d, 0.0) for d in t.dims) <= 1 - math.log(p, mem) + 1e-9  # bound-1 dims: 0


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.integers(1, 3), st.integers(1, 5), st.integers(4, 40), st.integers(6, 16))
def test_window_primal_never_below_the_dual(stride, filt, size, log_mem):
    """The box-tile relaxation of a sliding window can only overstate khat; the bound uses the dual."""
    nest = conv2d(N=2, C=16, K=16, P=size, Q=size, R=filt, S=filt, stride=stride)
    r = tile_lp(nest, 2.0 ** log_mem)
    assert r.primal_khat >= r.khat - 1e-7
    whole = math.log(nest.macs, 2.0 ** log_mem)
    # a box of min(M, |Z|) iterations touches at most that many elements of each array
    assert min(1.0, whole) - 1e-9 <= r.khat <= whole + 1e-9


def test_bad_memory_and_unit():
    nest = matmul(M=4, N=4, K=4, bits=32)
    with pytest.raises(ArchError, match="memory"):
        tile_lp(nest, 0.5)
    with pytest.raises(ArchError, match="element"):
        tile_lp(nest, 2, unit="bytes")
    with pytest.raises(ArchError, match="number"):
        tile_lp(nest, "lots")
    with pytest.raises(WorkloadError, match="unit"):
        tile_lp(nest, 64, unit="pages")
