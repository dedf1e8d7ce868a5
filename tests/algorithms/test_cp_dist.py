"""algorithms.cp.dist on mpiexec ranks: words per rank and phase equal the model, the accumulator-stationary
schedule's words do not grow with the mode sizes (the tensor-stationary one's do), the planted fit."""

import numpy as np
import pytest

pytest.importorskip("mpi4py")

from algorithms.cp.dist import run  # noqa: E402

BASE = {"nnz": 5000, "planted_rank": 4, "rank": 4, "samples": 200, "iters": 2, "noise": 0.01, "seed": 0}


@pytest.mark.parametrize("method, schedule", [("sts-cp", "accumulator"), ("sts-cp", "tensor"), ("als", "tensor")])
def test_counts_equal_the_model_and_fit(method, schedule):
    d = run({**BASE, "ranks": 3, "shape": [30, 40, 20], "method": method, "schedule": schedule, "iters": 4})
    assert d["counts_match"] and d["words_by_phase"] == d["model_by_phase"]
    assert d["fit"] > 0.97
    if schedule == "accumulator":
        assert all(w["mttkrp"] == 0 for w in d["words_by_phase"]) and min(d["redistribute_words"]) > 0
    else:
        assert all(w["mttkrp"] > 0 for w in d["words_by_phase"])


def test_accumulator_words_flat_as_modes_grow_8x():
    small = {s: run({**BASE, "ranks": 4, "shape": [40] * 3, "schedule": s}) for s in ("accumulator", "tensor")}
    big = {s: run({**BASE, "ranks": 4, "shape": [320] * 3, "schedule": s}) for s in ("accumulator", "tensor")}
    a0, a1 = np.mean(small["accumulator"]["words_per_rank"]), np.mean(big["accumulator"]["words_per_rank"])
    assert abs(a1 / a0 - 1) < 0.10
    t0, t1 = np.mean(small["tensor"]["words_per_rank"]), np.mean(big["tensor"]["words_per_rank"])
    assert t1 - t0 > 0.5 * (t1 - a1) > 0  # the reduce-scatter's I_n R words grow
    for d in (*small.values(), *big.values()):
        assert d["counts_match"]
