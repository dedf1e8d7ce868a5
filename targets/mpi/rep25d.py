"""2.5D algorithms on an s x s x c grid (s^2 c = p), Cannon-style: dense replicate and sparse replicate.

Rank ``((i s) + j) c + k`` sits at row i, column j, layer k; its fiber is the c ranks (i, j, .)
(replication), its row the s ranks (i, ., k) and its column the s ranks (., j, k) (propagation:
Cannon shifts, towards j - 1 along a row and i - 1 along a column).  Each round takes s steps, after
which everything that travelled is home again.  Layouts are the algorithms' own and start
pre-skewed (as Cannon's initial alignment, not counted); at step t a rank works on index
x = (i + j + t) mod s.

**2.5D dense replicate.**  T = S (orientation ``S``: stationary side R = A, travelling side H = B) or
T = S^T (``ST``: R = B, H = A).  Dense rows are cut into s c blocks, columns into s slabs; rank
(i, j, k) owns R block c i + k at slab j (allgathered over the fiber to R's super-row i, slab j), H
block c x + k at slab j, and T's super-row i at the columns of H block c x + k.  T travels along
the row (3 words per nonzero: row, column, value or partial dot product), H along the column.
SDDMM: T's values collect the dot products slab by slab.  SpMM into R: partial sums over the
layer's column blocks, reduce-scattered over the fiber.  FusedMM ``none``: SDDMM then SpMM into R;
``reuse``: orientation ST, B replicated once, the A-side output travels in H's place and needs no
reduction.

**2.5D sparse replicate.**  S is cut into s x s blocks; block (i, j) is sharded over the c layers
(contiguous runs of its nonzeros in CSR order) and allgathered over the fiber (3 words per
nonzero).  Columns of A and B are cut into s c slabs; rank (i, j, k) owns A's row block i and B's
row block j at slab c x + k; A travels along the row, B along the column.  SDDMM: partial dot
products over the layer's slabs, reduce-scattered over the fiber to the shards.  SpMM: the A-side
output slab travels in A's place.  FusedMM ``none``: the sampled values are reduce-scattered and
the sparse block allgathered again; ``reuse``: the values are allreduced and the replicated pattern
kept.

Their words and messages per rank and phase, exactly as ``Ranks`` counts them, are ``model.phase_counts_25d``.
"""

from __future__ import annotations

import numpy as np

from .local import Csr, ScipyLocal
from .model import grid25d


def _grid(ranks, c: int):
    s = grid25d(ranks.size, c)
    ij, k = divmod(ranks.rank, c)
    i, j = divmod(ij, s)
    fiber = ranks.split(ij, k, name=f"25d fiber c={c}")
    row = ranks.split(i * c + k, j, name=f"25d row c={c}")
    col = ranks.split(j * c + k, i, name=f"25d column c={c}")
    return s, i, j, k, fiber, row, col


def _coo(block):
    rows = np.repeat(np.arange(block.shape[0]), np.diff(block.indptr))
    return rows, block.indices.astype(np.int64), block.data


def dense_replicate(ranks, problem, s_mat, a, b, c: int, elide: str, local=None) -> dict:
    """Run ``problem.kernel`` with 2.5D dense replicate; this rank's pieces of the result.
    ``local``: the local kernels (``targets.mpi.local``; SciPy's when None)."""
    kernel, r = problem.kernel, problem.r
    local = local or ScipyLocal()
    s, i, j, k, fiber, row, col = _grid(ranks, c)
    orient = "ST" if kernel == "fusedmm" and elide == "reuse" else "S"
    t_mat, rside, hside = (s_mat, a, b) if orient == "S" else (s_mat.T.tocsr(), b, a)
    rb, hb, w = rside.shape[0] // (s * c), hside.shape[0] // (s * c), r // s
    slab = slice(j * w, (j + 1) * w)
    x0 = (i + j) % s
    hid = c * x0 + k
    r_own = np.ascontiguousarray(rside[(c * i + k) * rb:(c * i + k + 1) * rb, slab])
    h_own = np.ascontiguousarray(hside[hid * hb:(hid + 1) * hb, slab])
    shape = (c * rb, hb)  # of T's block
    blk = t_mat[c * i * rb:(c * i + c) * rb, hid * hb:(hid + 1) * hb].tocsr()
    blk.sort_indices()
    lrows, lcols, tvals = _coo(blk)
    with ranks.phase("setup"):
        counts = row.allgather(np.array([blk.nnz], dtype=np.int64))

    def z_at(t):  # nonzeros of the T block held at step t: the one row rank (j + t) held first
        return int(counts[(j + t) % s])

    def round_(values, dense, step):
        """s steps: ``step(rows, cols, values, dense) -> dense``; T travels along the row, ``dense`` along the column."""
        buf = np.concatenate([lrows, lcols, values]).astype(np.float64)
        for t in range(s):
            z = z_at(t)
            with ranks.phase("computation"):
                dense = step(buf[:z].astype(np.int64), buf[z:2 * z].astype(np.int64), buf[2 * z:], dense)
            with ranks.phase("propagation"):
                buf = row.sendrecv(buf, (j - 1) % s, np.empty(3 * z_at(t + 1)), (j + 1) % s, tag=31)
                dense = col.sendrecv(dense, (i - 1) % s, np.empty_like(dense), (i + 1) % s, tag=32)
        return buf[2 * blk.nnz:], dense

    def sddmm(r_rep):
        def step(rr, cc, partial, h):
            local.sddmm(Csr.from_rows(rr, cc, np.ones(len(rr)), shape), r_rep, h, partial, accumulate=True)
            return h
        return tvals * round_(np.zeros(blk.nnz), h_own, step)[0]

    def replicate_r():
        with ranks.phase("replication"):
            return fiber.allgather(r_own)

    def spmm_into_r(values):
        acc = np.zeros((c * rb, w))

        def step(rr, cc, v, h):
            local.spmm(Csr.from_rows(rr, cc, v, shape), h, acc, accumulate=True)
            return h
        round_(values, h_own, step)
        with ranks.phase("replication"):
            out = fiber.reduce_scatter(acc)
        return {"dense": [((c * i + k) * rb, j * w, out)]}

    if kernel == "spmm":
        return spmm_into_r(tvals)
    r_rep = replicate_r()
    vals = sddmm(r_rep)
    if kernel == "sddmm":
        return {"sparse": (lrows + c * i * rb, lcols + hid * hb, vals)}
    if orient == "S":
        return spmm_into_r(vals)

    def into_h(rr, cc, v, acc):
        return local.spmm_t(Csr.from_rows(rr, cc, v, shape), r_rep, acc, accumulate=True)
    _, out = round_(vals, np.zeros((hb, w)), into_h)
    return {"dense": [(hid * hb, j * w, out)]}


def sparse_replicate(ranks, problem, s_mat, a, b, c: int, elide: str, local=None) -> dict:
    """Run ``problem.kernel`` with 2.5D sparse replicate; this rank's pieces of the result.
    ``local``: the local kernels (``targets.mpi.local``; SciPy's when None)."""
    kernel, m, n, r = problem.kernel, problem.m, problem.n, problem.r
    local = local or ScipyLocal()
    s, i, j, k, fiber, row, col = _grid(ranks, c)
    mb, nb, w = m // s, n // s, r // (s * c)
    y0 = c * ((i + j) % s) + k
    slab = slice(y0 * w, (y0 + 1) * w)
    a_own = np.ascontiguousarray(a[i * mb:(i + 1) * mb, slab])
    b_own = np.ascontiguousarray(b[j * nb:(j + 1) * nb, slab])
    blk = s_mat[i * mb:(i + 1) * mb, j * nb:(j + 1) * nb].tocsr()
    blk.sort_indices()
    rows, cols, svals = _coo(blk)
    cut = np.array_split(np.arange(blk.nnz), c)[k]
    with ranks.phase("setup"):
        sizes = [int(x) for x in fiber.allgather(np.array([len(cut)], dtype=np.int64))]

    def replicate(values):
        """The whole block (rows, cols, values) from every layer's shard (3 words per nonzero)."""
        mine = np.concatenate([rows[cut], cols[cut], values]).astype(np.float64)
        with ranks.phase("replication"):
            got = fiber.allgather(mine, [3 * z for z in sizes])
        parts, pos = [], 0
        for z in sizes:
            parts.append(got[pos:pos + 3 * z].reshape(3, z))
            pos += 3 * z
        whole = np.concatenate(parts, axis=1)
        return whole[0].astype(np.int64), whole[1].astype(np.int64), whole[2]

    def round_(moving_row, moving_col, step):
        for _ in range(s):
            with ranks.phase("computation"):
                moving_row = step(moving_row, moving_col)
            with ranks.phase("propagation"):
                moving_row = row.sendrecv(moving_row, (j - 1) % s, np.empty_like(moving_row), (j + 1) % s, tag=41)
                moving_col = col.sendrecv(moving_col, (i - 1) % s, np.empty_like(moving_col), (i + 1) % s, tag=42)
        return moving_row

    def sddmm_partial(rr, cc):
        partial = np.zeros(len(rr))
        pattern = Csr.from_rows(rr, cc, np.ones(len(rr)), (mb, nb))

        def step(a_cur, b_cur):
            local.sddmm(pattern, a_cur, b_cur, partial, accumulate=True)
            return a_cur
        round_(a_own, b_own, step)
        return partial

    def spmm(rr, cc, v):
        mat = Csr.from_rows(rr, cc, v, (mb, nb))

        def step(acc, b_cur):
            return local.spmm(mat, b_cur, acc, accumulate=True)
        out = round_(np.zeros((mb, w)), b_own, step)
        return {"dense": [(i * mb, y0 * w, out)]}

    rr, cc, vv = replicate(svals[cut])
    if kernel == "spmm":
        return spmm(rr, cc, vv)
    partial = sddmm_partial(rr, cc)
    if kernel == "sddmm" or elide == "none":
        with ranks.phase("replication"):
            mine = fiber.reduce_scatter(partial, sizes)
        vals = svals[cut] * mine
        if kernel == "sddmm":
            return {"sparse": (rows[cut] + i * mb, cols[cut] + j * nb, vals)}
        rr, cc, vv = replicate(vals)
        return spmm(rr, cc, vv)
    with ranks.phase("replication"):
        total = fiber.allreduce(partial)
    return spmm(rr, cc, vv * total)
