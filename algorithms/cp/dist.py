"""STS-CP and exact CP-ALS on MPI ranks (``targets.mpi``'s counting rank wrapper), after Bharadwaj et al.,
"Distributed-memory randomized algorithms for sparse tensor CP decomposition" (SPAA 2024).

Layout: every factor U_k is split in P contiguous row blocks (``numpy.array_split``), block p on rank p;
the Gram matrices G_k are replicated (an allreduce of R^2 words after each update).  The tensor is
generated on every rank from the seed and each rank keeps a part of the nonzeros (not counted: input).

Distributed exact leverage sampling (one mode update, J draws of the Khatri-Rao product of the other
factors, modes in increasing order).  Every rank runs the same shared random stream, so the public
choices agree everywhere: for mode k the ranks allgather their block Grams (R^2 words each), then each
draw picks its eigencomponent and its row block (mass w^T G_k^(p) w), the block's owner draws the row
from its local segment tree (its own stream), and an allgather of the drawn rows and indices
(R + 1 words per draw) replicates them.  Words per rank and mode update: (N - 1)((P - 1) R^2 +
(J - J_own)(R + 1)) plus the Gram allreduce: O(J N R + P R^2), independent of I_n.

Schedules of the sampled MTTKRP:
* ``accumulator`` (accumulator-stationary): the nonzeros are redistributed once per mode at setup
  (pairwise exchange, an alltoallv, phase ``redistribute``) so that rank p holds every nonzero whose
  mode-n index is in its row block of U_n; rank p then computes its rows of U_n with no reduction.
* ``tensor`` (tensor-stationary): rank p keeps its nonzeros (a contiguous share of them); the partial
  I_n x R sampled MTTKRP is reduce-scattered to the row owners ((P - 1) / P I_n R words).
Exact ALS (``method="als"``) is tensor-stationary: the new factor is allgathered (I_n R words) so every
rank can form the rows its nonzeros need, and the MTTKRP is reduce-scattered.

``rank_main(ranks, config)`` is the entry of ``targets.mpi.launch``; ``run(config)`` launches it and
returns rank 0's summary with ``words_per_rank`` (measured, by phase) and ``model_words``.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from .als import _FiberIndex, fit_of, svd_init
from .sampler import SegmentTree, hadamard
from .tensors import CpError, SparseTensor, density_for_nnz, planted_sparse


def blocks(n: int, p: int) -> np.ndarray:
    """Row offsets of the P blocks of n rows (``array_split``): p + 1 numbers."""
    return np.concatenate([[0], np.cumsum([len(b) for b in np.array_split(np.arange(n), p)])])


def alltoallv(ranks, parts: list) -> np.ndarray:
    """Pairwise exchange: ``parts[q]`` (rows x W float64) goes to rank q; what every rank sent here,
    stacked in rank order.  Sizes travel first (one word each)."""
    p, me = ranks.size, ranks.rank
    width = parts[0].shape[1]
    got = [None] * p
    got[me] = parts[me]
    for s in range(1, p):
        dest, src = (me + s) % p, (me - s) % p
        n = ranks.sendrecv(np.array([parts[dest].shape[0]], dtype=np.float64), dest, np.empty(1), src, tag=21)
        buf = np.empty((int(n[0]), width))
        got[src] = ranks.sendrecv(np.ascontiguousarray(parts[dest], dtype=np.float64), dest, buf, src, tag=22)
    return np.concatenate(got)


def _tensor(cfg: dict) -> SparseTensor:
    if cfg.get("tensor"):
        from .tensors import read_tns

        return read_tns(cfg["tensor"])
    shape, nnz, r = tuple(cfg["shape"]), int(cfg["nnz"]), int(cfg["planted_rank"])
    t, _ = planted_sparse(shape, r, density=density_for_nnz(shape, nnz, r), noise=cfg.get("noise", 0.0),
                          seed=cfg.get("seed", 0))
    return t


def _subtensor(t: SparseTensor, rows: np.ndarray) -> SparseTensor:
    return SparseTensor(t.shape, np.ascontiguousarray(t.indices[rows]), np.ascontiguousarray(t.values[rows]))


class _DistSampler:
    """Exact KRP leverage draws with factors split by rows over the ranks (see the module docstring)."""

    def __init__(self, ranks, shared, local, r: int):
        self.ranks, self.shared, self.local, self.r = ranks, shared, local, r

    def draw(self, j: int, local_factors, trees, grams, offs):
        ranks, r, p = self.ranks, self.r, self.ranks.size
        g = hadamard(grams, r)
        gp = np.linalg.pinv(g, hermitian=True)
        total = float(np.sum(gp * g))
        h = np.ones((j, r))
        idx = np.empty((j, len(local_factors)), dtype=np.int64)
        own = []
        for k, (u, tree) in enumerate(zip(local_factors, trees)):
            lam, v = np.linalg.eigh(gp * hadamard(grams[k + 1:], r))
            lam = np.maximum(lam, 0.0)
            wv = h[:, :, None] * v[None, :, :]
            mass = np.maximum(lam[None, :] * np.einsum("jar,ab,jbr->jr", wv, grams[k], wv, optimize=True), 0.0)
            c = np.cumsum(mass, axis=1)
            comp = np.minimum((c < (self.shared.random(j) * c[:, -1])[:, None]).sum(axis=1), r - 1)
            w = wv[np.arange(j), :, comp]
            block_grams = ranks.allgather((tree.grams[0][0])[None]).reshape(p, r, r)
            bm = np.maximum(np.einsum("jr,prs,js->jp", w, block_grams, w, optimize=True), 0.0)
            cb = np.cumsum(bm, axis=1)
            owner = np.minimum((cb < (self.shared.random(j) * cb[:, -1])[:, None]).sum(axis=1), p - 1)
            mine = np.flatnonzero(owner == ranks.rank)
            own.append(int(mine.size))
            li = tree.draw(w[mine], self.local) if mine.size else np.zeros(0, dtype=np.int64)
            li = np.minimum(li, u.shape[0] - 1)
            payload = np.hstack([(li + offs[k][ranks.rank])[:, None].astype(np.float64), u[li]])
            counts = [int(np.sum(owner == q)) for q in range(p)]
            allrows = ranks.allgather(payload, counts)
            order = np.argsort(owner, kind="stable")  # allgather stacks by rank, draws ascending within
            got = np.empty((j, r + 1))
            got[order] = allrows
            idx[:, k] = got[:, 0].astype(np.int64)
            h = h * got[:, 1:]
        lev = np.einsum("jr,rs,js->j", h, gp, h)
        return idx, lev / total, h, own


def model_words_recv(method: str, schedule: str, shape, r: int, j: int, p: int, rank: int, own: list) -> dict:
    """Words this rank receives per sweep by phase, from the collectives' closed forms
    (``targets.mpi.ranks.collective_cost``); ``own``: this rank's drawn rows per (mode update, factor)."""
    from targets.mpi.ranks import collective_cost

    n_modes = len(shape)
    gram = collective_cost("allreduce", p, r * r, rank)[1]
    out = {"gram": n_modes * gram, "sample": 0, "mttkrp": 0, "factor": 0}
    for n in range(n_modes):
        rows = [int(b) for b in np.diff(blocks(shape[n], p))]
        if method == "als":
            out["mttkrp"] += collective_cost("reduce_scatter", p, [x * r for x in rows], rank)[1]
            out["factor"] += collective_cost("allgather", p, [x * r for x in rows], rank)[1]
            continue
        for k in range(n_modes - 1):
            out["sample"] += (p - 1) * r * r + (j - own[n][k]) * (r + 1)
        if schedule == "tensor":
            out["mttkrp"] += collective_cost("reduce_scatter", p, [x * r for x in rows], rank)[1]
    return out


def rank_main(ranks, config: dict) -> dict:
    cfg = dict(config)
    p, me = ranks.size, ranks.rank
    method, schedule = cfg.get("method", "sts-cp"), cfg.get("schedule", "accumulator")
    r, j, iters, seed = int(cfg["rank"]), int(cfg.get("samples") or 0), int(cfg["iters"]), int(cfg.get("seed", 0))
    t = _tensor(cfg)
    shape, n_modes = t.shape, t.order
    offs = [blocks(s, p) for s in shape]
    mine_nz = _subtensor(t, np.arange(t.nnz)[blocks(t.nnz, p)[me]:blocks(t.nnz, p)[me + 1]])
    init = svd_init(t, r, seed)  # every rank computes the same start (setup, not counted)
    factors = [u[offs[k][me]:offs[k][me + 1]].copy() for k, u in enumerate(init)]
    # per mode: the nonzeros this rank computes with
    local = []
    if method != "als" and schedule == "accumulator":
        with ranks.phase("redistribute"):
            for n in range(n_modes):
                owner = np.searchsorted(offs[n], mine_nz.indices[:, n], side="right") - 1
                packed = np.hstack([mine_nz.indices.astype(np.float64), mine_nz.values[:, None]])
                got = alltoallv(ranks, [packed[owner == q] for q in range(p)])
                local.append(SparseTensor(shape, got[:, :-1].astype(np.int64), got[:, -1].copy()))
    else:
        local = [mine_nz] * n_modes
    fibers = [_FiberIndex(local[n], n) for n in range(n_modes)] if method != "als" else None
    with ranks.phase("gram"):
        grams = [ranks.allreduce(u.T @ u) for u in factors]
    trees = [SegmentTree.build(u) for u in factors]
    full = None
    shared = np.random.default_rng(seed + 101)
    sampler = _DistSampler(ranks, shared, np.random.default_rng(seed + 1000 + me), r)
    if method == "als":
        with ranks.phase("factor"):
            full = [ranks.allgather(u, list(np.diff(offs[k]))) for k, u in enumerate(factors)]
    setup = ranks.traffic()
    ranks.reset()
    fits, secs, own_all = [], [], []
    weights = np.ones(r)
    for it in range(iters):
        t0 = time.perf_counter()
        own_sweep = []
        for n in range(n_modes):
            others = [k for k in range(n_modes) if k != n]
            rows_n = offs[n][me + 1] - offs[n][me]
            if method == "als":
                hrows = np.ones((mine_nz.nnz, r))
                for k in others:
                    hrows *= full[k][mine_nz.indices[:, k]]
                part = np.asarray(sp.csr_matrix((mine_nz.values, (mine_nz.indices[:, n], np.arange(mine_nz.nnz))),
                                                shape=(shape[n], mine_nz.nnz)) @ hrows)
                with ranks.phase("mttkrp"):
                    m = ranks.reduce_scatter(part, list(np.diff(offs[n])))
                gsys = hadamard([grams[k] for k in others], r)
            else:
                with ranks.phase("sample"):
                    idx, prob, a, own = sampler.draw(j, [factors[k] for k in others], [trees[k] for k in others],
                                                     [grams[k] for k in others], [offs[k] for k in others])
                own_sweep.append(own)
                scale2 = 1.0 / (j * prob)
                m = fibers[n].sampled_rhs(idx, scale2, a, shape[n])
                if schedule == "tensor":
                    with ranks.phase("mttkrp"):
                        m = ranks.reduce_scatter(m, list(np.diff(offs[n])))
                else:
                    m = m[offs[n][me]:offs[n][me + 1]]
                gsys = a.T @ (a * scale2[:, None])
            u = m @ np.linalg.pinv(gsys, hermitian=True)
            with ranks.phase("gram"):
                g = ranks.allreduce(u.T @ u)
            norms = np.sqrt(np.maximum(np.diag(g), 0.0))
            norms[norms == 0] = 1.0
            factors[n] = u / norms
            grams[n] = g / np.outer(norms, norms)
            weights = norms
            trees[n] = SegmentTree.build(factors[n]) if rows_n else trees[n]
            if method == "als":  # every rank's nonzeros need any row of the new factor
                with ranks.phase("factor"):
                    full[n] = ranks.allgather(factors[n], list(np.diff(offs[n])))
        secs.append(time.perf_counter() - t0)
        own_all.append(own_sweep)
        with ranks.phase("fit (not in the model)"):
            everything = [ranks.allgather(u, list(np.diff(offs[k]))) for k, u in enumerate(factors)]
        fits.append(fit_of(t, weights, everything))
    traffic = {k: v.to_dict() for k, v in ranks.traffic().items()}
    model = [model_words_recv(method, schedule, shape, r, j, p, me, own) for own in own_all]
    model_sum = {k: sum(m[k] for m in model) for k in model[0]}
    return {"rank": me, "fit_per_iter": fits, "seconds_per_iter": secs, "traffic": traffic,
            "setup_traffic": {k: v.to_dict() for k, v in setup.items()}, "model_words_recv": model_sum}


def run(config: dict, timeout_s: float = 300.0) -> dict:
    """Launch ``rank_main`` on ``config["ranks"]`` ranks; a summary with words per rank and the model."""
    from targets.mpi.launch import launch

    p = int(config["ranks"])
    if p < 1:
        raise CpError(f"must be >= 1, got {p}", field="ranks")
    if config.get("method", "sts-cp") != "als" and int(config.get("samples") or 0) < int(config["rank"]):
        raise CpError(f"samples must be >= rank ({config['rank']}), got {config.get('samples')}", field="samples")
    res = launch("algorithms.cp.dist:rank_main", p, {"config": config}, timeout_s=timeout_s)
    phases = ("sample", "mttkrp", "factor", "gram")
    words = [{ph: res[q]["traffic"].get(ph, {}).get("words_recv", 0) for ph in phases} for q in range(p)]
    model = [{ph: res[q]["model_words_recv"].get(ph, 0) for ph in phases} for q in range(p)]
    sweeps = int(config["iters"])
    return {"fit": res[0]["fit_per_iter"][-1], "fit_per_iter": res[0]["fit_per_iter"],
            "seconds_per_iter": [max(res[q]["seconds_per_iter"][i] for q in range(p)) for i in range(sweeps)],
            "seconds": sum(max(res[q]["seconds_per_iter"][i] for q in range(p)) for i in range(sweeps)),
            "words_per_rank": [sum(w.values()) for w in words], "model_words": [sum(m.values()) for m in model],
            "words_by_phase": words, "model_by_phase": model, "counts_match": words == model,
            "redistribute_words": [res[q]["setup_traffic"].get("redistribute", {}).get("words_recv", 0)
                                   for q in range(p)]}
