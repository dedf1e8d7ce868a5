"""1.5D algorithms on a (p/c) x c grid: dense shift and sparse shift, for SpMM, SDDMM and FusedMM.

Rank ``rank = c i + j`` sits in ring row i (0 <= i < q = p/c) and layer j (0 <= j < c).  The fiber of
(i, j) is the c ranks of row i (replication: allgather / reduce-scatter); its ring is the q ranks of
layer j (propagation: cyclic shifts, rank i sends to i + 1 and receives from i - 1).  Every round
takes q - 1 shifts: after them each rank has worked on every block of its ring once, and a q-th shift
would only carry the blocks back where they started (what travels ends one rank behind its start,
at rank i - 1; a round that must end at home starts one rank ahead).

**1.5D dense shift** (sparse and one dense matrix stationary, the other dense matrix travels).  The
dense matrices are cut into p row blocks; rank (i, j) owns block c i + j of each.  In orientation
``S`` the stationary side R is A (rows of S) and the travelling side H is B (columns of S); in
orientation ``ST`` the roles swap (T = S^T).  Rank (i, j) keeps T's rows of super-block i (the c
blocks of its fiber) at the columns of blocks {c i' + j}; at step t it holds H block c ((i - t) mod q)
+ j.
  - SDDMM: allgather R over the fiber, then one round shifting H.
  - SpMM into R (S B in orientation S): one round shifting H, partial sums of the c R blocks, then
    reduce-scatter over the fiber.
  - SpMM into H (S B in orientation ST): R replicated; the H-side output block travels and
    accumulates; the round starts with the block of ring row i - 1, so each block is complete when it
    reaches home (no reduction).
  - FusedMM ``none``: SDDMM then SpMM into R (orientation S), each with its own communication.
    ``fusion`` (local kernel fusion): one round, SDDMM and SpMM on each H block as it passes.
    ``reuse`` (replication reuse): orientation ST: SDDMM replicates B, the SpMM into H reuses it.

**1.5D sparse shift** (dense matrices stationary, S travels).  Rank (i, j) owns the dense row
blocks {c i' + j} at the column slab i (r / q columns) and S's row block c i + j (its pattern: row
and column indices).  B is allgathered over the fiber (all n rows, slab i).  S's row blocks travel
around the ring with their row and column indices and values (3 words per nonzero, one message);
SDDMM accumulates partial dot products slab by slab in the travelling values, complete at the end of
the round one rank behind their start, where they are scaled by S's values: so in SDDMM and FusedMM
rank (i, j) keeps the values of S's row block c (i + 1) + j (in SpMM those of its own block, which
travel); either way 3 words per nonzero of S are stored.  SpMM writes its output rows locally.
FusedMM ``none``: allgather B for each kernel; ``reuse``: once; the SpMM round starts with the blocks
where the SDDMM round left them.  Local fusion is not valid (the dot products are complete only after
the whole round).  The ring first exchanges its blocks' nonzero counts (phase ``setup``).
"""

from __future__ import annotations

import numpy as np

from .local import Csr, ScipyLocal


def grid15d(ranks, c: int):
    """(q, i, j, fiber, ring) of this rank on the (p/c) x c grid."""
    q = ranks.size // c
    i, j = divmod(ranks.rank, c)
    fiber = ranks.split(i, j, name=f"15d fiber c={c}")
    ring = ranks.split(j, i, name=f"15d ring c={c}")
    return q, i, j, fiber, ring


def dense_shift(ranks, problem, s, a, b, c: int, elide: str, local=None) -> dict:
    """Run ``problem.kernel`` with the 1.5D dense shift algorithm; this rank's pieces of the result.
    ``local``: the local kernels (``targets.mpi.local``; SciPy's when None)."""
    p, kernel, r = ranks.size, problem.kernel, problem.r
    local = local or ScipyLocal()
    q, i, j, fiber, ring = grid15d(ranks, c)
    orient = "ST" if kernel == "fusedmm" and elide == "reuse" else "S"
    t_mat, rside, hside = (s, a, b) if orient == "S" else (s.T.tocsr(), b, a)
    rb, hb = rside.shape[0] // p, hside.shape[0] // p
    own = c * i + j
    r_own, h_own = rside[own * rb:(own + 1) * rb], hside[own * hb:(own + 1) * hb]
    sup = t_mat[c * i * rb:(c * i + c) * rb]
    blocks = {c * ip + j: Csr.of(sup[:, (c * ip + j) * hb:(c * ip + j + 1) * hb]) for ip in range(q)}

    def round_(buf, step, start=0):
        """q steps, q - 1 shifts; at step t this rank holds the block of ring row i - start - t (start = 1:
        the block ending the round here is block c i + j)."""
        for t in range(q):
            with ranks.phase("computation"):
                buf = step(c * ((i - start - t) % q) + j, buf)
            if t < q - 1:
                with ranks.phase("propagation"):
                    buf = ring.shift(buf)
        return buf

    def replicate_r():
        with ranks.phase("replication"):
            return fiber.allgather(r_own)

    sddmm_vals = {}

    def sddmm_step(r_rep):
        def step(bid, h):
            blk = blocks[bid]
            sddmm_vals[bid] = local.sddmm(blk, r_rep, h, np.empty(blk.nnz))
            return h
        return step

    def spmm_into_r(values):
        acc = np.zeros((c * rb, r))

        def step(bid, h):
            local.spmm(blocks[bid].with_data(values[bid]), h, acc, accumulate=True)
            return h
        round_(h_own, step)
        with ranks.phase("replication"):
            return fiber.reduce_scatter(acc)

    if kernel == "sddmm":
        round_(h_own, sddmm_step(replicate_r()))
        return _sddmm_pieces(blocks, sddmm_vals, c * i * rb, hb, orient)
    if kernel == "spmm":
        return {"dense": [(own * rb, 0, spmm_into_r({k: v.data for k, v in blocks.items()}))]}
    if elide == "none":
        round_(h_own, sddmm_step(replicate_r()))
        return {"dense": [(own * rb, 0, spmm_into_r(sddmm_vals))]}
    if elide == "fusion":
        r_rep = replicate_r()
        acc = np.zeros((c * rb, r))
        sd = sddmm_step(r_rep)

        def fused(bid, h):
            sd(bid, h)
            local.spmm(blocks[bid].with_data(sddmm_vals[bid]), h, acc, accumulate=True)
            return h
        round_(h_own, fused)
        with ranks.phase("replication"):
            return {"dense": [(own * rb, 0, fiber.reduce_scatter(acc))]}
    # reuse, orientation ST: R = B replicated once; the output (A side, H) travels and accumulates
    r_rep = replicate_r()
    round_(h_own, sddmm_step(r_rep))
    transposed = {bid: blk.transpose_order() for bid, blk in blocks.items()}  # local: the pattern of T's blocks^T

    def into_h(bid, acc):
        pattern, perm = transposed[bid]
        return local.spmm(pattern.with_data(sddmm_vals[bid][perm]), r_rep, acc, accumulate=True)
    out = round_(np.zeros((hb, r)), into_h, start=1)
    return {"dense": [(own * hb, 0, out)]}


def _sddmm_pieces(blocks, vals, row0, hb, orient) -> dict:
    rows, cols, data = [], [], []
    for bid, blk in blocks.items():
        rows.append(blk.rows + row0)
        cols.append(blk.indices.astype(np.int64) + bid * hb)
        data.append(vals[bid])
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    if orient == "ST":
        rows, cols = cols, rows
    return {"sparse": (rows, cols, np.concatenate(data))}


def sparse_shift(ranks, problem, s, a, b, c: int, elide: str, local=None) -> dict:
    """Run ``problem.kernel`` with the 1.5D sparse shift algorithm; this rank's pieces of the result.
    ``local``: the local kernels (``targets.mpi.local``; SciPy's when None)."""
    p, kernel = ranks.size, problem.kernel
    local = local or ScipyLocal()
    q, i, j, fiber, ring = grid15d(ranks, c)
    m, n, r = problem.m, problem.n, problem.r
    slab = r // q
    cols = slice(i * slab, (i + 1) * slab)
    mb, nb = m // p, n // p
    mine = [c * ip + j for ip in range(q)]
    a_loc = {bid: np.ascontiguousarray(a[bid * mb:(bid + 1) * mb, cols]) for bid in mine}
    b_loc = np.concatenate([b[bid * nb:(bid + 1) * nb, cols] for bid in mine])
    own = c * i + j

    def row_block(bid):
        return Csr.of(s[bid * mb:(bid + 1) * mb])

    blk = row_block(own)
    rows, bcols = blk.rows.astype(np.float64), blk.indices.astype(np.float64)
    # the values this rank scales at the end of an SDDMM round (module docstring): block c (i + 1) + j
    last = c * ((i + 1) % q) + j
    scale = row_block(last).data if kernel != "spmm" else None
    with ranks.phase("setup"):
        counts = ring.allgather(np.array([blk.nnz], dtype=np.int64))

    def block_at(t, start):  # (block id, nonzeros) of the S block held at step t of a round from ``start``
        src = (i - start - t) % q
        return c * src + j, int(counts[src])

    def replicate_b():
        with ranks.phase("replication"):
            got = fiber.allgather(b_loc)  # fiber rank j' sent its blocks c i' + j', i' = 0..q-1
        order = np.empty(n, dtype=np.int64)
        pos = 0
        for jp in range(c):
            for ip in range(q):
                bid = c * ip + jp
                order[bid * nb:(bid + 1) * nb] = np.arange(pos, pos + nb)
                pos += nb
        return got[order]

    def round_(buf, step, start):
        """q steps, q - 1 shifts of ``buf`` (rows, columns, values of the block of ring row i - start);
        returns the buffer held at the end (the block of ring row i - start + 1)."""
        for t in range(q):
            bid, z = block_at(t, start)
            with ranks.phase("computation"):
                held = Csr.from_rows(buf[:z].astype(np.int64), buf[z:2 * z], buf[2 * z:3 * z], (mb, n))
                step(bid, held, buf[2 * z:3 * z])
            if t < q - 1:
                with ranks.phase("propagation"):
                    out = np.empty(3 * block_at(t + 1, start)[1])
                    buf = ring.sendrecv(buf, (i + 1) % q, out, (i - 1) % q, tag=21)
        return buf

    def sddmm(b_rep):
        """The sampled values of block ``last`` (rows, columns and values travel as one buffer)."""
        def step(bid, held, partial):  # the travelling values are the partial sums: S's values enter at the end
            local.sddmm(held.with_data(np.ones(held.nnz)), a_loc[bid], b_rep, partial, accumulate=True)
        buf = round_(np.concatenate([rows, bcols, np.zeros(blk.nnz)]), step, 0)
        z = scale.size
        buf[2 * z:] *= scale
        return buf

    out = {bid: np.zeros((mb, slab)) for bid in mine}

    def spmm(b_rep, buf, start):
        def step(bid, held, _):
            local.spmm(held, b_rep, out[bid], accumulate=True)
        round_(buf, step, start)
        return {"dense": [(bid * mb, i * slab, out[bid]) for bid in mine]}

    b_rep = replicate_b()
    if kernel == "spmm":
        return spmm(b_rep, np.concatenate([rows, bcols, blk.data]), 0)
    buf = sddmm(b_rep)
    if kernel == "sddmm":
        z = scale.size
        return {"sparse": (buf[:z].astype(np.int64) + last * mb, buf[z:2 * z].astype(np.int64), buf[2 * z:])}
    if elide == "none":
        b_rep = replicate_b()
    return spmm(b_rep, buf, q - 1)
