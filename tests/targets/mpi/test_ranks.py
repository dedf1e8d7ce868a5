"""The counting rank wrapper and the launcher, on real mpiexec ranks (3 ranks: an odd ring and a
binomial tree that is not a full one)."""

import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py")

from targets.mpi import MpiError, collective_cost, launch  # noqa: E402
from targets.mpi.ranks import binomial_children, binomial_parent  # noqa: E402

HERE = str(Path(__file__).resolve().parent)
ENV = {"PYTHONPATH": HERE}


@pytest.fixture(scope="module")
def three():
    return launch("mpi_entries:patterns", 3, {"block": 3}, timeout_s=60, extra_env=ENV)


def counts(result, phase):
    t = result["traffic"].get(phase, {})
    return tuple(t.get(k, 0) for k in ("words_sent", "words_recv", "msgs_sent", "msgs_recv"))


def test_values_are_right(three):
    a0 = np.arange(9.0).reshape(3, 3)
    for r, res in enumerate(three):
        assert res["shift"] == (np.arange(3.0) + 100 * ((r - 1) % 3)).tolist()
        assert res["allgather"] == [(np.arange(3.0) + 100 * q).tolist() for q in range(3)]
        assert res["allgatherv"] == [[q, q] for q in range(3) for _ in range(q + 1)]
        assert res["reduce_scatter"] == [(6 * a0[r]).tolist()]
        assert res["allreduce"] == [6.0] * 7
        assert res["bcast"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert three[1]["p2p"] == [0.0, 1.0, 2.0]
    assert all(res["same_split"] for res in three)  # a named split is made once
    assert three[0]["reduce"] == [3.0] * 4 and three[1]["reduce"] is None


def test_counts_by_hand(three):
    # (words sent, words received, messages sent, messages received) per rank, worked out by hand
    hand = {
        "shift": [(3, 3, 1, 1)] * 3,
        "p2p": [(3, 0, 1, 0), (0, 3, 0, 1), (0, 0, 0, 0)],
        "allgather": [(6, 6, 2, 2)] * 3,                            # two blocks of 3 each way
        "allgatherv": [(8, 10, 2, 2), (6, 8, 2, 2), (10, 6, 2, 2)],  # blocks of 2, 4, 6 words
        "reduce_scatter": [(6, 6, 2, 2)] * 3,
        "allreduce": [(9, 9, 4, 4), (10, 9, 4, 4), (9, 10, 4, 4)],   # 7 words cut 3 + 2 + 2
        "bcast": [(0, 5, 0, 1), (10, 0, 2, 0), (0, 5, 0, 1)],        # root 1 sends to both
        "reduce": [(0, 8, 0, 2), (4, 0, 1, 0), (4, 0, 1, 0)],
        "inner": [(3, 3, 1, 1)] * 3,                                # nested phases count innermost
        "outer": [(0, 0, 0, 0)] * 3,
        "sub": [(3, 3, 1, 1), (0, 0, 0, 0), (3, 3, 1, 1)],          # ranks {0, 2} and {1}
    }
    for phase, want in hand.items():
        assert [counts(r, phase) for r in three] == want, phase
    for r in three:
        assert "other" not in r["traffic"]
        assert r["traffic"]["shift"]["bytes_sent"] == 24


def test_model_equals_counts(three):
    model = {
        "allgather": lambda r: collective_cost("allgather", 3, 3, r),
        "allgatherv": lambda r: collective_cost("allgather", 3, [2, 4, 6], r),
        "reduce_scatter": lambda r: collective_cost("reduce_scatter", 3, 3, r),
        "allreduce": lambda r: collective_cost("allreduce", 3, 7, r),
        "bcast": lambda r: collective_cost("bcast", 3, 5, r, root=1),
        "reduce": lambda r: collective_cost("reduce", 3, 4, r, root=0),
    }
    for phase, f in model.items():
        assert [counts(res, phase) for res in three] == [f(r) for r in range(3)], phase


def test_binomial_tree_covers_every_rank_once():
    for size in range(1, 18):
        seen = [0]
        stack = [0]
        while stack:
            v = stack.pop()
            for k in binomial_children(v, size):
                assert binomial_parent(k) == v
                seen.append(k)
                stack.append(k)
        assert sorted(seen) == list(range(size))


def test_exception_in_one_rank_ends_the_job_naming_it():
    t0 = time.monotonic()
    with pytest.raises(MpiError) as e:
        launch("mpi_entries:fail_on", 3, {"rank": 1}, timeout_s=60, extra_env=ENV)
    assert time.monotonic() - t0 < 30
    assert str(e.value) == "rank 1: RuntimeError: bad block"
    assert e.value.exit_code == 1


def test_a_rank_that_dies_is_named():
    t0 = time.monotonic()
    with pytest.raises(MpiError) as e:
        launch("mpi_entries:die_on", 3, {"rank": 1}, timeout_s=60, extra_env=ENV)
    assert time.monotonic() - t0 < 30
    assert str(e.value) == "rank 1 died: its process ended without an error or a result"


def test_time_out_names_the_hanging_rank_and_its_phase():
    t0 = time.monotonic()
    with pytest.raises(MpiError) as e:
        launch("mpi_entries:hang_on", 2, {"rank": 1}, timeout_s=4, extra_env=ENV)
    assert time.monotonic() - t0 < 15
    assert str(e.value) == "timed out after 4 s: rank 1 (in phase 'stuck') did not finish"


def test_bad_entry_and_rank_count():
    with pytest.raises(MpiError, match="ranks"):
        launch("mpi_entries:patterns", 0)
    with pytest.raises(MpiError, match="rank 0: ValueError"):
        launch("no_colon", 1, timeout_s=30)
