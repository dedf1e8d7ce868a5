"""The alpha-beta-gamma model of the distributed sparse algorithms: words and messages per rank and phase
(exact: the counts ``Ranks`` measures), seconds, and memory per rank.

``phase_counts(alg, kernel, elide, m, n, r, p, c, rank, block_nnz)`` -> ``{phase: (words_sent,
words_recv, msgs_sent, msgs_recv)}`` for one rank; collectives are counted as ``targets.mpi.ranks``
carries them out (``collective_cost``).  ``block_nnz``: nonzeros of S's row blocks (p blocks of m/p
rows) for the 1.5D sparse shift, of S's (s c) x (s c) blocks for the 2.5D algorithms (rows then
columns), from ``block_counts``.

Time of one rank: sum over phases of alpha * max(messages sent, received) + beta * max(words sent,
received) (a shift sends and receives at once) plus gamma * its flops; the run's time is the largest
over ranks.  Flops: 2 r per nonzero per SDDMM or SpMM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .ranks import collective_cost

ALGORITHMS = ("15d-dense", "15d-sparse", "25d-dense", "25d-sparse")
ELIDES = ("none", "reuse", "fusion")
PHASES = ("setup", "replication", "propagation", "computation")


@dataclass(frozen=True)
class Machine:
    """alpha: seconds per message; beta: seconds per word (8 bytes); gamma: seconds per flop."""

    alpha: float = 2e-6
    beta: float = 1e-9
    gamma: float = 1e-10
    memory_words: float | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @staticmethod
    def from_arch(arch) -> "Machine":
        """alpha, beta, gamma and memory per rank from a cluster arch's params (``alpha_s``,
        ``beta_s_per_word``, ``gamma_s_per_flop``, ``memory_per_rank_bytes``); the defaults otherwise."""
        p, d = arch.params, Machine()
        mem = p.get("memory_per_rank_bytes")
        return Machine(float(p.get("alpha_s", d.alpha)), float(p.get("beta_s_per_word", d.beta)),
                       float(p.get("gamma_s_per_flop", d.gamma)), None if mem is None else float(mem) / 8)


CORI_LIKE = Machine(alpha=2e-6, beta=8 / 8e9, gamma=1 / 2e10)
"""A Cori-like network (Aries: about 2 microseconds per message, 8 GB/s per rank) and a node's flop rate."""


def _add(*parts):
    return tuple(int(sum(x)) for x in zip(*parts)) if parts else (0, 0, 0, 0)


def _times(k, t):
    return tuple(k * x for x in t)


def grid25d(p: int, c: int) -> int:
    """s with s * s * c = p (0 when there is none)."""
    if c < 1 or p % c:
        return 0
    s = math.isqrt(p // c)
    return s if s * s * c == p else 0


def check(alg: str, kernel: str, elide: str, m: int, n: int, r: int, p: int, c: int) -> str | None:
    """Why the configuration cannot run (None when it can): one reason naming the parameter."""
    if alg not in ALGORITHMS:
        return f"--algorithm: {alg!r} is not one of {', '.join(ALGORITHMS)}"
    if elide not in ELIDES:
        return f"--elide: {elide!r} is not one of {', '.join(ELIDES)}"
    if kernel != "fusedmm" and elide != "none":
        return f"--elide: {elide} applies to fusedmm only"
    if elide == "fusion" and alg != "15d-dense":
        return "--elide: local kernel fusion is valid on 15d-dense only"
    if c < 1 or p % c:
        return f"--c: {c} does not divide the {p} ranks"
    if alg.startswith("15d"):
        if m % p or n % p:
            return f"--m/--n: {alg} needs m and n divisible by p = {p} (got {m}, {n})"
        if alg == "15d-sparse" and r % (p // c):
            return f"--r: 15d-sparse needs r divisible by p / c = {p // c} (got {r})"
        return None
    s = grid25d(p, c)
    if not s:
        return f"--c: {alg} needs p / c to be a square (p = {p}, c = {c})"
    if m % (s * c) or n % (s * c):
        return f"--m/--n: {alg} needs m and n divisible by s c = {s * c} (got {m}, {n})"
    if alg == "25d-dense" and r % s:
        return f"--r: 25d-dense needs r divisible by s = {s} (got {r})"
    if alg == "25d-sparse" and r % (s * c):
        return f"--r: 25d-sparse needs r divisible by s c = {s * c} (got {r})"
    return None


def block_counts(s, p: int, alg: str, c: int) -> np.ndarray:
    """Nonzeros per block of S as the model wants them (see the module docstring)."""
    m, n = s.shape
    if alg.startswith("15d"):
        k = p
        rows = np.diff(s.indptr)
        return np.add.reduceat(rows, np.arange(0, m, m // k)) if m else np.zeros(k, dtype=np.int64)
    g = grid25d(p, c) * c
    coo = s.tocoo()
    out = np.zeros((g, g), dtype=np.int64)
    np.add.at(out, (coo.row // (m // g), coo.col // (n // g)), 1)
    return out


def phase_counts(alg, kernel, elide, m, n, r, p, c, rank, block_nnz=None) -> dict:
    """Words and messages of ``rank`` by phase (see the module docstring)."""
    if alg == "15d-dense":
        return _dense15(kernel, elide, m, n, r, p, c)
    if alg == "15d-sparse":
        return _sparse15(kernel, elide, m, n, r, p, c, rank, block_nnz)
    return phase_counts_25d(alg, kernel, elide, m, n, r, p, c, rank, block_nnz)


def _dense15(kernel, elide, m, n, r, p, c):
    q = p // c
    ba, bb = m // p * r, n // p * r
    ag = lambda w: collective_cost("allgather", c, w)
    rs = lambda w: collective_cost("reduce_scatter", c, w)
    shift = lambda w: ((q - 1) * w, (q - 1) * w, q - 1, q - 1)  # a round: q - 1 shifts of one block
    if kernel == "sddmm":
        return {"replication": ag(ba), "propagation": shift(bb)}
    if kernel == "spmm":
        return {"replication": rs(ba), "propagation": shift(bb)}
    if elide == "none":
        return {"replication": _add(ag(ba), rs(ba)), "propagation": _times(2, shift(bb))}
    if elide == "fusion":
        return {"replication": _add(ag(ba), rs(ba)), "propagation": shift(bb)}
    return {"replication": ag(bb), "propagation": _times(2, shift(ba))}  # reuse: S^T orientation


def _sparse15(kernel, elide, m, n, r, p, c, rank, block_nnz):
    q = p // c
    i, j = divmod(rank, c)
    nnz_at = lambda row: int(block_nnz[c * (row % q) + j])  # S's row block of ring row ``row``
    total = sum(nnz_at(ip) for ip in range(q))

    def round_(start):  # q - 1 shifts from the block of ring row i - start: it never sends the block it
        # ends with (ring row i - start + 1) nor receives the one it starts with; 3 words per nonzero
        return (3 * (total - nnz_at(i - start + 1)), 3 * (total - nnz_at(i - start)), q - 1, q - 1)
    ag = collective_cost("allgather", c, n * r // p)
    setup = collective_cost("allgather", q, 1)
    if kernel in ("sddmm", "spmm"):
        return {"setup": setup, "replication": ag, "propagation": round_(0)}
    return {"setup": setup, "replication": ag if elide == "reuse" else _times(2, ag),
            "propagation": _add(round_(0), round_(-1))}  # SpMM starts where SDDMM left the blocks


def phase_counts_25d(alg, kernel, elide, m, n, r, p, c, rank, grid_nnz) -> dict:
    """Words and messages of ``rank`` by phase (``grid_nnz``: S's nonzeros on an (s c) x (s c) grid)."""
    s = grid25d(p, c)
    ij, k = divmod(rank, c)
    i, j = divmod(ij, s)
    g = np.asarray(grid_nnz)
    if alg == "25d-dense":
        orient = "ST" if kernel == "fusedmm" and elide == "reuse" else "S"
        big_r, big_h = (m, n) if orient == "S" else (n, m)
        tg = g if orient == "S" else g.T
        z_t = lambda x: int(tg[c * i:c * i + c, c * x + k].sum())  # T super-row i, column block c x + k
        zt = 3 * sum(z_t(x) for x in range(s))
        tround = (zt, zt, s, s)
        hround = (s * big_h * r // p,) * 2 + (s, s)
        setup = collective_cost("allgather", s, 1)
        ag = collective_cost("allgather", c, big_r * r // p)
        rs = collective_cost("reduce_scatter", c, m * r // p)
        if kernel == "sddmm":
            return {"setup": setup, "replication": ag, "propagation": _add(tround, hround)}
        if kernel == "spmm":
            return {"setup": setup, "replication": rs, "propagation": _add(tround, hround)}
        if orient == "S":
            return {"setup": setup, "replication": _add(ag, rs), "propagation": _times(2, _add(tround, hround))}
        return {"setup": setup, "replication": ag, "propagation": _times(2, _add(tround, hround))}
    z = int(g[c * i:c * i + c, c * j:c * j + c].sum())
    sizes = [len(x) for x in np.array_split(np.arange(z), c)]
    setup = collective_cost("allgather", c, 1)
    rep = collective_cost("allgather", c, [3 * x for x in sizes], k)
    step = (s * (m + n) * r // p,) * 2 + (2 * s, 2 * s)
    if kernel == "spmm":
        return {"setup": setup, "replication": rep, "propagation": step}
    rs = collective_cost("reduce_scatter", c, sizes, k)
    if kernel == "sddmm":
        return {"setup": setup, "replication": _add(rep, rs), "propagation": step}
    if elide == "none":
        return {"setup": setup, "replication": _add(rep, rs, rep), "propagation": _times(2, step)}
    return {"setup": setup, "replication": _add(rep, collective_cost("allreduce", c, z, k)),
            "propagation": _times(2, step)}


def local_flops(kernel: str, nnz_local: float, r: int) -> float:
    return (2 if kernel == "fusedmm" else 1) * 2.0 * nnz_local * r


def seconds(counts: dict, machine: Machine, flops: float) -> dict:
    """Modelled seconds by phase (computation = gamma * flops) and in total, for one rank."""
    out = {}
    for ph, (ws, wr, ms, mr) in counts.items():
        out[ph] = machine.alpha * max(ms, mr) + machine.beta * max(ws, wr)
    out["computation"] = out.get("computation", 0.0) + machine.gamma * flops
    out["total"] = sum(out.values())
    return out


def memory_words(alg, kernel, m, n, r, p, c, nnz) -> float:
    """Words a rank holds at its peak (dense blocks, replicas, buffers; 3 words per nonzero)."""
    z = 3.0 * nnz / p
    if alg == "15d-dense":
        return (m + n) * r / p + 2 * c * m * r / p + 2 * n * r / p + 2 * z
    if alg == "15d-sparse":
        return (m + n) * r / p + c * n * r / p + m * r / p + 3 * z
    if alg == "25d-dense":
        return (m + n) * r / p + 2 * c * m * r / p + 2 * n * r / p + 3 * z
    return (m + n) * r / p + 2 * m * r / p + 2 * n * r / p + 3 * c * z
