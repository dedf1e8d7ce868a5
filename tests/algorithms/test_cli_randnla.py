"""cosa run lstsq|rsvd|pencil: JSON keys, values checked, bad input in one line with exit 2."""

import json

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from cosa.cli import main



def _json(capsys, argv):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("method", ["solve", "precondition"])
def test_lstsq_json(capsys, method):
    d = _json(capsys, ["run", "lstsq", "--synthetic", "1500,30,1e6", "--sketch", "sjlt", "--method", method])
    for key in ("residual", "rel_error_vs_truth", "lstsq_rel_error_vs_truth", "backward_error", "iterations",
                "seconds", "seconds_lstsq"):
        assert key in d
    if method == "precondition":
        assert d["backward_error"] <= 1e-12 and d["iterations"] > 0
        assert d["rel_error_vs_truth"] <= 10 * d["lstsq_rel_error_vs_truth"]
    else:
        assert d["iterations"] == 0 and d["rel_error_vs_truth"] > d["lstsq_rel_error_vs_truth"]


def test_lstsq_on_a_matrix_market_file(capsys, tmp_path):
    a = sp.random(400, 12, density=0.2, format="coo", random_state=2) + sp.eye(400, 12)
    path = tmp_path / "a.mtx"
    scipy.io.mmwrite(str(path), a)
    d = _json(capsys, ["run", "lstsq", "--matrix", str(path), "--sketch", "countsketch", "--d", "60"])
    assert d["m"] == 400 and d["n"] == 12 and d["d"] == 60
    assert d["rel_error_vs_truth"] < 1e-10 and d["backward_error"] < 1e-12


def test_rsvd_json(capsys):
    d = _json(capsys, ["run", "rsvd", "--synthetic", "200,0.85", "--rank", "10", "--power", "2", "--compare"])
    assert d["spectral_error"] <= 2 * d["optimal_error"] and "seconds_svd" in d


def test_pencil_json(capsys):
    d = _json(capsys, ["run", "pencil", "--n", "40", "--kind", "planted", "--eps", "1e-8", "--kernels", "numpy",
                       "--threshold", "8"])
    for key in ("backward_error_A", "backward_error_B", "eig_match_vs_scipy", "seconds", "splits", "qz_fallbacks"):
        assert key in d
    assert d["backward_error_A"] <= 1e-7 and d["backward_error_B"] <= 1e-7 and d["eig_match_vs_scipy"] <= 1
    assert d["splits"] > 0 and d["qz_fallbacks"] == 0


@pytest.mark.parametrize("argv, words", [
    (["lstsq", "--synthetic", "1000,40,1e4", "--d", "20"], "smaller than the column count"),
    (["lstsq", "--synthetic", "1000,40,1e4", "--sketch", "magic"], "unknown sketch"),
    (["lstsq", "--synthetic", "1000,40"], "comma-separated"),
    (["lstsq", "--synthetic", "1000,40,nan"], "comma-separated"),
    (["rsvd", "--synthetic", "50", "--rank", "60"], "rank"),
    (["pencil", "--n", "8", "--kind", "odd"], "unknown pencil kind"),
    (["pencil", "--n", "8", "--eps", "3"], "eps"),
    (["pencil", "--n", "0"], "--n")])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, words):
    assert main(["run"] + argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err and "Traceback" not in err


def test_nan_in_a_matrix_file(capsys, tmp_path):
    path = tmp_path / "bad.mtx"
    a = np.ones((20, 3))
    a[4, 1] = np.nan
    scipy.io.mmwrite(str(path), a)
    assert main(["run", "lstsq", "--matrix", str(path), "--d", "10"]) == 2
    assert "NaN" in capsys.readouterr().err
