"""bench/randnla.py's rows on tiny sizes: every solver runs and the ratios are what the columns say."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import randnla as bench  # noqa: E402



def test_lstsq_rows():
    rows = bench.lstsq_rows([(1200, 12)], (1e6,), (None, 0.05), 1)
    assert len(rows) == 4 and {r["A"] for r in rows} == {"dense", "5% sparse"}
    for r in rows:
        assert r["backward_error"] <= 1e-12 and r["err_over_scipy"] <= 10
        assert r["speedup_vs_scipy"] == pytest.approx(r["scipy_s"] / r["seconds"])
        assert r["d"] == 48


def test_rsvd_and_pencil_rows():
    (r,) = bench.rsvd_rows([120], 8, 2)
    assert r["err_over_opt"] <= 2 and r["svds_err_over_opt"] <= 2
    (p,) = bench.pencil_rows([(24, "random", 1e-8)], "numpy", 8)
    assert p["errA_over_eps"] <= 10 and p["errB_over_eps"] <= 10 and p["qz_fallbacks"] == 0
