"""The distributed sparse problem: what every rank knows before the algorithm starts, and the reference.

A ``Problem`` is small and JSON-able (it travels to the ranks): the kernel, the sizes, the pattern spec
of ``workloads.sparse`` and a seed for the dense operands.  ``full_data`` builds S (m x n, CSR), A
(m x r) and B (n x r) identically on every rank; each algorithm then keeps only the blocks its layout
gives the rank (an initial distribution that costs no communication).

Kernels (the paper's notation, Bharadwaj, Bulu\u00e7 and Demmel, IPDPS 2022):
``sddmm``: S o (A B^T) at the nonzeros of S; ``spmm``: S B (m x r); ``fusedmm``: (S o (A B^T)) B.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

KERNELS = ("spmm", "sddmm", "fusedmm")


@dataclass(frozen=True)
class Problem:
    kernel: str
    m: int
    n: int
    r: int
    pattern: dict
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_nest(nest, seed: int = 0) -> "Problem":
        """The problem of a ``workloads.sparse`` nest (spmm, sddmm, fusedmm)."""
        op = nest.op
        return Problem(op["kind"], int(op["m"]), int(op["n"]), int(op["r"]), dict(op["pattern"]), seed)


def sparse(problem: Problem):
    """S as CSR (float64 values, sorted int32 indices), the same on every rank."""
    from workloads.sparse import _pattern_cached
    import json

    return _pattern_cached(json.dumps(problem.pattern, sort_keys=True), problem.m, problem.n).copy()


def full_data(problem: Problem):
    """(S, A, B): the sparse matrix and the two dense operands, uniform in [-1, 1) from ``seed``."""
    rng = np.random.default_rng(problem.seed + 1000)
    a = rng.random((problem.m, problem.r)) * 2 - 1
    b = rng.random((problem.n, problem.r)) * 2 - 1
    return sparse(problem), a, b


def reference(problem: Problem, s, a, b):
    """SciPy's answer: sddmm: the values at S's nonzeros in CSR order; spmm / fusedmm: the m x r product."""
    if problem.kernel == "spmm":
        return np.asarray(s @ b)
    sampled = s.multiply(a @ b.T).tocsr()
    if problem.kernel == "sddmm":
        # S.multiply keeps S's pattern but may drop explicit zeros: read the values at S's positions
        rows = np.repeat(np.arange(s.shape[0]), np.diff(s.indptr))
        return s.data * np.einsum("ij,ij->i", a[rows], b[s.indices])
    return np.asarray(sampled @ b)


def row_dots(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Row-wise dot products: out[k] = left[k] . right[k] (the local SDDMM kernel on gathered rows)."""
    return np.einsum("ij,ij->i", left, right)
