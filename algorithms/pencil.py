"""Randomized inverse-free divide-and-conquer diagonalization of a pencil (A, B).

After Demmel, Dumitriu and Schneider, "Generalized pseudospectral shattering and inverse-free matrix
pencil diagonalization" (FoCM 2024), in our own formulation:

1. **Scale and perturb**: A and B are divided by max(||A||_2, ||B||_2) (the eigenvalues do not change),
   then perturbed by complex Ginibre matrices of norm about ``gamma = eps / 16`` each, which shatters the
   pseudospectrum with high probability.
2. **Grid**: lines ``x = x0 + i*omega`` and ``y = y0 + j*omega`` over the box [-radius, radius]^2, spacing
   ``omega = gamma / n``, the offsets (x0, y0) uniformly random in one cell.
3. **Split** a sub-pencil of size m along a line: for a vertical line Re z = h the pencil
   (A - (h-1)B, A - (h+1)B) has eigenvalues (z-h+1)/(z-h-1), of modulus > 1 exactly when Re z > h
   (a horizontal line rotates by -i first).  **Inverse-free repeated squaring** (Bai, Demmel and Gu
   1997): p steps of a 2m x m QR, [B_j; -A_j] = Q R, A_{j+1} = Q12^H A_j, B_{j+1} = Q22^H B_j, with
   B_p^-1 A_p = (B^-1 A)^(2^p), stopped early when R settles; (A_p + B_p)^-1 A_p then approximates the
   spectral projector onto the eigenvalues right of (above) the line and (A_p + B_p)^-1 B_p the other one.
4. **GRURV** (generalized randomized URV, Ballard, Demmel and Dumitriu): with a Haar V, X V^H = U R2
   (QR) and U^H (A_p + B_p) = R1 W (RQ), so (A_p + B_p)^-1 X = W^H R1^-1 R2 V without an inverse; the
   leading k columns of W^H span the projector's range, k = #{i : |R2_ii / R1_ii| >= tau}.  A binary
   search over grid lines looks for a split with m/5 <= k <= 4m/5, vertical lines first, then
   horizontal ones; failing both it takes the most balanced nontrivial split it saw, and only with
   none it falls back to QZ (counted in ``qz_fallbacks``).
5. **Deflate**: right bases X_+ (k columns), X_- (m-k) from the two projectors, left bases from a
   pivoted QR of [A X, B X]; the sub-pencils Y^H (A, B) X recurse; below ``threshold`` rows QZ
   (``scipy.linalg.eig``) finishes.  T = [X_+ T_+, X_- T_-] (unit columns), D the eigenvalues, and at the
   top S = B~ T (B~ the perturbed B), so A ~ S D T^-1 and B ~ S T^-1.

The GEMMs (repeated squaring and the deflation products) run through ``algorithms.sketch.matmul``:
``kernels="cosa"`` the scheduled CPU GEMM (a complex product as one real GEMM, shapes rounded up to a
quarter octave so that a recursion needs few kernels), ``"numpy"`` NumPy's.  QRs are LAPACK's.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sl

from targets.exceptions import ExceptionStatus, NonFiniteIterate, check_mode, first_nonfinite, require_finite
from workloads import FrameworkError

from .sketch import matmul as _matmul


def matmul(a, b, kernels: str):
    return _matmul(a, b, kernels=kernels, pad=True)


class PencilError(FrameworkError, ValueError):
    """A pencil the method cannot take (shape, NaN/Inf, singular) or a bad parameter."""


@dataclass
class PencilStats:
    """``splits``: k/m of every split of a sub-pencil larger than 3; ``qz_fallbacks``: sub-pencils above
    the threshold that no line split (sizes in ``fallback_sizes``); ``lines_checked``: IRS runs;
    ``irs_steps``: QR steps in all; ``max_deflation_residual``: largest ||A X - Y (Y^H A X)|| / ||A||."""

    splits: list = field(default_factory=list)
    qz_fallbacks: int = 0
    fallback_sizes: list = field(default_factory=list)
    lines_checked: int = 0
    irs_steps: int = 0
    qz_calls: int = 0
    max_deflation_residual: float = 0.0


@dataclass
class PencilResult:
    """A ~ S diag(eigenvalues) T^-1, B ~ S T^-1 (original scale); ``scale`` divided A and B.
    ``exception_status`` (``targets.exceptions``): code 0 all finite; -1 / -2 A / B held Inf/NaN
    (``exceptions="check"``); +1 an iterate became non-finite, the solver stopped there (eigenvalues,
    S and T are NaN)."""

    eigenvalues: np.ndarray
    S: np.ndarray
    T: np.ndarray
    scale: float
    stats: PencilStats
    seconds: float
    exception_status: dict = field(default_factory=lambda: ExceptionStatus().to_dict())


@dataclass(frozen=True)
class _Params:
    omega: float
    x0: float
    y0: float
    lines: int
    p_max: int
    tau: float
    threshold: int
    kernels: str
    rng: np.random.Generator


def _irs(a, b, p_max: int, kernels: str, stats: PencilStats):
    """Inverse-free repeated squaring: (A_p, B_p) with B_p^-1 A_p = (B^-1 A)^(2^p)."""
    m = a.shape[0]
    r_old = None
    for _ in range(p_max):
        q, r = sl.qr(np.vstack([b, -a]), mode="full", check_finite=False)
        stats.irs_steps += 1
        qh = q[:, m:].conj().T
        a = require_finite("A_p", matmul(qh[:, :m], a, kernels))      # no squaring on NaNs
        b = require_finite("B_p", matmul(qh[:, m:], b, kernels))
        r = r[:m]
        if r_old is not None and np.linalg.norm(np.abs(r) - np.abs(r_old), 1) <= 10 * m * 2.2e-16 * np.linalg.norm(r_old, 1):
            break
        r_old = r
    return a, b


def _grurv(s, x, rng):
    """(W^H, ratios): (s^-1 x) = W^H R1^-1 R2 V with V Haar; ratios |R2_ii / R1_ii|."""
    m = s.shape[0]
    g = (rng.standard_normal((m, m)) + 1j * rng.standard_normal((m, m))) / math.sqrt(2)
    v, rv = np.linalg.qr(g)
    v = v * (np.diag(rv) / np.abs(np.diag(rv)))           # Haar (Mezzadri)
    u, r2 = np.linalg.qr(x @ v.conj().T)
    r1, w = sl.rq(u.conj().T @ s, check_finite=False)
    ratios = np.abs(np.diag(r2)) / np.maximum(np.abs(np.diag(r1)), 1e-300)
    return w.conj().T, ratios


def _line_pencil(a, b, vertical: bool, h: float):
    """(A1, B1) whose eigenvalues have modulus > 1 exactly where Re z > h (vertical) or Im z > h."""
    rot = a if vertical else -1j * a
    return rot - (h - 1) * b, rot - (h + 1) * b


def _probe(a, b, vertical, h, prm: _Params, stats):
    a1, b1 = _line_pencil(a, b, vertical, h)
    ap, bp = _irs(a1, b1, prm.p_max, prm.kernels, stats)
    stats.lines_checked += 1
    s = ap + bp
    w_plus, ratios = _grurv(s, ap, prm.rng)
    return int(np.sum(ratios >= prm.tau)), (s, ap, bp, w_plus)


def _search(a, b, box, prm: _Params, stats):
    """A line splitting (a, b): (vertical, h, k, line data, index) or None."""
    m = a.shape[0]
    best = None
    for vertical in (True, False):
        lo, hi = box[0:2] if vertical else box[2:4]
        origin = prm.x0 if vertical else prm.y0
        checked = 0
        while hi - lo > 1 and checked < int(math.log2(max(hi - lo, 2))) + 2:
            idx = (lo + hi) // 2
            h = origin + idx * prm.omega
            k, data = _probe(a, b, vertical, h, prm, stats)
            checked += 1
            if 0 < k < m and (best is None or abs(k - m / 2) < abs(best[2] - m / 2)):
                best = (vertical, h, k, data, idx)
            if k < m / 5:
                hi = idx                            # few eigenvalues beyond the line: move it back
            elif k > 4 * m / 5:
                lo = idx
            else:
                return best
    return best


def _left_basis(a, b, x, k):
    y = np.hstack([a @ x, b @ x])
    q = sl.qr(y, mode="economic", pivoting=True, check_finite=False)[0]
    return q[:, :k]


def _dnc(a, b, box, prm: _Params, stats: PencilStats):
    """(T, eigenvalues) of the sub-pencil, T with unit columns."""
    m = a.shape[0]
    if m == 1:
        return np.ones((1, 1), dtype=complex), np.array([a[0, 0] / b[0, 0]])
    if m <= prm.threshold:
        return _qz(a, b, stats)
    found = _search(a, b, box, prm, stats)
    if found is None:
        stats.qz_fallbacks += 1
        stats.fallback_sizes.append(m)
        return _qz(a, b, stats)
    vertical, h, k, (s, ap, bp, w_plus), idx = found
    if m > 3:
        stats.splits.append(k / m)
    w_minus, _ = _grurv(s, bp, prm.rng)
    halves = []
    for x, kk, sub in ((w_plus[:, :k], k, "upper"), (w_minus[:, :m - k], m - k, "lower")):
        y = _left_basis(a, b, x, kk)
        yh = y.conj().T
        ax, bx = require_finite("A X", matmul(a, x, prm.kernels)), require_finite("B X", matmul(b, x, prm.kernels))
        a11, b11 = matmul(yh, ax, prm.kernels), matmul(yh, bx, prm.kernels)
        res = max(np.linalg.norm(ax - y @ a11, 2), np.linalg.norm(bx - y @ b11, 2))
        stats.max_deflation_residual = max(stats.max_deflation_residual, float(res))
        sub_box = list(box)
        slot = (0 if vertical else 2) + (0 if sub == "upper" else 1)
        sub_box[slot] = idx
        t_sub, d_sub = _dnc(a11, b11, tuple(sub_box), prm, stats)
        halves.append((x @ t_sub, d_sub))
    t = np.hstack([halves[0][0], halves[1][0]])
    t /= np.linalg.norm(t, axis=0, keepdims=True)
    return t, np.concatenate([halves[0][1], halves[1][1]])


def _qz(a, b, stats):
    stats.qz_calls += 1
    w, v = sl.eig(a, b, check_finite=False)
    return v / np.linalg.norm(v, axis=0, keepdims=True), w


def check_pencil(a, b):
    """(A, B) as complex arrays, or a PencilError: shapes, NaN/Inf, a singular pencil."""
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape != b.shape or a.shape[0] < 1:
        raise PencilError(f"A {a.shape} and B {b.shape} must be square and of one size", field="A")
    for name, x in (("A", a), ("B", b)):
        if not np.all(np.isfinite(x)):
            raise PencilError("holds NaN or Inf", source=f"matrix {name}", field=name)
    a, b = a.astype(complex), b.astype(complex)
    scale = max(np.linalg.norm(a, 2), np.linalg.norm(b, 2))
    if scale == 0:
        raise PencilError("A and B are zero: the pencil is singular", field="A")
    rng = np.random.default_rng(12345)
    n = a.shape[0]
    tiny = [np.linalg.svd(a - z * b, compute_uv=False)[-1] <= 50 * n * 2.2e-16 * scale * (1 + abs(z))
            for z in rng.standard_normal(3) + 1j * rng.standard_normal(3)]
    if all(tiny):
        raise PencilError("the pencil is singular (det(A - zB) vanishes at random z): it has no eigenvalues to "
                          "diagonalize", field="B")
    return a, b, float(scale)


def diagonalize(a, b, *, eps: float = 1e-8, seed: int = 0, threshold: int = 16, radius: float = 4.0,
                kernels: str = "numpy", p_max: int | None = None, tau: float = 1e-3,
                blas_threads: int | None = 1, exceptions: str = "ieee") -> PencilResult:
    """Diagonalize the pencil (A, B) to backward error about ``eps`` (relative to max(||A||, ||B||)).
    ``blas_threads``: LAPACK/BLAS threads for the many small QRs (one is fastest up to n ~ 512 on a
    shared machine; None leaves the library's setting).  NaN/Inf: a non-finite A or B is bad input
    (PencilError), or with ``exceptions="check"`` a result with status code -1 / -2; every product of
    the repeated squaring and the deflation is checked and the first non-finite one stops the solver
    (status +1) instead of recursing on NaNs."""
    from threadpoolctl import threadpool_limits

    check_mode(exceptions)
    if exceptions == "check":
        for pos, name, x in ((1, "A", a), (2, "B", b)):
            hit = first_nonfinite(np.asarray(x))
            if hit is not None:
                return _failed(np.shape(a)[0], ExceptionStatus("check", -pos, name, "input", *hit), 0.0)
    t0 = time.perf_counter()
    with threadpool_limits(blas_threads):
        try:
            res = _diagonalize(a, b, eps, seed, threshold, radius, kernels, p_max, tau)
            require_finite("eigenvalues", res.eigenvalues)
        except NonFiniteIterate as exc:
            return _failed(np.shape(a)[0], exc.status, time.perf_counter() - t0)
    res.exception_status = ExceptionStatus(exceptions, 0).to_dict()
    return res


def _failed(n: int, status: ExceptionStatus, seconds: float) -> PencilResult:
    nan = np.full((n, n), np.nan + 0j)
    return PencilResult(np.full(n, np.nan + 0j), nan, nan.copy(), float("nan"), PencilStats(), seconds,
                        {**status.to_dict(), "mode": status.mode})


def _diagonalize(a, b, eps, seed, threshold, radius, kernels, p_max, tau) -> PencilResult:
    t0 = time.perf_counter()
    if not (0 < eps < 1):
        raise PencilError(f"eps must be in (0, 1), got {eps}", field="eps")
    if int(threshold) < 1:
        raise PencilError(f"threshold must be >= 1, got {threshold}", field="threshold")
    if kernels not in ("cosa", "numpy"):
        raise PencilError(f"kernels must be cosa or numpy, got {kernels}", field="kernels")
    a, b, scale = check_pencil(a, b)
    n = a.shape[0]
    rng = np.random.default_rng(seed)
    gamma = eps / 16
    ginibre = lambda: (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))) / math.sqrt(2 * n)
    at, bt = a / scale + gamma * ginibre(), b / scale + gamma * ginibre()
    omega = gamma / n
    lines = int(math.ceil(2 * radius / omega))
    x0 = -radius + rng.random() * omega
    y0 = -radius + rng.random() * omega
    p = p_max or int(math.ceil(math.log2(n / (gamma / n)))) + 2
    prm = _Params(omega, x0, y0, lines, p, tau, int(threshold), kernels, rng)
    stats = PencilStats()
    t, d = _dnc(at, bt, (0, lines, 0, lines), prm, stats)
    s = matmul(bt, t, kernels) * scale
    return PencilResult(d, s, t, scale, stats, time.perf_counter() - t0)


def backward_errors(a, b, res: PencilResult) -> tuple[float, float]:
    """(||A - S D T^-1||_2, ||B - S T^-1||_2) relative to max(||A||_2, ||B||_2)."""
    tinv_s = np.linalg.solve(res.T.T, res.S.T).T                     # S T^-1
    sdt = np.linalg.solve(res.T.T, (res.S * res.eigenvalues).T).T    # S D T^-1
    scale = max(np.linalg.norm(a, 2), np.linalg.norm(b, 2))
    return float(np.linalg.norm(a - sdt, 2) / scale), float(np.linalg.norm(b - tinv_s, 2) / scale)


def eig_match(a, b, eigenvalues, eps: float) -> dict:
    """Our eigenvalues against ``scipy.linalg.eig`` (matched by an assignment): the largest difference and
    the largest ratio of difference to the first-order prediction kappa_i (1 + |lambda_i|) eps, with
    kappa_i = ||x_i|| ||y_i|| / |y_i^H B x_i| from scipy's left and right eigenvectors (scaled pencil)."""
    from scipy.optimize import linear_sum_assignment

    scale = max(np.linalg.norm(a, 2), np.linalg.norm(b, 2))
    w, vl, vr = sl.eig(a / scale, b / scale, left=True, right=True)
    cost = np.abs(w[:, None] - eigenvalues[None, :])
    rows, cols = linear_sum_assignment(cost)
    diff = cost[rows, cols]
    kappa = (np.linalg.norm(vl, axis=0) * np.linalg.norm(vr, axis=0)
             / np.abs(np.einsum("ij,ij->j", vl.conj(), (b / scale) @ vr)))[rows]
    pred = kappa * (1 + np.abs(w[rows])) * eps
    return {"max_abs_diff": float(diff.max()), "max_over_prediction": float(np.max(diff / pred)),
            "max_condition": float(kappa.max())}


def test_pencil(n: int, kind: str = "random", *, seed: int = 0):
    """(A, B, planted eigenvalues or None): ``random`` Ginibre A, B / sqrt(n); ``planted``: A = X diag(lam) Y,
    B = X Y with X, Y Gaussian and lam uniform in the unit disk; ``ill-conditioned``: the same with X, Y of
    condition number about 1e4 (graded columns)."""
    rng = np.random.default_rng(seed)
    g = lambda: rng.standard_normal((n, n)) / math.sqrt(n)
    if kind == "random":
        return g(), g(), None
    if kind not in ("planted", "ill-conditioned"):
        raise PencilError(f"unknown pencil kind '{kind}' (random, planted, ill-conditioned)", field="kind")
    lam = np.sqrt(rng.random(n)) * np.exp(2j * np.pi * rng.random(n))
    x, y = g() + np.eye(n), g() + np.eye(n)
    if kind == "ill-conditioned":
        grade = np.geomspace(1, 1e-4, n)
        x, y = x * grade, grade[:, None] * y
    return (x * lam) @ y, x @ y, lam
