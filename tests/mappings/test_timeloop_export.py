"""Timeloop's mapping and problem formats from the command line, and the timeloop-model runner's errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import workloads as W
from costmodel import evaluate, preset
from mappings import MappingError, from_timeloop, load_mapping
from mappings.timeloop import TimeloopRunError, parse_timeloop_stats, run_timeloop_model, timeloop_problem

ROOT = Path(__file__).resolve().parents[2]
LAYER = {"problem": {"shape": "cnn-layer", "R": 3, "S": 3, "P": 8, "Q": 8, "C": 16, "K": 32, "N": 1,
                     "Wstride": 2, "Hstride": 2, "Wdilation": 1, "Hdilation": 1}}


def cosa(*args, cwd):
    return subprocess.run([sys.executable, "-m", "cosa.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_schedule_writes_timeloop_format_and_evaluate_reads_it_back(tmp_path):
    (tmp_path / "layer.yaml").write_text(yaml.safe_dump(LAYER))
    out = cosa("schedule", "layer.yaml", "--arch", "simba", "--scheduler", "random", "-o", "m.yaml",
               "--format", "timeloop", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = yaml.safe_load((tmp_path / "m.yaml").read_text())
    assert {d["type"] for d in doc["mapping"]} <= {"temporal", "spatial", "bypass"}
    assert {d["target"] for d in doc["mapping"]} == set(preset("simba").level_names)
    import json

    scheduled = json.loads(out.stdout)["cost"]["cycles"]
    back = cosa("evaluate", "layer.yaml", "--arch", "simba", "--mapping", "m.yaml", "--json", cwd=tmp_path)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["cycles"] == scheduled


def test_problem_follows_timeloops_cnn_layer_and_reads_back():
    from workloads.loaders import parse_document

    w = parse_document(LAYER, "layer")[0]
    assert timeloop_problem(w) == LAYER
    conv = W.conv2d(C=4, K=8, P=5, Q=6, R=3, S=1, stride=(1, 2), dilation=(2, 1))
    p = timeloop_problem(conv)["problem"]
    assert (p["Hstride"], p["Wstride"], p["Hdilation"], p["Wdilation"]) == (1, 2, 2, 1)
    assert (p["P"], p["Q"], p["R"], p["S"]) == (conv.dims["P"], conv.dims["Q"], 3, 1)
    with pytest.raises(MappingError, match=r"dims \[.G.\] have no place"):
        timeloop_problem(W.depthwise_conv2d(C=4, P=4, Q=2, R=3, S=1))


def test_exported_mapping_round_trips_on_simba():
    from workloads.loaders import parse_document

    from mappings import dump_timeloop

    w = parse_document(LAYER, "layer")[0]
    arch = preset("simba")
    from cosa.baselines import random_mapping
    import random

    m = random_mapping(w, arch, random.Random(3))
    back = from_timeloop(dump_timeloop(m, w, arch), w, arch)
    assert evaluate(w, arch, back) == evaluate(w, arch, m)
    assert load_mapping is not None


def test_missing_or_failing_timeloop_is_one_line_with_the_log(tmp_path):
    from workloads.loaders import parse_document

    w = parse_document(LAYER, "layer")[0]
    arch = preset("simba")
    from cosa.baselines import random_mapping
    import random

    m = random_mapping(w, arch, random.Random(1))
    with pytest.raises(TimeloopRunError, match="binary not found"):
        run_timeloop_model(tmp_path / "no-such-timeloop-model", tmp_path / "a.yaml", w, m, arch, tmp_path / "run")
    fake = tmp_path / "timeloop-model"
    fake.write_text("#!/bin/sh\necho 'ERROR: mapping violates the constraints' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(TimeloopRunError) as err:
        run_timeloop_model(fake, tmp_path / "a.yaml", w, m, arch, tmp_path / "run")
    text = str(err.value)
    assert "exit 3" in text and "violates the constraints" in text and "timeloop.log" in text and "\n" not in text
    assert (tmp_path / "run" / "map.yaml").exists() and (tmp_path / "run" / "problem.yaml").exists()


def test_stats_without_cycles_are_rejected():
    with pytest.raises(MappingError, match="no 'Cycles:'"):
        parse_timeloop_stats("nothing here\n")


def test_an_unknown_directive_key_is_named():
    from workloads.loaders import parse_document

    w = parse_document(LAYER, "layer")[0]
    doc = {"mapping": [{"target": "DRAM", "type": "temporal", "factors": "K=32", "permutation": "K",
                        "multicast": True}]}
    with pytest.raises(MappingError, match=r"mapping\[0\]\.multicast.*unknown key 'multicast'"):
        from_timeloop(doc, w, preset("simba"))
