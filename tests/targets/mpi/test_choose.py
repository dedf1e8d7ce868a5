"""The scheduler's choice over algorithm x c x eliding with the alpha-beta-gamma model."""

import pytest

from lowerbounds.sparse import sparse_parallel_bound
from targets.mpi import MpiError
from targets.mpi.choose import candidates, choose
from targets.mpi.model import CORI_LIKE, Machine


def test_paper_setting_prefers_eliding_and_reports_the_bound():
    ch = choose("fusedmm", 4096, 4096, 32, 32768, 4, CORI_LIKE)
    # 15d-sparse, c = 2, reuse: B allgathered once (32,768 words), the nonzero counts (1 word) and two
    # rounds of q - 1 = 1 shift of a 1,024-row block of S (8,192 nonzeros, 3 words each)
    assert (ch.best.algorithm, ch.best.c, ch.best.elide) == ("15d-sparse", 2, "reuse")
    assert ch.best.words == 32_768 + 1 + 2 * 24_576
    assert ch.best.seconds == min(cd.seconds for cd in ch.candidates)
    assert sparse_parallel_bound("fusedmm", 4096, 4096, 32, 32768, 4).memory_independent_words <= ch.best.words
    keys = {(cd.algorithm, cd.c, cd.elide) for cd in ch.candidates}
    assert ("15d-sparse", 2, "fusion") not in keys and ("25d-dense", 2, "none") not in keys  # invalid ones
    assert ("25d-sparse", 4, "reuse") in keys


def test_memory_per_rank_removes_choices():
    free = choose("fusedmm", 4096, 4096, 32, 32768, 4, Machine())
    tight_words = min(cd.memory_words for cd in candidates("fusedmm", 4096, 4096, 32, 32768, 4)) + 1
    tight = choose("fusedmm", 4096, 4096, 32, 32768, 4, Machine(memory_words=tight_words))
    assert tight.best.memory_words <= tight_words
    assert (tight.best.algorithm, tight.best.c) != (free.best.algorithm, free.best.c) or \
        tight.best.memory_words == free.best.memory_words
    with pytest.raises(MpiError, match="memory per rank"):
        choose("fusedmm", 4096, 4096, 32, 32768, 4, Machine(memory_words=1000))


def test_latency_bound_machine_prefers_fewer_messages():
    """With a huge alpha, the fewest messages win; with a huge beta, the fewest words."""
    by_alpha = choose("fusedmm", 4096, 4096, 32, 32768, 4, Machine(alpha=1.0, beta=1e-12, gamma=0))
    assert by_alpha.best.messages == min(cd.messages for cd in by_alpha.candidates)
    by_beta = choose("fusedmm", 4096, 4096, 32, 32768, 4, Machine(alpha=1e-12, beta=1.0, gamma=0))
    assert by_beta.best.words == min(cd.words for cd in by_beta.candidates)


def test_no_algorithm_for_these_ranks():
    with pytest.raises(MpiError, match="no algorithm"):
        choose("spmm", 7, 7, 3, 10, 4)
