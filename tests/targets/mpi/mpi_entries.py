"""Entry points the MPI tests launch on ranks (``launch("mpi_entries:NAME", ...)``)."""

import os
import time

import numpy as np


def patterns(ranks, block: int = 3):
    """Every counted operation once, each in its own phase; returns the counts and the results."""
    p, me = ranks.size, ranks.rank
    mine = np.arange(block, dtype=np.float64) + 100 * me
    out = {}
    with ranks.phase("shift"):
        got = ranks.shift(mine)
        out["shift"] = got.tolist()
    with ranks.phase("p2p"):
        if me == 0 and p > 1:
            ranks.send(mine, 1)
        elif me == 1:
            out["p2p"] = ranks.recv(np.empty(block), 0).tolist()
    with ranks.phase("allgather"):
        out["allgather"] = ranks.allgather(mine.reshape(1, -1)).tolist()
    with ranks.phase("allgatherv"):
        v = np.full((me + 1, 2), me, dtype=np.int64)
        out["allgatherv"] = ranks.allgather(v, counts=[r + 1 for r in range(p)]).tolist()
    with ranks.phase("reduce_scatter"):
        a = np.arange(p * block, dtype=np.float64).reshape(p, block) * (me + 1)
        out["reduce_scatter"] = ranks.reduce_scatter(a).tolist()
    with ranks.phase("allreduce"):
        out["allreduce"] = ranks.allreduce(np.full(7, me + 1.0)).tolist()
    with ranks.phase("bcast"):
        b = np.arange(5.0) if me == 1 else np.zeros(5)
        out["bcast"] = ranks.bcast(b, root=1 % p).tolist()
    with ranks.phase("reduce"):
        r = ranks.reduce(np.full(4, float(me)), root=0)
        out["reduce"] = None if r is None else r.tolist()
    with ranks.phase("outer"):
        with ranks.phase("inner"):
            ranks.shift(mine, offset=2)
    sub = ranks.split(me % 2)
    out["same_split"] = ranks.split(me % 2, name="parity") is ranks.split(me % 2, name="parity")
    with ranks.phase("sub"):
        sub.allgather(mine)
    out["traffic"] = {k: v.to_dict() for k, v in ranks.traffic().items()}
    return out


def fail_on(ranks, rank: int = 1):
    """Rank ``rank`` raises while the others wait in a receive that never comes."""
    with ranks.phase("work"):
        if ranks.rank == rank:
            raise RuntimeError("bad block")
        ranks.recv(np.empty(1), (ranks.rank + 1) % ranks.size, tag=99)


def die_on(ranks, rank: int = 1):
    """Rank ``rank`` exits at once without a word."""
    if ranks.rank == rank:
        os._exit(3)
    ranks.barrier()
    return ranks.rank


def hang_on(ranks, rank: int = 1):
    """Rank ``rank`` sleeps in phase 'stuck' for a long time; the others finish the phase 'work'."""
    if ranks.rank == rank:
        with ranks.phase("stuck"):
            time.sleep(600)
    return ranks.rank


def sleep_after_send(ranks, sleep_s: float = 0.0, rounds: int = 20):
    """``rounds`` allreduces of 4 words sleeping ``sleep_s`` after each message sent: seconds and counts."""
    ranks.ledger.sleep_after_send_s = sleep_s
    ranks.barrier()
    t0 = time.perf_counter()
    with ranks.phase("allreduce"):
        for _ in range(rounds):
            ranks.allreduce(np.ones(4))
    return {"seconds": time.perf_counter() - t0, "msgs_sent": ranks.traffic()["allreduce"].msgs_sent}
