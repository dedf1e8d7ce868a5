"""Minibatch SGD and s-step communication-avoiding SGD (CA-SGD) for binary logistic regression on MPI
ranks, after Devarakonda and Demmel, "Avoiding communication in logistic regression" (HiPC 2020).

Problem: labels y in {-1, +1}, loss f(x) = (1/m) sum_i log(1 + exp(-y_i a_i^T x)).  Iteration k samples
a batch I_k of b rows (``batch_indices``: one seeded stream that SGD and CA-SGD share), forms
Y_k = diag(y_I) A_I and steps

    x_{k+1} = x_k + (eta / b) Y_k^T u_k,    u_k = sigma(-Y_k x_k),    sigma(t) = 1 / (1 + exp(-t)).

1D column partition: rank r of p owns the features [c_r, c_{r+1}) (``numpy.array_split`` sizes) and that
block of x.  SGD needs Y_k x_k, a sum over ranks: one allreduce of b words per iteration.  CA-SGD
unrolls s iterations: with Y = [Y_1; ...; Y_s] (sb x n) it allreduces, once per s iterations, the
lower triangle of the Gram matrix G = Y Y^T (sb(sb+1)/2 words, row by row) and v = Y x (sb words), then
every rank recomputes, redundantly,

    Y_t x_{t-1} = v_t + (eta / b) sum_{l < t} G_{t,l} u_l,     t = 1..s,

and updates its block once: x += (eta / b) Y^T [u_1; ...; u_s].  In exact arithmetic the iterates are
SGD's; in floating point they agree to rounding (the tests check 1e-12 relative).

Local kernels (``kernels="cosa"``): the Gram product, Y x and Y^T u are LoopNests
(``kernel_nests``) scheduled by ``cosa.schedule`` on the cpu preset and compiled by ``targets.cpu``
(dense: einsum nests; CSR: the CPU target's CSR SpMM with a dense right-hand side); ``kernels="numpy"``
uses NumPy / SciPy.  The model of words, messages, flops and time and the driver that launches the
ranks live in ``algorithms.casgd_run``.
"""

from __future__ import annotations

import functools
import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from workloads import FrameworkError

SHIPPED = Path(__file__).resolve().parent / "data" / "breast_cancer_scale.svm.gz"
"""569 x 30 Breast Cancer Wisconsin (Diagnostic), features scaled to [-1, 1]: see data/README.md."""


class CasgdError(FrameworkError, ValueError):
    """Bad input to CA-SGD: a data file that does not parse, labels, sizes, s, b, ranks."""


# --- data ----------------------------------------------------------------------------------------

@dataclass
class Dataset:
    """``a``: (m, n) float64, a C-contiguous ndarray or a CSR matrix; ``y``: (m,) labels in {-1, +1}."""

    a: object
    y: np.ndarray
    name: str

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.a.shape)

    @property
    def sparse(self) -> bool:
        return sp.issparse(self.a)

    @property
    def density(self) -> float:
        m, n = self.shape
        return (self.a.nnz / (m * n)) if self.sparse else 1.0


def synthetic(m: int, n: int, density: float = 1.0, *, cond: float = 10.0, seed: int = 0) -> Dataset:
    """A seeded logistic-regression problem: m samples, n features, ``density`` nonzeros (CSR below 1).

    Feature j is scaled by cond^(-j / (n - 1)), so the columns' norms span a factor ``cond`` (the
    conditioning of A^T A grows like cond^2); labels y = sign(A w + 0.1 noise) for a Gaussian w, so
    the classes are nearly separable."""
    if m < 1 or n < 1:
        raise CasgdError(f"m and n must be >= 1, got {m}, {n}", field="synthetic")
    if not 0 < density <= 1:
        raise CasgdError(f"density must be in (0, 1], got {density}", field="synthetic")
    if not cond >= 1:
        raise CasgdError(f"cond must be >= 1, got {cond}", field="cond")
    rng = np.random.default_rng(seed)
    scale = cond ** (-np.arange(n) / max(1, n - 1))
    if density < 1:
        a = sp.random(m, n, density=density, format="csr", random_state=rng, data_rvs=rng.standard_normal)
        a = (a @ sp.diags(scale)).tocsr()
        a.sort_indices()
    else:
        a = np.ascontiguousarray(rng.standard_normal((m, n)) * scale)
    w = rng.standard_normal(n) / scale
    t = a @ w
    t = t + 0.1 * np.std(t) * rng.standard_normal(m)
    return Dataset(a, np.where(t >= 0, 1.0, -1.0), f"synthetic-{m}x{n}-d{density:g}-c{cond:g}-s{seed}")


def _first_bad_line(path: Path) -> str | None:
    """'line N: reason' for the first line that is not ``label idx:value ...`` (None when all parse)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", errors="replace") as f:
        for no, line in enumerate(f, 1):
            body = line.split("#", 1)[0].split()
            if not body:
                continue
            try:
                float(body[0])
            except ValueError:
                return f"line {no}: label {body[0]!r} is not a number"
            last = 0
            for tok in body[1:]:
                idx, colon, val = tok.partition(":")
                if not colon or not idx.isdigit():
                    return f"line {no}: {tok!r} is not index:value"
                try:
                    float(val)
                except ValueError:
                    return f"line {no}: value {val!r} of feature {idx} is not a number"
                if int(idx) <= last:
                    return f"line {no}: feature indices must increase ({idx} after {last})"
                last = int(idx)
    return None


def labels_pm1(y, source: str = "labels") -> np.ndarray:
    """Labels as float64 -1/+1: {-1, +1} as given, {0, 1} with 0 -> -1; anything else is refused."""
    y = np.asarray(y, dtype=np.float64)
    values = set(np.unique(y).tolist())
    if values <= {-1.0, 1.0}:
        return y.copy()
    if values <= {0.0, 1.0}:
        return np.where(y > 0, 1.0, -1.0)
    bad = sorted(values - {-1.0, 1.0, 0.0}) or sorted(values)
    raise CasgdError(f"labels must be +-1 or 0/1, found {', '.join(f'{v:g}' for v in bad[:5])}"
                     f" (values: {', '.join(f'{v:g}' for v in sorted(values)[:6])})", source=source, field="label")


def load_libsvm(path) -> Dataset:
    """A LIBSVM-format file (``.gz`` too) through scikit-learn's ``load_svmlight_file``; dense when more
    than half of the entries are nonzero, CSR otherwise."""
    path = Path(path)
    if not path.is_file():
        raise CasgdError("no such file", source=str(path), field="--data")
    bad = _first_bad_line(path)
    if bad:
        raise CasgdError(bad, source=str(path))
    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError:
        raise CasgdError("reading LIBSVM files needs scikit-learn (pip install scikit-learn)",
                         source=str(path)) from None
    try:
        a, y = load_svmlight_file(str(path), dtype=np.float64)
    except (ValueError, RuntimeError) as exc:
        raise CasgdError(str(exc).splitlines()[0], source=str(path)) from None
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise CasgdError(f"no samples or no features ({a.shape[0]} x {a.shape[1]})", source=str(path))
    a = a.tocsr()
    a.sort_indices()
    y = labels_pm1(y, str(path))
    if a.nnz > 0.5 * a.shape[0] * a.shape[1]:
        a = np.ascontiguousarray(a.toarray())
    return Dataset(a, y, path.name.split(".")[0])


# --- partition and sampling ----------------------------------------------------------------------

def column_block(n: int, p: int, rank: int) -> tuple[int, int]:
    """Rank ``rank``'s features [c0, c1) of n over p ranks (``numpy.array_split`` sizes)."""
    q, r = divmod(n, p)
    c0 = rank * q + min(rank, r)
    return c0, c0 + q + (rank < r)


def local_block(a, c0: int, c1: int):
    """Columns [c0, c1) of A: a C-contiguous ndarray, or a CSR with sorted indices."""
    if sp.issparse(a):
        blk = a[:, c0:c1].tocsr()
        blk.sort_indices()
        return blk
    return np.ascontiguousarray(a[:, c0:c1])


def batch_indices(m: int, b: int, iters: int, seed: int) -> np.ndarray:
    """(iters, b) row indices, each row b distinct samples: the one stream SGD and CA-SGD share."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.choice(m, size=b, replace=False) for _ in range(iters)]) if iters else \
        np.zeros((0, b), dtype=np.int64)


def scaled_rows(a_loc, y: np.ndarray, idx: np.ndarray):
    """Y = diag(y[idx]) A_loc[idx]: C-contiguous ndarray or CSR (sorted indices)."""
    if sp.issparse(a_loc):
        yb = a_loc[idx].tocsr()
        yb.data = yb.data * np.repeat(y[idx], np.diff(yb.indptr))
        yb.sort_indices()
        return yb
    return np.ascontiguousarray(a_loc[idx] * y[idx, None])


# --- local kernels ---------------------------------------------------------------------------------

def kernel_nests(rows: int, n_loc: int, density: float = 1.0) -> dict:
    """The LoopNests of one step on ``rows`` = s b sampled rows and ``n_loc`` local features:

    ``gram``: G[i, j] = sum_k Y[i, k] Y[j, k] (i, j < rows); ``matvec``: v[i] = sum_k Y[i, k] x[k];
    ``tmatvec``: d[k] = sum_i Y[i, k] u[i] (the update's product).  With density < 1 the first operand
    (Y) is sparse: the CSR SpMM nests C[i, j] = sum_k Y[i, k] B[k, j] (B = Y^T, x or u as columns)."""
    import workloads

    if density < 1:
        def spmm(name, m, n, k):
            nest = workloads.matmul(name, M=m, N=n, K=k, bits=64)
            from dataclasses import replace
            return replace(nest, tensors=tuple(replace(t, density=density) if t.name == "A" else t
                                               for t in nest.tensors))
        return {"gram": spmm(f"casgd_gram_{rows}x{n_loc}", rows, rows, n_loc),
                "matvec": spmm(f"casgd_matvec_{rows}x{n_loc}", rows, 1, n_loc),
                "tmatvec": spmm(f"casgd_tmatvec_{n_loc}x{rows}", n_loc, 1, rows)}
    e = workloads.einsum
    return {"gram": e("ik,jk->ij", {"i": rows, "j": rows, "k": n_loc}, name=f"casgd_gram_{rows}x{n_loc}",
                      tensor_names=["Y", "Yt", "G"], bits=64),
            "matvec": e("ik,k->i", {"i": rows, "k": n_loc}, name=f"casgd_matvec_{rows}x{n_loc}",
                        tensor_names=["Y", "x", "v"], bits=64),
            "tmatvec": e("ik,i->k", {"i": rows, "k": n_loc}, name=f"casgd_tmatvec_{rows}x{n_loc}",
                         tensor_names=["Y", "u", "d"], bits=64)}


@functools.lru_cache(maxsize=None)
def scheduled(kind: str, rows: int, n_loc: int, sparse: bool):
    """(nest, mapping, arch, callable) of one kernel: the CoSA MIP's mapping on the cpu preset (cached on
    disk by ``algorithms.sketch.scheduled_mapping``), compiled by ``targets.cpu`` (cached by content)."""
    from algorithms.sketch import scheduled_mapping

    nest = kernel_nests(rows, n_loc, 0.01 if sparse else 1.0)[kind]
    mapping, arch = scheduled_mapping(nest)
    if sparse:
        from targets.cpu import emit
        from targets.cpu.build import build, load

        fn = load(build(emit(nest, mapping, arch)), "cosa_kernel", 5)
    else:
        from targets.cpu import compile_kernel

        fn = compile_kernel(nest, mapping, arch)
    return nest, mapping, arch, fn


class Kernels:
    """Y Y^T, Y x and Y^T u for a dense or CSR Y: ``"cosa"`` (scheduled, compiled) or ``"numpy"``."""

    def __init__(self, kind: str = "numpy", threads: int = 1):
        if kind not in ("numpy", "cosa"):
            raise CasgdError(f"unknown kernels {kind!r} (numpy or cosa)", field="kernels")
        self.kind, self.threads = kind, threads

    def _csr_call(self, kind, y, rhs: np.ndarray, n_loc: int) -> np.ndarray:
        fn = scheduled(kind, *((y.shape[1], n_loc) if kind == "tmatvec" else (y.shape[0], n_loc)), True)[3]
        rhs = np.ascontiguousarray(rhs, dtype=np.float64)
        out = np.empty((y.shape[0], rhs.shape[1]))
        indptr, indices = y.indptr.astype(np.int32), y.indices.astype(np.int32)
        data = np.ascontiguousarray(y.data, dtype=np.float64)
        fn(indptr.ctypes.data, indices.ctypes.data, data.ctypes.data, rhs.ctypes.data, out.ctypes.data,
           self.threads)
        return out

    def gram(self, y) -> np.ndarray:
        if self.kind == "numpy":
            return np.asarray((y @ y.T).todense()) if sp.issparse(y) else y @ y.T
        if sp.issparse(y):
            return self._csr_call("gram", y, y.T.toarray(), y.shape[1])
        return scheduled("gram", y.shape[0], y.shape[1], False)[3]({"Y": y, "Yt": y}, threads=self.threads)

    def matvec(self, y, x: np.ndarray) -> np.ndarray:
        if self.kind == "numpy":
            return y @ x
        if sp.issparse(y):
            return self._csr_call("matvec", y, x[:, None], y.shape[1])[:, 0]
        return scheduled("matvec", y.shape[0], y.shape[1], False)[3]({"Y": y, "x": x}, threads=self.threads)

    def tmatvec(self, y, u: np.ndarray) -> np.ndarray:
        if self.kind == "numpy":
            return y.T @ u
        if sp.issparse(y):
            yt = y.T.tocsr()
            yt.sort_indices()
            return self._csr_call("tmatvec", yt, u[:, None], y.shape[1])[:, 0]
        return scheduled("tmatvec", y.shape[0], y.shape[1], False)[3]({"Y": y, "u": u}, threads=self.threads)


# --- the iterations (one rank's view; ``comm`` None = one rank) -----------------------------------

def _allreduce(comm, buf: np.ndarray) -> np.ndarray:
    return buf if comm is None or comm.size == 1 else comm.allreduce(buf)


def sgd(comm, a_loc, y: np.ndarray, x: np.ndarray, batches: np.ndarray, eta: float, kern: Kernels) -> np.ndarray:
    """Minibatch SGD on this rank's block ``x`` (updated in place and returned): one allreduce of b
    words per iteration."""
    b = batches.shape[1]
    for idx in batches:
        yk = scaled_rows(a_loc, y, idx)
        z = _allreduce(comm, kern.matvec(yk, x))
        x += (eta / b) * kern.tmatvec(yk, expit(-z))
    return x


def casgd(comm, a_loc, y: np.ndarray, x: np.ndarray, batches: np.ndarray, eta: float, s: int,
          kern: Kernels) -> np.ndarray:
    """s-step CA-SGD on this rank's block ``x`` (in place): per s iterations one allreduce of the Gram
    matrix's lower triangle and Y x (k b (k b + 1) / 2 + k b words for the k = min(s, left) iterations
    of the step), the s inner updates redundant on every rank, one local update of x."""
    iters, b = batches.shape
    for j in range(0, iters, s):
        k = min(s, iters - j)
        rows = k * b
        yk = scaled_rows(a_loc, y, batches[j:j + k].reshape(-1))
        tri = np.tril_indices(rows)
        buf = np.concatenate([kern.gram(yk)[tri], kern.matvec(yk, x)])
        buf = _allreduce(comm, buf)
        g = np.zeros((rows, rows))
        g[tri] = buf[:len(tri[0])]
        v = buf[len(tri[0]):]
        u = np.empty(rows)
        for t in range(k):
            lo, hi = t * b, (t + 1) * b
            z = v[lo:hi] + (eta / b) * (g[lo:hi, :lo] @ u[:lo]) if t else v[lo:hi]
            u[lo:hi] = expit(-z)
        x += (eta / b) * kern.tmatvec(yk, u)
    return x


def loss_accuracy(a, y: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """Mean logistic loss and the fraction of samples with sign(a_i^T x) = y_i (0 counts as +1)."""
    t = a @ x
    return float(np.mean(np.logaddexp(0.0, -y * t))), float(np.mean(np.where(t >= 0, 1.0, -1.0) == y))
