"""Tensors for CP decomposition: dense (a NumPy array) and sparse COO of any order.

``SparseTensor``: ``shape`` (mode sizes), ``indices`` (nnz x N int64, zero-based), ``values`` (nnz
float64), duplicates summed.  ``read_tns`` reads FROSTT's ``.tns`` text (one nonzero per line: N
one-based indices then the value; ``#`` comments).  Generators (every one takes a seed):
``planted_sparse`` (exactly rank R: the sum of R rank-one terms whose factor columns are sparse, with
optional Gaussian noise on the nonzeros scaled so that the best fit is about 1 - noise) and
``powerlaw_sparse`` (nonzero indices drawn from a Zipf-like law per mode, for load-balance tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workloads import FrameworkError


class CpError(FrameworkError, ValueError):
    """Bad input to the CP drivers (exit 2 in the command line)."""


@dataclass(frozen=True)
class SparseTensor:
    shape: tuple[int, ...]
    indices: np.ndarray  # (nnz, N) int64
    values: np.ndarray  # (nnz,) float64

    @property
    def order(self) -> int:
        return len(self.shape)

    @property
    def nnz(self) -> int:
        return int(self.values.shape[0])

    def norm(self) -> float:
        return float(np.linalg.norm(self.values))

    def to_dense(self) -> np.ndarray:
        out = np.zeros(self.shape)
        np.add.at(out, tuple(self.indices.T), self.values)
        return out


def check_shape(shape, where: str = "shape") -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if len(shape) < 2:
        raise CpError(f"a tensor needs order >= 2, got order {len(shape)}", field=where)
    if any(s < 1 for s in shape):
        raise CpError(f"mode sizes must be >= 1, got {shape}", field=where)
    return shape


def make_sparse(shape, indices, values, *, source: str | None = None) -> SparseTensor:
    """A COO tensor with duplicates summed and indices checked against ``shape``."""
    shape = check_shape(shape)
    idx = np.asarray(indices, dtype=np.int64).reshape(-1, len(shape))
    val = np.asarray(values, dtype=np.float64).reshape(-1)
    if idx.shape[0] != val.shape[0]:
        raise CpError(f"{idx.shape[0]} index rows but {val.shape[0]} values", source=source, field="values")
    if idx.size and (idx.min() < 0 or np.any(idx.max(axis=0) >= np.array(shape))):
        raise CpError(f"an index lies outside the shape {shape}", source=source, field="indices")
    if idx.shape[0]:
        lin = np.ravel_multi_index(tuple(idx.T), shape)
        uniq, inv = np.unique(lin, return_inverse=True)
        if uniq.size < lin.size:
            val = np.bincount(inv, weights=val, minlength=uniq.size)
            idx = np.stack(np.unravel_index(uniq, shape), axis=1).astype(np.int64)
    return SparseTensor(shape, np.ascontiguousarray(idx), np.ascontiguousarray(val))


def read_tns(path, shape=None) -> SparseTensor:
    """A FROSTT ``.tns`` file (one-based indices).  ``shape``: the mode sizes (default: the largest index
    per mode).  A malformed line is one ``CpError`` naming the file and line."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise CpError(f"cannot read: {e.strerror}", source=str(path)) from None
    rows, order = [], None
    for no, line in enumerate(lines, 1):
        s = line.split("#", 1)[0].split()
        if not s:
            continue
        if order is None:
            order = len(s) - 1
            if order < 2:
                raise CpError(f"line {no}: need at least 2 indices and a value, got {len(s)} fields",
                              source=str(path))
        if len(s) != order + 1:
            raise CpError(f"line {no}: expected {order + 1} fields, got {len(s)}", source=str(path))
        try:
            ids = [int(x) for x in s[:-1]]
            v = float(s[-1])
        except ValueError:
            raise CpError(f"line {no}: not integers and a number: {line.strip()!r}", source=str(path)) from None
        if min(ids) < 1:
            raise CpError(f"line {no}: indices are one-based, got {min(ids)}", source=str(path))
        rows.append(ids + [v])
    if order is None:
        raise CpError("no nonzeros", source=str(path))
    a = np.array(rows, dtype=np.float64)
    idx = a[:, :-1].astype(np.int64) - 1
    if shape is None:
        shape = tuple(int(m) + 1 for m in idx.max(axis=0))
    elif len(shape) != order:
        raise CpError(f"shape {tuple(shape)} has {len(shape)} modes, the file {order}", source=str(path))
    return make_sparse(shape, idx, a[:, -1], source=str(path))


def write_tns(t: SparseTensor, path) -> None:
    with open(path, "w") as f:
        for ids, v in zip(t.indices + 1, t.values):
            f.write(" ".join(str(int(i)) for i in ids) + f" {float(v)!r}\n")


def planted_factors(shape, rank: int, density, seed: int) -> list[np.ndarray]:
    """Factor matrices whose columns each have ``max(1, round(density * I))`` nonzero rows (values in
    [0.5, 1.5), random signs); ``density``: one number or one per mode.  Term r is scaled by
    1 / (1 + 3 r / R) (in the first factor) so the terms differ in size, as in data: equal-sized terms
    make the unfoldings' singular vectors arbitrary mixtures and ALS swamps at rank 16 and beyond."""
    rng = np.random.default_rng(seed)
    dens = np.broadcast_to(np.asarray(density, dtype=float), (len(shape),))
    out = []
    for n, d in zip(shape, dens):
        u = np.zeros((n, rank))
        k = min(n, max(1, int(round(d * n))))
        for r in range(rank):
            rows = rng.choice(n, size=k, replace=False)
            u[rows, r] = rng.uniform(0.5, 1.5, k) * rng.choice([-1.0, 1.0], k)
        out.append(u)
    out[0] = out[0] / (1.0 + 3.0 * np.arange(rank) / rank)
    return out


def planted_sparse(shape, rank: int, *, density: float = 0.1, noise: float = 0.0, seed: int = 0):
    """``(tensor, factors)``: the sparse sum of ``rank`` rank-one terms with sparse factor columns
    (``density`` of each column's rows nonzero), plus Gaussian noise on the nonzeros with
    ||noise|| / ||tensor|| = ``noise`` (so ALS's best fit is about 1 - noise)."""
    shape = check_shape(shape)
    if rank < 1:
        raise CpError(f"rank must be >= 1, got {rank}", field="rank")
    if not np.all((np.asarray(density) > 0) & (np.asarray(density) <= 1)):
        raise CpError(f"density must be in (0, 1], got {density}", field="density")
    if not 0 <= noise < 1:
        raise CpError(f"noise must be in [0, 1), got {noise}", field="noise")
    factors = planted_factors(shape, rank, density, seed)
    idx_parts, val_parts = [], []
    for r in range(rank):
        supp = [np.flatnonzero(u[:, r]) for u in factors]
        grids = np.meshgrid(*supp, indexing="ij")
        idx = np.stack([g.ravel() for g in grids], axis=1)
        val = np.ones(idx.shape[0])
        for k, u in enumerate(factors):
            val *= u[idx[:, k], r]
        idx_parts.append(idx)
        val_parts.append(val)
    t = make_sparse(shape, np.concatenate(idx_parts), np.concatenate(val_parts))
    if noise > 0:
        rng = np.random.default_rng(seed + 1)
        e = rng.standard_normal(t.nnz)
        e *= noise * t.norm() / np.sqrt(1 - noise ** 2) / np.linalg.norm(e)
        t = SparseTensor(t.shape, t.indices, t.values + e)
    return t, factors


def density_for_nnz(shape, nnz: int, rank: int) -> list[float]:
    """Per-mode column densities that make ``planted_sparse`` have about ``nnz`` nonzeros: each rank-one
    term a block of (nnz / rank)^(1/N) rows per mode (fewer where a mode is smaller)."""
    shape = check_shape(shape)
    if nnz < 1 or rank < 1:
        raise CpError(f"nnz and rank must be >= 1, got {nnz}, {rank}", field="synthetic")
    side = (nnz / rank) ** (1.0 / len(shape))
    return [min(1.0, max(1.0, side) / n) for n in shape]


def powerlaw_sparse(shape, nnz: int, *, alpha: float = 1.5, seed: int = 0) -> SparseTensor:
    """About ``nnz`` distinct nonzeros whose index in each mode follows p(i) ~ (i + 1)^-alpha over a random
    permutation of the mode (a few heavy slices), values standard normal."""
    shape = check_shape(shape)
    if nnz < 1:
        raise CpError(f"nnz must be >= 1, got {nnz}", field="nnz")
    rng = np.random.default_rng(seed)
    cols = []
    for n in shape:
        p = (np.arange(n) + 1.0) ** -alpha
        cols.append(rng.permutation(n)[rng.choice(n, size=nnz, p=p / p.sum())])
    idx = np.stack(cols, axis=1)
    lin = np.unique(np.ravel_multi_index(tuple(idx.T), shape))
    idx = np.stack(np.unravel_index(lin, shape), axis=1)
    return make_sparse(shape, idx, rng.standard_normal(idx.shape[0]))


def dense_from_factors(factors, weights=None) -> np.ndarray:
    """The full tensor [[weights; U_1, ..., U_N]] (small cases and tests)."""
    r = factors[0].shape[1]
    w = np.ones(r) if weights is None else np.asarray(weights)
    letters = "abcdefghijklmnopq"[:len(factors)]
    spec = ",".join(f"{c}z" for c in letters) + ",z->" + letters
    return np.einsum(spec, *factors, w)
