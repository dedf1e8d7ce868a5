"""Words per rank of the 1.5D algorithms against their closed forms (rounds of q - 1 shifts).

Setting: m = n rows, r columns, p ranks on a q x c grid (q = p / c), every row of S with exactly k
nonzeros (Erdos-Renyi with ``nnz_per_row``), so every rank's blocks have the same size:

* W = m r / p: words of one dense row block (A's or B's);
* Z = 3 k m / p: words of one travelling row block of S (row index, column index, value per nonzero).

A round of q - 1 shifts moves q - 1 blocks into every rank; an allgather or a reduce-scatter over the c
ranks of a fiber moves c - 1 blocks into every rank.  Words received (= sent) per rank:

1.5D dense shift (the dense blocks travel):
  SpMM, SDDMM:         (c - 1) W + (q - 1) W
  FusedMM ``none``:    2 (c - 1) W + 2 (q - 1) W     (each kernel with its own replication and round)
  FusedMM ``fusion``:  2 (c - 1) W + (q - 1) W       (allgather A, one round, reduce-scatter the output)
  FusedMM ``reuse``:   (c - 1) W + 2 (q - 1) W       (allgather B once; A's round, then the output's)

1.5D sparse shift (S travels; B allgathered over the fiber at this rank's r / q columns, W words):
  SpMM, SDDMM:         (q - 1) + (c - 1) W + (q - 1) Z       (q - 1: the ring's nonzero counts)
  FusedMM ``none``:    (q - 1) + 2 (c - 1) W + 2 (q - 1) Z
  FusedMM ``reuse``:   (q - 1) + (c - 1) W + 2 (q - 1) Z

With rounds of q shifts every (q - 1) term would read q; at c = p (q = 1) the rounds move nothing.
"""

import pytest

pytest.importorskip("mpi4py")

from targets.mpi.problem import Problem  # noqa: E402
from targets.mpi.run import run_batch  # noqa: E402
from workloads import fusedmm, sddmm, spmm  # noqa: E402

M, R, K = 48, 12, 3
PAIRS = ((2, 1), (4, 1), (4, 2))
BUILDERS = {"spmm": spmm, "sddmm": sddmm, "fusedmm": fusedmm}


def closed_form(alg: str, kernel: str, elide: str, p: int, c: int) -> int:
    """Words each rank receives (and sends), from the module docstring."""
    q, w, z = p // c, M * R // p, 3 * K * M // p
    if alg == "15d-dense":
        rounds, reps = {"none": (2, 2), "fusion": (1, 2), "reuse": (2, 1)}[elide] if kernel == "fusedmm" else (1, 1)
        return reps * (c - 1) * w + rounds * (q - 1) * w
    rounds, reps = {"none": (2, 2), "reuse": (2, 1)}[elide] if kernel == "fusedmm" else (1, 1)
    return (q - 1) + reps * (c - 1) * w + rounds * (q - 1) * z


def configurations():
    for kernel in BUILDERS:
        for alg in ("15d-dense", "15d-sparse"):
            elides = ("none",) if kernel != "fusedmm" else \
                ("none", "fusion", "reuse") if alg == "15d-dense" else ("none", "reuse")
            for elide in elides:
                yield kernel, alg, elide


@pytest.mark.parametrize("p,c", PAIRS)
def test_words_per_rank_equal_the_closed_form(p, c):
    probs = {k: Problem.from_nest(b(m=M, n=M, r=R, nnz_per_row=K, seed=2)) for k, b in BUILDERS.items()}
    configs = [(probs[kernel], alg, c, elide) for kernel, alg, elide in configurations()]
    for (prob, alg, _, elide), d in zip(configs, run_batch(configs, ranks=p, timeout_s=120)):
        tag = (prob.kernel, alg, p, c, elide)
        want = closed_form(alg, prob.kernel, elide, p, c)
        assert d["verified"] and d["counts_match"], tag
        assert d["words_per_rank"] == [want] * p, (tag, d["words_per_rank"], want)
        assert d["words_sent_per_rank"] == [want] * p, tag

