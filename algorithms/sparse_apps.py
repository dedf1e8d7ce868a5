"""Two applications of the distributed sparse kernels (``targets.mpi``, 1.5D dense shift), each run on
MPI ranks and checked against a NumPy / SciPy reference.

* ``als_step``: one alternating-least-squares step for collaborative filtering (Bharadwaj et al.'s
  application).  Ratings S (m users x n items) observed on a pattern Omega; the step updates A with
  B fixed, then B with A fixed, each row by ``(sum_{j in Omega_i} b_j b_j^T + lam I) a_i = sum_j S_ij b_j``.
  All rows are solved at once by conjugate gradients (one CG per row, batched), whose
  matrix-vector product ``(Omega o (X B^T)) B + lam X`` is one distributed FusedMM and whose right-hand
  side ``S B`` is one SpMM.  The ratings are synthetic: a rank-k product plus noise.  RMSE over the
  observed entries (an SDDMM) before and after.
* ``gat_forward``: one graph-attention layer (Velickovic et al.): Z = H W; scores
  e_ij = LeakyReLU(a_src . z_i + a_dst . z_j) on the graph's edges, as an SDDMM of the rank-2 factors
  [z a_src, 1] and [1, z a_dst]; a softmax over each row's edges (row sums reduced over the fiber);
  output ELU(alpha Z), an SpMM.

Dense rows live where the 1.5D dense shift keeps them: rank c i + j holds rows block c i + j of every
dense matrix, so the per-row CG scalars are local.  Words and messages are counted per phase by the
rank wrapper; the kernels' phases and the applications' own (``application``: the RMSE sums).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from targets.mpi.launch import MpiError, launch


@dataclass(frozen=True)
class _Kernel:
    """What the distributed kernels read of a problem: the kernel and the dense width."""

    kernel: str
    r: int


def synthetic_ratings(m: int, n: int, rank: int, nnz_per_row: int, noise: float = 0.01, seed: int = 0):
    """(S, A_true, B_true): S = (A_true B_true^T + noise) sampled on an Erdos-Renyi pattern (CSR)."""
    from workloads.sparse import erdos_renyi

    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, rank)), rng.standard_normal((n, rank))
    mask = erdos_renyi(m, n, nnz_per_row=nnz_per_row, seed=seed + 1)
    rows = np.repeat(np.arange(m), np.diff(mask.indptr))
    vals = np.einsum("ij,ij->i", a[rows], b[mask.indices]) + noise * rng.standard_normal(mask.nnz)
    return sp.csr_matrix((vals, mask.indices, mask.indptr), shape=(m, n)), a, b


def rmse(s, a, b) -> float:
    rows = np.repeat(np.arange(s.shape[0]), np.diff(s.indptr))
    pred = np.einsum("ij,ij->i", a[rows], b[s.indices])
    return float(np.sqrt(np.mean((s.data - pred) ** 2)))


def als_reference(s, a, b, lam: float):
    """One exact ALS step (A then B) by dense per-row solves."""
    def update(mat, y):
        out = np.empty((mat.shape[0], y.shape[1]))
        for i in range(mat.shape[0]):
            cols = mat.indices[mat.indptr[i]:mat.indptr[i + 1]]
            yy = y[cols]
            out[i] = np.linalg.solve(yy.T @ yy + lam * np.eye(y.shape[1]), yy.T @ mat.data[mat.indptr[i]:mat.indptr[i + 1]])
        return out
    a2 = update(s, b)
    return a2, update(s.T.tocsr(), a2)


def _embed(block: np.ndarray, row0: int, rows: int) -> np.ndarray:
    full = np.zeros((rows, block.shape[1]))
    full[row0:row0 + block.shape[0]] = block
    return full


def _dense_out(result: dict) -> np.ndarray:
    return result["dense"][0][2]


def _rowdot(x, y):
    return np.einsum("ij,ij->i", x, y)


def _als_rank(ranks, m: int, n: int, r: int, k_true: int, nnz_per_row: int, lam: float, cg_iters: int, c: int,
              elide: str, seed: int) -> dict:
    """One rank of ``als_step``."""
    from targets.mpi.shift15d import dense_shift

    p, own = ranks.size, ranks.rank  # rank c i + j owns rows block c i + j
    s, _, _ = synthetic_ratings(m, n, k_true, nnz_per_row, seed=seed)
    rng = np.random.default_rng(seed + 7)
    a0, b0 = rng.standard_normal((m, r)) * 0.5, rng.standard_normal((n, r)) * 0.5
    mb, nb = m // p, n // p
    a_own, b_own = a0[own * mb:(own + 1) * mb].copy(), b0[own * nb:(own + 1) * nb].copy()

    def update(mat, x_own, y_own, rows_x, rows_y):
        mask = sp.csr_matrix((np.ones(mat.nnz), mat.indices, mat.indptr), shape=mat.shape)
        ry = _embed(y_own, own * (rows_y // p), rows_y)
        zero_x = np.zeros((rows_x, r))

        def matvec(v):
            out = dense_shift(ranks, _Kernel("fusedmm", r), mask, _embed(v, own * (rows_x // p), rows_x), ry, c, elide)
            return _dense_out(out) + lam * v
        rhs = _dense_out(dense_shift(ranks, _Kernel("spmm", r), mat, zero_x, ry, c, "none"))
        x = x_own.copy()
        res = rhs - matvec(x)
        d = res.copy()
        rr = _rowdot(res, res)
        for _ in range(cg_iters):  # one CG per row, all rows at once
            q = matvec(d)
            dq = _rowdot(d, q)
            step = np.divide(rr, dq, out=np.zeros_like(rr), where=dq > 0)
            x += step[:, None] * d
            res -= step[:, None] * q
            rr_new = _rowdot(res, res)
            beta = np.divide(rr_new, rr, out=np.zeros_like(rr), where=rr > 0)
            d = res + beta[:, None] * d
            rr = rr_new
        return x

    def distributed_rmse(a_blk, b_blk):
        got = dense_shift(ranks, _Kernel("sddmm", r), sp.csr_matrix((np.ones(s.nnz), s.indices, s.indptr), shape=s.shape),
                          _embed(a_blk, own * mb, m), _embed(b_blk, own * nb, n), c, "none")["sparse"]
        rows, cols, pred = got
        truth = np.asarray(s[rows, cols]).ravel()
        with ranks.phase("application"):
            tot = ranks.allreduce(np.array([np.sum((truth - pred) ** 2), float(len(pred))]))
        return float(np.sqrt(tot[0] / tot[1]))

    before = distributed_rmse(a_own, b_own)
    a_new = update(s, a_own, b_own, m, n)
    b_new = update(s.T.tocsr(), b_own, a_new, n, m)
    after = distributed_rmse(a_new, b_new)
    traffic = {k: v.to_dict() for k, v in ranks.traffic().items()}
    blocks = ranks.comm.gather((a_new, b_new), root=0)  # verification: not counted
    out = {"rank": own, "rmse_before": before, "rmse_after": after, "traffic": traffic}
    if own == 0:
        a_ref, b_ref = als_reference(s, a0, b0, lam)
        a_got, b_got = np.concatenate([x[0] for x in blocks]), np.concatenate([x[1] for x in blocks])
        out["max_abs_err"] = float(max(np.max(np.abs(a_got - a_ref)), np.max(np.abs(b_got - b_ref))))
        out["rmse_before_ref"], out["rmse_after_ref"] = rmse(s, a0, b0), rmse(s, a_ref, b_ref)
    return out


def _gat_rank(ranks, n: int, f_in: int, f_out: int, nnz_per_row: int, c: int, seed: int) -> dict:
    """One rank of ``gat_forward``."""
    from targets.mpi.shift15d import dense_shift

    p, own = ranks.size, ranks.rank
    q = p // c
    i, j = divmod(own, c)
    adj, h, w, a_src, a_dst = gat_data(n, f_in, f_out, nnz_per_row, seed)
    nb = n // p
    z = h[own * nb:(own + 1) * nb] @ w                      # Z = H W, rows local
    left = np.column_stack([z @ a_src, np.ones(nb)])        # [s_i, 1]
    right = np.column_stack([np.ones(nb), z @ a_dst])       # [1, t_j]
    rows, cols, e = dense_shift(ranks, _Kernel("sddmm", 2), adj, _embed(left, own * nb, n),
                                _embed(right, own * nb, n), c, "none")["sparse"]
    e = np.where(e > 0, e, 0.2 * e)                          # LeakyReLU(0.2)
    ex = np.exp(e)
    super0 = c * i * nb                                      # this fiber's rows: c blocks from super0
    with ranks.phase("application"):
        fiber = ranks.split(i, j, name=f"15d fiber c={c}")
        sums = fiber.allreduce(np.bincount(rows - super0, weights=ex, minlength=c * nb))
    alpha = ex / sums[rows - super0]
    att = sp.csr_matrix((alpha, (rows, cols)), shape=(n, n))
    out = _dense_out(dense_shift(ranks, _Kernel("spmm", f_out), att, np.zeros((n, f_out)), _embed(z, own * nb, n),
                                 c, "none"))
    out = np.where(out > 0, out, np.expm1(out))             # ELU
    traffic = {k: v.to_dict() for k, v in ranks.traffic().items()}
    blocks = ranks.comm.gather(out, root=0)
    res = {"rank": own, "traffic": traffic, "q": q}
    if own == 0:
        ref = gat_reference(adj, h, w, a_src, a_dst)
        res["max_abs_err"] = float(np.max(np.abs(np.concatenate(blocks) - ref)))
    return res


def gat_data(n: int, f_in: int, f_out: int, nnz_per_row: int, seed: int = 0):
    """(adjacency with self-loops, H, W, a_src, a_dst), seeded."""
    from workloads.sparse import erdos_renyi

    rng = np.random.default_rng(seed)
    g = erdos_renyi(n, n, nnz_per_row=nnz_per_row, seed=seed + 1)
    adj = ((g + sp.identity(n, format="csr")) > 0).astype(np.float64).tocsr()
    adj.sort_indices()
    return adj, rng.standard_normal((n, f_in)), rng.standard_normal((f_in, f_out)) / np.sqrt(f_in), \
        rng.standard_normal(f_out) / np.sqrt(f_out), rng.standard_normal(f_out) / np.sqrt(f_out)


def gat_reference(adj, h, w, a_src, a_dst) -> np.ndarray:
    """The layer in dense NumPy: masked scores, row softmax, aggregation, ELU."""
    z = h @ w
    e = (z @ a_src)[:, None] + (z @ a_dst)[None, :]
    e = np.where(e > 0, e, 0.2 * e)
    dense = adj.toarray() > 0
    ex = np.where(dense, np.exp(np.where(dense, e, 0.0)), 0.0)
    out = (ex / ex.sum(axis=1, keepdims=True)) @ z
    return np.where(out > 0, out, np.expm1(out))


def _check(p: int, c: int, rows: list[int]) -> None:
    if p < 1 or c < 1 or p % c:
        raise MpiError(f"{c} does not divide the {p} ranks", field="c")
    for x in rows:
        if x % p:
            raise MpiError(f"{x} rows do not divide among {p} ranks", field="m/n")


def als_step(m: int = 64, n: int = 48, r: int = 4, k_true: int = 4, nnz_per_row: int = 8, lam: float = 0.1,
             cg_iters: int | None = None, ranks: int = 4, c: int = 1, elide: str = "fusion", seed: int = 0,
             timeout_s: float = 120.0) -> dict:
    """One distributed ALS step; RMSE before/after, the error against the exact step, words per rank."""
    _check(ranks, c, [m, n])
    iters = cg_iters if cg_iters is not None else 2 * r
    res = launch("algorithms.sparse_apps:_als_rank", ranks,
                 {"m": m, "n": n, "r": r, "k_true": k_true, "nnz_per_row": nnz_per_row, "lam": lam, "cg_iters": iters,
                  "c": c, "elide": elide, "seed": seed}, timeout_s=timeout_s)
    out = {k: res[0][k] for k in ("rmse_before", "rmse_after", "rmse_before_ref", "rmse_after_ref", "max_abs_err")}
    out["words_per_rank"] = [sum(t["words_recv"] for t in x["traffic"].values()) for x in res]
    out["cg_iters"] = iters
    return out


def gat_forward(n: int = 64, f_in: int = 8, f_out: int = 4, nnz_per_row: int = 4, ranks: int = 4, c: int = 1,
                seed: int = 0, timeout_s: float = 120.0) -> dict:
    """One distributed GAT layer; the error against NumPy and the words per rank."""
    _check(ranks, c, [n])
    res = launch("algorithms.sparse_apps:_gat_rank", ranks,
                 {"n": n, "f_in": f_in, "f_out": f_out, "nnz_per_row": nnz_per_row, "c": c, "seed": seed},
                 timeout_s=timeout_s)
    return {"max_abs_err": res[0]["max_abs_err"],
            "words_per_rank": [sum(t["words_recv"] for t in x["traffic"].values()) for x in res]}
