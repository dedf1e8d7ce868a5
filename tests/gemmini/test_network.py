"""A whole int8 ONNX network on the functional and timing models, against ONNX Runtime.

Expected agreement: exact (0 LSB), not "within 1".  Every requantization on both sides is float32
arithmetic rounded half to even and saturated: Gemmini's mvout (``gemmini.numerics.scale_round``) is
MLAS's requantization of QLinearConv and QGemm once the scale is ONNX Runtime's float32
``(x_scale * w_scale) / y_scale``; the host operators copy ONNX Runtime's formulas.  The ReLUs fuse
exactly because ``cosa quantize`` gives each ReLU's producer the ReLU's scale.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="needs onnxruntime (the 'onnxruntime' extra)")

from onnx_networks import tiny_cnn, write_tiny_cnn  # noqa: E402

from gemmini import CodegenError, GemminiConfig  # noqa: E402
from gemmini.network import arena_plan, load_network, plan  # noqa: E402
from gemmini.network_run import (compare, compared_tensors, distinct_layers, gemmini_layers,  # noqa: E402
                                 onnxruntime_values, run_network, tiles_for)
from gemmini.onnx_quantize import input_specs, synthetic_inputs  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return write_tiny_cnn(tmp_path_factory.mktemp("net"))


@pytest.fixture(scope="module")
def net(models):
    return load_network(models[1])


def _diffs(net, scheduler, schedules, n, seed=100):
    steps = plan(net)
    out = []
    for feeds in synthetic_inputs(input_specs(net.model, net.source), n, seed):
        run = run_network(net, feeds, schedules, scheduler, steps)
        out.append((compare(net, run, onnxruntime_values(net, feeds, compared_tensors(net))), run))
    return out


def test_plan_fuses_relus_and_places_operators(net):
    steps = plan(net)
    by_op = [(s.op, s.on, s.relu, s.pool) for s in steps]
    assert by_op == [("QuantizeLinear", "host", False, None), ("QLinearConv", "gemmini", True, (3, 2, 1)),
                     ("QLinearConv", "gemmini", False, None), ("QLinearAdd", "host", True, None),
                     ("QLinearConv", "gemmini", False, None), ("MaxPool", "host", False, None),
                     ("QLinearGlobalAveragePool", "host", False, None), ("Flatten", "host", False, None),
                     ("QGemm", "gemmini", False, None), ("DequantizeLinear", "host", False, None)]
    # the stem's ReLU and its max-pool (float between Dequantize and QuantizeLinear in the model) go into
    # the first convolution's mvout; the pool after the depthwise convolution stays on the host
    assert [f for s in steps for f in s.fused if "relu" in f or "pool" in f] == ["relu1", "pool1", "relu2"]
    assert len(distinct_layers(gemmini_layers(net, steps))) == 4


def test_arena_reuses_dead_buffers_without_overlap(net):
    steps = plan(net)
    a = arena_plan(net, steps)
    assert a.peak_bytes <= a.size_bytes < a.sum_bytes
    size = {t: int(np.prod(net.shapes[t])) * np.dtype(net.dtypes[t]).itemsize for t in a.offsets}
    names = list(a.offsets)
    for i, s in enumerate(names):             # buffers alive at the same step never share bytes
        for t in names[i + 1:]:
            (b1, e1), (b2, e2) = a.lifetimes[s], a.lifetimes[t]
            if b1 <= e2 and b2 <= e1:
                assert a.offsets[s] + size[s] <= a.offsets[t] or a.offsets[t] + size[t] <= a.offsets[s], (s, t)


def test_library_tiles_match_onnxruntime_exactly_on_20_inputs(net):
    results = _diffs(net, "gemmini-default", {}, 20)
    assert [c["max_abs_diff_vs_onnxruntime"] for c, _ in results] == [0] * 20
    assert all(c["top1_equal"] for c, _ in results)
    run = results[0][1]
    gem = [r for r in run.layers if r.on == "gemmini"]
    assert all(r.layer_verified and r.cycles > 0 and r.cycles_source == "timing model" for r in gem)
    assert run.cycles == sum(r.cycles for r in gem)


def test_cosa_tiles_match_onnxruntime_and_are_never_slower(net):
    from cosa.scheduler import schedule

    arch = GemminiConfig().arch("ws")
    tiles = {k: tiles_for(layer, schedule(layer.workload, arch, time_limit_s=10, bound=False).mapping, arch,
                          budget=8)
             for k, layer in distinct_layers(gemmini_layers(net, plan(net))).items()}
    results = _diffs(net, "cosa", tiles, 3)
    assert all(c["max_abs_diff_vs_onnxruntime"] == 0 and c["top1_equal"] for c, _ in results)
    for r in results[0][1].layers:
        if r.on == "gemmini":
            assert r.layer_verified and r.cycles <= r.library_cycles


def test_host_operators_follow_onnxruntime_on_every_tensor(net):
    steps = plan(net)
    feeds = synthetic_inputs(input_specs(net.model, net.source), 1, 7)[0]
    run = run_network(net, feeds, {}, "gemmini-default", steps)
    ints = [s.output for s in steps if np.issubdtype(net.dtypes[s.output], np.integer)]
    ref = onnxruntime_values(net, feeds, ints)
    for t in ints:
        np.testing.assert_array_equal(run.values[t], ref[t], err_msg=t)


def test_unplaceable_operator_is_named_with_the_supported_list(models, tmp_path):
    import onnx
    from onnx import helper

    model = onnx.load(str(models[1]))
    last = model.graph.node[-1]
    model.graph.node.append(helper.make_node("LRN", [last.output[0]], ["z"], name="norm", size=3))
    with pytest.raises(CodegenError, match=r"node norm \(LRN\).*supported operators: QLinearConv"):
        load_network(tmp_path / "m.onnx", model=model)


def test_float_and_qdq_models_point_at_quantize(models, tmp_path):
    from gemmini.onnx_quantize import quantize_model

    with pytest.raises(CodegenError, match="cosa quantize"):
        load_network(models[0])
    quantize_model(models[0], tmp_path / "qdq.onnx", calibration=2, fmt="qdq")
    with pytest.raises(CodegenError, match="QDQ model.*--format qoperator"):
        load_network(tmp_path / "qdq.onnx")


def test_without_the_fusing_pass_a_relu_fuses_only_where_its_scales_agree(tmp_path):
    """Without the second pass a ReLU keeps its own scale: it runs on the host (DequantizeLinear, Relu,
    QuantizeLinear in float32, as ONNX Runtime does) unless the two calibrated scales happen to agree."""
    import onnx

    from gemmini.onnx_quantize import quantize_model

    onnx.save(tiny_cnn(), str(tmp_path / "f.onnx"))
    quantize_model(tmp_path / "f.onnx", tmp_path / "q.onnx", calibration=4, fuse_relu=False)
    net = load_network(tmp_path / "q.onnx")
    steps = plan(net)
    assert sum(s.op == "Relu" for s in steps) + sum(s.relu for s in steps) == 2
    for s in steps:
        if s.relu:
            dq, q = (net.graph.nodes[n]["inputs"] for n in (s.fused[0], s.fused[2]))
            assert net.constants[dq[1]] == net.constants[q[1]]
    (c, _), = _diffs(net, "gemmini-default", {}, 1)
    assert c["max_abs_diff_vs_onnxruntime"] == 0


def test_per_channel_scales_are_refused_naming_the_node(tmp_path):
    import onnx

    from gemmini.onnx_quantize import _load, quantize_model

    onnx.save(tiny_cnn(), str(tmp_path / "f.onnx"))
    quantize_model(tmp_path / "f.onnx", tmp_path / "q.onnx", calibration=2)
    model = _load(tmp_path / "q.onnx")
    for init in model.graph.initializer:
        if init.name == "w2_scale":
            value = onnx.numpy_helper.to_array(init)
            init.CopyFrom(onnx.numpy_helper.from_array(np.full(8, value, np.float32), "w2_scale"))
    net = load_network(tmp_path / "pc.onnx", model=model)
    with pytest.raises(CodegenError, match="conv2_quant.*per-channel"):
        gemmini_layers(net, plan(net))          # before any layer is scheduled


def test_block_diagonal_weights_hold_each_channel_on_its_group_diagonal():
    from gemmini.network_run import block_diagonal
    from gemmini.vendor.calls import depthwise_packed
    from gemmini.vendor.run import reference

    w = np.random.default_rng(1).integers(-128, 128, size=(24, 1, 3, 3)).astype(np.int8)
    bd = block_diagonal(w, 12)
    assert bd.shape == (3, 3, 12, 24)
    for c in range(24):
        np.testing.assert_array_equal(bd[:, :, c % 12, c], w[c, 0])
        assert not np.any(np.delete(bd[:, :, :, c], c % 12, axis=2))
    # the packed calls' reference (the diagonal of its weight buffer) is the depthwise convolution itself
    prog = depthwise_packed("dw", 1, 5, 5, 24, 3, pack=12, padding=1)
    x = np.random.default_rng(2).integers(-128, 128, size=(1, 5, 5, 24)).astype(np.int8)
    bias = np.zeros(24, np.int32)
    dense = np.zeros((3, 3, 24, 24), np.int8)
    dense[:, :, np.arange(24), np.arange(24)] = np.transpose(w[:, 0], (1, 2, 0))
    from gemmini.reference import conv_ref

    np.testing.assert_array_equal(reference(prog, {"input": x, "weights": bd, "bias": bias}),
                                  conv_ref(x, dense, bias, 1, 1, 1, 1.0, False))


@pytest.fixture(scope="module")
def dw_net(tmp_path_factory):
    from onnx_networks import depthwise_cnn, write_int8

    return load_network(write_int8(depthwise_cnn(), tmp_path_factory.mktemp("dw"), "dw"))


@pytest.mark.parametrize("which", ["tiny", "depthwise"])
def test_cosa_runs_depthwise_layers_as_packed_groups_bit_exact(which, net, dw_net):
    """With the loop-tile MIP (budget 0, as the bench runs), a depthwise layer runs as packed groups with
    block-diagonal weights made from the model's constants: faster than the library's tiled_conv_dw_auto on the
    timing model, and the network's output still equals ONNX Runtime's."""
    from cosa.mip import choose_loop_tiles
    from cosa.scheduler import schedule

    net = net if which == "tiny" else dw_net
    arch = GemminiConfig().arch("ws")
    steps = plan(net)
    distinct = distinct_layers(gemmini_layers(net, steps))
    tiles = {k: tiles_for(layer, schedule(layer.workload, arch, time_limit_s=10, bound=False).mapping, arch,
                          budget=0, chooser=choose_loop_tiles)
             for k, layer in distinct.items()}
    depthwise = {layer.step.name for layer in distinct.values() if layer.kind == "conv" and layer.key[10] > 1}
    assert depthwise and all(tiles[layer.key].own_calls for layer in distinct.values()
                             if layer.step.name in depthwise)
    results = _diffs(net, "cosa", tiles, 3)
    assert all(c["max_abs_diff_vs_onnxruntime"] == 0 and c["top1_equal"] for c, _ in results)
    library = {r.name: r for r in _diffs(net, "gemmini-default", {}, 1)[0][1].layers}
    ran = [r for r in results[0][1].layers if r.name in depthwise or library[r.name].calls == "tiled_conv_dw_auto"]
    assert len(ran) == sum(s.op == "QLinearConv" and s.attrs.get("group", 1) > 1 for s in steps)
    pack = 8 if which == "tiny" else 12
    for r in ran:
        assert library[r.name].calls == "tiled_conv_dw_auto"
        assert r.calls.startswith("tiled_conv_stride_auto") and f"packed by {pack}" in r.calls
        assert r.layer_verified and r.cycles < library[r.name].cycles == r.library_cycles


def test_resnet50_c_downsample_layer_runs_its_library_call_and_cosa_runs_tiled_conv_auto(tmp_path):
    """A 1x1 stride-2 layer named res4a_branch1 (res4a_branch1_quant once quantized): the library column runs
    tiled_conv_downsample as resnet50.c does, cosa's column tiled_conv_auto with the MIP's tiles; both
    bit-exact against ONNX Runtime."""
    from onnx_networks import downsample_cnn, write_int8

    from cosa.mip import choose_loop_tiles
    from cosa.scheduler import schedule

    net = load_network(write_int8(downsample_cnn(), tmp_path, "ds"))
    arch = GemminiConfig().arch("ws")
    tiles = {k: tiles_for(layer, schedule(layer.workload, arch, time_limit_s=10, bound=False).mapping, arch,
                          budget=0, chooser=choose_loop_tiles)
             for k, layer in distinct_layers(gemmini_layers(net, plan(net))).items()}
    (lib, _), = _diffs(net, "gemmini-default", {}, 1)
    (ours, run), = _diffs(net, "cosa", tiles, 1)
    assert lib["max_abs_diff_vs_onnxruntime"] == ours["max_abs_diff_vs_onnxruntime"] == 0
    library = {r.name: r for r in _diffs(net, "gemmini-default", {}, 1)[0][1].layers}
    ds = next(r for r in run.layers if r.name == "res4a_branch1_quant")
    assert library[ds.name].calls == "tiled_conv_downsample" and ds.calls == "tiled_conv_auto"
    assert ds.layer_verified and ds.tiles and ds.cycles < ds.library_cycles == library[ds.name].cycles
