"""Exact leverage-score sampling from a Khatri-Rao product A = U_1 ⊙ ... ⊙ U_N without forming it.

The leverage of row i = (i_1, ..., i_N) is l(i) = a_i^T G^+ a_i with a_i = u_{1,i_1} * ... * u_{N,i_N}
(Hadamard) and G = A^T A = G_1 * ... * G_N (G_k = U_k^T U_k); the l(i) sum to rank(G).  Drawing i with
probability l(i) / rank(G) mode by mode (Bharadwaj, Malik, Murray, Grigori, Buluç, Demmel, NeurIPS 2023):
given the indices drawn so far, whose rows multiply into h, the conditional law of i_k is

    p(i_k) ~ u^T (G^+ * h h^T * G_{>k}) u,   u = u_{k,i_k},  G_{>k} = product of the later modes' Grams.

With Phi_k = G^+ * G_{>k} = V diag(lambda) V^T (one eigendecomposition per mode, shared by every draw)
this is sum_r lambda_r ((h * v_r)^T u)^2: a mixture, so each draw first picks r with weight
lambda_r w_r^T G_k w_r (w_r = h * v_r) and then a row with probability ~ (w_r^T u)^2.  That row is found
by descending a segment tree over U_k's rows whose nodes hold the Gram matrices of their row blocks
(mass of a node = w^T G_node w): O(R^2) per level, log(I_k / F) levels, then a leaf block of F rows.
All J draws descend together (NumPy batches).

``KrpSampler(factors).draw(J, rng)`` returns the index tuples (J x N) and their exact probabilities;
``leverage_scores`` forms A (small cases, tests); ``product_leverage_draw`` is CP-ARLS-LEV's sampler
(independent draws from each factor's own leverage scores; Larsen and Kolda).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .mttkrp import krp


@dataclass
class SegmentTree:
    """Row blocks of ``leaf_rows`` rows of U (zero-padded to a power-of-two number of leaves);
    ``grams[d]``: (2^d, R, R), the Gram matrices of the nodes at depth d (``grams[0][0]`` = U^T U)."""

    u: np.ndarray  # padded, (leaves * leaf_rows, R)
    rows: int
    leaf_rows: int
    grams: list

    @classmethod
    def build(cls, u: np.ndarray, leaf_rows: int | None = None) -> "SegmentTree":
        n, r = u.shape
        f = leaf_rows or max(4, r)
        leaves = 1 << max(0, int(np.ceil(np.log2(max(1, -(-n // f))))))
        up = np.zeros((leaves * f, r))
        up[:n] = u
        blocks = up.reshape(leaves, f, r)
        g = np.einsum("lfr,lfs->lrs", blocks, blocks)
        grams = [g]
        while g.shape[0] > 1:
            g = g[0::2] + g[1::2]
            grams.append(g)
        return cls(up, n, f, grams[::-1])

    def draw(self, w: np.ndarray, rng) -> np.ndarray:
        """One row per row of ``w`` (J x R), row i with probability (w_j^T u_i)^2 / (w_j^T U^T U w_j)."""
        j = w.shape[0]
        node = np.zeros(j, dtype=np.int64)
        mass = np.einsum("jr,rs,js->j", w, self.grams[0][0], w)
        for g in self.grams[1:]:
            left = 2 * node
            ml = np.minimum(np.maximum(np.einsum("jr,jrs,js->j", w, g[left], w, optimize=True), 0.0), mass)
            go_right = rng.random(j) * mass >= ml
            node = left + go_right
            mass = np.where(go_right, mass - ml, ml)
        f = self.leaf_rows
        rows = node[:, None] * f + np.arange(f)[None, :]
        q = np.matmul(self.u[rows], w[:, :, None])[:, :, 0] ** 2
        c = np.cumsum(q, axis=1)
        pick = (c < (rng.random(j) * c[:, -1])[:, None]).sum(axis=1)
        return node * f + np.minimum(pick, f - 1)


def hadamard(mats, r: int) -> np.ndarray:
    out = np.ones((r, r))
    for m in mats:
        out = out * m
    return out


class KrpSampler:
    """Draws rows of U_1 ⊙ ... ⊙ U_N (the given factors, in this order) by exact leverage."""

    def __init__(self, factors, trees=None, grams=None):
        self.factors = [np.asarray(u, dtype=np.float64) for u in factors]
        self.r = self.factors[0].shape[1]
        self.trees = trees or [SegmentTree.build(u) for u in self.factors]
        self.grams = grams or [t.grams[0][0] for t in self.trees]
        g = hadamard(self.grams, self.r)
        self.gpinv = np.linalg.pinv(g, hermitian=True)
        self.total = float(np.sum(self.gpinv * g))  # trace(G^+ G) = rank(G): the leverages' sum
        self.eigs = []
        r = self.r
        for k in range(len(self.factors)):
            phi = self.gpinv * hadamard(self.grams[k + 1:], r)
            lam, v = np.linalg.eigh(phi)
            # mass of component c for a prefix h: lam_c h^T (G_k * v_c v_c^T) h; m[a, c*R + b] holds
            # (G_k * v_c v_c^T)[a, b] so that one GEMM h @ m serves every draw
            m = (self.grams[k][None, :, :] * (v.T[:, :, None] * v.T[:, None, :])).transpose(1, 0, 2)
            self.eigs.append((np.maximum(lam, 0.0), v, np.ascontiguousarray(m.reshape(r, r * r))))

    def draw(self, j: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(idx, prob, rows)``: J index tuples (J x N), their probabilities l(i) / rank(G), and the
        sampled rows of the Khatri-Rao product (J x R)."""
        r = self.r
        h = np.ones((j, r))
        idx = np.empty((j, len(self.factors)), dtype=np.int64)
        for k, (u, tree) in enumerate(zip(self.factors, self.trees)):
            lam, v, m = self.eigs[k]
            hm = (h @ m).reshape(j, r, r)
            mass = np.maximum(lam[None, :] * np.matmul(hm, h[:, :, None])[:, :, 0], 0.0)
            c = np.cumsum(mass, axis=1)
            comp = np.minimum((c < (rng.random(j) * c[:, -1])[:, None]).sum(axis=1), r - 1)
            w = h * v.T[comp]  # w = h * v_comp
            i = tree.draw(w, rng)
            idx[:, k] = i
            h = h * u[i]
        lev = np.einsum("jr,rs,js->j", h, self.gpinv, h)
        return idx, lev / self.total, h


def leverage_scores(factors) -> np.ndarray:
    """Exact leverage distribution of U_1 ⊙ ... ⊙ U_N by forming the product (rows in C order)."""
    a = krp(list(factors))
    g = a.T @ a
    gp = np.linalg.pinv(g, hermitian=True)
    lev = np.einsum("ir,rs,is->i", a, gp, a)
    return lev / lev.sum()


def product_leverage_draw(factors, j: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CP-ARLS-LEV's draw: each index from its factor's own leverage scores, independently; returns
    ``(idx, prob, rows)`` like ``KrpSampler.draw`` (prob: the product of the per-factor probabilities)."""
    r = factors[0].shape[1]
    idx = np.empty((j, len(factors)), dtype=np.int64)
    prob = np.ones(j)
    h = np.ones((j, r))
    for k, u in enumerate(factors):
        gp = np.linalg.pinv(u.T @ u, hermitian=True)
        lev = np.maximum(np.einsum("ir,rs,is->i", u, gp, u), 0.0)
        p = lev / lev.sum()
        i = rng.choice(u.shape[0], size=j, p=p)
        idx[:, k] = i
        prob *= p[i]
        h = h * u[i]
    return idx, prob, h
