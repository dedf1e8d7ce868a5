"""Distributed sketching on mpiexec ranks: every rank generates its own block of S, one counted reduce."""


import numpy as np
import pytest

pytest.importorskip("mpi4py")

from algorithms import sketch as S  # noqa: E402
from targets.mpi import collective_cost, launch  # noqa: E402

M, D, N, P = 301, 24, 5, 3


@pytest.mark.parametrize("kind", ["gaussian", "sjlt"])
def test_reduce_of_rank_blocks_equals_the_whole_sketch(kind):
    out = launch("algorithms.sketch:distributed_sketch", P,
                 {"kind": kind, "d": D, "m": M, "n": N, "seed": 4, "data_seed": 9}, timeout_s=180)
    a = S.gaussian_rows(9, 0, M, N)
    whole = S.make(kind, D, M, seed=4).dense() @ a
    np.testing.assert_allclose(np.array(out[0]["sketch"]), whole, atol=1e-12)
    assert [tuple(r["rows"]) for r in out] == [(0, 101), (101, 201), (201, 301)]
    for rank, r in enumerate(out):
        t = r["traffic"]["sketch_reduce"]
        model = collective_cost("reduce", P, D * N, rank, root=0)
        assert (t["words_sent"], t["words_recv"], t["msgs_sent"], t["msgs_recv"]) == model
        assert "local_sketch" not in r["traffic"] or r["traffic"]["local_sketch"]["words_sent"] == 0
        assert r["sketch"] is None if rank else True


def test_row_blocks_cover_every_row_once():
    for m, p in ((10, 3), (7, 7), (5, 8)):
        blocks = [S.row_block(m, p, r) for r in range(p)]
        assert blocks[0][0] == 0 and blocks[-1][1] == m
        assert all(b[1] == c[0] for b, c in zip(blocks, blocks[1:]))


def test_generated_rows_are_seekable():
    np.testing.assert_array_equal(S.gaussian_rows(3, 5, 9, 4), S.gaussian_rows(3, 0, 20, 4)[5:9])
