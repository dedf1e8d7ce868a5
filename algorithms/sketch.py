"""Sketching operators with a counter-based, seekable RNG, applied through scheduled CPU kernels.

An operator ``S`` is d x m (it sketches the m rows of a tall A into d rows).  Every random entry comes
from NumPy's ``Philox`` bit generator keyed by ``(seed, kind tag)`` and positioned by its counter, so any
block ``S[r0:r1, c0:c1]`` is generated on its own, bit for bit equal to the same block of the whole
operator; a rank that owns rows ``c0:c1`` of A generates columns ``c0:c1`` of S with no communication.

Streams (one 64-bit word = ``Philox`` output number ``L``):

* ``gaussian``: entry (i, j) is number ``L = j*d + i`` of a column-major stream of N(0, 1/d) values,
  Box-Muller on word pairs (``2*(L//2)``, ``2*(L//2)+1``): cosine for even ``L``, sine for odd.
* ``rademacher``: entry (i, j) is +-1/sqrt(d) from the top bit of word ``j*d + i``.
* ``sjlt`` (sparse sign, k nonzeros per column) and ``countsketch`` (k = 1): the d rows are cut into k
  bands; nonzero t of column j sits in band t at a row drawn from word ``j*k + t`` (distinct rows by
  construction), sign from the word's top bit, value +-1/sqrt(k).
* ``srft`` (orthonormal DCT-II) and ``srht`` (Walsh-Hadamard, rows padded to a power of two m'):
  ``sqrt(m'/d) R F D``; D's signs are words 0..m-1, R keeps the d rows whose keys (a second stream) are
  smallest, in key order.  Applied by ``scipy.fft`` (DCT) or a NumPy fast Walsh-Hadamard transform.
* ``uniform`` and ``leverage`` row sampling: row t of S has one nonzero, at the column drawn from word
  t (uniform, or inverse CDF of the given probabilities), scaled 1/sqrt(d p).

Kernels: a dense operator is applied block by block (``chunk`` columns of S at a time, the last block
zero-padded) as a GEMM LoopNest scheduled by ``cosa.schedule`` on the ``cpu`` preset and run by
``targets.cpu``; a sparse one (sjlt, countsketch, sampling) as a CSR SpMM LoopNest through the CPU
target's sparse kernel.  Schedules are cached per shape in memory and on disk (``cosa.schedule_cache``),
kernels by the target's content-hash build cache, so a driver pays for each shape once.
A sparse A is sketched by SciPy's sparse product when S is sparse, by SpMM on ``A^T`` when S is dense.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from workloads import FrameworkError

KINDS = ("gaussian", "rademacher", "sjlt", "countsketch", "srft", "srht", "uniform", "leverage")
_TAGS = {k: i + 1 for i, k in enumerate(KINDS)}
DENSE_KINDS = ("gaussian", "rademacher", "srft", "srht")


class SketchError(FrameworkError, ValueError):
    """A sketch or a driver's input that cannot be used (bad size, unknown operator, NaN/Inf)."""


# --- the counter-based stream ------------------------------------------------------------------

def _key(seed: int, tag: int) -> np.ndarray:
    return np.array([int(seed) % 2**64, tag], dtype=np.uint64)


def raw_words(seed: int, tag: int, start: int, count: int) -> np.ndarray:
    """Words ``start .. start+count-1`` of the Philox stream keyed by (seed, tag): counter ``start // 4``
    gives words 4c..4c+3, so any range is generated without the words before it."""
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    bg = np.random.Philox(key=_key(seed, tag), counter=start // 4)
    skip = start % 4
    return bg.random_raw(count + skip)[skip:]


def _unit(words: np.ndarray) -> np.ndarray:
    """Uniform doubles in [0, 1) from the top 53 bits."""
    return (words >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)


def gaussian_numbers(seed: int, tag: int, start: int, count: int) -> np.ndarray:
    """N(0, 1) numbers ``start .. start+count-1`` of the stream (Box-Muller on word pairs)."""
    if count <= 0:
        return np.zeros(0)
    p0, p1 = start // 2, (start + count - 1) // 2 + 1
    w = raw_words(seed, tag, 2 * p0, 2 * (p1 - p0)).reshape(-1, 2)
    rad = np.sqrt(-2.0 * np.log1p(-_unit(w[:, 0])))
    ang = (2 * np.pi) * _unit(w[:, 1])
    z = np.empty(2 * (p1 - p0))
    z[0::2] = rad * np.cos(ang)
    z[1::2] = rad * np.sin(ang)
    off = start - 2 * p0
    return z[off:off + count]


def _signs(words: np.ndarray) -> np.ndarray:
    return np.where(words >> np.uint64(63), 1.0, -1.0)


# --- operators ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sketch:
    """A d x m sketching operator (see the module docstring for its streams).

    ``k``: nonzeros per column (sjlt); ``probabilities``: length-m row probabilities (leverage)."""

    kind: str
    d: int
    m: int
    seed: int = 0
    k: int = 8
    probabilities: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def tag(self) -> int:
        return _TAGS[self.kind]

    @property
    def sparse(self) -> bool:
        return self.kind not in DENSE_KINDS

    @property
    def padded_m(self) -> int:
        """Rows the transform acts on: m, or the next power of two for srht."""
        return 1 << max(0, (self.m - 1).bit_length()) if self.kind == "srht" else self.m

    # transforms: signs D and the kept rows R
    @functools.cached_property
    def _signs_d(self) -> np.ndarray:
        return _signs(raw_words(self.seed, self.tag, 0, self.m))

    @functools.cached_property
    def rows(self) -> np.ndarray:
        """Sampled rows: the transform rows R keeps (srft/srht) or the columns of A each row of S picks."""
        if self.kind in ("srft", "srht"):
            keys = raw_words(self.seed, self.tag + 100, 0, self.padded_m)
            return np.argsort(keys, kind="stable")[:self.d]
        w = raw_words(self.seed, self.tag, 0, self.d)
        if self.kind == "uniform":
            return (w % np.uint64(self.m)).astype(np.int64)
        cdf = np.cumsum(self.probabilities)
        return np.minimum(np.searchsorted(cdf, _unit(w) * cdf[-1], side="right"), self.m - 1)

    def _sample_scale(self) -> np.ndarray:
        if self.kind == "uniform":
            return np.full(self.d, math.sqrt(self.m / self.d))
        p = self.probabilities[self.rows] / np.sum(self.probabilities)
        return 1.0 / np.sqrt(self.d * p)

    def block(self, r0: int, r1: int, c0: int, c1: int):
        """``S[r0:r1, c0:c1]``, generated on its own: a C-contiguous float64 array for dense kinds, a
        SciPy CSR matrix (sorted indices) for sparse ones."""
        if not (0 <= r0 <= r1 <= self.d and 0 <= c0 <= c1 <= self.m):
            raise SketchError(f"block [{r0}:{r1}, {c0}:{c1}] outside the {self.d} x {self.m} operator",
                              source=f"sketch {self.kind}", field="block")
        d, nc = self.d, c1 - c0
        if self.kind == "gaussian":
            z = gaussian_numbers(self.seed, self.tag, c0 * d, nc * d).reshape(nc, d)
            return np.ascontiguousarray(z.T[r0:r1]) / math.sqrt(d)
        if self.kind == "rademacher":
            w = raw_words(self.seed, self.tag, c0 * d, nc * d).reshape(nc, d)
            return np.ascontiguousarray(_signs(w).T[r0:r1]) / math.sqrt(d)
        if self.kind in ("srft", "srht"):
            i = self.rows[r0:r1, None]
            j = np.arange(c0, c1)[None, :]
            mp = self.padded_m
            if self.kind == "srft":
                # the angle's integer part is reduced mod 4m' first, so it stays exact
                f = np.cos(np.pi * ((i * (2 * j + 1)) % (4 * mp)) / (2 * mp)) * math.sqrt(2.0 / mp)
                f = np.where(i == 0, 1.0 / math.sqrt(mp), f)
            else:
                bits = np.bitwise_and(i, j)
                par = np.zeros(bits.shape, dtype=np.int64)
                while np.any(bits):
                    par ^= bits & 1
                    bits = bits >> 1
                f = (1.0 - 2.0 * par) / math.sqrt(mp)
            return np.ascontiguousarray(f * self._signs_d[c0:c1][None, :] * math.sqrt(mp / d))
        if self.kind in ("sjlt", "countsketch"):
            k = self.k if self.kind == "sjlt" else 1
            w = raw_words(self.seed, self.tag, c0 * k, nc * k).reshape(nc, k)
            lo = (np.arange(k) * d) // k
            size = (np.arange(1, k + 1) * d) // k - lo
            rows = lo[None, :] + (w % size[None, :].astype(np.uint64)).astype(np.int64)
            vals = _signs(w) / math.sqrt(k)
            cols = np.repeat(np.arange(nc), k)
            keep = (rows.ravel() >= r0) & (rows.ravel() < r1)
            m = sp.csr_matrix((vals.ravel()[keep], (rows.ravel()[keep] - r0, cols[keep])), shape=(r1 - r0, nc))
        else:
            rows, scale = self.rows[r0:r1], self._sample_scale()[r0:r1]
            keep = (rows >= c0) & (rows < c1)
            t = np.arange(r1 - r0)[keep]
            m = sp.csr_matrix((scale[keep], (t, rows[keep] - c0)), shape=(r1 - r0, nc))
        m.sort_indices()
        return m

    def dense(self) -> np.ndarray:
        """The whole operator as a dense d x m array."""
        b = self.block(0, self.d, 0, self.m)
        return b.toarray() if sp.issparse(b) else b

    def apply(self, a, *, chunk: int = 4096, threads: int | None = None) -> np.ndarray:
        """``S @ a`` for a dense or SciPy sparse ``a`` with m rows (d x n, float64)."""
        a = check_finite_matrix(a, "A")
        if a.shape[0] != self.m:
            raise SketchError(f"A has {a.shape[0]} rows, the operator {self.m} columns", source="sketch", field="A")
        if sp.issparse(a):
            if self.sparse:
                return np.asarray((self.block(0, self.d, 0, self.m) @ a).todense())
            at = sp.csr_matrix(a.T)
            return apply_dense_to_sparse_t(self, at, chunk, threads)
        a = np.ascontiguousarray(a, dtype=np.float64)
        if self.kind == "srft":
            from scipy.fft import dct

            y = dct(self._signs_d[:, None] * a, type=2, norm="ortho", axis=0, workers=threads or -1)
            return np.ascontiguousarray(y[self.rows]) * math.sqrt(self.m / self.d)
        if self.kind == "srht":
            x = np.zeros((self.padded_m, a.shape[1]))
            x[:self.m] = self._signs_d[:, None] * a
            return fwht(x)[self.rows] * math.sqrt(self.padded_m / self.d)
        n = a.shape[1]
        if n % 8:                    # kernels run best on whole vectors: pad the columns to a multiple of 8
            a = np.pad(a, ((0, 0), (0, 8 - n % 8)))
        if self.sparse:
            return spmm(self.block(0, self.d, 0, self.m), a, threads=threads)[:, :n]
        out = np.zeros((self.d, a.shape[1]))
        step = min(chunk, self.m)
        for c0 in range(0, self.m, step):
            c1 = min(c0 + step, self.m)
            sb, ab = self.block(0, self.d, c0, c1), a[c0:c1]
            if c1 - c0 < step:                          # pad the last block: one kernel shape
                sb = np.pad(sb, ((0, 0), (0, step - (c1 - c0))))
                ab = np.pad(ab, ((0, step - (c1 - c0)), (0, 0)))
            out += gemm(sb, ab, threads=threads)
        return out[:, :n]


def apply_dense_to_sparse_t(op: Sketch, at, chunk: int, threads) -> np.ndarray:
    """``S @ A`` for sparse A given as ``at = A^T`` (CSR): ``(A^T S^T)^T`` by SpMM, S^T in column blocks."""
    n = at.shape[0]
    out = np.zeros((n, op.d))
    step = min(chunk, op.m)
    for c0 in range(0, op.m, step):
        c1 = min(c0 + step, op.m)
        st = np.zeros((step, op.d))
        st[:c1 - c0] = op.block(0, op.d, c0, c1).T
        blk = at[:, c0:c1]
        blk = sp.csr_matrix((blk.data, blk.indices, blk.indptr), shape=(n, step))
        out += spmm(blk, st, threads=threads)
    return np.ascontiguousarray(out.T)


def make(kind: str, d: int, m: int, *, seed: int = 0, k: int = 8, probabilities=None) -> Sketch:
    """A checked operator: unknown kinds, d < 1, k outside 1..d and bad probabilities are refused."""
    if kind not in KINDS:
        raise SketchError(f"unknown sketch '{kind}' (known: {', '.join(KINDS)})", field="sketch")
    if int(d) < 1 or int(m) < 1:
        raise SketchError(f"sketch size d={d} and rows m={m} must be >= 1", field="d")
    if kind == "sjlt" and not 1 <= int(k) <= int(d):
        raise SketchError(f"sjlt needs 1 <= k <= d, got k={k}, d={d}", field="k")
    if kind in ("srft", "srht") and int(d) > int(m):
        raise SketchError(f"{kind} keeps d={d} of m={m} transformed rows: needs d <= m", field="d")
    if kind == "leverage":
        p = np.asarray(probabilities, dtype=np.float64) if probabilities is not None else None
        if p is None or p.shape != (int(m),) or not np.all(np.isfinite(p)) or np.any(p < 0) or p.sum() <= 0:
            raise SketchError("leverage sampling needs m finite non-negative probabilities with a positive sum",
                              field="probabilities")
        probabilities = p
    return Sketch(kind, int(d), int(m), int(seed), int(k), probabilities)


def check_finite_matrix(a, name: str):
    """``a`` (dense or SciPy sparse) as float64, or a SketchError when it holds NaN or Inf."""
    if sp.issparse(a):
        a = a.astype(np.float64)
        vals = a.data
    else:
        a = np.asarray(a, dtype=np.float64)
        vals = a
    if vals.size and np.isfinite(np.sum(vals)):      # one read, no mask: a NaN or Inf makes the sum non-finite
        return a
    if not np.all(np.isfinite(vals)):
        raise SketchError("holds NaN or Inf", source=f"matrix {name}", field=name)
    return a


def fwht(x: np.ndarray) -> np.ndarray:
    """Orthonormal Walsh-Hadamard transform along axis 0 (length a power of two), Sylvester order."""
    m = x.shape[0]
    y = np.array(x, dtype=np.float64, copy=True).reshape(m, -1)
    h = 1
    while h < m:
        v = y.reshape(m // (2 * h), 2, h, -1)
        a, b = v[:, 0].copy(), v[:, 1]
        v[:, 0] += b
        v[:, 1] = a - b
        h *= 2
    return (y / math.sqrt(m)).reshape(x.shape)


def leverage_scores(a, *, exact: bool = False, seed: int = 0, oversample: int = 4) -> np.ndarray:
    """Row leverage scores of a tall full-rank A: exact (thin QR) or approximate (Drineas et al.: R from
    an SJLT sketch of ``oversample * n`` rows, then row norms of A R^-1 G with a Gaussian G of 32 columns)."""
    import scipy.linalg as sl

    a = check_finite_matrix(a, "A")
    m, n = a.shape
    dense = a.toarray() if sp.issparse(a) else a
    if exact:
        q = np.linalg.qr(dense)[0]
        return np.einsum("ij,ij->i", q, q)
    op = make("sjlt", min(m, oversample * n), m, seed=seed, k=min(8, oversample * n))
    r = np.linalg.qr(op.apply(a), mode="r")
    g = gaussian_numbers(seed, 99, 0, n * 32).reshape(n, 32) / math.sqrt(32)
    y = a @ sl.solve_triangular(r, g)
    return np.einsum("ij,ij->i", y, y)


# --- scheduled kernels -------------------------------------------------------------------------

def _cpu_arch():
    import costmodel

    return costmodel.preset("cpu")


def scheduled_mapping(nest):
    """The CoSA MIP's mapping of ``nest`` on the cpu preset (its fan-outs as spatial axes), solved once
    for every process (``cosa.schedule_cache``: on disk, keyed by the workload, arch and options);
    returns (mapping, arch)."""
    from cosa.schedule_cache import cached_mapping
    from targets.cpu.plan import arch_for

    arch = arch_for(nest, _cpu_arch())
    return cached_mapping(nest, arch, time_limit_s=20, seed=0), arch


@functools.lru_cache(maxsize=None)
def gemm_kernel(m: int, n: int, k: int):
    """The compiled float64 GEMM ``C[m, n] = A[m, k] B[k, n]`` for one shape (scheduled, cached)."""
    import workloads
    from targets.cpu import compile_kernel

    nest = workloads.matmul(f"gemm_{m}x{n}x{k}", M=m, N=n, K=k, bits=64)
    mapping, arch = scheduled_mapping(nest)
    return compile_kernel(nest, mapping, arch)


@functools.lru_cache(maxsize=None)
def spmm_kernel(m: int, n: int, k: int):
    """The compiled CSR SpMM ``C[m, n] = S[m, k] B[k, n]`` (S sparse float64) for one shape: the C function
    ``(indptr, indices, values, B, C, nthreads)``."""
    from dataclasses import replace

    import workloads
    from targets.cpu.build import build, load
    from targets.cpu.sparse import emit_sparse

    nest = workloads.matmul(f"spmm_{m}x{n}x{k}", M=m, N=n, K=k, bits=64)
    nest = replace(nest, tensors=tuple(replace(t, density=0.01) if t.name == "A" else t for t in nest.tensors))
    mapping, arch = scheduled_mapping(nest)
    return load(build(emit_sparse(nest, mapping, arch)), "cosa_kernel", 5)


def _threads(threads) -> int:
    return int(threads or os.cpu_count() or 1)


def gemm(a: np.ndarray, b: np.ndarray, *, threads: int | None = None) -> np.ndarray:
    """``a @ b`` (float64) by the scheduled CPU kernel of its shape."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    if a.shape[1] != b.shape[0]:
        raise SketchError(f"gemm shapes {a.shape} and {b.shape} do not chain", field="shape")
    if 0 in a.shape or b.shape[1] == 0:
        return np.zeros((a.shape[0], b.shape[1]))
    kern = gemm_kernel(a.shape[0], b.shape[1], a.shape[1])
    return kern({"A": a, "B": b}, threads=_threads(threads))


def spmm(s, b: np.ndarray, *, threads: int | None = None) -> np.ndarray:
    """``s @ b`` for a SciPy sparse ``s`` and a dense ``b`` by the CPU target's CSR SpMM kernel."""
    s = sp.csr_matrix(s, dtype=np.float64)
    s.sort_indices()
    b = np.ascontiguousarray(b, dtype=np.float64)
    m, k = s.shape
    out = np.empty((m, b.shape[1]))
    if 0 in out.shape:
        return np.zeros(out.shape)
    fn = spmm_kernel(m, b.shape[1], k)
    indptr, indices = s.indptr.astype(np.int32), s.indices.astype(np.int32)
    data = np.ascontiguousarray(s.data)
    fn(indptr.ctypes.data, indices.ctypes.data, data.ctypes.data, b.ctypes.data, out.ctypes.data, _threads(threads))
    return out


def bucket(size: int) -> int:
    """``size`` rounded up to a quarter octave (16, 20, 24, 28, 32, 40, 48, ...): padding shapes to
    these keeps the number of scheduled kernels a recursion needs small (at most 25% more work per dim)."""
    if size <= 16:
        return 16
    step = 1 << ((size - 1).bit_length() - 3)
    return -(-size // step) * step


def matmul(a, b, *, kernels: str = "cosa", threads: int | None = None, pad: bool = False) -> np.ndarray:
    """``a @ b`` for real or complex dense operands: ``kernels="cosa"`` runs the scheduled float64 GEMM (a
    complex product is one real GEMM ``[Re a; Im a] @ [Re b, Im b]`` recombined; ``pad``: shapes padded
    with zeros to ``bucket`` sizes), ``"numpy"`` NumPy's."""
    if kernels == "numpy":
        return a @ b
    m, n = a.shape[0], b.shape[1]
    cplx = np.iscomplexobj(a) or np.iscomplexobj(b)
    if cplx:
        a, b = np.vstack([a.real, np.imag(a)]), np.hstack([b.real, np.imag(b)])
    if pad:
        mp, kp, np_ = bucket(a.shape[0]), bucket(a.shape[1]), bucket(b.shape[1])
        a = np.pad(a, ((0, mp - a.shape[0]), (0, kp - a.shape[1])))
        b = np.pad(b, ((0, kp - b.shape[0]), (0, np_ - b.shape[1])))
    p = gemm(a, b, threads=threads)
    if not cplx:
        return p[:m, :n]
    return (p[:m, :n] - p[m:2 * m, n:2 * n]) + 1j * (p[:m, n:2 * n] + p[m:2 * m, :n])


# --- distributed sketching ---------------------------------------------------------------------

def row_block(m: int, parts: int, rank: int) -> tuple[int, int]:
    """Rows [r0, r1) of rank ``rank`` when m rows are cut into ``parts`` near-equal blocks."""
    base, extra = divmod(m, parts)
    r0 = rank * base + min(rank, extra)
    return r0, r0 + base + (rank < extra)


def gaussian_rows(seed: int, r0: int, r1: int, n: int) -> np.ndarray:
    """Rows r0..r1-1 of an m x n N(0, 1) test matrix (row-major stream, tag 200), generated on their own."""
    return gaussian_numbers(seed, 200, r0 * n, (r1 - r0) * n).reshape(r1 - r0, n)


def distributed_sketch(ranks, *, kind: str, d: int, m: int, n: int, seed: int = 0, data_seed: int = 1,
                       k: int = 8) -> dict:
    """``S @ A`` for a row-partitioned A on MPI ranks (``targets.mpi.Ranks``): each rank generates its rows
    of A and its own column block of S (no communication), multiplies them with the CPU kernels, and one
    binomial ``reduce`` of d x n words (phase ``sketch_reduce``) sums the blocks at rank 0.  Returns this
    rank's rows, traffic and, on rank 0, the sketch (a nested list)."""
    r0, r1 = row_block(m, ranks.size, ranks.rank)
    op = make(kind, d, m, seed=seed, k=min(k, d))
    a = gaussian_rows(data_seed, r0, r1, n)
    with ranks.phase("local_sketch"):
        blk = op.block(0, d, r0, r1)
        local = spmm(blk, a, threads=1) if sp.issparse(blk) else gemm(blk, a, threads=1)
    with ranks.phase("sketch_reduce"):
        total = ranks.reduce(np.ascontiguousarray(local), root=0)
    return {"rows": [r0, r1], "traffic": {p: t.to_dict() for p, t in ranks.traffic().items()},
            "sketch": None if total is None else total.tolist()}
