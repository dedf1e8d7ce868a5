"""``cosa run casgd``: the JSON keys, exactness and counts through the command line; bad input in one line."""

import json

import pytest

from algorithms.casgd import SHIPPED
from cosa.cli import main

KEYS = ("loss", "accuracy", "iterate_diff_vs_sgd", "words_per_rank", "messages_per_rank", "model_seconds",
        "seconds", "best_s")


def test_json_keys_and_values(capsys):
    pytest.importorskip("mpi4py")
    rc = main(["run", "casgd", "--synthetic", "200,12,0.5", "--ranks", "2", "--b", "4", "--s", "4", "--eta", "0.5",
               "--iters", "16", "--kernels", "numpy", "--json", "--arch", "cluster", "--alpha", "5e-5"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    for k in KEYS:
        assert k in d
    assert d["iterate_diff_vs_sgd"] < 1e-12 and d["counts_match"]
    assert d["messages_per_rank"] == [2 * 4, 2 * 4]  # 16 / 4 allreduces of 2 (p - 1) messages
    assert d["machine"]["alpha"] == 5e-5 and d["machine"]["beta"] == 1e-9 and d["best_s"] >= 4


def test_explain_and_text_output(capsys):
    pytest.importorskip("mpi4py")
    rc = main(["run", "casgd", "--data", str(SHIPPED), "--ranks", "2", "--b", "4", "--s", "2", "--iters", "4",
               "--explain"])  # the ranks run the scheduled kernels (the default)
    out = capsys.readouterr().out
    assert rc == 0
    assert "# casgd_gram_8x15" in out and "# casgd_matvec_4x15" in out and "accuracy" in out
    assert "iterates vs SGD" in out and "equal" in out


@pytest.mark.parametrize("argv,words", [
    (["--synthetic", "100,10,1", "--s", "0"], "--s"),
    (["--synthetic", "100,10,1", "--b", "0"], "--b"),
    (["--synthetic", "100,10,1", "--ranks", "11"], "11 ranks for 10 features"),
    (["--synthetic", "100,10"], "--synthetic"),
    (["--synthetic", "100,10,1", "--eta", "x"], "--eta"),
    ([], "--data"),
    (["--data", "nonexistent.svm"], "no such file"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, words):
    rc = main(["run", "casgd", "--kernels", "numpy", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and words in err, err


def test_bad_labels_exit_2(tmp_path, capsys):
    f = tmp_path / "l.svm"
    f.write_text("1 1:1\n3 1:2\n")
    assert main(["run", "casgd", "--data", str(f), "--kernels", "numpy"]) == 2
    err = capsys.readouterr().err
    assert "l.svm" in err and "labels must be +-1 or 0/1" in err and "3" in err
