"""``cosa run cpu|opencl|gemmini ... --exceptions check``: the JSON's ``exception_status``; a bad mode is one
line and exit 2."""

import json
import random

import pytest

import costmodel
import workloads
from cosa.baselines.mapspace import random_mapping
from cosa.cli import main
from mappings import dump_mapping

GEMM = "kind: matmul\nname: g\nM: 12\nN: 16\nK: 8\ndtype: float32\n"


@pytest.fixture
def files(tmp_path):
    wl = tmp_path / "g.yaml"
    wl.write_text(GEMM)
    out = {}
    for arch_name in ("cpu", "gpu"):
        arch = costmodel.preset(arch_name)
        mapping = random_mapping(workloads.load_one(str(wl)), arch, random.Random(0))
        mp = tmp_path / f"m_{arch_name}.yaml"
        mp.write_text(dump_mapping(mapping, arch))
        out[arch_name] = mp
    return wl, out


@pytest.mark.parametrize("mode,code", [("check", 0), ("ieee", None)])
def test_run_cpu_json_has_exception_status(files, capsys, mode, code):
    wl, mp = files
    argv = ["run", "cpu", str(wl), "--mapping", str(mp["cpu"]), "--threads", "2", "--repeat", "1", "--json"]
    assert main(argv + (["--exceptions", mode] if mode != "ieee" else [])) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["exception_status"]["mode"] == mode and d["exception_status"]["code"] == code


def test_run_opencl_json_has_exception_status(files, capsys):
    wl, mp = files
    assert main(["run", "opencl", str(wl), "--arch", "gpu", "--mapping", str(mp["gpu"]), "--repeat", "1",
                 "--exceptions", "check", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["exception_status"]["code"] == 0 and d["exception_status"]["mode"] == "check"


def test_run_gemmini_json_has_exception_status(tmp_path, capsys):
    wl = tmp_path / "g8.yaml"
    wl.write_text("kind: matmul\nname: g8\nM: 16\nN: 16\nK: 16\n")
    assert main(["run", "gemmini", str(wl), "--scheduler", "gemmini-default", "--exceptions", "check",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["exception_status"]["code"] == 0 and "integer" in d["exception_status"]["message"]


@pytest.mark.parametrize("target", ["cpu", "gemmini"])
def test_bad_mode_is_one_line_exit_2(files, capsys, target):
    wl, mp = files
    argv = ["run", target, str(wl), "--exceptions", "loud"] + (["--mapping", str(mp["cpu"])] if target == "cpu" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--exceptions" in err and "loud" in err
