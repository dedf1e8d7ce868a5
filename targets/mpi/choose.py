"""The scheduler's choice of a distributed sparse algorithm: every algorithm x replication factor c x
eliding that can run on p ranks, costed with the alpha-beta-gamma model (``targets.mpi.model``), the
memory-infeasible ones dropped, the cheapest returned with its modelled phase times.  The parallel lower
bound beside it is the caller's (``lowerbounds.sparse``: the back end does not import the bounds).

Without the pattern, nonzeros are taken as spread evenly over the blocks (rounded); with it
(``s``), the exact block counts are used, so the modelled words are the ones a run measures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workloads.divisors import divisors

from . import model
from .launch import MpiError


@dataclass
class Candidate:
    algorithm: str
    c: int
    elide: str
    words: int              # most words a rank receives
    messages: int           # most messages a rank receives
    seconds: float          # modelled: the slowest rank
    phase_seconds: dict     # modelled seconds by phase of the slowest rank
    memory_words: float
    feasible: bool

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Choice:
    best: Candidate
    candidates: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"best": self.best.to_dict(), "candidates": [c.to_dict() for c in self.candidates]}


def _even_blocks(alg: str, nnz: int, p: int, c: int) -> np.ndarray:
    if alg.startswith("15d"):
        return np.array([len(x) for x in np.array_split(np.arange(nnz), p)])
    g = model.grid25d(p, c) * c
    flat = np.array([len(x) for x in np.array_split(np.arange(nnz), g * g)])
    return flat.reshape(g, g)


def candidates(kernel: str, m: int, n: int, r: int, nnz: int, p: int, machine: model.Machine | None = None,
               s=None, algorithms=None, cs=None, elides=None) -> list[Candidate]:
    """Every runnable configuration (restricted to the given algorithms, c values, elides), costed."""
    machine = machine or model.Machine()
    out = []
    for alg in algorithms or model.ALGORITHMS:
        for c in cs or divisors(p):
            for elide in elides or model.ELIDES:
                if model.check(alg, kernel, elide, m, n, r, p, c):
                    continue
                blocks = model.block_counts(s, p, alg, c) if s is not None else _even_blocks(alg, nnz, p, c)
                flops = model.local_flops(kernel, nnz / p, r)
                per_rank = [model.phase_counts(alg, kernel, elide, m, n, r, p, c, rk, blocks) for rk in range(p)]
                times = [model.seconds(pc, machine, flops) for pc in per_rank]
                slow = max(range(p), key=lambda rk: times[rk]["total"])
                mem = model.memory_words(alg, kernel, m, n, r, p, c, nnz)
                out.append(Candidate(alg, c, elide,
                                     words=max(sum(v[1] for v in pc.values()) for pc in per_rank),
                                     messages=max(sum(v[3] for v in pc.values()) for pc in per_rank),
                                     seconds=times[slow]["total"], phase_seconds=times[slow],
                                     memory_words=mem,
                                     feasible=machine.memory_words is None or mem <= machine.memory_words))
    return out


def choose(kernel: str, m: int, n: int, r: int, nnz: int, p: int, machine: model.Machine | None = None,
           s=None, **restrict) -> Choice:
    """The cheapest feasible configuration; ``MpiError`` (exit 2) when none fits."""
    cands = candidates(kernel, m, n, r, nnz, p, machine, s, **restrict)
    ok = [cd for cd in cands if cd.feasible]
    if not ok:
        what = "no algorithm can use these ranks and sizes" if not cands else \
            f"no configuration fits the memory per rank ({(machine or model.Machine()).memory_words:g} words; " \
            f"the smallest needs {min(cd.memory_words for cd in cands):g})"
        raise MpiError(what, field="--ranks" if not cands else "--c" if restrict.get("cs") else "memory")
    best = min(ok, key=lambda cd: (cd.seconds, cd.words, cd.algorithm, cd.c, cd.elide))
    return Choice(best, cands)
