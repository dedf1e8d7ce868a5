"""``cosa run mpi``: JSON keys, the model's choice, bad input in one line (exit 2), and a run inside an
existing mpiexec."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("mpi4py")

from cosa.cli import main  # noqa: E402
from targets.mpi import mpiexec_path  # noqa: E402

KEYS = {"verified", "max_abs_err", "algorithm", "c", "elide", "words_per_rank", "messages_per_rank", "model_words",
        "model_seconds", "seconds"}


def test_json_of_a_chosen_and_of_a_given_configuration(capsys):
    assert main(["run", "mpi", "fusedmm", "--m", "32", "--n", "32", "--r", "4", "--nnz-per-row", "3", "--ranks", "4",
                 "--repeat", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert KEYS <= set(d) and d["verified"] and d["chosen_by_model"]
    assert d["words_per_rank"] == d["model_words"] and d["max_abs_err"] <= 1e-10
    # the fewest words any configuration moves (several tie: 15d-dense fusion at c = 1 or 2, reuse at c = 2)
    assert d["elide"] in ("fusion", "reuse") and max(d["model_words"]) == 96
    assert main(["run", "mpi", "sddmm", "--m", "32", "--n", "16", "--r", "4", "--density", "0.2", "--ranks", "4",
                 "--algorithm", "25d-sparse", "--c", "4", "--elide", "none", "--repeat", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["algorithm"] == "25d-sparse" and not d["chosen_by_model"] and d["verified"]


@pytest.mark.parametrize("args,message", [
    (["--c", "3"], "field '--c': 3 does not divide the 4 ranks"),
    (["--algorithm", "15d-sparse", "--elide", "fusion"], "field '--elide': local kernel fusion is valid on 15d-dense only"),
    (["--matrix", "missing.mtx"], "give exactly one of --density, --nnz-per-row, --matrix"),
    (["--ranks", "0"], "field '--ranks': must be >= 1"),
])
def test_bad_input_is_one_line(capsys, args, message):
    base = ["run", "mpi", "fusedmm", "--m", "32", "--n", "32", "--r", "4", "--nnz-per-row", "3", "--ranks", "4"]
    assert main(base + args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_unreadable_matrix_file(tmp_path, capsys):
    bad = tmp_path / "bad.mtx"
    bad.write_text("not a matrix\n")
    assert main(["run", "mpi", "spmm", "--r", "4", "--matrix", str(bad), "--ranks", "2"]) == 2
    assert "bad.mtx" in capsys.readouterr().err


def test_inside_an_existing_mpiexec():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "HYDRA_", "OMPI_"))}
    env["HYDRA_LAUNCHER"] = "fork"
    proc = subprocess.run([mpiexec_path(), "-n", "2", sys.executable, "-m", "cosa.cli", "run", "mpi", "spmm", "--m", "16",
                           "--n", "16", "--r", "4", "--density", "0.2", "--ranks", "2", "--repeat", "1", "--json"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)        # rank 0 alone prints
    assert d["verified"] and d["ranks"] == 2 and d["words_per_rank"] == d["model_words"]


def test_a_c_that_does_not_fit_the_memory_per_rank(tmp_path, capsys):
    from dataclasses import replace

    from costmodel import dump_arch, preset

    arch = preset("cluster")
    path = tmp_path / "small.yaml"
    path.write_text(dump_arch(replace(arch, params={**arch.params, "memory_per_rank_bytes": 2_000_000,
                                                     "alpha_s": 1e-6, "beta_s_per_word": 1e-9})))
    args = ["run", "mpi", "fusedmm", "--m", "4096", "--n", "4096", "--r", "32", "--nnz-per-row", "8", "--ranks", "4",
            "--arch", str(path)]
    assert main(args + ["--algorithm", "15d-dense", "--c", "4", "--elide", "fusion"]) == 2
    err = capsys.readouterr().err
    assert "field '--c': no configuration fits the memory per rank (250000 words" in err
