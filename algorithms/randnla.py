"""RandNLA drivers on the sketches of ``algorithms.sketch``: least squares, low-rank factorizations, CholeskyQR.

* ``sketch_and_solve``: x = argmin ||S(Ax - b)|| (QR of SA; one sketch pass over [A, b]).
* ``sketch_and_precondition`` (Blendenpik / LSRN style): R from the QR of SA is a right preconditioner,
  LSQR (``algorithms.lsqr``: one fused pass over a dense A per iteration) runs on A R^-1 from the
  sketch-and-solve start, then restarts once on the correction; for dense and SciPy-sparse tall A.  The
  solution is backward stable when the restart reaches ``tol``; an A with eps * cond_est(R) >= 1 is refused
  with the estimate.
* ``range_finder`` (Gaussian test matrix, ``power`` subspace iterations with QR between them), ``qb``,
  ``rsvd`` (Halko, Martinsson and Tropp); products with a dense A run as scheduled GEMM kernels,
  with a sparse A as CSR SpMM kernels.
* ``randomized_cholesky_qr``: R0 from a sketch's QR, then CholeskyQR of A R0^-1 (its Gram matrix a
  scheduled GEMM), Q = A R^-1 orthonormal to working precision for condition numbers up to ~1/eps.
* ``synthetic_lstsq`` plants x*: A = U diag(sigma) V^T (sigma geometric from 1 to 1/cond), b = A x* + r
  with r orthogonal to range(A), so x* is the exact least-squares solution; ``backward_error`` is the
  normwise ||A^T(b - Ax)|| / (||A||_2 ||b - Ax||), its residual formed in extended precision.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sl
import scipy.sparse as sp

from targets.exceptions import ExceptionStatus, check_mode, first_nonfinite, iterate_status
from targets.exceptions import NonFiniteIterate as _NonFinite
from targets.exceptions import require_finite as _finite

from .sketch import SketchError, check_finite_matrix, gemm, make, spmm


@dataclass
class LstsqResult:
    """``x``; LSQR ``iterations`` (0 for sketch-and-solve); ``d`` rows of the sketch; ``seconds``
    (sketch, factor and iterate); ``sketch_seconds``; ``istop`` LSQR's stop reason (-1: stopped on a
    non-finite iterate); ``condition_estimate``: cond_1(R) of the sketch's triangular factor (LAPACK
    dtrcon), which estimates cond(A) within the sketch's distortion and a factor n; ``exception_status`` (``targets.exceptions.ExceptionStatus.to_dict``): code 0 all
    finite, -1 / -2 A / b held Inf/NaN (``exceptions="check"``; x is then NaN), +1 an iterate became
    non-finite (x is NaN, the iteration stopped there)."""

    x: np.ndarray
    iterations: int
    d: int
    seconds: float
    sketch_seconds: float
    istop: int = 0
    exception_status: dict = field(default_factory=lambda: ExceptionStatus().to_dict())
    condition_estimate: float = math.nan

    @property
    def reachable_error(self) -> float:
        """eps * ``condition_estimate``: the relative forward error a backward-stable solution can promise
        for a zero-residual problem (a residual adds eps * cond^2 * ||r|| / (||A|| ||x||))."""
        return EPS * self.condition_estimate


def _input_status(a, b, exceptions: str) -> ExceptionStatus | None:
    """``exceptions="check"``: the status of a non-finite A (code -1) or b (-2), else None.  (``ieee``
    refuses them as bad input, exit 2.)"""
    if check_mode(exceptions) != "check":
        return None
    for pos, name, arr in ((1, "A", a.data if sp.issparse(a) else a), (2, "b", b)):
        hit = first_nonfinite(np.asarray(arr))
        if hit is not None:
            return ExceptionStatus("check", -pos, name, "input", *hit)
    return None


def _check_problem(a, b, sketch: str, d: int | None):
    a = check_finite_matrix(a, "A")
    b = np.asarray(b, dtype=np.float64).ravel()
    if not np.all(np.isfinite(b)):
        raise SketchError("holds NaN or Inf", source="vector b", field="b")
    m, n = a.shape
    if b.shape[0] != m:
        raise SketchError(f"b has {b.shape[0]} entries, A {m} rows", field="b")
    if m < n:
        raise SketchError(f"A is {m} x {n}: least squares here needs a tall A (m >= n)", field="A")
    d = int(d) if d is not None else min(m, 4 * n)
    if d < n:
        raise SketchError(f"sketch size d={d} is smaller than the column count n={n}", field="d")
    if d > m:
        raise SketchError(f"sketch size d={d} is larger than the row count m={m}", field="d")
    return a, b, d


EPS = float(np.finfo(np.float64).eps)
FIRST_RUN_FACTOR = 1e-2
"""The first LSQR run of ``sketch_and_precondition`` stops at this fraction of eps * cond_est(R).  Measured on
the 2000 x 40 tests: at 1 (where its error stops improving) one restart left backward errors up to 1.3e-12 at
cond 1e10 (Gaussian sketch); at 1e-2 at most 1.7e-13, for about one more iteration."""


def _sketch_ab(a, b, sketch, d, seed, k, threads=None):
    """(SA, Sb).  A sparse operator on a dense A: one scatter pass (``algorithms.lsqr.sparse_sketch``), no
    copy of A; otherwise ``Sketch.apply`` on [A, b] (scheduled kernels, scipy.fft)."""
    op = make(sketch, d, a.shape[0], seed=seed, k=min(k, d))
    n = a.shape[1]
    if op.sparse and not sp.issparse(a):
        from .lsqr import sparse_sketch

        return sparse_sketch(op, np.ascontiguousarray(a), threads=threads), op.block(0, d, 0, a.shape[0]) @ b
    if sp.issparse(a):
        ab = sp.hstack([a, sp.csr_matrix(b[:, None])], format="csr")
    else:                                            # one copy, its columns padded to whole vectors
        ab = np.zeros((a.shape[0], -(-(n + 1) // 8) * 8))
        ab[:, :n], ab[:, n] = a, b
    sab = op.apply(ab)
    return sab[:, :n], sab[:, n]


def _triangular(sa):
    q, r = np.linalg.qr(sa)
    diag = np.abs(np.diag(r))
    if diag.size and diag.min() <= diag.max() * 1e-15 * r.shape[0]:
        raise SketchError("the sketched A is numerically rank deficient; least squares needs full column rank",
                          field="A", exit_code=1)
    return q, r


def _preconditioner(sa, sb):
    """(R, Q^T Sb, cond_est) from the QR of the sketch [SA, Sb] (R only: Q is never formed); SketchError (bad
    input, exit 2) when eps * cond_est(R) >= 1, naming the estimate and the accuracy reachable (none)."""
    from scipy.linalg.lapack import dtrcon

    n = sa.shape[1]
    rab = sl.qr(np.column_stack([sa, sb]), mode="r", overwrite_a=True, check_finite=False)[0]
    r, qtb = np.triu(rab[:n, :n]), rab[:n, n]
    rcond, info = dtrcon(r, norm="1", uplo="U", diag="N")
    kappa = 1.0 / rcond if info == 0 and rcond > 0 else math.inf
    if not EPS * kappa < 1:
        raise SketchError(f"too ill-conditioned for least squares in float64: estimated condition number "
                          f"{kappa:.1e} (1-norm, from the sketch's R), so the reachable relative accuracy "
                          f"eps * cond = {EPS * kappa:.2g} determines no digit of x; drop dependent columns or "
                          f"regularize", field="A")
    return r, qtb, kappa


def sketch_and_solve(a, b, *, sketch: str = "gaussian", d: int | None = None, seed: int = 0,
                     k: int = 8, exceptions: str = "ieee") -> LstsqResult:
    """x = argmin ||S(Ax - b)||_2 with a d x m operator S (default d = 4n).  ``exceptions``: see
    ``sketch_and_precondition``."""
    early = _input_status(a, b, exceptions)
    if early is not None:
        return LstsqResult(np.full(np.shape(a)[1], np.nan), 0, 0, 0.0, 0.0, -1, early.to_dict())
    a, b, d = _check_problem(a, b, sketch, d)
    t0 = time.perf_counter()
    sa, sb = _sketch_ab(a, b, sketch, d, seed, k)
    t1 = time.perf_counter()
    r, qtb, kappa = _preconditioner(sa, sb)
    x = sl.solve_triangular(r, qtb)
    status = iterate_status("x", x, exceptions) or ExceptionStatus(exceptions, 0)
    return LstsqResult(x, 0, d, time.perf_counter() - t0, t1 - t0, 0 if status.ok else -1, status.to_dict(),
                       kappa)


def default_sketch_rows(m: int, n: int) -> int:
    """Sketch rows for sketch-and-precondition: m/16 clamped to 4n..16n (and to m).  More rows make A R^-1
    better conditioned (LSQR's error falls by about sqrt(n/d) per iteration: 0.5 at 4n, 0.25 at 16n) at
    2dn^2 flops for the QR of SA; at m/16 rows that QR costs about 2n flops per entry of A, a few of the
    memory-bound passes over A it saves."""
    return int(min(m, max(4 * n, min(16 * n, m // 16))))


def sketch_and_precondition(a, b, *, sketch: str = "sjlt", d: int | None = None, seed: int = 0, k: int = 4,
                            tol: float = 1e-14, iter_lim: int | None = None, refine: int = 1,
                            kernel: str = "fused", threads: int | None = None,
                            exceptions: str = "ieee") -> LstsqResult:
    """LSQR on A R^-1 (R from the QR of SA, d rows: ``default_sketch_rows``; sjlt with ``k`` = 4 nonzeros per
    column: on 65536 x 256 at cond 1e8 as good a preconditioner as k = 8 at about half the sketch time), started at the sketch-and-solve
    solution, then ``refine`` restarts from the current x (LSQR on the same operator for the correction
    min ||A dx - (b - Ax)||: preconditioned LSQR alone is not backward stable at large condition numbers,
    Meier, Nakatsukasa, Townsend and Webb 2024; one restart makes it so in practice, Epperly 2024).

    Stopping: LSQR's estimate ||(AR^-1)^T r|| / (||AR^-1|| ||r||) below ``tol`` in the last run; the first
    run stops at max(tol, ``FIRST_RUN_FACTOR`` * eps * cond_est(R)) instead, near where its error stops
    improving (rounding in the products with R^-1), and leaves the rest to the restart.  ``kernel``: ``"fused"`` (one pass over a dense
    A per iteration, ``algorithms.lsqr``) or ``"blas"`` (NumPy's two dgemv passes); a sparse A always runs
    SciPy's products.  A sparse ``sketch`` of a dense A is applied by ``algorithms.lsqr.sparse_sketch`` (one
    scatter pass over A).  ``threads``: the kernels' threads (default: all cores).

    A too ill-conditioned A (eps * cond_est(R) >= 1: no digit of x is determined) is refused as bad input
    (SketchError, exit 2) with the estimate and the reachable accuracy, instead of iterating on noise.

    NaN/Inf (``targets.exceptions``): every product of the iteration is checked; at the first non-finite
    one LSQR stops (it would otherwise run to ``iter_lim`` on NaNs) and the result has x = NaN, istop -1
    and ``exception_status`` code +1.  ``exceptions="check"``: a non-finite A or b gives code -1 / -2
    instead of the bad-input error."""
    from .lsqr import preconditioned_lsqr

    early = _input_status(a, b, exceptions)
    if early is not None:
        return LstsqResult(np.full(np.shape(a)[1], np.nan), 0, 0, 0.0, 0.0, -1, early.to_dict())
    if kernel not in ("fused", "blas"):
        raise SketchError(f"unknown kernel '{kernel}' (known: fused, blas)", field="kernel")
    m, n = np.shape(a)
    a, b, d = _check_problem(a, b, sketch, d if d is not None else default_sketch_rows(m, n))
    if not sp.issparse(a):
        a = np.ascontiguousarray(a)
    t0 = time.perf_counter()
    sa, sb = _sketch_ab(a, b, sketch, d, seed, k, threads)
    t1 = time.perf_counter()
    r, qtb, kappa = _preconditioner(sa, sb)
    solve = lambda v: sl.solve_triangular(r, v, check_finite=False)
    solve_t = lambda v: sl.solve_triangular(r, v, trans="T", check_finite=False)
    limit = iter_lim or 20 * n + 100
    runs = [max(tol, FIRST_RUN_FACTOR * EPS * kappa)] + [tol] * int(refine) if int(refine) > 0 else [tol]
    its, stop = 0, 0
    try:
        x = _finite("x0", solve(qtb), exceptions)                # the sketch-and-solve solution
        for atol in runs:
            out = preconditioned_lsqr(a, b, solve, solve_t, x, atol=atol, btol=atol, iter_lim=limit,
                                      kernel=kernel, threads=threads, exceptions=exceptions)
            x, its, stop = _finite("x", x + solve(out.dy), exceptions), its + out.iterations, out.istop
    except _NonFinite as exc:
        return LstsqResult(np.full(n, np.nan), its, d, time.perf_counter() - t0, t1 - t0, -1,
                           exc.status.to_dict(), kappa)
    return LstsqResult(x, its, d, time.perf_counter() - t0, t1 - t0, stop, ExceptionStatus(exceptions, 0).to_dict(),
                       kappa)


def synthetic_lstsq(m: int, n: int, cond: float, *, residual: float = 1e-4, seed: int = 0,
                    density: float | None = None):
    """(A, b, x*) with x* the exact least-squares solution.  Dense: A = U diag(sigma) V^T, ||A||_2 = 1,
    cond(A) = ``cond``, ||r|| = ``residual`` * ||x*||.  ``density`` < 1: a SciPy CSR A = G diag(sigma)
    (G sparse Gaussian, so cond(A) is about ``cond``) and the planted residual orthogonal to range(A)."""
    if m < n or n < 1 or not cond >= 1 or not math.isfinite(cond):
        raise SketchError(f"synthetic problem needs m >= n >= 1 and a finite cond >= 1, got {m}, {n}, {cond}",
                          field="synthetic")
    rng = np.random.default_rng(seed)
    sigma = np.geomspace(1.0, 1.0 / cond, n)
    if density is None or density >= 1:
        u = np.linalg.qr(rng.standard_normal((m, n)))[0]
        v = np.linalg.qr(rng.standard_normal((n, n)))[0]
        a = (u * sigma) @ v.T
        return (a, *plant(a, residual=residual, seed=seed + 1, basis=u))
    s = sp.random(m, n, density=density, format="csr", random_state=rng, data_rvs=rng.standard_normal)
    s = s + sp.csr_matrix((np.ones(n), (rng.choice(m, n, replace=False), np.arange(n))), shape=(m, n))
    a = sp.csr_matrix(s @ sp.diags(sigma))
    return (a, *plant(a, residual=residual, seed=seed + 1))


def plant(a, *, residual: float = 1e-4, seed: int = 0, basis=None):
    """(b, x*) for a full-rank tall A: b = A x* + r, r orthogonal to range(A) (projected out twice with
    ``basis``, an orthonormal basis of range(A), else with a thin QR of A), ||r|| = ``residual`` * ||x*||."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(a.shape[1])
    g = rng.standard_normal(a.shape[0])
    if basis is None:
        basis = np.linalg.qr(a.toarray() if sp.issparse(a) else a)[0]
    for _ in range(2):
        g -= basis @ (basis.T @ g)
    r = g * (residual * np.linalg.norm(x) / np.linalg.norm(g)) if residual > 0 else 0 * g
    return a @ x + r, x


def backward_error(a, b, x, norm_a: float | None = None, chunk: int = 65536) -> float:
    """||A^T(b - Ax)|| / (||A||_2 ||b - Ax||), the residual and A^T r in extended precision (row blocks);
    ``norm_a``: ||A||_2 when known, else estimated (exact for dense A, ``svds`` for sparse)."""
    ld = np.longdouble
    m = a.shape[0]
    xl = np.asarray(x, dtype=ld)
    atr = np.zeros(a.shape[1], dtype=ld)
    rr = ld(0)
    for c0 in range(0, m, chunk):
        blk = a[c0:c0 + chunk]
        blk = blk.toarray() if sp.issparse(blk) else blk
        bl = blk.astype(ld)
        r = np.asarray(b[c0:c0 + chunk], dtype=ld) - bl @ xl
        atr += bl.T @ r
        rr += r @ r
    if norm_a is None:
        norm_a = _norm2(a)
    return float(np.sqrt(atr @ atr) / (norm_a * np.sqrt(rr)))


def _norm2(a) -> float:
    if sp.issparse(a):
        from scipy.sparse.linalg import svds

        return float(svds(a, k=1, return_singular_vectors=False, random_state=0)[0])
    return float(np.linalg.norm(np.linalg.qr(a, mode="r"), 2))


# --- low rank -----------------------------------------------------------------------------------

def _times(a, b):
    """a @ b for a dense or sparse a and a dense b, through the CPU kernels."""
    return spmm(a, b) if sp.issparse(a) else gemm(a, b)


def _transpose(a):
    return sp.csr_matrix(a.T) if sp.issparse(a) else np.ascontiguousarray(a.T)


def range_finder(a, rank: int, *, oversample: int = 10, power: int = 2, seed: int = 0) -> np.ndarray:
    """An m x (rank + oversample) orthonormal Q with range(Q) ~ the dominant range of A.  A product that
    overflows to Inf/NaN stops the power iteration: SketchError (exit 1) with the status's message."""
    a = check_finite_matrix(a, "A")
    m, n = a.shape
    ell = int(rank) + int(oversample)
    if int(rank) < 1 or ell > min(m, n):
        raise SketchError(f"rank {rank} + oversampling {oversample} must be in 1..min(m, n) = {min(m, n)}",
                          field="rank")
    if int(power) < 0:
        raise SketchError(f"power iterations must be >= 0, got {power}", field="power")
    omega = np.ascontiguousarray(make("gaussian", ell, n, seed=seed).dense().T)
    try:
        q = np.linalg.qr(_finite("A Omega", _times(a, omega), "ieee"))[0]
        at = _transpose(a) if power else None
        for _ in range(int(power)):
            z = np.linalg.qr(_finite("A^T Q", _times(at, q), "ieee"))[0]
            q = np.linalg.qr(_finite("A Z", _times(a, z), "ieee"))[0]
    except _NonFinite as exc:  # a power iteration does not go on with NaNs: a failed run (exit 1)
        raise SketchError(f"stopped: the iterate {exc.status.message()}", field="power", exit_code=1) from None
    return q


def qb(a, rank: int, *, oversample: int = 10, power: int = 2, seed: int = 0):
    """(Q, B) with A ~ Q B, Q m x l orthonormal, B = Q^T A (l = rank + oversample)."""
    q = range_finder(a, rank, oversample=oversample, power=power, seed=seed)
    a = check_finite_matrix(a, "A")
    if sp.issparse(a):
        return q, np.ascontiguousarray(_times(_transpose(a), q).T)
    return q, gemm(np.ascontiguousarray(q.T), a)


def rsvd(a, rank: int, *, oversample: int = 10, power: int = 2, seed: int = 0):
    """(U, s, Vt) of rank ``rank``: the SVD of B from ``qb``, U = Q U_B."""
    q, bm = qb(a, rank, oversample=oversample, power=power, seed=seed)
    ub, s, vt = np.linalg.svd(bm, full_matrices=False)
    return (q @ ub)[:, :rank], s[:rank], vt[:rank]


_EPS = float(np.finfo(np.float64).eps)


def _cholesky_pass(a1: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """One CholeskyQR pass on ``a1`` (m x n): (Q = a1 C^-1, C, shifted).  G = a1^T a1 is a scheduled GEMM.
    Where rounding leaves G not numerically positive definite, G + sI is factored instead, with the
    shift s = 11 (mn + n(n+1)) u ||G||_2 of shifted CholeskyQR (Fukaya, Kannan, Nakatsukasa, Yamamoto and
    Yanagisawa, SIAM J. Sci. Comput. 2020), which provably succeeds for cond(a1) below ~1/(sqrt(mn) u)
    and leaves Q well enough conditioned for further passes to orthonormalise."""
    m, n = a1.shape
    g = gemm(np.ascontiguousarray(a1.T), a1)
    g = (g + g.T) / 2
    shifted = False
    try:
        c = sl.cholesky(g, lower=False)
    except np.linalg.LinAlgError:
        shift = 11 * (m * n + n * (n + 1)) * _EPS * float(np.linalg.norm(g, 2))
        try:
            c = sl.cholesky(g + shift * np.eye(n), lower=False)
        except np.linalg.LinAlgError:
            c = None
        shifted = True
    if c is None or not np.all(np.isfinite(c)):
        raise SketchError("CholeskyQR met a Gram matrix that is not positive definite even shifted: A is "
                          "numerically rank deficient", field="A", exit_code=1)
    return np.ascontiguousarray(sl.solve_triangular(c, a1.T, trans="T").T), c, shifted


def randomized_cholesky_qr(a, *, sketch: str = "gaussian", d: int | None = None, seed: int = 0,
                           max_passes: int = 3):
    """(Q, R) with A = QR to ~u ||A|| and Q orthonormal to ~u (u = 2^-53) wherever A is of full rank at
    working precision (tested at condition numbers 1e12 and 1e15, seeds 0-19, with OpenBLAS and with the
    reference BLAS).

    R0 from the QR of SA preconditions A: A1 = A R0^-1 is well conditioned (cond ~ (1 + sqrt(n/d)) /
    (1 - sqrt(n/d)) for a Gaussian d x m sketch, while rounding in R0 adds ~u cond(A)).  CholeskyQR passes
    then factor A1 (``_cholesky_pass``: shifted where rounding makes the Gram matrix indefinite); another
    pass follows while the last factor C says Q is not yet orthonormal (||Q^T Q - I|| ~ u cond(C)^2 for
    Cholesky QR), at most ``max_passes`` (randomized CholeskyQR, Fan, Guo and Lin 2021; with the second
    pass as in CholeskyQR2).  R = C_k ... C_1 R0.

    A whose sketch's R is singular at working precision (its diagonal spans more than 1/(4u)) is refused
    with that condition estimate (SketchError, exit 2)."""
    a = check_finite_matrix(a, "A")
    a = a.toarray() if sp.issparse(a) else a
    m, n = a.shape
    d = int(d) if d is not None else min(m, 2 * n)
    if d < n or m < n:
        raise SketchError(f"sketch size d={d} must be in n..m ({n}..{m}) for a tall A", field="d")
    r0 = np.linalg.qr(make(sketch, d, m, seed=seed).apply(a), mode="r")
    diag = np.abs(np.diag(r0))
    if n and not diag.min() > diag.max() * _EPS * 4:
        cond = diag.max() / diag.min() if diag.min() > 0 else math.inf
        raise SketchError(f"A is numerically rank deficient: its sketch's R has condition ~{cond:.1e}, "
                          f"beyond 1/(4u) = {0.25 / _EPS:.1e}, so no R of full rank exists in float64",
                          field="A")
    q = np.ascontiguousarray(sl.solve_triangular(r0, a.T, trans="T").T)
    r = r0
    for _ in range(max(1, int(max_passes))):
        q, c, shifted = _cholesky_pass(q)
        r = c @ r
        if not shifted and np.linalg.cond(c) ** 2 * _EPS * max(n, 1) <= 1e-13:
            break
    return q, r


def decaying_matrix(n: int, *, decay: float = 0.8, floor: float = 1e-6, seed: int = 0):
    """(A, sigma): an n x n matrix with singular values max(decay^i, floor), random singular vectors."""
    rng = np.random.default_rng(seed)
    sigma = np.maximum(decay ** np.arange(n), floor)
    u = np.linalg.qr(rng.standard_normal((n, n)))[0]
    v = np.linalg.qr(rng.standard_normal((n, n)))[0]
    return np.ascontiguousarray((u * sigma) @ v.T), sigma
