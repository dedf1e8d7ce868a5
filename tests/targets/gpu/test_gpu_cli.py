"""``cosa emit cuda|opencl`` and ``cosa run opencl|cuda`` on the command line."""

import json
import random

import pytest

import costmodel
from cosa.baselines.mapspace import random_mapping
from cosa.cli import main
from mappings import dump_mapping
from targets.gpu import cuda
from workloads import load_one

GEMM = """kind: matmul
name: tiny_gemm
M: 16
N: 8
K: 12
dtype: float32
"""


@pytest.fixture()
def gemm(tmp_path):
    path = tmp_path / "gemm.yaml"
    path.write_text(GEMM)
    return path


def test_emit_cuda_compiles_and_opencl_from_a_mapping_file(gemm, tmp_path, capsys):
    out = tmp_path / "k.cu"
    assert main(["emit", "cuda", str(gemm), "--arch", "gpu", "--time-limit", "10", "-o", str(out)]) == 0
    source = out.read_text()
    assert '__global__' in source and "__syncthreads" in source
    assert cuda.compile_cuda(source, "ptx").exists()
    arch = costmodel.preset("gpu")
    mapping = random_mapping(load_one(str(gemm)), arch, random.Random(4))
    mfile = tmp_path / "m.yaml"
    mfile.write_text(dump_mapping(mapping, arch))
    cl = tmp_path / "k.cl"
    assert main(["emit", "opencl", str(gemm), "--arch", "gpu", "--mapping", str(mfile), "-o", str(cl)]) == 0
    assert "__kernel" in cl.read_text()


def test_run_opencl_json(gemm, capsys):
    assert main(["run", "opencl", str(gemm), "--arch", "gpu", "--time-limit", "10", "--repeat", "3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert {"verified", "max_abs_err", "reference", "seconds", "gflops", "mapping"} <= set(d)
    assert d["verified"] is True and d["reference"] == "numpy" and len(d["runs_s"]) == 3
    assert d["seconds"] > 0 and d["gflops"] > 0 and [lv["name"] for lv in d["mapping"]["levels"]][1] == "L2"


def test_run_cuda_runs_or_says_why(gemm, capsys):
    rc = main(["run", "cuda", str(gemm), "--arch", "gpu", "--time-limit", "10", "--json"])
    if cuda.available() is None:
        assert rc == 0 and json.loads(capsys.readouterr().out)["verified"] is True
    else:
        err = capsys.readouterr().err.strip()
        assert rc == 2 and "\n" not in err and "NVIDIA" in err


def test_bad_arch_is_one_line_exit_2(gemm, capsys):
    assert main(["emit", "opencl", str(gemm), "--arch", "gemmini", "--time-limit", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "needs 4 levels" in err
