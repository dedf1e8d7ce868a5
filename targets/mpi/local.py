"""The local kernels every rank of a distributed sparse algorithm calls: the scheduled CPU kernels
(``targets.cpu``, ``cosa``) or SciPy's (``scipy``), behind one interface.

* ``sddmm(s, a, b, out, accumulate)``: ``out[q] (+)= s.data[q] * (a[row q] . b[col q])`` for every stored
  entry q of the CSR block ``s`` (a: rows x w, b: columns x w, both row-major);
* ``spmm(s, b, out, accumulate)``: ``out (+)= s @ b`` (b: columns x w, out: rows x w);
* ``spmm_t(s, b, out, accumulate)``: ``out (+)= s^T @ b`` (the CPU kernels run ``spmm`` on the transpose).

FusedMM's local work is the two in turn on the same block.  ``Csr`` holds a block's arrays (int32
``indptr`` and sorted ``indices``, float64 ``data``) without SciPy's checks.

The CPU kernels are compiled from mappings the ranks receive: the caller (which may import the
scheduler) schedules ``local_nests(problem, p, algorithm, c, elide)`` and passes ``{nest name: mapping
as a dict}``; each rank builds them with ``targets.cpu`` (cached on disk: a kernel built once is loaded
by every later rank and run) and runs them with ``threads`` OpenMP threads (default: this machine's
cores divided among the ranks).  The nests' density is S's, to two significant digits, so every block
of a run shares one kernel per shape.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .launch import MpiError
from .model import grid25d
from .problem import row_dots

LOCAL_KERNELS = ("cosa", "scipy")


@dataclass
class Csr:
    """A CSR block: ``indptr`` (rows + 1, int32), ``indices`` (sorted in each row, int32), ``data``
    (float64), ``shape`` (rows, columns)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple
    _rows: np.ndarray | None = field(default=None, repr=False)

    @staticmethod
    def of(mat) -> "Csr":
        """From a SciPy CSR matrix (indices sorted first)."""
        mat = mat.tocsr()
        mat.sort_indices()
        return Csr(mat.indptr.astype(np.int32), mat.indices.astype(np.int32),
                   np.ascontiguousarray(mat.data, dtype=np.float64), tuple(mat.shape))

    @staticmethod
    def from_rows(rows: np.ndarray, cols: np.ndarray, data: np.ndarray, shape: tuple) -> "Csr":
        """From coordinates already in CSR order (rows non-decreasing, columns sorted within a row)."""
        counts = np.bincount(rows, minlength=shape[0])
        indptr = np.zeros(shape[0] + 1, dtype=np.int32)
        np.cumsum(counts, out=indptr[1:])
        return Csr(indptr, cols.astype(np.int32), np.ascontiguousarray(data, dtype=np.float64), tuple(shape), rows)

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    @property
    def rows(self) -> np.ndarray:
        """The row of every stored entry."""
        if self._rows is None:
            self._rows = np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))
        return self._rows

    def with_data(self, data: np.ndarray) -> "Csr":
        return Csr(self.indptr, self.indices, np.ascontiguousarray(data, dtype=np.float64), self.shape, self._rows)

    def transpose_order(self) -> tuple["Csr", np.ndarray]:
        """(the pattern of this block's transpose, ``perm``): the transpose's data is ``data[perm]``."""
        tr = sp.csr_matrix((np.arange(self.nnz, dtype=np.float64), self.indices, self.indptr), shape=self.shape).T.tocsr()
        tr.sort_indices()
        perm = tr.data.astype(np.int64)
        return Csr(tr.indptr.astype(np.int32), tr.indices.astype(np.int32), self.data[perm], tuple(tr.shape)), perm


class ScipyLocal:
    """SciPy's CSR product and NumPy row dot products on gathered rows."""

    name = "scipy"

    def sddmm(self, s: Csr, a: np.ndarray, b: np.ndarray, out: np.ndarray, accumulate: bool = False) -> np.ndarray:
        vals = s.data * row_dots(a[s.rows], b[s.indices])
        if accumulate:
            out += vals
        else:
            out[:] = vals
        return out

    def spmm(self, s: Csr, b: np.ndarray, out: np.ndarray, accumulate: bool = False) -> np.ndarray:
        return _store(sp.csr_matrix((s.data, s.indices, s.indptr), shape=s.shape) @ b, out, accumulate)

    def spmm_t(self, s: Csr, b: np.ndarray, out: np.ndarray, accumulate: bool = False) -> np.ndarray:
        return _store(sp.csr_matrix((s.data, s.indices, s.indptr), shape=s.shape).T @ b, out, accumulate)


def _store(prod, out: np.ndarray, accumulate: bool) -> np.ndarray:
    if accumulate:
        out += prod
    else:
        out[:] = prod
    return out


def local_density(nnz: int, m: int, n: int) -> float:
    """S's density to two significant digits (the local nests' density)."""
    return min(1.0, float(f"{max(nnz, 1) / (m * n):.2g}"))


def local_nest(kind: str, rows: int, cols: int, width: int, density: float):
    """The LoopNest of one local kernel: ``spmm`` C[M, R] = S[M, N] B[N, R]; ``sddmm`` O[M, N] = S[M, N] *
    sum_R A[M, R] B[N, R] (both dense operands row-major); S (and O) of ``density``; float64."""
    from workloads import LoopNest, Tensor

    t = lambda name, idx, role="input", d=1.0: Tensor(name, idx, role, 64, d, None, "float64")
    dims = {"M": rows, "N": cols, "R": width}
    if kind == "spmm":
        tensors = (t("S", ("M", "N"), d=density), t("B", ("N", "R")), t("C", ("M", "R"), "output"))
    elif kind == "sddmm":
        tensors = (t("S", ("M", "N"), d=density), t("A", ("M", "R")), t("B", ("N", "R")),
                   t("O", ("M", "N"), "output", density))
    else:
        raise MpiError(f"{kind!r} is not a local kernel (spmm, sddmm)", field="kernel")
    return LoopNest(f"mpi_{kind}_{rows}x{cols}x{width}_d{density:g}", dims, tensors)


def local_shapes(kernel: str, m: int, n: int, r: int, p: int, algorithm: str, c: int, elide: str) -> set:
    """(kind, rows, columns, width) of every local kernel call of the configuration."""
    kinds = {"spmm": ("spmm",), "sddmm": ("sddmm",), "fusedmm": ("sddmm", "spmm")}[kernel]
    orient_st = kernel == "fusedmm" and elide == "reuse"
    if algorithm == "15d-sparse":
        return {(kd, m // p, n, r // (p // c)) for kd in kinds}
    if algorithm == "25d-sparse":
        s = grid25d(p, c)
        return {(kd, m // s, n // s, r // (s * c)) for kd in kinds}
    if algorithm == "15d-dense":
        parts, w = p, r
    else:
        s = grid25d(p, c)
        parts, w = s * c, r // s
    rside, hside = (n, m) if orient_st else (m, n)
    rb, hb = rside // parts, hside // parts
    if orient_st:  # the SpMM into H runs on the transposed block
        return {("sddmm", c * rb, hb, w), ("spmm", hb, c * rb, w)}
    return {(kd, c * rb, hb, w) for kd in kinds}


def local_nests(problem, p: int, algorithm: str, c: int, elide: str, nnz: int) -> list:
    """The LoopNests the ranks run for ``problem`` (``nnz``: S's nonzeros), to be scheduled by the caller."""
    d = local_density(nnz, problem.m, problem.n)
    shapes = local_shapes(problem.kernel, problem.m, problem.n, problem.r, p, algorithm, c, elide)
    return [local_nest(kd, rows, cols, w, d) for kd, rows, cols, w in sorted(shapes)]


def cpu_arch(nest):
    """The arch the local kernels are scheduled for: the ``cpu`` preset with the CPU target's spatial axes."""
    from costmodel import preset

    from ..cpu.plan import arch_for

    return arch_for(nest, preset("cpu"))


class CosaLocal:
    """The scheduled CPU kernels: ``mappings`` {nest name: mapping dict} for ``local_nests``; ``density``
    of those nests; ``threads`` per call."""

    name = "cosa"

    def __init__(self, mappings: dict, density: float, threads: int):
        self.mappings, self.density, self.threads = mappings, density, max(1, int(threads))

    @functools.lru_cache(maxsize=None)  # noqa: B019 - one object per run; its kernels live as long
    def kernel(self, kind: str, rows: int, cols: int, width: int):
        from mappings import mapping_from_dict

        from ..cpu.sparse import compile_sparse

        nest = local_nest(kind, rows, cols, width, self.density)
        doc = self.mappings.get(nest.name)
        if doc is None:
            raise MpiError(f"no scheduled mapping for the local kernel {nest.name} (schedule "
                           "targets.mpi.local.local_nests and pass the mappings)", field="mappings", exit_code=1)
        arch = cpu_arch(nest)
        return compile_sparse(nest, mapping_from_dict(doc, arch, source=nest.name), arch)

    def sddmm(self, s: Csr, a: np.ndarray, b: np.ndarray, out: np.ndarray, accumulate: bool = False) -> np.ndarray:
        call = self.kernel("sddmm", s.shape[0], s.shape[1], a.shape[1])
        return call(s, [_c(a), _c(b)], out, beta=1.0 if accumulate else 0.0, threads=self.threads)

    def spmm(self, s: Csr, b: np.ndarray, out: np.ndarray, accumulate: bool = False) -> np.ndarray:
        call = self.kernel("spmm", s.shape[0], s.shape[1], b.shape[1])
        return call(s, [_c(b)], out, beta=1.0 if accumulate else 0.0, threads=self.threads)

    def spmm_t(self, s: Csr, b: np.ndarray, out: np.ndarray, accumulate: bool = False) -> np.ndarray:
        return self.spmm(s.transpose_order()[0], b, out, accumulate)


def _c(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64)


def make_local(name: str, mappings: dict | None = None, density: float = 1.0, ranks: int = 1,
               threads: int | None = None):
    """The local kernels called ``name`` (``LOCAL_KERNELS``); ``threads`` defaults to the cores per rank."""
    if name == "scipy":
        return ScipyLocal()
    if name != "cosa":
        raise MpiError(f"{name!r} is not one of {', '.join(LOCAL_KERNELS)}", field="--local-kernel")
    return CosaLocal(mappings or {}, density, threads or max(1, (os.cpu_count() or 1) // max(1, ranks)))
