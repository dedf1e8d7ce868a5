"""``cosa arch calibrate cluster --ranks P``: alpha, beta and gamma of this machine's MPI ranks, measured.

* alpha (seconds per message) and beta (seconds per 8-byte word): a ping-pong between ranks 0 and 1
  of a P-rank mpiexec job (the others wait, as loaded ranks would) over float64 buffers from 1 to 2^17
  words; alpha is the one-way time (half the median round trip) of small messages, beta the extra time
  per word of large ones (``fit_alpha_beta``).  On a machine with fewer cores than ranks the waiting
  ranks share the cores, and the figures say so.
* gamma (seconds per flop): the local kernel, SciPy CSR times a dense block (2 nnz r flops) on an
  Erdos-Renyi matrix, the median of several runs.
* memory per rank: physical memory / P.

The result is the ``cluster`` preset (a network over the nodes) with P nodes, the link bandwidth of
the measured beta, and ``params`` alpha_s, beta_s_per_word, gamma_s_per_flop, memory_per_rank_bytes,
ranks (what ``targets.mpi.model.Machine.from_arch`` reads).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import replace

import numpy as np

from .launch import MpiError, launch

SIZES_WORDS = (1, 8, 64, 512, 4096, 32768, 131072)


STATS = {"median": statistics.median, "mean": statistics.fmean, "min": min}


def pingpong(ranks, sizes: list, reps: int, stat: str = "median") -> dict | None:
    """One-way seconds by size between ranks 0 and 1 (at rank 0): the ``stat`` (median, mean or min) of
    ``reps`` round trips halved; the other ranks go straight to the end of the job and wait there.  On a
    loaded machine the mean counts the exchanges a descheduled rank slows down, the median does not."""
    out = {}
    for w in sizes:
        buf = np.zeros(int(w))
        times = []
        for _ in range(reps + 2):  # two warm-up exchanges
            if ranks.rank == 0:
                t0 = time.perf_counter()
                ranks.send(buf, 1, tag=5)
                ranks.recv(buf, 1, tag=6)
                times.append((time.perf_counter() - t0) / 2)
            elif ranks.rank == 1:
                ranks.recv(buf, 0, tag=5)
                ranks.send(buf, 0, tag=6)
        out[str(w)] = STATS[stat](times[2:]) if times else None
    return out if ranks.rank == 0 else None


def fit_alpha_beta(points: dict) -> tuple[float, float]:
    """(alpha, beta) of t = alpha + beta w from {words: one-way seconds}: alpha the median time of the
    messages of at most 64 words, beta the median of (t - alpha) / w over those of at least 4096 words
    (robust to the odd slow exchange, which a least-squares fit lets dominate)."""
    w = np.array([float(k) for k in points])
    t = np.array([float(v) for v in points.values()])
    alpha = float(np.median(t[w <= 64])) if np.any(w <= 64) else float(t.min())
    big = w >= 4096 if np.any(w >= 4096) else w == w.max()
    beta = float(np.median(np.maximum(t[big] - alpha, 0.0) / w[big]))
    return alpha, max(beta, 1e-15)


def local_gamma(quick: bool = False, seed: int = 0) -> float:
    """Seconds per flop of the local SpMM kernel (SciPy CSR @ dense)."""
    from workloads.sparse import erdos_renyi

    n, r = (1024, 16) if quick else (4096, 32)
    s = erdos_renyi(n, n, nnz_per_row=8, seed=seed)
    b = np.random.default_rng(seed).random((n, r))
    times = []
    for _ in range(3 if quick else 7):
        t0 = time.perf_counter()
        s @ b
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / (2.0 * s.nnz * r)


def calibrate(ranks: int = 4, quick: bool = False, timeout_s: float = 120.0):
    """The measured cluster arch (see the module docstring)."""
    from costmodel.presets import cluster

    if not isinstance(ranks, int) or ranks < 2:
        raise MpiError(f"a ping-pong needs at least 2 ranks, got {ranks!r}", field="--ranks")
    sizes = SIZES_WORDS[:5] if quick else SIZES_WORDS
    res = launch("targets.mpi.calibrate:pingpong", ranks, {"sizes": list(sizes), "reps": 5 if quick else 20},
                 timeout_s=timeout_s)
    alpha, beta = fit_alpha_beta(res[0])
    gamma = local_gamma(quick)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / ranks
    arch = cluster(nodes=ranks)
    link = 8.0 / beta / arch.frequency_hz  # bytes per cycle of one rank's link
    arch = cluster(nodes=ranks, link_bytes_per_cycle=round(link, 6))
    params = {**arch.params, "alpha_s": alpha, "beta_s_per_word": beta, "gamma_s_per_flop": gamma,
              "memory_per_rank_bytes": int(memory), "ranks": ranks, "pingpong_s": res[0]}
    return replace(arch, source=f"measured by cosa arch calibrate cluster --ranks {ranks} (ping-pong, local SpMM)",
                   params=params)
