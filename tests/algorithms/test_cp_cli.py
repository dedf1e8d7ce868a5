"""``cosa run cp``: JSON keys, TensorLy beside it, bad input in one line with exit 2."""

import json

import pytest

from cosa.cli import main

KEYS = ("fit", "fit_per_iter", "seconds", "seconds_per_iter", "words_per_rank", "model_words")


@pytest.mark.parametrize("method", ["als", "arls-lev", "sts-cp"])
def test_json_keys_and_planted_fit(capsys, method):
    rc = main(["run", "cp", "--synthetic", "30,25,20:4000:3", "--rank", "3", "--noise", "0.05", "--method", method,
               "--samples", "200", "--iters", "12", "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    for k in KEYS:
        assert k in d
    assert len(d["fit_per_iter"]) == 12 and d["fit"] > 0.94


def test_compare_tensorly(capsys):
    pytest.importorskip("tensorly")
    rc = main(["run", "cp", "--synthetic", "12,10,8:500:3", "--rank", "3", "--iters", "10", "--compare", "tensorly",
               "--backend", "numpy"])
    out = capsys.readouterr().out
    assert rc == 0 and "tensorly" in out and "parafac: fit" in out


@pytest.mark.parametrize("argv, words", [
    (["--synthetic", "30:100:2", "--rank", "2"], "order >= 2"),
    (["--synthetic", "10,10,10:100:2", "--rank", "0"], "--rank"),
    (["--synthetic", "10,10,10:100:2", "--rank", "4", "--method", "sts-cp", "--samples", "2"], "samples must be"),
    (["--synthetic", "10,10:x:2", "--rank", "2"], "I1,I2"),
    (["--synthetic", "10,10,10:100:2", "--rank", "2", "--ranks", "2", "--method", "arls-lev"], "on ranks"),
    (["--synthetic", "10,10,10:100:2", "--rank", "2", "--ranks", "0"], "--ranks"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, words):
    assert main(["run", "cp", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_malformed_tns(tmp_path, capsys):
    p = tmp_path / "bad.tns"
    p.write_text("1 2 3 1.0\n1 2 3\n")
    assert main(["run", "cp", "--tensor", str(p), "--rank", "2"]) == 2
    assert "line 2" in capsys.readouterr().err


def test_distributed_json(capsys):
    pytest.importorskip("mpi4py")
    rc = main(["run", "cp", "--synthetic", "40,40,40:3000:3", "--rank", "3", "--method", "sts-cp", "--samples", "150",
               "--iters", "3", "--ranks", "2", "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["counts_match"] and d["words_per_rank"] == d["model_words"] and d["fit"] > 0.95
