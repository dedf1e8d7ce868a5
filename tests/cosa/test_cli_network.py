"""``cosa quantize`` and ``cosa run gemmini MODEL.int8.onnx`` (a whole network), and their bad input."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from cosa.cli import main


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    pytest.importorskip("onnxruntime", reason="needs onnxruntime (the 'onnxruntime' extra)")
    from onnx_networks import write_tiny_cnn

    return write_tiny_cnn(tmp_path_factory.mktemp("cli-net"))


def test_quantize_then_run_the_network_as_json(capsys, models, tmp_path):
    out_model = tmp_path / "q.onnx"
    code, out, err = run(capsys, "quantize", models[0], "-o", out_model, "--calibration", "4", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["calibration_inputs"] == 4 and summary["nodes"]["QLinearConv"] == 3
    assert summary["relu_fusable"] == ["a", "c1"]
    code, out, err = run(capsys, "run", "gemmini", out_model, "--sim", "isa", "--scheduler", "gemmini-default",
                         "--inputs", "2", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["verified"] and d["top1_equal"] and d["max_abs_diff_vs_onnxruntime"] == 0
    gem = [layer for layer in d["layers"] if layer["on"] == "gemmini"]
    assert [layer["op"] for layer in gem] == ["QLinearConv"] * 3 + ["QGemm"]
    assert all(layer["scheduler"] == "gemmini-default" and layer["cycles_source"] == "timing model" for layer in gem)
    assert d["cycles"] == sum(layer["cycles"] for layer in gem)
    assert d["arena"]["peak_bytes"] < d["arena"]["sum_bytes"]


def test_quantize_from_npy_calibration_files(capsys, models, tmp_path):
    batch = np.random.default_rng(3).standard_normal((3, 1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "calib.npy", batch)
    code, out, err = run(capsys, "quantize", models[0], "-o", tmp_path / "q.onnx", "--calibration",
                         tmp_path / "calib.npy", "--json")
    assert code == 0, err
    assert json.loads(out)["calibration_inputs"] == 3 and json.loads(out)["seed"] is None


def test_quantize_bad_input_is_one_line_exit_2(capsys, models, tmp_path):
    code, _, err = run(capsys, "quantize", tmp_path / "missing.onnx", "-o", tmp_path / "q.onnx")
    assert code == 2 and "no such file" in err and err.count("\n") == 1
    np.save(tmp_path / "bad.npy", np.zeros((2, 2), np.float32))
    code, _, err = run(capsys, "quantize", models[0], "-o", tmp_path / "q.onnx", "--calibration", tmp_path / "bad.npy")
    assert code == 2 and "bad.npy" in err and "--calibration" in err
    code, _, err = run(capsys, "quantize", models[1], "-o", tmp_path / "q.onnx")
    assert code == 2 and "already quantized" in err


def test_network_refuses_other_simulators_and_schedulers_and_build(capsys, models, tmp_path):
    code, _, err = run(capsys, "run", "gemmini", models[1], "--sim", "rtl")
    assert code == 2 and "--sim" in err
    code, _, err = run(capsys, "run", "gemmini", models[1], "--scheduler", "random")
    assert code == 2 and "--scheduler" in err
    code, _, err = run(capsys, "run", "gemmini", models[1], "--mapping", tmp_path / "m.yaml")
    assert code == 2 and "--mapping" in err
    code, _, err = run(capsys, "build", "gemmini", models[1], "-o", tmp_path / "net.elf", "--scheduler", "random")
    assert code == 2 and "--scheduler" in err and not (tmp_path / "net.elf").exists()
    code, _, err = run(capsys, "build", "gemmini", models[0], "-o", tmp_path / "net.elf")
    assert code == 2 and "cosa quantize" in err and len(err.strip().splitlines()) == 1


def test_missing_onnxruntime_names_the_extra(capsys, models, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    code, _, err = run(capsys, "quantize", models[0], "-o", tmp_path / "q.onnx")
    assert code == 2 and "cosa-framework[onnxruntime]" in err
    code, _, err = run(capsys, "run", "gemmini", models[1])
    assert code == 2 and "cosa-framework[onnxruntime]" in err


def test_cosa_schedules_distinct_layers_in_processes(capsys, models):
    code, out, err = run(capsys, "run", "gemmini", models[1], "--scheduler", "cosa", "--jobs", "2",
                         "--time-limit", "5", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["verified"] and d["max_abs_diff_vs_onnxruntime"] == 0 and d["distinct_layers"] == 4
    gem = [layer for layer in d["layers"] if layer["on"] == "gemmini"]
    assert all(layer["scheduler"] == "cosa" and layer["cycles"] <= layer["library_cycles"] for layer in gem)
    assert d["cycles"] <= d["library_cycles"]
