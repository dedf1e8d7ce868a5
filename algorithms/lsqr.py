"""LSQR with one pass over A per iteration, and a one-pass sparse sketch of a dense A.

LSQR (Paige and Saunders 1982) needs ``A v`` and then ``A^T u`` of the new ``u`` in every iteration.
Written as ``u <- A v - alpha u``, ``ss = ||u||^2``, ``z = A^T u`` the two products fuse over row blocks:
a row of A is read from memory once, for its dot product with v and, still in cache, for its share of
A^T u (the normalization by ||u|| is carried into the next iteration's alpha and into z).  A tall dense A
makes each iteration memory bound, so the fused pass costs about one read of A where ``a @ v`` then
``a.T @ u`` (BLAS dgemv) costs two.

Kernels (``kernel=``):

* ``"fused"``: ``fused_pass``, a small hand-written C kernel (OpenMP over row blocks, four rows at a time,
  per-thread partial ``A^T u`` summed in thread order, so the result depends only on the thread count)
  built by ``targets.cpu.build``.  It is not a CoSA-scheduled kernel: a GEMV has no reuse for a
  schedule to find, and the scheduled GEMM/SpMM kernels of ``algorithms.sketch`` would run the two
  products as two passes.
* ``"blas"``: NumPy's ``a @ v`` and ``a.T @ u`` (two dgemv passes), for comparison; any SciPy sparse A
  runs this way too.

``sparse_sketch`` applies a sparse operator (sjlt, countsketch, sampling) to a dense A by scattering each
row of A into the k rows of SA its column of S names (one read of A, per-thread SA buffers summed
in thread order); the CSR SpMM of ``algorithms.sketch`` gathers instead and reads each row of A k times.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from targets.exceptions import require_finite

_PASS_C = r"""
#include <stdlib.h>
#include <string.h>
#include <omp.h>
/* u <- A v - alpha u (A m x n row-major), out[0] = ||u||^2, z = A^T u.  dims = {m, n}. */
void lsqr_pass(const double *A, const double *v, double *u, double *z, const long *dims, double *out,
               double alpha, int nthreads) {
    const long m = dims[0], n = dims[1];
    int nt = nthreads < 1 ? 1 : nthreads;
    if (m < 64L * nt) nt = 1;
    double *zs = calloc((size_t)nt * n, sizeof(double));
    double *ss = calloc((size_t)nt, sizeof(double));
    #pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        const long r0 = m * t / T, r1 = m * (t + 1) / T;
        double *zt = zs + (size_t)t * n, s2 = 0.0;
        long i = r0;
        for (; i + 4 <= r1; i += 4) {
            const double *a0 = A + i * n, *a1 = a0 + n, *a2 = a1 + n, *a3 = a2 + n;
            double d0 = 0, d1 = 0, d2 = 0, d3 = 0;
            #pragma omp simd reduction(+:d0,d1,d2,d3)
            for (long j = 0; j < n; j++) {
                d0 += a0[j] * v[j]; d1 += a1[j] * v[j]; d2 += a2[j] * v[j]; d3 += a3[j] * v[j];
            }
            d0 -= alpha * u[i]; d1 -= alpha * u[i + 1]; d2 -= alpha * u[i + 2]; d3 -= alpha * u[i + 3];
            u[i] = d0; u[i + 1] = d1; u[i + 2] = d2; u[i + 3] = d3;
            s2 += d0 * d0 + d1 * d1 + d2 * d2 + d3 * d3;
            #pragma omp simd
            for (long j = 0; j < n; j++) zt[j] += d0 * a0[j] + d1 * a1[j] + d2 * a2[j] + d3 * a3[j];
        }
        for (; i < r1; i++) {
            const double *a0 = A + i * n;
            double d0 = 0;
            #pragma omp simd reduction(+:d0)
            for (long j = 0; j < n; j++) d0 += a0[j] * v[j];
            d0 -= alpha * u[i];
            u[i] = d0;
            s2 += d0 * d0;
            #pragma omp simd
            for (long j = 0; j < n; j++) zt[j] += d0 * a0[j];
        }
        ss[t] = s2;
    }
    double s = 0.0;
    memcpy(z, zs, (size_t)n * sizeof(double));
    for (int t = 0; t < nt; t++) s += ss[t];
    for (int t = 1; t < nt; t++)
        for (long j = 0; j < n; j++) z[j] += zs[(size_t)t * n + j];
    out[0] = s;
    free(zs); free(ss);
}

/* SA (d x n) = S A for S given by columns (CSC: colptr, rows, vals; m columns) and A m x n row-major. */
void sparse_sketch(const int *colptr, const int *rows, const double *vals, const double *A, double *SA,
                   const long *dims, int nthreads) {
    const long m = dims[0], n = dims[1], d = dims[2];
    int nt = nthreads < 1 ? 1 : nthreads;
    if (m < 256L * nt) nt = 1;
    double *buf = nt > 1 ? calloc((size_t)(nt - 1) * d * n, sizeof(double)) : NULL;
    memset(SA, 0, (size_t)d * n * sizeof(double));
    #pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        const long r0 = m * t / T, r1 = m * (t + 1) / T;
        double *out = t == 0 ? SA : buf + (size_t)(t - 1) * d * n;
        for (long i = r0; i < r1; i++) {
            const double *ai = A + i * n;
            for (int p = colptr[i]; p < colptr[i + 1]; p++) {
                double *o = out + (long)rows[p] * n;
                const double s = vals[p];
                #pragma omp simd
                for (long j = 0; j < n; j++) o[j] += s * ai[j];
            }
        }
    }
    for (int t = 1; t < nt; t++) {
        const double *b = buf + (size_t)(t - 1) * d * n;
        for (long j = 0; j < d * n; j++) SA[j] += b[j];
    }
    free(buf);
}
"""


@functools.lru_cache(maxsize=None)
def _kernels():
    from targets.cpu.build import build, load

    lib = build(_PASS_C)
    return load(lib, "lsqr_pass", 6, 1), load(lib, "sparse_sketch", 6)


def _threads(threads) -> int:
    return max(1, int(threads or os.cpu_count() or 1))


def fused_pass(a: np.ndarray, v: np.ndarray, u: np.ndarray, alpha: float, *, threads: int | None = None):
    """``u <- a v - alpha u`` in place (a C-contiguous float64 m x n); returns ``(||u||^2, a^T u)``."""
    z = np.empty(a.shape[1])
    out = np.empty(1)
    dims = np.array(a.shape, dtype=np.int64)
    v = np.ascontiguousarray(v, dtype=np.float64)
    _kernels()[0](a.ctypes.data, v.ctypes.data, u.ctypes.data, z.ctypes.data, dims.ctypes.data, out.ctypes.data,
                  float(alpha), _threads(threads))
    return float(out[0]), z


def blas_pass(a, v, u, alpha: float, *, threads: int | None = None):
    """``fused_pass`` as two products (NumPy/BLAS dgemv for dense a, SciPy for sparse a)."""
    u *= -alpha
    u += a @ v
    return float(u @ u), np.asarray(a.T @ u).ravel()


def sparse_sketch(op, a: np.ndarray, *, threads: int | None = None) -> np.ndarray:
    """``op @ a`` (d x n) for a sparse operator ``op`` (``algorithms.sketch.Sketch``) and a dense C-contiguous
    float64 ``a``, by one scatter pass over the rows of ``a``."""
    s = sp.csc_matrix(op.block(0, op.d, 0, op.m))
    s.sort_indices()
    colptr, rows = s.indptr.astype(np.int32), s.indices.astype(np.int32)
    vals = np.ascontiguousarray(s.data, dtype=np.float64)
    out = np.empty((op.d, a.shape[1]))
    dims = np.array([a.shape[0], a.shape[1], op.d], dtype=np.int64)
    _kernels()[1](colptr.ctypes.data, rows.ctypes.data, vals.ctypes.data, a.ctypes.data, out.ctypes.data,
                  dims.ctypes.data, _threads(threads))
    return out


@dataclass
class LsqrOutcome:
    """``dy``: the correction in the preconditioned coordinates (x = x0 + R^-1 dy), ``iterations``,
    ``istop`` (1: ||r|| / ||b|| below btol, 2: the backward-error estimate below atol, 7: iteration limit),
    ``passes`` over A (iterations plus the start's)."""

    dy: np.ndarray
    iterations: int
    istop: int
    passes: int


def preconditioned_lsqr(a, b, solve, solve_t, x0, *, atol: float, btol: float, iter_lim: int,
                        kernel: str = "fused", threads: int | None = None, exceptions: str = "ieee") -> LsqrOutcome:
    """LSQR on ``A R^-1`` (``solve``: v -> R^-1 v, ``solve_t``: v -> R^-T v) for the correction of ``x0``:
    min ||A R^-1 dy - (b - A x0)|| from dy = 0, one (fused) pass over A per iteration; the caller adds
    R^-1 dy to x0 (in x, not in R x, where the sum would round at eps ||R x||).  Stops as SciPy's ``lsqr``
    does (damp 0, no conlim): ``||(A R^-1)^T r|| / (||A R^-1||_F-estimate ||r||) <= atol``, or
    ``||r|| <= btol ||b|| + atol ||A R^-1|| ||dy||``.  A non-finite product raises
    ``targets.exceptions.NonFiniteIterate`` (its status names the product)."""
    dense = not sp.issparse(a)
    step = functools.partial(fused_pass if (dense and kernel == "fused") else blas_pass, a, threads=threads)
    u = np.array(b, dtype=np.float64, copy=True)
    ss, z = step(np.asarray(x0, dtype=np.float64), u, 1.0)         # u = A x0 - b, z = A^T u
    require_finite("A x0 - b", np.array([ss, *z[:1]]), exceptions)
    bnorm = float(np.linalg.norm(b))
    beta = math.sqrt(ss)
    if beta == 0.0:
        return LsqrOutcome(np.zeros(len(z)), 0, 1, 1)
    v = -solve_t(z) / beta                            # (A R^-1)^T (b - A x0) / beta
    alpha = float(np.linalg.norm(v))
    require_finite("(A R^-1)^T r", np.array([alpha]), exceptions)
    u_scale = -beta                                   # the unit u is u / u_scale
    if alpha == 0.0:
        return LsqrOutcome(np.zeros(len(z)), 0, 2, 1)
    v /= alpha
    w, dy = v.copy(), np.zeros_like(v)
    phibar, rhobar, anorm = beta, alpha, 0.0
    its, istop = 0, 7
    while its < iter_lim:
        its += 1
        ss, z = step(solve(v), u, alpha / u_scale)     # u = A R^-1 v - alpha * (the unit u)
        beta = math.sqrt(ss)
        require_finite("A R^-1 v", np.array([beta]), exceptions)
        u_scale = beta
        anorm = math.hypot(anorm, math.hypot(alpha, beta))
        v = solve_t(z) / beta - beta * v
        alpha = float(np.linalg.norm(v))
        require_finite("(A R^-1)^T u", np.array([alpha]), exceptions)
        if alpha > 0:
            v /= alpha
        rho = math.hypot(rhobar, beta)
        cs, sn = rhobar / rho, beta / rho
        theta, rhobar, phi = sn * alpha, -cs * alpha, cs * phibar
        phibar = sn * phibar
        dy += (phi / rho) * w
        w = v - (theta / rho) * w
        rnorm, arnorm = phibar, alpha * abs(sn * phi)
        if rnorm <= btol * bnorm + atol * anorm * float(np.linalg.norm(dy)):
            istop = 1
            break
        if arnorm <= atol * anorm * rnorm or alpha == 0:
            istop = 2
            break
    return LsqrOutcome(dy, its, istop, its + 1)
