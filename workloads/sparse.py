"""Sparse kernels with real sparsity: SpMM, SDDMM and FusedMM over a nonzero pattern.

A pattern is a small spec kept in the nest's ``op["pattern"]`` and materialised on demand by
``sparse_matrix(nest)`` (SciPy CSR, sorted int32 indices, float64 values), always the same for the same
spec:

* ``{"generator": "erdos_renyi", "nnz": Z, "seed": s}``: Z distinct positions drawn uniformly;
* ``{"generator": "erdos_renyi", "nnz_per_row": d, "seed": s}``: d distinct columns per row, uniform;
* ``{"generator": "rmat", "nnz": Z, "seed": s, "abc": [a, b, c]}``: R-MAT (Chakrabarti et al.), a power-law
  pattern: each nonzero descends the quadrants with probabilities a, b, c, 1 - a - b - c; duplicates are
  dropped and drawn again until Z distinct nonzeros exist;
* ``{"generator": "file", "path": F}``: a Matrix Market file (``scipy.io.mmread``); pattern-only files get
  seeded values.

Generated values are uniform in [-1, 1) from ``seed + 1``.  The tensors' density is nnz / (m n) exactly.

Nests (dims M = rows of S, N = columns of S, R = the dense width; the layouts are those of
``targets.cpu.sparse``):

* ``spmm``:    C[M, R] += S[M, N] * B[N, R]
* ``sddmm``:   O[M, N] = S[M, N] * sum_R A[M, R] * Bt[R, N]              (Bt: the n x r B, transposed)
* ``fusedmm``: Out[M, Q] += S[M, N] * A[M, R] * Bt[R, N] * B[N, Q]      (Q = R: (S o A B^T) B, one nest;
  evaluated as an SDDMM then an SpMM, ``flops`` counts that)
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np

from .errors import WorkloadError
from .ir import LoopNest, Tensor

SPARSE_KINDS = ("spmm", "sddmm", "fusedmm")
SHORT_KEYS = {"kind", "name", "m", "n", "r", "density", "nnz", "nnz_per_row", "generator", "matrix", "seed", "bits",
              "abc", "repeat", "source"}
RMAT_ABC = (0.57, 0.19, 0.19)


# --------------------------------------------------------------------------- patterns
def erdos_renyi(m: int, n: int, *, nnz: int | None = None, nnz_per_row: int | None = None, seed: int = 0):
    """Uniform random pattern: ``nnz`` distinct positions, or ``nnz_per_row`` distinct columns in every row."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    if nnz_per_row is not None:
        if not 0 <= nnz_per_row <= n:
            raise WorkloadError(f"must be in [0, {n}], got {nnz_per_row}", field="nnz_per_row")
        cols = np.sort(rng.integers(0, n, size=(m, nnz_per_row)), axis=1)
        dup = np.flatnonzero((np.diff(cols, axis=1) == 0).any(axis=1)) if nnz_per_row > 1 else []
        for i in dup:  # rows that drew a column twice draw again without replacement
            cols[i] = np.sort(rng.choice(n, nnz_per_row, replace=False))
        cols = cols.reshape(-1)
        indptr = np.arange(m + 1) * nnz_per_row
        mat = sp.csr_matrix((np.ones(len(cols)), cols, indptr), shape=(m, n))
    else:
        if nnz is None or not 0 <= nnz <= m * n:
            raise WorkloadError(f"must be in [0, {m * n}], got {nnz}", field="nnz")
        flat = np.sort(rng.choice(m * n, nnz, replace=False))
        mat = sp.csr_matrix((np.ones(nnz), (flat // n, flat % n)), shape=(m, n))
    return _with_values(mat, rng_seed=seed + 1)


def rmat(m: int, n: int, nnz: int, *, seed: int = 0, abc=RMAT_ABC):
    """R-MAT power-law pattern with ``nnz`` distinct nonzeros in an m x n matrix (see the module docstring)."""
    import scipy.sparse as sp

    a, b, c = (float(x) for x in abc)
    d = 1.0 - a - b - c
    if min(a, b, c, d) < 0:
        raise WorkloadError(f"a, b, c must be >= 0 with a + b + c <= 1, got {list(abc)}", field="abc")
    if not 0 <= nnz <= m * n // 2:
        raise WorkloadError(f"R-MAT needs 0 <= nnz <= m n / 2 = {m * n // 2}, got {nnz}", field="nnz")
    rng = np.random.default_rng(seed)
    levels = max(1, math.ceil(math.log2(max(m, n))))
    keys = np.zeros(0, dtype=np.int64)
    for _ in range(200):
        if len(keys) >= nnz:
            break
        k = 2 * (nnz - len(keys)) + 16
        quad = rng.choice(4, size=(k, levels), p=[a, b, c, d])
        weights = 1 << np.arange(levels - 1, -1, -1, dtype=np.int64)
        rows = ((quad >= 2).astype(np.int64) * weights).sum(axis=1)
        cols = ((quad % 2).astype(np.int64) * weights).sum(axis=1)
        ok = (rows < m) & (cols < n)
        new = rows[ok] * n + cols[ok]
        both = np.concatenate([keys, new])
        _, first = np.unique(both, return_index=True)
        keys = both[np.sort(first)]  # distinct, in order of first draw
    if len(keys) < nnz:
        raise WorkloadError(f"R-MAT drew only {len(keys)} distinct nonzeros of {nnz}; lower nnz", field="nnz")
    keys = np.sort(keys[:nnz])
    mat = sp.csr_matrix((np.ones(nnz), (keys // n, keys % n)), shape=(m, n))
    return _with_values(mat, rng_seed=seed + 1)


def read_matrix_market(path: str | Path):
    """A Matrix Market file as CSR (pattern files get seeded values); bad files: ``WorkloadError``."""
    import scipy.io
    import scipy.sparse as sp

    src = str(path)
    try:
        mat = scipy.io.mmread(src)
    except (OSError, ValueError, IndexError, TypeError) as exc:
        raise WorkloadError(f"not a readable Matrix Market file: {str(exc).splitlines()[0] if str(exc) else exc}",
                            source=src, field="matrix") from None
    if not sp.issparse(mat):
        mat = sp.csr_matrix(mat)
    mat = sp.csr_matrix(mat, dtype=np.float64)
    mat.sum_duplicates()
    mat.eliminate_zeros()
    info = scipy.io.mminfo(src)
    if info[5] == "pattern":
        return _with_values(mat, rng_seed=1)
    return _canonical(mat)


def _canonical(mat):
    import scipy.sparse as sp

    mat = sp.csr_matrix(mat)
    mat.sort_indices()
    return sp.csr_matrix((mat.data.astype(np.float64), mat.indices.astype(np.int32), mat.indptr.astype(np.int32)),
                         shape=mat.shape)


def _with_values(mat, rng_seed: int):
    mat = _canonical(mat)
    mat.data = np.random.default_rng(rng_seed).random(mat.nnz) * 2 - 1
    return mat


@functools.lru_cache(maxsize=8)
def _pattern_cached(spec_json: str, m: int, n: int):
    spec = json.loads(spec_json)
    gen = spec.get("generator")
    if gen == "erdos_renyi":
        return erdos_renyi(m, n, nnz=spec.get("nnz"), nnz_per_row=spec.get("nnz_per_row"), seed=spec.get("seed", 0))
    if gen == "rmat":
        return rmat(m, n, spec["nnz"], seed=spec.get("seed", 0), abc=spec.get("abc", RMAT_ABC))
    if gen == "file":
        return read_matrix_market(spec["path"])
    raise WorkloadError(f"unknown generator {gen!r}; expected erdos_renyi, rmat or file", field="generator")


def sparse_matrix(nest: LoopNest):
    """The CSR matrix S of a sparse nest (a fresh copy; see the module docstring)."""
    op = nest.op
    if op.get("kind") not in SPARSE_KINDS or "pattern" not in op:
        raise WorkloadError("not a sparse kernel with a pattern (spmm, sddmm, fusedmm)", source=f"workload {nest.name}",
                            field="op")
    return _pattern_cached(json.dumps(op["pattern"], sort_keys=True), op["m"], op["n"]).copy()


def nnz(nest: LoopNest) -> int:
    """Nonzeros of S (from the spec, without building the matrix when it says)."""
    p = nest.op["pattern"]
    if "nnz" in p:
        return int(p["nnz"])
    if "nnz_per_row" in p:
        return int(p["nnz_per_row"]) * int(nest.op["m"])
    return int(sparse_matrix(nest).nnz)


def flops(nest: LoopNest) -> int:
    """Floating-point operations of the kernel evaluated on the nonzeros: 2 nnz r per SDDMM or SpMM."""
    stages = 2 if nest.op["kind"] == "fusedmm" else 1
    return stages * 2 * nnz(nest) * int(nest.op["r"])


# --------------------------------------------------------------------------- builders
def _spec(m, n, density, nnz_, nnz_per_row, generator, matrix, seed, abc) -> tuple[int, int, dict, int]:
    """(m, n, pattern spec, nnz) from a builder's arguments."""
    if matrix is not None:
        import scipy.io

        try:
            rows, cols, entries = scipy.io.mminfo(str(matrix))[:3]
        except (OSError, ValueError, IndexError) as exc:
            raise WorkloadError(f"not a readable Matrix Market file: {exc}", source=str(matrix), field="matrix") from None
        for got, want, what in ((rows, m, "m"), (cols, n, "n")):
            if want is not None and want != got:
                raise WorkloadError(f"the matrix has {got} {'rows' if what == 'm' else 'columns'}, not {want}",
                                    source=str(matrix), field=what)
        spec = {"generator": "file", "path": str(Path(matrix).resolve())}
        return rows, cols, spec, None
    if m is None or n is None:
        raise WorkloadError("give m and n (or a matrix file)", field="m" if m is None else "n")
    given = [k for k, v in (("density", density), ("nnz", nnz_), ("nnz_per_row", nnz_per_row)) if v is not None]
    if len(given) != 1:
        raise WorkloadError(f"give exactly one of density, nnz, nnz_per_row (got {given or 'none'})", field="density")
    if density is not None:
        if not 0.0 < float(density) <= 1.0:
            raise WorkloadError(f"must be in (0, 1], got {density!r}", field="density")
        nnz_ = max(1, round(float(density) * m * n))
    spec: dict = {"generator": generator, "seed": int(seed)}
    if generator == "erdos_renyi":
        if nnz_per_row is not None:
            spec["nnz_per_row"] = int(nnz_per_row)
            return m, n, spec, int(nnz_per_row) * m
        spec["nnz"] = int(nnz_)
    elif generator == "rmat":
        if nnz_per_row is not None:
            nnz_ = int(nnz_per_row) * m
        spec["nnz"] = int(nnz_)
        spec["abc"] = [float(x) for x in abc]
    else:
        raise WorkloadError(f"unknown generator {generator!r}; expected erdos_renyi or rmat", field="generator")
    return m, n, spec, int(nnz_)


def _build(kind: str, name: str, m, n, r, density, nnz, nnz_per_row, generator, matrix, seed, abc, bits, repeat):
    if not isinstance(r, int) or r < 1:
        raise WorkloadError(f"must be a positive integer, got {r!r}", source=f"workload {name}", field="r")
    m, n, spec, count = _spec(m, n, density, nnz, nnz_per_row, generator, matrix, seed, abc)
    op = {"kind": kind, "m": int(m), "n": int(n), "r": int(r), "pattern": spec}
    if count is None:
        count = int(_pattern_cached(json.dumps(spec, sort_keys=True), m, n).nnz)
        spec["nnz"] = count  # a file's nonzeros, for nnz() without reading it again
    if count < 1:
        raise WorkloadError("the pattern has no nonzeros", source=f"workload {name}", field="nnz")
    dens = count / (m * n)
    t = lambda nm, idx, role="input", d=1.0: Tensor(nm, idx, role, bits, d, None, "float64" if bits == 64 else None)
    if kind == "spmm":
        dims = {"M": m, "N": n, "R": r}
        tensors = (t("S", ("M", "N"), d=dens), t("B", ("N", "R")), t("C", ("M", "R"), "output"))
    elif kind == "sddmm":
        dims = {"M": m, "N": n, "R": r}
        tensors = (t("S", ("M", "N"), d=dens), t("A", ("M", "R")), t("Bt", ("R", "N")), t("O", ("M", "N"), "output", dens))
    else:
        dims = {"M": m, "N": n, "R": r, "Q": r}
        tensors = (t("S", ("M", "N"), d=dens), t("A", ("M", "R")), t("Bt", ("R", "N")), t("B", ("N", "Q")),
                   t("Out", ("M", "Q"), "output"))
    return LoopNest(name, dims, tensors, repeat, op)


def spmm(name: str = "spmm", *, m: int | None = None, n: int | None = None, r: int, density: float | None = None,
         nnz: int | None = None, nnz_per_row: int | None = None, generator: str = "erdos_renyi",
         matrix: str | Path | None = None, seed: int = 0, abc=RMAT_ABC, bits: int = 64, repeat: int = 1) -> LoopNest:
    """C = S B with S m x n sparse (one of density, nnz, nnz_per_row, or a Matrix Market ``matrix``)."""
    return _build("spmm", name, m, n, r, density, nnz, nnz_per_row, generator, matrix, seed, abc, bits, repeat)


def sddmm(name: str = "sddmm", *, m: int | None = None, n: int | None = None, r: int, density: float | None = None,
          nnz: int | None = None, nnz_per_row: int | None = None, generator: str = "erdos_renyi",
          matrix: str | Path | None = None, seed: int = 0, abc=RMAT_ABC, bits: int = 64, repeat: int = 1) -> LoopNest:
    """O = S o (A B^T) at the nonzeros of S (arguments as ``spmm``)."""
    return _build("sddmm", name, m, n, r, density, nnz, nnz_per_row, generator, matrix, seed, abc, bits, repeat)


def fusedmm(name: str = "fusedmm", *, m: int | None = None, n: int | None = None, r: int,
            density: float | None = None, nnz: int | None = None, nnz_per_row: int | None = None,
            generator: str = "erdos_renyi", matrix: str | Path | None = None, seed: int = 0, abc=RMAT_ABC,
            bits: int = 64, repeat: int = 1) -> LoopNest:
    """Out = (S o (A B^T)) B (arguments as ``spmm``)."""
    return _build("fusedmm", name, m, n, r, density, nnz, nnz_per_row, generator, matrix, seed, abc, bits, repeat)


BUILDERS = {"spmm": spmm, "sddmm": sddmm, "fusedmm": fusedmm}


# --------------------------------------------------------------------------- short form
def short_form_sparse(doc: dict, name: str, source: str, label: str, base_dir: Path | None = None) -> LoopNest:
    """One ``kind: spmm|sddmm|fusedmm`` layer of the short form (keys: m, n, r, density | nnz | nnz_per_row,
    generator, seed, abc, matrix (a .mtx path, relative to the file), bits, repeat)."""
    unknown = sorted(set(doc) - SHORT_KEYS)
    if unknown:
        raise WorkloadError(f"unknown keys {unknown}; allowed: {sorted(SHORT_KEYS)}", source=source, field=label)
    args = {k: doc[k] for k in ("m", "n", "r", "density", "nnz", "nnz_per_row", "generator", "seed", "abc", "bits",
                                "repeat") if k in doc}
    for k in ("m", "n", "r", "nnz", "nnz_per_row", "seed", "bits", "repeat"):
        if k in args and (not isinstance(args[k], int) or isinstance(args[k], bool) or args[k] < 0):
            raise WorkloadError(f"must be a non-negative integer, got {args[k]!r}", source=source, field=f"{label}.{k}")
    if "r" not in args:
        raise WorkloadError("missing r (the dense width)", source=source, field=f"{label}.r")
    if "matrix" in doc:
        path = Path(str(doc["matrix"]))
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        args["matrix"] = path
    try:
        return BUILDERS[doc["kind"]](str(doc.get("name", name)), **args)
    except WorkloadError as exc:
        if exc.source:
            raise
        raise WorkloadError(exc.reason, source=source, field=f"{label}.{exc.field}" if exc.field else label) from None


def short_form_doc(nest: LoopNest) -> dict:
    """The short-form document of a sparse nest (``load`` reads it back to the same pattern)."""
    op, p = nest.op, nest.op["pattern"]
    doc = {"kind": op["kind"], "name": nest.name, "m": op["m"], "n": op["n"], "r": op["r"]}
    if p["generator"] == "file":
        doc["matrix"] = p["path"]
    else:
        doc["generator"] = p["generator"]
        doc.update({k: p[k] for k in ("nnz", "nnz_per_row", "seed") if k in p})
        if "abc" in p:
            doc["abc"] = list(p["abc"])
    doc["bits"] = nest.tensors[0].bits
    if nest.repeat != 1:
        doc["repeat"] = nest.repeat
    return doc
