"""cosa emit|run cpu and cosa arch calibrate cpu: results, JSON keys, refusals in one line."""

import json
import random
import subprocess

import pytest

import costmodel
import workloads
from cosa.baselines.mapspace import random_mapping
from cosa.cli import main
from mappings import dump_mapping


GEMM = "kind: matmul\nname: g\nM: 24\nN: 32\nK: 16\ndtype: float32\n"


@pytest.fixture
def files(tmp_path):
    wl = tmp_path / "g.yaml"
    wl.write_text(GEMM)
    arch = costmodel.preset("cpu")
    mapping = random_mapping(workloads.load_one(str(wl)), arch, random.Random(0))
    mp = tmp_path / "m.yaml"
    mp.write_text(dump_mapping(mapping, arch))
    return wl, mp


def test_run_json_keys_and_emit(files, tmp_path, capsys):
    wl, mp = files
    assert main(["run", "cpu", str(wl), "--mapping", str(mp), "--threads", "2", "--repeat", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert {"verified", "max_abs_err", "reference", "seconds", "gflops", "threads", "mapping"} <= set(d)
    assert d["verified"] and d["reference"] == "numpy" and d["threads"] == 2 and d["seconds"] > 0
    out = tmp_path / "g.c"
    assert main(["emit", "cpu", str(wl), "--mapping", str(mp), "-o", str(out)]) == 0
    text = out.read_text()
    assert "void cosa_kernel(" in text
    subprocess.run(["gcc", "-O1", "-fopenmp", "-c", str(out), "-o", str(tmp_path / "g.o")], check=True)


def test_bad_input_one_line_exit_2(files, tmp_path, capsys):
    wl, mp = files
    bad = tmp_path / "bad.yaml"
    bad.write_text(GEMM.replace("float32", "float16"))
    assert main(["run", "cpu", str(bad), "--mapping", str(mp)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.yaml" in err and "dtype" in err
    other = tmp_path / "other.yaml"
    other.write_text(GEMM.replace("M: 24", "M: 48"))
    assert main(["emit", "cpu", str(other), "--mapping", str(mp)]) == 2
    assert "factors of 'M'" in capsys.readouterr().err
    assert main(["run", "cpu", str(wl), "--mapping", str(mp), "--threads", "0"]) == 2


def test_compiler_failure_exit_1_names_the_log(files, tmp_path, monkeypatch, capsys):
    from targets.cpu import build

    wl, mp = files
    monkeypatch.setenv("COSA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COSA_CC", "false")
    build.isa.cache_clear()
    try:
        assert main(["run", "cpu", str(wl), "--mapping", str(mp)]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "full log:" in err and str(tmp_path / "cache") in err
        monkeypatch.setenv("COSA_CC", "no-such-compiler")
        assert main(["run", "cpu", str(wl), "--mapping", str(mp)]) == 1
        assert "Debian package 'gcc'" in capsys.readouterr().err
    finally:
        monkeypatch.delenv("COSA_CC")
        build.isa.cache_clear()


def test_calibrate_writes_an_arch_that_runs(files, tmp_path, capsys):
    wl, _ = files
    out = tmp_path / "cpu.yaml"
    assert main(["arch", "calibrate", "cpu", "--quick", "-o", str(out)]) == 0
    arch = costmodel.load_arch(str(out))
    assert [lv.name for lv in arch.levels] == ["DRAM", "L3", "L2", "L1"]
    assert arch.params["peak_gflops_per_core"] > 0 and arch.levels[3].read_bandwidth > 0
    assert arch.levels[3].capacity_bytes > 0 and arch.levels[3].fanout == arch.params["simd_lanes"]
    mapping = random_mapping(workloads.load_one(str(wl)), arch, random.Random(1))
    mp = tmp_path / "m2.yaml"
    mp.write_text(dump_mapping(mapping, arch))
    assert main(["run", "cpu", str(wl), "--arch", str(out), "--mapping", str(mp), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verified"]


def test_run_schedules_a_1x1_convolution_on_fused_pixels(tmp_path, capsys):
    wl = tmp_path / "c.yaml"
    wl.write_text("kind: conv2d\nname: c1\nC: 16\nK: 32\nH: 14\nW: 14\nR: 1\nS: 1\ndtype: float32\n")
    assert main(["run", "cpu", str(wl), "--threads", "2", "--repeat", "1", "--time-limit", "20", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["verified"]
    levels = got["mapping"]["levels"] if isinstance(got["mapping"], dict) else got["mapping"]
    assert "QP" in json.dumps(levels) and '"P"' not in json.dumps(levels)   # the 196 pixels are one dim
    assert got["rewrites"] == {"dims": {"K": 32, "C": 16, "QP": 196}, "fused_dims": {"QP": ["Q", "P"]}}


def test_run_names_the_strided_copy_a_strided_1x1_convolution_reads(tmp_path, capsys):
    wl = tmp_path / "s.yaml"
    wl.write_text("kind: conv2d\nname: s2\nC: 16\nK: 32\nH: 14\nW: 14\nR: 1\nS: 1\nstride: 2\ndtype: float32\n")
    assert main(["run", "cpu", str(wl), "--threads", "1", "--repeat", "1", "--time-limit", "20", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["verified"] and got["rewrites"]["dims"] == {"K": 32, "C": 16, "QP": 49}
    assert got["rewrites"]["subsampled"] == {"Inputs": {"strides": [1, 1, 2, 2], "shape": [1, 16, 14, 14],
                                                        "copy_shape": [1, 16, 7, 7]}}


def test_run_profile_reports_the_packing_copies_share(tmp_path, capsys):
    wl = tmp_path / "c.yaml"
    wl.write_text("kind: conv2d\nname: c3\nC: 32\nK: 64\nH: 14\nW: 14\nR: 3\nS: 3\npadding: 1\ndtype: float32\n")
    assert main(["run", "cpu", str(wl), "--threads", "1", "--repeat", "2", "--time-limit", "10", "--profile",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["verified"] and set(got["packing"]) == {"measured", "model"}
    assert got["packing"]["measured"] and all(0 < v < 1 for v in got["packing"]["measured"].values())
    assert main(["run", "cpu", str(wl), "--threads", "1", "--repeat", "2", "--time-limit", "10", "--profile"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("packing copies: ") and "% of the time measured" in lines[-1]


def test_a_machine_without_simd_runs_the_portable_kernel_and_says_so_once(files, monkeypatch, capsys):
    from cosa import cli_targets
    from targets.cpu import build

    wl, mp = files
    monkeypatch.setattr(build, "isa", lambda: build.Isa(8, 16, "scalar"))
    monkeypatch.setattr(cli_targets, "_SAID", False)
    assert main(["run", "cpu", str(wl), "--mapping", str(mp), "--repeat", "1", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["verified"]
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "portable C code" in lines[0]
    assert main(["emit", "cpu", str(wl), "--mapping", str(mp)]) == 0
    assert "portable" not in capsys.readouterr().err  # once per process
    monkeypatch.setattr(build, "isa", lambda: build.Isa(64, 32, "avx512f"))
    assert build.portable_note() is None
