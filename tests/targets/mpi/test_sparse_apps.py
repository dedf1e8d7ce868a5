"""The two applications on MPI ranks: an ALS step whose CG solves use the distributed FusedMM, and a GAT
layer (SDDMM scores, SpMM aggregation), against NumPy."""

import numpy as np
import pytest

pytest.importorskip("mpi4py")

from algorithms.sparse_apps import als_reference, als_step, gat_forward, rmse, synthetic_ratings  # noqa: E402
from targets.mpi import MpiError  # noqa: E402


def test_als_step_matches_the_exact_step_and_lowers_the_rmse():
    d = als_step(m=64, n=48, r=4, ranks=4, c=2, elide="fusion")
    assert d["max_abs_err"] <= 1e-8
    assert d["rmse_after"] == pytest.approx(d["rmse_after_ref"], rel=1e-10)
    assert d["rmse_after"] < 0.7 * d["rmse_before"]
    assert min(d["words_per_rank"]) > 0


def test_gat_layer_matches_numpy():
    d = gat_forward(n=64, f_in=8, f_out=4, nnz_per_row=4, ranks=4, c=2)
    assert d["max_abs_err"] <= 1e-10


def test_reference_als_converges_on_low_rank_data():
    s, _, _ = synthetic_ratings(40, 30, 3, 10, noise=0.0, seed=1)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((40, 3)), rng.standard_normal((30, 3))
    for _ in range(30):
        a, b = als_reference(s, a, b, 1e-6)
    assert rmse(s, a, b) < 1e-3


def test_bad_sizes():
    with pytest.raises(MpiError, match="do not divide among 4"):
        gat_forward(n=30, ranks=4)
    with pytest.raises(MpiError, match="does not divide"):
        als_step(ranks=4, c=3)
