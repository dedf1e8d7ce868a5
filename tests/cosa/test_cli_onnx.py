"""ONNX models on the command line: layers by name (``model.onnx:LAYER``) in every command that takes a
WORKLOAD, identical layers merged with repeat counts, and the word size (``--bits``, the float-on-int8 note)."""

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cosa.cli import main


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def model(tmp_path):
    return write_model(tmp_path / "blocks.onnx")


def write_model(path):
    """A float32 model as a Caffe2 converter writes one (node names n0, n2, ...; weights '<layer>_w_0'):
    two blocks of a 1x1 and a 3x3 convolution with the same shapes, and a classifier."""
    def init(name, shape):
        return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)

    nodes, inits, prev = [], [], "x"
    for block in (1, 2):
        for part, k, c, r in (("reduce", 4, 8, 1), ("conv3x3", 8, 4, 3)):
            w = f"block{block}/{part}_w_0"
            inits.append(init(w, (k, c, r, r)))
            y = f"y{len(nodes)}"
            nodes.append(helper.make_node("Conv", [prev, w], [y], name=f"n{len(nodes)}", pads=[r // 2] * 4))
            prev = y
    nodes += [helper.make_node("Flatten", [prev], ["f"], axis=1),
              helper.make_node("Gemm", ["f", "fc_w_0"], ["logits"], name="n9", transB=1)]
    inits.append(init("fc_w_0", (16, 8 * 8 * 8)))
    graph = helper.make_graph(nodes, "blocks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def test_show_names_layers_and_merges_identical_ones(capsys, model):
    code, out, _ = run(capsys, "show", model, "--json")
    assert code == 0
    doc = json.loads(out)
    assert [(d["name"], d["repeat"]) for d in doc] == [("block1/reduce", 2), ("block1/conv3x3", 2), ("fc", 1)]
    assert {t["bits"] for d in doc for t in d["tensors"]} == {32}
    assert {t["dtype"] for d in doc for t in d["tensors"]} == {"float32"}
    code, out, _ = run(capsys, "show", model)
    assert code == 0 and "block1/conv3x3" in out and " n0 " not in out


def test_show_one_layer_and_bits(capsys, model):
    code, out, _ = run(capsys, "show", f"{model}:block2/conv3x3", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["name"] == "block2/conv3x3" and doc["repeat"] == 1
    code, out, _ = run(capsys, "show", f"{model}:block2/conv3x3", "--bits", "8", "--json")
    assert code == 0 and {t["bits"] for t in json.loads(out)["tensors"]} == {8}


def test_schedule_a_layer_notes_float_words_on_int8_gemmini(capsys, model):
    layer = f"{model}:block1/conv3x3"
    code, out, _ = run(capsys, "schedule", layer, "--scheduler", "gemmini-default", "--json")
    assert code == 0
    wide = json.loads(out)
    assert wide["workload"] == "block1/conv3x3"
    assert "float32" in wide["note"] and "--bits 8" in wide["note"] and "gemmini" in wide["note"]
    code, out, _ = run(capsys, "schedule", layer, "--scheduler", "gemmini-default", "--bits", "8", "--json")
    assert code == 0
    narrow = json.loads(out)
    assert "note" not in narrow
    # the same tiles move a quarter of the bytes as int8 (DRAM words priced at the tensors' width)
    assert narrow["cost"]["dram_bytes"] < wide["cost"]["dram_bytes"]
    code, out, _ = run(capsys, "schedule", layer, "--scheduler", "gemmini-default")
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert code == 0 and len(notes) == 1 and "--bits 8" in notes[0]
    code, out, _ = run(capsys, "schedule", layer, "--scheduler", "gemmini-default", "--bits", "8")
    assert code == 0 and "note:" not in out


def test_no_note_where_the_arch_keeps_the_words(capsys, model):
    code, out, _ = run(capsys, "bound", f"{model}:fc", "--arch", "cpu", "--json")
    assert code == 0 and "note" not in json.loads(out)
    code, out, _ = run(capsys, "bound", f"{model}:fc", "--arch", "gemmini", "--json")
    assert code == 0 and "--bits 8" in json.loads(out)["note"]
    code, out, _ = run(capsys, "bound", "resnet50/res2a_branch2b", "--arch", "gemmini", "--json")  # int8 zoo
    assert code == 0 and "note" not in json.loads(out)


def test_evaluate_and_bound_take_a_layer(capsys, model, tmp_path):
    layer = f"{model}:block1/reduce"
    mapping = tmp_path / "m.yaml"
    code, _, _ = run(capsys, "schedule", layer, "--bits", "8", "--scheduler", "gemmini-default", "-o", mapping,
                     "--json")
    assert code == 0
    code, out, _ = run(capsys, "evaluate", layer, "--bits", "8", "--arch", "gemmini", "--mapping", mapping, "--json")
    assert code == 0 and "note" not in json.loads(out)
    code, out, _ = run(capsys, "bound", layer, "--arch", "gemmini", "--json")
    assert code == 0 and "--bits 8" in json.loads(out)["note"]
    code, out, _ = run(capsys, "bound", layer, "--memory", "64KiB", "--json")
    assert code == 0 and "note" not in json.loads(out)


def test_emit_gemmini_needs_int8_words(capsys, model, tmp_path):
    layer = f"{model}:block1/reduce"
    code, out, err = run(capsys, "emit", "gemmini", layer, "--scheduler", "gemmini-default", "--dim", "4")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "--bits 8" in err and "32-bit float32" in err and "block1/reduce" in err
    c_file = tmp_path / "reduce.c"
    code, _, err = run(capsys, "emit", "gemmini", layer, "--bits", "8", "--scheduler", "gemmini-default",
                       "--dim", "4", "-o", c_file)
    assert code == 0 and "wrote" in err and "gemmini" in c_file.read_text().lower()


def test_run_gemmini_and_cpu_take_a_layer(capsys, model):
    code, out, _ = run(capsys, "run", "gemmini", f"{model}:block1/reduce", "--bits", "8", "--dim", "4",
                       "--scheduler", "gemmini-default", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["verified"]
    code, out, _ = run(capsys, "emit", "cpu", f"{model}:block1/reduce", "--time-limit", "2")
    assert code == 0 and "for (" in out


def test_unknown_layer_is_one_line_exit_2(capsys, model):
    for command in (["show"], ["schedule"], ["emit", "gemmini"], ["bound"], ["compare"]):
        code, out, err = run(capsys, *command, f"{model}:block1/conv5x5")
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, (command, err)
        assert str(model) in lines[0] and "'block1/conv5x5'" in lines[0] and "block1/conv3x3" in lines[0]
        assert "Traceback" not in err


def test_a_whole_model_where_one_layer_is_needed(capsys, model):
    code, _, err = run(capsys, "schedule", model)
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"{model}:LAYER" in err


def test_bad_bits_exit_2(capsys, model):
    with pytest.raises(SystemExit) as exc:
        main(["show", str(model), "--bits", "0"])
    assert exc.value.code == 2
    assert "--bits" in capsys.readouterr().err


def test_compare_schedules_each_distinct_layer_once_and_shows_repeats(capsys, model):
    code, out, _ = run(capsys, "compare", model, "--schedulers", "gemmini-default", "--json")
    assert code == 0
    doc = json.loads(out)
    assert [(r["layer"], r["repeat"]) for r in doc["rows"]] == [("block1/reduce", 2), ("block1/conv3x3", 2),
                                                                ("fc", 1)]
    assert "--bits 8" in doc["meta"]["note"]
    code, out, _ = run(capsys, "compare", model, "--schedulers", "gemmini-default", "--bits", "8")
    assert code == 0 and "block1/conv3x3 x2" in out and "fc x" not in out and "note:" not in out
