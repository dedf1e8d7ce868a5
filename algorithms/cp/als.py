"""CP decomposition by alternating least squares: exact CP-ALS, CP-ARLS-LEV and STS-CP.

Each sweep updates U_1, ..., U_N in turn from min ||X_(n) - U_n A_n^T|| with A_n the Khatri-Rao product
of the other factors (modes in increasing order).  ``als``: U_n = MTTKRP (G_{-n})^+ with G_{-n} the
Hadamard product of the other Grams (the MTTKRP dense through the scheduled CPU kernel or NumPy, sparse
over the nonzeros).  ``arls-lev`` and ``sts-cp``: J rows of A_n drawn with probability p_j (ARLS-LEV:
the product of per-factor leverage scores; STS-CP: the exact leverage of A_n, ``KrpSampler``), each
scaled by 1/sqrt(J p_j), and the sampled problem solved: U_n = (X_(n) S^T S A_n)(A_n^T S^T S A_n)^+.
For a sparse X the sampled columns of X_(n) are fibers found by binary search in the nonzeros sorted
by their other-mode indices.

Weights: columns are normalised after each update, their norms kept in ``weights``.  Fit
1 - ||X - [[w; U]]|| / ||X||, from ||X||^2 - 2 <X, [[w; U]]> + ||[[w; U]]||^2 (never forming the dense
tensor for a sparse X); its evaluation is not counted in the seconds.  ``seconds``: the sweeps;
``setup_seconds``: index building, and for the dense CPU backend scheduling and compiling each mode's
kernel (once per shape in a process).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from targets.exceptions import ExceptionStatus, check_mode, first_nonfinite, iterate_status, nrm2

from .mttkrp import SparseMttkrp, mttkrp_dense, unfold3
from .sampler import KrpSampler, SegmentTree, hadamard, product_leverage_draw
from .tensors import CpError, SparseTensor

METHODS = ("als", "arls-lev", "sts-cp")


@dataclass
class CpResult:
    weights: np.ndarray
    factors: list
    fit: float
    fit_per_iter: list = field(default_factory=list)
    seconds: float = 0.0
    seconds_per_iter: list = field(default_factory=list)
    setup_seconds: float = 0.0
    method: str = "als"
    samples: int | None = None
    exception_status: dict = field(default_factory=lambda: ExceptionStatus().to_dict())

    def to_dict(self) -> dict:
        return {"method": self.method, "rank": int(self.weights.size), "samples": self.samples,
                "fit": self.fit, "fit_per_iter": self.fit_per_iter, "seconds": self.seconds,
                "seconds_per_iter": self.seconds_per_iter,
                "setup_seconds": self.setup_seconds, "exception_status": self.exception_status}


def init_factors(shape, rank: int, seed: int) -> list[np.ndarray]:
    """Uniform [0, 1) factors (TensorLy's ``init='random'`` law), seeded."""
    rng = np.random.default_rng(seed)
    return [rng.random((n, rank)) for n in shape]


def svd_init(x, rank: int, seed: int = 0) -> list[np.ndarray]:
    """Leading left singular vectors of each unfolding (TensorLy's ``init='svd'``; columns past the mode
    size are seeded uniform [0, 1)); a sparse X through its unfolding's Gram (or ``svds`` for big modes)."""
    import scipy.sparse.linalg as sla

    rng = np.random.default_rng(seed)
    shape = tuple(x.shape)
    out = []
    for n, size in enumerate(shape):
        others = [m for m in range(len(shape)) if m != n]
        k = min(rank, size)
        if isinstance(x, SparseTensor):
            cols = np.ravel_multi_index(tuple(x.indices[:, others].T), [shape[m] for m in others])
            a = sp.csr_matrix((x.values, (x.indices[:, n], cols)), shape=(size, int(cols.max()) + 1))
            if size <= 4096 or k >= size - 1:
                import scipy.linalg as sla_dense

                _, v = sla_dense.eigh((a @ a.T).toarray(), subset_by_index=[size - k, size - 1])
                u = v[:, ::-1]
            else:
                u, _, _ = sla.svds(a, k=k, random_state=seed)
                u = u[:, ::-1]
        else:
            u = np.linalg.svd(np.moveaxis(np.asarray(x), n, 0).reshape(size, -1), full_matrices=False)[0][:, :k]
        if k < rank:
            u = np.hstack([u, rng.random((size, rank - k))])
        out.append(np.ascontiguousarray(u))
    return out


def fit_of(x, weights, factors, xnorm: float | None = None) -> float:
    """1 - ||X - [[w; U]]||_F / ||X||_F for a dense array or a ``SparseTensor``."""
    r = weights.size
    grams = [u.T @ u for u in factors]
    sparse = isinstance(x, SparseTensor)
    xn = (nrm2(x.values) if sparse else nrm2(x)) if xnorm is None else xnorm
    ws = weights / xn              # in units of ||X||: no overflow where X's squares would overflow
    mnorm2 = float(ws @ hadamard(grams, r) @ ws)
    if sparse:
        rows = np.ones((x.nnz, r))
        for k, u in enumerate(factors):
            rows *= u[x.indices[:, k]]
        ip = float(x.values @ (rows @ ws)) / xn
    else:
        ip = float(np.sum(mttkrp_dense(x, factors, 0, "numpy") * factors[0], axis=0) @ ws) / xn
    res2 = max(1.0 - 2 * ip + mnorm2, 0.0)
    return 1.0 - np.sqrt(res2)


class _FiberIndex:
    """For mode n: the nonzeros sorted by the linear index of their other-mode indices."""

    def __init__(self, t: SparseTensor, n: int):
        self.others = [m for m in range(t.order) if m != n]
        dims = [t.shape[m] for m in self.others]
        if np.prod(np.array(dims, dtype=float)) >= 2.0 ** 62:
            raise CpError(f"mode sizes {t.shape} too large to index fibers in 64 bits", field="shape")
        self.dims = dims
        key = np.ravel_multi_index(tuple(t.indices[:, self.others].T), dims)
        self.perm = np.argsort(key, kind="stable")
        self.keys = key[self.perm]
        self.rows = t.indices[self.perm, n]
        self.vals = t.values[self.perm]

    def sampled_rhs(self, idx: np.ndarray, scale2: np.ndarray, a: np.ndarray, rows_n: int) -> np.ndarray:
        """sum_j scale2_j X(:, fiber_j) a_j^T  (rows_n x R)."""
        key = np.ravel_multi_index(tuple(idx.T), self.dims)
        lo = np.searchsorted(self.keys, key, "left")
        hi = np.searchsorted(self.keys, key, "right")
        cnt = hi - lo
        tot = int(cnt.sum())
        if tot == 0:
            return np.zeros((rows_n, a.shape[1]))
        which = np.repeat(np.arange(idx.shape[0]), cnt)
        start = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
        nz = start + np.arange(tot)
        m = sp.csr_matrix((self.vals[nz] * scale2[which], (self.rows[nz], which)), shape=(rows_n, idx.shape[0]))
        return np.asarray(m @ a)


def _check(x, rank: int, method: str, samples: int | None, iters: int):
    shape = x.shape
    if len(shape) < 2:
        raise CpError(f"a tensor needs order >= 2, got order {len(shape)}", field="tensor")
    if rank < 1:
        raise CpError(f"must be >= 1, got {rank}", field="rank")
    if iters < 1:
        raise CpError(f"must be >= 1, got {iters}", field="iters")
    if method not in METHODS:
        raise CpError(f"unknown method {method!r} (one of {', '.join(METHODS)})", field="method")
    if method != "als" and (samples is None or samples < rank):
        raise CpError(f"samples must be >= rank ({rank}), got {samples}", field="samples")


def cp(x, rank: int, *, method: str = "als", iters: int = 20, samples: int | None = None, seed: int = 0,
       init: str | list = "svd", backend: str = "cpu", track_fit: bool = True, exceptions: str = "ieee") -> CpResult:
    """Rank-``rank`` CP of ``x`` (dense array or ``SparseTensor``) by ``method`` (als, arls-lev, sts-cp),
    ``iters`` sweeps; ``init``: ``svd`` (``svd_init``), ``random`` (``init_factors``) or the factors;
    ``backend`` (dense exact ALS): ``cpu`` (the scheduled kernel) or ``numpy``.

    NaN/Inf (``targets.exceptions``): a non-finite X is bad input (CpError), or with ``exceptions="check"``
    a result with ``exception_status`` code -1 and NaN factors; a factor update that becomes non-finite
    (overflow) stops the sweeps there: the result holds that update, fit NaN, status code +1."""
    _check(x, rank, method, samples, iters)
    check_mode(exceptions)
    hit = first_nonfinite(x.values if isinstance(x, SparseTensor) else np.asarray(x))
    if hit is not None:
        if exceptions != "check":
            raise CpError("holds NaN or Inf (exceptions=check reports it as a status)", field="tensor")
        nan = [np.full((s, rank), np.nan) for s in x.shape]
        return CpResult(np.full(rank, np.nan), nan, float("nan"), method=method, samples=samples,
                        exception_status=ExceptionStatus("check", -1, "X", "input", *hit).to_dict())
    sparse = isinstance(x, SparseTensor)
    shape = tuple(x.shape)
    nmodes = len(shape)
    if isinstance(init, str):
        if init not in ("svd", "random"):
            raise CpError(f"unknown init {init!r} (svd, random or factor matrices)", field="init")
        init = svd_init(x, rank, seed) if init == "svd" else init_factors(shape, rank, seed)
    factors = [np.array(u, dtype=np.float64) for u in init]
    if len(factors) != nmodes or any(u.shape != (s, rank) for u, s in zip(factors, shape)):
        raise CpError(f"init factors {[u.shape for u in factors]} do not fit shape {shape} and rank {rank}",
                      field="init")
    weights = np.ones(rank)
    rng = np.random.default_rng(seed + 7)
    xnorm = nrm2(x.values) if sparse else nrm2(x)        # scaled: no spurious overflow
    t0 = time.perf_counter()
    if sparse:
        mtt = SparseMttkrp(x) if method == "als" else None
        fibers = [_FiberIndex(x, n) for n in range(nmodes)] if method != "als" else None
    else:
        xd = np.ascontiguousarray(x, dtype=np.float64)
        if method == "als":  # the nest's A per mode, kept; schedule and build each mode's kernel once
            unfolded = [unfold3(xd, n) for n in range(nmodes)]
            if backend == "cpu":
                for n in range(nmodes):
                    mttkrp_dense(xd, factors, n, backend, unfolded[n])
        unfold = [np.moveaxis(xd, n, 0).reshape(shape[n], -1) for n in range(nmodes)] if method != "als" else None
    grams = [u.T @ u for u in factors]
    trees = [SegmentTree.build(u) for u in factors] if method == "sts-cp" else None
    setup_s = time.perf_counter() - t0
    fits, secs = [], []
    for _ in range(iters):
        t1 = time.perf_counter()
        for n in range(nmodes):
            others = [m for m in range(nmodes) if m != n]
            if method == "als":
                m = mtt(factors, n) if sparse else mttkrp_dense(xd, factors, n, backend, unfolded[n])
                g = hadamard([grams[k] for k in others], rank)
            else:
                if method == "sts-cp":
                    smp = KrpSampler([factors[k] for k in others], [trees[k] for k in others],
                                     [grams[k] for k in others])
                    idx, prob, a = smp.draw(samples, rng)
                else:
                    idx, prob, a = product_leverage_draw([factors[k] for k in others], samples, rng)
                scale2 = 1.0 / (samples * prob)
                if sparse:
                    m = fibers[n].sampled_rhs(idx, scale2, a, shape[n])
                else:
                    cols = np.ravel_multi_index(tuple(idx.T), [shape[k] for k in others])
                    m = (unfold[n][:, cols] * scale2) @ a
                g = a.T @ (a * scale2[:, None])
            u = m @ np.linalg.pinv(g, hermitian=True) if np.all(np.isfinite(g)) else m * np.nan
            stop = iterate_status(f"U_{n}", u, exceptions)
            if stop is not None:  # no further sweep on NaNs
                factors[n] = u
                secs.append(time.perf_counter() - t1)
                return CpResult(weights, factors, float("nan"), fits, sum(secs), secs, setup_s, method, samples,
                                stop.to_dict())
            scale = np.max(np.abs(u), axis=0)                    # column norms scaled (NRM2's rule)
            safe = np.where(scale > 0, scale, 1.0)
            norms = scale * np.sqrt(np.sum((u / safe) ** 2, axis=0))
            norms[norms == 0] = 1.0
            factors[n] = u / norms
            weights = norms
            grams[n] = factors[n].T @ factors[n]
            if trees is not None:
                trees[n] = SegmentTree.build(factors[n])
        secs.append(time.perf_counter() - t1)
        if track_fit:
            fits.append(fit_of(x, weights, factors, xnorm))
    fit = fits[-1] if fits else fit_of(x, weights, factors, xnorm)
    return CpResult(weights, factors, fit, fits, sum(secs), secs, setup_s, method, samples,
                    ExceptionStatus(exceptions, 0).to_dict())
