"""Exact linear algebra over the rationals for small integer matrices.

The HBL rank conditions are statements about subgroups of Z^d, i.e. about
subspaces of Q^d; floating-point ranks can be wrong on nearly dependent rows,
so subspaces are kept as reduced row-echelon bases of Fractions.  A subspace
is a tuple of basis rows (its canonical RREF), which makes it hashable.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Iterable, Sequence

Subspace = tuple[tuple[Fraction, ...], ...]


def rref(rows: Iterable[Sequence]) -> Subspace:
    """Reduced row-echelon form of ``rows`` without zero rows (a canonical basis of the row space)."""
    mat = [[Fraction(x) for x in row] for row in rows]
    if not mat:
        return ()
    ncols = len(mat[0])
    pivot_row = 0
    for col in range(ncols):
        pick = next((r for r in range(pivot_row, len(mat)) if mat[r][col] != 0), None)
        if pick is None:
            continue
        mat[pivot_row], mat[pick] = mat[pick], mat[pivot_row]
        lead = mat[pivot_row][col]
        mat[pivot_row] = [x / lead for x in mat[pivot_row]]
        for r in range(len(mat)):
            if r != pivot_row and mat[r][col] != 0:
                factor = mat[r][col]
                mat[r] = [a - factor * b for a, b in zip(mat[r], mat[pivot_row])]
        pivot_row += 1
        if pivot_row == len(mat):
            break
    return tuple(tuple(row) for row in mat[:pivot_row])


def rank(rows: Iterable[Sequence]) -> int:
    return len(rref(rows))


def nullspace(rows: Iterable[Sequence], ncols: int) -> Subspace:
    """Basis (RREF) of {x in Q^ncols : row . x = 0 for every row}."""
    basis = rref(rows)
    pivots = []
    for row in basis:
        pivots.append(next(i for i, x in enumerate(row) if x != 0))
    free = [c for c in range(ncols) if c not in pivots]
    vectors = []
    for f in free:
        vec = [Fraction(0)] * ncols
        vec[f] = Fraction(1)
        for row, p in zip(basis, pivots):
            vec[p] = -row[f]
        vectors.append(vec)
    return rref(vectors)


def span_sum(a: Subspace, b: Subspace) -> Subspace:
    """The smallest subspace containing both."""
    return rref(list(a) + list(b))


def intersect(a: Subspace, b: Subspace, ncols: int) -> Subspace:
    """a ∩ b, as the annihilator of the sum of the annihilators."""
    return nullspace(list(nullspace(a, ncols)) + list(nullspace(b, ncols)), ncols)


def image_rank(map_rows: Sequence[Sequence[int]], subspace: Subspace) -> int:
    """rank of phi(H) for the linear map with matrix ``map_rows`` (one row per output axis)."""
    if not subspace or not map_rows:
        return 0
    # phi(h) for each basis vector h of H; the rank of those images is rank(phi(H)).
    images = [[sum(Fraction(r[k]) * h[k] for k in range(len(h))) for r in map_rows] for h in subspace]
    return rank(images)


def identity(ncols: int) -> Subspace:
    return tuple(tuple(Fraction(int(i == j)) for j in range(ncols)) for i in range(ncols))
