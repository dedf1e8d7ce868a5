"""Distributed SpMM / SDDMM / FusedMM on mpiexec ranks: results equal SciPy's to 1e-10 in fp64 and the
measured words and messages equal the model on every rank and phase."""

import numpy as np
import pytest

pytest.importorskip("mpi4py")

from targets.mpi import MpiError  # noqa: E402
from targets.mpi.model import phase_counts  # noqa: E402
from targets.mpi.problem import Problem  # noqa: E402
from targets.mpi.run import run, run_batch  # noqa: E402
from workloads import fusedmm, sddmm, spmm  # noqa: E402


def test_reference_point_of_the_paper_setting():
    """p = 4, m = n = 4096, r = 32, 8 nonzeros per row, 1.5D dense shift, the most words a rank receives."""
    prob = Problem.from_nest(fusedmm(m=4096, n=4096, r=32, nnz_per_row=8, seed=0))
    configs = [(prob, "15d-dense", c, e) for c in (1, 2, 4) for e in ("none", "fusion")]
    got = {(d["c"], d["elide"]): d for d in run_batch(configs, ranks=4, timeout_s=120)}
    # blocks of 1024 x 32 = 32,768 words; q - 1 shifts a round, (c - 1) blocks per fiber collective
    want = {(1, "none"): 196_608, (1, "fusion"): 98_304, (2, "none"): 131_072, (2, "fusion"): 98_304,
            (4, "none"): 196_608, (4, "fusion"): 196_608}
    for key, words in want.items():
        d = got[key]
        assert d["verified"] and d["max_abs_err"] <= 1e-10, key
        assert d["counts_match"], key
        assert max(d["words_per_rank"]) == words, key
    assert max(got[(2, "none")]["words_per_rank"]) / max(got[(2, "fusion")]["words_per_rank"]) >= 1.3


def test_every_configuration_on_a_power_law_pattern():
    """R-MAT rows are uneven, so the algorithms that move S move different words on different ranks."""
    configs = []
    for build in (spmm, sddmm, fusedmm):
        prob = Problem.from_nest(build(m=64, n=48, r=8, nnz=400, generator="rmat", seed=3))
        for alg, cs in (("15d-dense", (1, 2, 4)), ("15d-sparse", (1, 2, 4)), ("25d-dense", (1, 4)),
                        ("25d-sparse", (1, 4))):
            elides = ["none"] if build is not fusedmm else ["none", "reuse"] + (["fusion"] if alg == "15d-dense" else [])
            configs += [(prob, alg, c, e) for c in cs for e in elides]
    results = run_batch(configs, ranks=4, timeout_s=120)
    for (prob, alg, c, e), d in zip(configs, results):
        tag = (prob.kernel, alg, c, e)
        assert d["verified"], (tag, d["max_abs_err"])
        assert d["counts_match"], (tag, d["phases"])
    for alg in ("15d-sparse", "25d-dense"):
        assert any(len(set(d["words_per_rank"])) > 1 for d in results if d["algorithm"] == alg), alg


def test_two_ranks_and_a_non_square_matrix():
    prob = Problem.from_nest(fusedmm(m=10, n=6, r=4, nnz_per_row=2, seed=5))
    for d in run_batch([(prob, "15d-dense", 2, "reuse"), (prob, "15d-sparse", 1, "none")], ranks=2, timeout_s=60):
        assert d["verified"] and d["counts_match"]


def test_model_by_hand():
    # 1.5D dense shift SpMM, m = n = 8, r = 2, p = 4, c = 2: blocks of 2 rows x 2 = 4 words; q - 1 = 1 shift of
    # a B block (4 words, 1 message each way), then a reduce-scatter over 2 ranks (one 4-word block)
    assert phase_counts("15d-dense", "spmm", "none", 8, 8, 2, 4, 2, 0) == \
        {"replication": (4, 4, 1, 1), "propagation": (4, 4, 1, 1)}
    # FusedMM with reuse: allgather B (one block), two rounds (A blocks, then the output blocks) of one shift
    assert phase_counts("15d-dense", "fusedmm", "reuse", 8, 8, 2, 4, 2, 0) == \
        {"replication": (4, 4, 1, 1), "propagation": (8, 8, 2, 2)}
    # 2.5D sparse replicate, p = 4, c = 4 (s = 1): 10 nonzeros sharded 3, 3, 2, 2 over the layers; rank 0
    # receives the other shards, 3 words per nonzero (30 - 9), and sends all but its right neighbour's (30 - 9);
    # one step (s = 1) sends and receives a 4-row, 2-column slab of A and one of B: 16 words, 2 messages
    grid = np.diag([3, 3, 2, 2])
    counts = phase_counts("25d-sparse", "spmm", "none", 4, 4, 8, 4, 4, 0, block_nnz=grid)
    assert counts["replication"] == (21, 21, 3, 3) and counts["propagation"] == (16, 16, 2, 2)
    assert phase_counts("25d-sparse", "spmm", "none", 4, 4, 8, 4, 4, 3, block_nnz=grid)["replication"] == (21, 24, 3, 3)
    # 1.5D sparse shift, c = 1, p = 2: one shift; rank 0 sends its block (3 nonzeros) and receives the other
    # (5), 3 words per nonzero; FusedMM's SpMM round sends the block back and receives its own
    counts = phase_counts("15d-sparse", "sddmm", "none", 4, 4, 2, 2, 1, 0, block_nnz=[3, 5])
    assert counts["propagation"] == (9, 15, 1, 1) and counts["setup"] == (1, 1, 1, 1)
    counts = phase_counts("15d-sparse", "fusedmm", "reuse", 4, 4, 2, 2, 1, 0, block_nnz=[3, 5])
    assert counts["propagation"] == (24, 24, 2, 2)


@pytest.mark.parametrize("alg,c,elide,r,match", [
    ("15d-dense", 3, "none", 8, "c.*does not divide"),
    ("15d-sparse", 2, "fusion", 8, "fusion is valid on 15d-dense only"),
    ("15d-sparse", 1, "none", 6, "r divisible by p / c = 4"),
    ("25d-dense", 2, "none", 8, "square"),
])
def test_bad_configurations_are_one_line(alg, c, elide, r, match):
    prob = Problem.from_nest(fusedmm(m=16, n=16, r=r, nnz_per_row=2))
    with pytest.raises(MpiError, match=match) as e:
        run(prob, 4, alg, c, elide)
    assert e.value.exit_code == 2


def test_eight_ranks_cover_2_5d_with_both_s_and_c_above_one():
    """p = 8, c = 2: a 2 x 2 x 2 grid (Cannon steps and fiber collectives together)."""
    configs = []
    for build in (spmm, sddmm, fusedmm):
        prob = Problem.from_nest(build(m=32, n=48, r=8, nnz=150, generator="rmat", seed=4))
        for alg in ("25d-dense", "25d-sparse"):
            configs += [(prob, alg, 2, e) for e in (["none", "reuse"] if build is fusedmm else ["none"])]
    configs.append((prob, "15d-dense", 8, "fusion"))
    for (prob, alg, c, e), d in zip(configs, run_batch(configs, ranks=8, timeout_s=180)):
        assert d["verified"] and d["counts_match"], (prob.kernel, alg, c, e)
