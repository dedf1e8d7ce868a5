"""A whole int8 network in the explicit-command style (``gemmini.network_isa``, ``--style isa``): every Gemmini
step the program ``codegen.generate`` writes from cosa's mapping, run on the functional model against the
loops style and ONNX Runtime, printed into one bare-metal program, and run on Spike when ``GEMMINI_SPIKE`` is
set."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="needs onnxruntime (the 'onnxruntime' extra)")

from onnx_networks import depthwise_cnn, write_int8, write_tiny_cnn  # noqa: E402

from cosa.scheduler import schedule  # noqa: E402
from gemmini import CodegenError, GemminiConfig  # noqa: E402
from gemmini.network import load_network, plan  # noqa: E402
from gemmini.network_isa import LayerMapping  # noqa: E402
from gemmini.network_program import NetworkProgram, check_memory, network_program  # noqa: E402
from gemmini.network_run import (compare, compared_tensors, distinct_layers, gemmini_layers,  # noqa: E402
                                 onnxruntime_values, run_network)
from gemmini.onnx_quantize import input_specs, synthetic_inputs  # noqa: E402

RISCV_CC = os.environ.get("GEMMINI_RISCV_GCC") or shutil.which("riscv64-unknown-elf-gcc")


def _mappings(net, steps) -> dict:
    arch = GemminiConfig().arch("ws")
    return {key: LayerMapping(schedule(layer.workload, arch, scheduler="cosa", bound=False).mapping, arch)
            for key, layer in distinct_layers(gemmini_layers(net, steps)).items()}


@pytest.fixture(scope="module", params=["tiny", "depthwise"])
def network(request, tmp_path_factory):
    """(net, isa steps, mappings, seeded feeds, isa run) of the tiny CNN (a max-pool the loops style fuses into
    conv1's store path) and the depthwise CNN."""
    d = tmp_path_factory.mktemp(request.param)
    path = write_tiny_cnn(d)[1] if request.param == "tiny" else write_int8(depthwise_cnn(), d, "dw")
    net = load_network(path)
    steps = plan(net, store_pool=False)
    mappings = _mappings(net, steps)
    feeds = next(iter(synthetic_inputs(input_specs(net.model, net.source), 1, 5)))
    return net, steps, mappings, feeds, run_network(net, feeds, mappings, "cosa", steps, style="isa")


def test_without_the_store_pooler_every_max_pool_runs_on_the_host(tmp_path):
    net = load_network(write_tiny_cnn(tmp_path)[1])
    fused, unfused = plan(net), plan(load_network(net.source), store_pool=False)
    assert any(s.pool for s in fused) and not any(s.pool for s in unfused)
    assert sum(s.op == "MaxPool" for s in unfused) == sum(s.op == "MaxPool" for s in fused) + 1
    assert [s.name for s in unfused if s.on == "gemmini"] == [s.name for s in fused if s.on == "gemmini"]


def test_explicit_command_layers_equal_the_loop_instruction_layers_and_onnxruntime(network):
    net, steps, mappings, feeds, run = network
    gem = [r for r in run.layers if r.on == "gemmini"]
    assert gem and all(r.layer_verified for r in gem) and all(r.cycles > 0 for r in gem)
    assert all(r.calls.startswith("explicit commands") and r.tiles is None for r in gem)
    assert set(run.isa_layers) == {r.name for r in gem}
    loops = run_network(net, feeds, {}, "gemmini-default")
    for t in compared_tensors(net):   # the same integer semantics, whatever program computes them
        assert np.array_equal(run.values[t], loops.values[t])
    got = compare(net, run, onnxruntime_values(net, feeds, compared_tensors(net)))
    assert got["max_abs_diff_vs_onnxruntime"] <= 1 and got["top1_equal"]


def test_the_network_program_calls_each_layers_own_function(network):
    net, steps, mappings, feeds, run = network
    program = network_program(net, steps, run.values, mappings, "cosa", isa_layers=run.isa_layers)
    names = [name for name, on in program.steps if on == "gemmini"]
    for i, (name, on) in enumerate(program.steps):
        if on == "gemmini":
            fn = f"cosa_net_layer_{i}_{name}"
            assert f"void {fn}(const elem_t *input" in program.source and f"  {fn}((const elem_t *)" in program.source
    assert names and "gemmini_cosa_loop_ws" not in program.source and "loop_conv_ws" not in program.source
    assert "cosa_net_zeros" in program.source
    # each layer's weights and bias are in the blob, in the program's own buffer layout
    for layer in run.isa_layers.values():
        for data in layer.constants.values():
            assert data.tobytes() in program.blob


def test_isa_style_needs_cosa_mappings(network):
    net, steps, mappings, feeds, run = network
    with pytest.raises(CodegenError, match="explicit commands"):
        run_network(net, feeds, {}, "gemmini-default", style="isa")
    with pytest.raises(CodegenError, match="unknown style"):
        run_network(net, feeds, mappings, "cosa", steps, style="vliw")


def test_a_max_pool_in_the_store_path_has_no_explicit_command_form(tmp_path):
    pooled = load_network(write_tiny_cnn(tmp_path)[1])
    steps = plan(pooled)
    feeds = next(iter(synthetic_inputs(input_specs(pooled.model, pooled.source), 1, 5)))
    with pytest.raises(CodegenError, match="store path"):
        run_network(pooled, feeds, _mappings(pooled, steps), "cosa", steps, style="isa")


def test_partial_sums_count_against_the_memory():
    program = NetworkProgram("n", "", b"", 1 << 20, 1 << 20, (), "y", np.zeros(1, np.int8), 64 << 20)
    with pytest.raises(CodegenError, match="67,108,864 bytes of partial sums and bordered images"):
        check_memory(program, "net.onnx")


def test_cli_names_the_style_and_refuses_the_librarys_tiles_as_commands(tmp_path, capsys):
    from cosa.cli import main

    model = str(write_tiny_cnn(tmp_path)[1])
    assert main(["run", "gemmini", model, "--style", "isa", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["style"] == "isa" and d["verified"] and d["library_cycles"] is None
    calls = [r["calls"] for r in d["layers"] if r["on"] == "gemmini"]
    assert all("explicit commands" in c for c in calls)
    # the scheduler takes a rewrite where its model finds it cheaper: conv1 (3 channels) folded
    assert any("im2col fold" in c or "packed groups" in c for c in calls)
    assert main(["run", "gemmini", model, "--style", "isa", "--scheduler", "gemmini-default"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--scheduler" in err[0] and "--style loops" in err[0]


@pytest.mark.skipif(RISCV_CC is None, reason="no riscv64-unknown-elf-gcc (Debian: gcc-riscv64-unknown-elf)")
def test_cosa_build_writes_the_explicit_command_network_elf(tmp_path, capsys):
    from cosa.cli import main

    elf = tmp_path / "net.elf"
    assert main(["build", "gemmini", str(write_tiny_cnn(tmp_path)[1]), "-o", str(elf), "--style", "isa"]) == 0
    assert elf.is_file() and "as explicit commands" in capsys.readouterr().err
    assert "gemmini_cosa_preload(" in elf.with_suffix(".c").read_text()


@pytest.mark.skipif(not os.environ.get("GEMMINI_SPIKE"), reason="GEMMINI_SPIKE (Spike with libgemmini) is not set")
def test_explicit_command_network_on_spike_matches_onnxruntime(tmp_path, capsys):
    from cosa.cli import main

    model = str(write_int8(depthwise_cnn(), tmp_path, "dw"))
    assert main(["run", "gemmini", model, "--style", "isa", "--sim", "spike", "--inputs", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verified"] and d["max_abs_diff_vs_onnxruntime"] <= 1 and d["top1_equal"] and d["style"] == "isa"
    assert all(s["passed"] for s in d["spike"]) and len(d["spike"]) == 2


@pytest.mark.parametrize("style", ["isa", "loops"])
def test_the_reference_computes_what_the_simulated_programs_do(network, style):
    net, steps, mappings, feeds, run = network
    if style == "isa":
        simulated, schedules, scheduler, on = run, mappings, "cosa", steps
    else:
        net = load_network(net.source)
        on = plan(net)
        simulated, schedules, scheduler = run_network(net, feeds, {}, "gemmini-default", on), {}, "gemmini-default"
    ref = run_network(net, feeds, schedules, scheduler, on, style=style, compute="reference")
    assert ref.cycles is None and all(r.cycles is None for r in ref.layers)
    assert set(ref.values) == set(simulated.values)
    assert all(np.array_equal(ref.values[t], simulated.values[t]) for t in ref.values)
    with pytest.raises(CodegenError, match="compute"):
        run_network(net, feeds, schedules, scheduler, on, style=style, compute="guess")
