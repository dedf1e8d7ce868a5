"""MTTKRP: M = X_(n) (U_N ⊙ ... ⊙ U_{n+1} ⊙ U_{n-1} ⊙ ... ⊙ U_1), dense and sparse.

Dense: the mode-n product is the loop nest ``ikl,kj,lj->ij`` (i = I_n, k = the first other mode,
l = the remaining other modes, j = R; for order 3 exactly the MTTKRP, for higher orders ``C`` is the
Khatri-Rao product of the remaining factors), a ``workloads.einsum`` LoopNest scheduled by
``cosa.schedule`` on the ``cpu`` arch and compiled by ``targets.cpu`` (one kernel per shape, cached in
the process; the MIP and the build are paid once).  ``backend="numpy"`` is the unfolding @ KRP
reference.  ``mttkrp_bound`` reports the nest's communication lower bound (``lowerbounds.bound``: the
HBL exponent s_HBL = 5/3 of the four-index nest, the tile LP, compulsory traffic, which binds).

Sparse: over the nonzeros, M[i_n] += v * prod_{k != n} U_k[i_k] (a SciPy CSR product of the
nonzero-to-row map and the per-nonzero Hadamard rows).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import scipy.sparse as sp

from .tensors import SparseTensor


def krp(mats) -> np.ndarray:
    """Khatri-Rao product U_1 ⊙ U_2 ⊙ ... (row (i_1, i_2, ...) in C order: the last matrix fastest)."""
    out = mats[0]
    for m in mats[1:]:
        out = (out[:, None, :] * m[None, :, :]).reshape(-1, out.shape[1])
    return out


def mttkrp_nest(i: int, k: int, l: int, r: int, dtype: str = "float64"):  # noqa: E741
    """The dense MTTKRP loop nest Out[i, j] = sum_{k,l} A[i, k, l] B[k, j] C[l, j]."""
    import workloads
    from workloads.dtypes import apply_dtype

    nest = workloads.einsum("ikl,kj,lj->ij", {"i": i, "k": k, "l": l, "j": r}, name=f"mttkrp_{i}x{k}x{l}_r{r}")
    return apply_dtype(nest, dtype, False, "algorithms.cp", "dtype")


@lru_cache(maxsize=32)
def scheduled_kernel(i: int, k: int, l: int, r: int, time_limit_s: float = 5.0):  # noqa: E741
    """``(kernel, schedule)``: the nest scheduled by ``cosa.schedule`` on the cpu arch and compiled."""
    import costmodel
    from cosa.scheduler import schedule
    from targets.cpu import compile_kernel
    from targets.cpu.plan import arch_for

    nest = mttkrp_nest(i, k, l, r)
    arch = costmodel.preset("cpu")
    sched = schedule(nest, arch_for(nest, arch), time_limit_s=time_limit_s, seed=0, bound=False)
    return compile_kernel(nest, sched.mapping, arch), sched


def mttkrp_bound(i: int, k: int, l: int, r: int, memory="256KiB") -> dict:  # noqa: E741
    """The communication lower bound of the nest (``lowerbounds.bound``): s_HBL, words, what binds."""
    import lowerbounds

    return lowerbounds.bound(mttkrp_nest(i, k, l, r), memory).to_dict()


def _split(x: np.ndarray, factors, n: int, unfolded=None):
    """(A, B, C) of the nest for mode n: A = X with mode n first (I_n, I_k, rest), B = U_k, C = KRP of the
    rest (rows in the order of A's last axis)."""
    others = [m for m in range(x.ndim) if m != n]
    k = others[0]
    rest = others[1:]
    a = unfold3(x, n) if unfolded is None else unfolded
    c = krp([factors[m] for m in rest])
    return a, np.ascontiguousarray(factors[k]), np.ascontiguousarray(c)


def unfold3(x: np.ndarray, n: int) -> np.ndarray:
    """X with mode n first and the other modes as (first other, rest): the nest's ``A`` (a C-contiguous copy)."""
    others = [m for m in range(x.ndim) if m != n]
    return np.ascontiguousarray(np.moveaxis(x, n, 0).reshape(x.shape[n], x.shape[others[0]], -1))


def mttkrp_dense(x: np.ndarray, factors, n: int, backend: str = "cpu",
                 unfolded: np.ndarray | None = None) -> np.ndarray:
    """Mode-n MTTKRP of a dense tensor; ``backend``: ``cpu`` (the scheduled C kernel) or ``numpy``;
    ``unfolded``: ``unfold3(x, n)`` when the caller keeps it (ALS does, one copy per mode)."""
    a, b, c = _split(x, factors, n, unfolded)
    if backend == "numpy":
        return a.reshape(a.shape[0], -1) @ krp([b, c])
    kernel, _ = scheduled_kernel(a.shape[0], a.shape[1], a.shape[2], b.shape[1])
    return kernel({"A": a, "B": b, "C": c}, threads=None)


class SparseMttkrp:
    """Mode-n MTTKRP over the nonzeros of ``t``; the nonzero-to-row CSR maps are built once per mode."""

    def __init__(self, t: SparseTensor):
        self.t = t
        nnz = t.nnz
        self.rowmaps = [sp.csr_matrix((t.values, (t.indices[:, n], np.arange(nnz))), shape=(t.shape[n], nnz))
                        for n in range(t.order)]

    def __call__(self, factors, n: int) -> np.ndarray:
        t = self.t
        rows = None
        for m in range(t.order):
            if m == n:
                continue
            g = factors[m][t.indices[:, m]]
            rows = g if rows is None else rows * g
        return np.asarray(self.rowmaps[n] @ rows)


def mttkrp_sparse(t: SparseTensor, factors, n: int) -> np.ndarray:
    return SparseMttkrp(t)(factors, n)
