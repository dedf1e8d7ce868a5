"""The command line: JSON keys, exit codes and one-line errors (no tracebacks)."""

import json

import pytest

from cosa.cli import main, parse_size


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_show_json_keys(capsys):
    code, out, _ = run(capsys, "show", "resnet50/res2a_branch2b", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["name"] == "res2a_branch2b"
    assert doc["macs"] == 64 * 64 * 56 * 56 * 9
    assert {t["name"] for t in doc["tensors"]} == {"Weights", "Inputs", "Outputs"}
    assert all({"name", "bits", "words"} <= set(t) for t in doc["tensors"])


def test_show_network_lists_every_layer(capsys):
    code, out, _ = run(capsys, "show", "resnet50", "--json")
    assert code == 0 and len(json.loads(out)) == 24


def test_arch_show(capsys):
    code, out, _ = run(capsys, "arch", "show", "gemmini", "--json")
    assert code == 0
    doc = json.loads(out)
    assert [lv["name"] for lv in doc["levels"]][:2] == ["DRAM", "Scratchpad"]


def test_schedule_then_evaluate_roundtrip(capsys, tmp_path):
    mapping = tmp_path / "m.yaml"
    code, out, _ = run(capsys, "schedule", "resnet50/res4b_branch2b", "--arch", "gemmini",
                       "--scheduler", "gemmini-default", "-o", str(mapping), "--json")
    assert code == 0
    sched = json.loads(out)
    assert {"mapping", "cost", "solver", "scheduler"} <= set(sched)
    assert {"batches", "porows", "pocols", "pochs", "krows", "kcols", "kchs"} <= set(sched["tile_args"])
    code, out, _ = run(capsys, "evaluate", "resnet50/res4b_branch2b", "--arch", "gemmini",
                       "--mapping", str(mapping), "--json")
    assert code == 0
    cost = json.loads(out)
    assert {"cycles", "energy_pj", "utilization", "accesses"} <= set(cost)
    assert cost["cycles"] == sched["cost"]["cycles"]
    assert set(cost["accesses"]["DRAM"]["Weights"]) >= {"reads", "writes", "fills"}


def test_bound_json(capsys):
    code, out, _ = run(capsys, "bound", "resnet50/res2a_branch2b", "--memory", "256KiB", "--json")
    assert code == 0
    doc = json.loads(out)
    assert {"s_hbl", "khat", "bound_words", "bound_bytes", "compulsory_bytes", "binding", "tile"} <= set(doc)
    assert doc["s_hbl"] == pytest.approx(2.0)


@pytest.mark.parametrize("argv", [
    ("show", "no/such/layer"),
    ("show", "missing-file.yaml"),
    ("arch", "show", "no-such-arch"),
    ("bound", "resnet50/conv1", "--memory", "lots"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("cosa: ") and err.count("\n") == 1 and "Traceback" not in err


def test_malformed_yaml_names_the_file(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: conv2d\nC: [1, 2\n")
    code, _, err = run(capsys, "show", str(bad))
    assert code == 2 and "bad.yaml" in err


def test_mapping_that_does_not_fit_is_rejected(capsys, tmp_path):
    mapping = tmp_path / "m.yaml"
    mapping.write_text("levels:\n- name: DRAM\n- name: Scratchpad\n- name: Accumulator\n"
                       "- name: Registers\n  temporal: {K: 64, C: 64, P: 56, Q: 56, R: 3, S: 3}\n")
    code, _, err = run(capsys, "evaluate", "resnet50/res2a_branch2b", "--arch", "gemmini", "--mapping", str(mapping))
    assert code == 2 and "capacity" in err


def test_parse_size():
    assert parse_size("256KiB") == 262144
    assert parse_size("1MiB") == 1 << 20
    assert parse_size("64K") == 65536
    assert parse_size("4096") == 4096


def _small_matmul(tmp_path):
    path = tmp_path / "mm.yaml"
    path.write_text("kind: matmul\nname: mm\nM: 16\nN: 12\nK: 20\n")
    return str(path)


def test_run_gemmini_verifies_bit_exact(capsys, tmp_path):
    code, out, _ = run(capsys, "run", "gemmini", _small_matmul(tmp_path), "--dim", "4",
                       "--scheduler", "gemmini-default", "--json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"verified", "mismatches", "cycles", "ideal_cycles", "utilization", "instructions", "dram_bytes",
                        "busy", "exception_status", "cycles_source", "lowering"}
    assert doc["lowering"] is None   # the layer as written
    assert doc["cycles_source"] == "timing model"
    assert doc["exception_status"]["code"] is None  # int8/int32: nothing to scan
    assert doc["verified"] and doc["mismatches"] == 0
    assert doc["ideal_cycles"] == 16 * 12 * 20 / 16 and doc["cycles"] >= doc["ideal_cycles"]
    assert set(doc["busy"]) == {"load", "execute", "store"} and max(doc["busy"].values()) <= doc["cycles"]
    code, out, _ = run(capsys, "run", "gemmini", _small_matmul(tmp_path), "--dim", "4", "--scheduler", "gemmini-default")
    assert code == 0 and "busy load/execute/store " in out and "[isa]" in out and "cycles (timing model)" in out


def test_emit_gemmini_writes_self_checking_c(capsys, tmp_path):
    out_c = tmp_path / "mm.c"
    code, _, err = run(capsys, "emit", "gemmini", _small_matmul(tmp_path), "--dim", "4",
                       "--scheduler", "gemmini-default", "--main", "-o", str(out_c))
    assert code == 0 and out_c.exists()
    source = out_c.read_text()
    assert '#include "gemmini_cosa.h"' in source and "int main" in source


def test_run_gemmini_lower_runs_the_cheapest_rewrite(capsys, tmp_path, monkeypatch):
    path = tmp_path / "thin.yaml"
    path.write_text("kind: conv2d\nname: thin\nC: 3\nK: 16\nH: 20\nW: 20\nR: 7\nS: 7\nstride: 2\npadding: 3\n")
    code, out, _ = run(capsys, "run", "gemmini", str(path), "--lower", "--scheduler", "gemmini-default", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["verified"] and doc["mismatches"] == 0 and doc["lowering"] == "fold"
    # a lowered program has its C form, so it runs on Spike too: here without one, a one-line error naming it
    monkeypatch.setenv("GEMMINI_SPIKE", str(tmp_path / "no-spike"))
    code, out, err = run(capsys, "run", "gemmini", str(path), "--lower", "--sim", "spike")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "GEMMINI_SPIKE" in err


def test_schedule_without_tie_breaks_says_so_and_is_refused_for_other_schedulers(capsys):
    code, out, _ = run(capsys, "schedule", "bert_base_128/attention_context", "--arch", "eyeriss", "--no-tie-breaks", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["tie_breaks"] is False and [s["what"] for s in doc["tie_solves"]] == ["fewest compute"]
    code, _, err = run(capsys, "schedule", "bert_base_128/attention_context", "--arch", "eyeriss", "--no-tie-breaks",
                       "--scheduler", "random")
    assert code == 2 and "--no-tie-breaks is an option of the cosa scheduler" in err and err.count("\n") == 1


def test_compare_passes_no_tie_breaks_to_the_mip(capsys):
    code, out, _ = run(capsys, "compare", "bert_base_128/attention_context", "--arch", "eyeriss", "--schedulers",
                       "cosa", "--no-tie-breaks", "--json")
    assert code == 0
    row = json.loads(out)["rows"][0]
    assert row["extra"]["tie_breaks"] is False and [s["what"] for s in row["extra"]["tie_solves"]] == ["fewest compute"]
