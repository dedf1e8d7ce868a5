"""HBL exponents: closed forms, edge cover versus the subspace lattice, exact rational algebra."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowerbounds import hbl_exponent
from lowerbounds.rational import intersect, nullspace, rank, rref, span_sum
from workloads import LoopNest, Tensor, WorkloadError, conv2d, einsum, matmul


def test_matmul_is_three_halves():
    h = hbl_exponent(matmul(M=64, N=32, K=16))
    assert h.s_hbl == pytest.approx(1.5)
    assert h.exponents == pytest.approx({"A": 0.5, "B": 0.5, "C": 0.5})
    assert h.method == "edge-cover"


def test_mttkrp_is_five_thirds():
    h = hbl_exponent(einsum("ijk,jr,kr->ir", {"i": 8, "j": 8, "k": 8, "r": 8}))
    assert h.s_hbl == pytest.approx(5 / 3)
    assert h.exponents["A"] == pytest.approx(2 / 3)


def test_nbody_is_two():
    # F(i) += f(X(i), X(j)): the two reads of X are two maps
    nest = LoopNest("nbody", {"i": 64, "j": 64},
                    (Tensor("Xi", ("i",)), Tensor("Xj", ("j",)), Tensor("F", ("i",), "output")))
    assert hbl_exponent(nest).s_hbl == pytest.approx(2.0)


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_convolution_with_unbounded_filter_is_two(stride):
    h = hbl_exponent(conv2d(N=2, C=8, K=8, P=8, Q=8, R=3, S=3, stride=stride))
    assert h.method == "lattice"
    assert h.s_hbl == pytest.approx(2.0)


def test_lattice_certifies_the_exponents_it_returns():
    """s = exponents satisfies rank(H) <= sum s_j rank(phi_j(H)) on every coordinate subspace too."""
    nest = conv2d(N=2, C=4, K=4, P=6, Q=6, R=3, S=3)
    h = hbl_exponent(nest, method="lattice")
    dims = list(nest.dims)
    for size in range(1, len(dims) + 1):
        for subset in itertools.combinations(dims, size):
            # rank of phi_j restricted to the coordinate subspace = rank of its axes' coefficients there
            total = 0.0
            for t in nest.tensors:
                rows = [[e.coef(d) for d in subset] for e in t.indices]
                total += h.exponents[t.name] * rank(rows)
            assert total >= size - 1e-9


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.data())
def test_edge_cover_equals_lattice_on_projective_nests(data):
    letters = "ijklm"[: data.draw(st.integers(2, 5))]
    ntensors = data.draw(st.integers(2, 4))
    operands = [data.draw(st.lists(st.sampled_from(letters), min_size=1, max_size=3, unique=True))
                for _ in range(ntensors)]
    covered = set().union(*operands)
    out = [c for c in letters if c in covered][:2]
    spec = ",".join("".join(o) for o in operands) + "->" + "".join(out)
    nest = einsum(spec, {c: 4 for c in covered})
    a = hbl_exponent(nest, method="edge-cover")
    b = hbl_exponent(nest, method="lattice")
    assert a.s_hbl == pytest.approx(b.s_hbl, abs=1e-9)
    assert 1.0 - 1e-9 <= a.s_hbl <= ntensors + 1 + 1e-9


def test_edge_cover_refuses_a_window():
    with pytest.raises(WorkloadError, match="projective"):
        hbl_exponent(conv2d(C=2, K=2, P=4, Q=4, R=3, S=3), method="edge-cover")
    with pytest.raises(WorkloadError, match="method"):
        hbl_exponent(matmul(M=2, N=2, K=2), method="simplex")


def test_a_direction_no_array_sees_has_no_exponent():
    # Out(i + j) += A(i + j): the direction (1, -1) moves no index
    nest = LoopNest("diag", {"i": 4, "j": 4}, (Tensor("A", ("i + j",)), Tensor("O", ("i + j",), "output")))
    with pytest.raises(WorkloadError, match="direction"):
        hbl_exponent(nest)


vectors = st.lists(st.lists(st.integers(-3, 3), min_size=4, max_size=4), min_size=0, max_size=3)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(vectors, vectors)
def test_dimension_formula_for_sum_and_intersection(a, b):
    u, v = rref(a), rref(b)
    assert len(span_sum(u, v)) + len(intersect(u, v, 4)) == len(u) + len(v)
    for x in intersect(u, v, 4):  # in both: adding it changes neither rank
        assert rank(list(u) + [x]) == len(u) and rank(list(v) + [x]) == len(v)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(vectors)
def test_nullspace_is_orthogonal_and_complementary(a):
    basis = nullspace(a, 4)
    assert len(basis) + rank(a) == 4
    for x in basis:
        for row in a:
            assert sum(Fraction(r) * y for r, y in zip(row, x)) == 0
