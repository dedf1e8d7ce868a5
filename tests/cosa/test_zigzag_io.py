"""ZigZag's inputs from our workloads and archs, and mappings both ways (plain data: ZigZag need not be installed)."""

from __future__ import annotations

import random

import pytest

from cosa.baselines.mapspace import random_mapping
from cosa.baselines.zigzag_io import (ZigZagConversionError, from_zigzag_loops, nearest_mapping, to_zigzag_loops,
                                      zigzag_accelerator, zigzag_layer, zigzag_mapping_entry)
from costmodel import preset
from mappings import LevelMapping, Mapping, validate
from workloads import conv2d, einsum, matmul, spmm, zoo

ROUND_TRIP_LAYERS = ("resnet50/res2a_branch2b", "resnet50/res3a_branch1", "mobilenet_v2/b3_dw",
                     "mobilenet_v2/b2_dw", "bert_base_128/attention_scores", "bert_base_128/ffn1")


def test_a_padded_convolution_becomes_two_window_relations_with_its_padding():
    e = zigzag_layer(zoo.layer("resnet50/res2a_branch2b")).entry
    assert e["equation"] == "O[n][k][q][p]+=W[k][c][s][r]*I[n][c][ia0][ia1]"
    assert e["dimension_relations"] == ["ia0=1*q+1*s", "ia1=1*p+1*r"]
    assert e["pr_loop_sizes"] == [56, 56] and e["padding"] == [[1, 1], [1, 1]]
    assert dict(zip(e["loop_dims"], e["loop_sizes"])) == {"N": 1, "K": 64, "C": 64, "P": 56, "Q": 56, "R": 3, "S": 3}


def test_strides_stay_in_the_relation_and_groups_split_the_channel_axis():
    strided = zigzag_layer(conv2d("s", C=8, K=8, H=9, W=9, R=3, S=3, stride=2)).entry
    assert strided["dimension_relations"] == ["ia0=2*q+1*s", "ia1=2*p+1*r"]
    assert strided["padding"] == [[0, 0], [0, 0]] and strided["pr_loop_sizes"] == [9, 9]
    grouped = zigzag_layer(conv2d("g", C=8, K=12, H=6, W=6, R=3, S=3, groups=4)).entry
    assert grouped["equation"] == "O[n][g][k][q][p]+=W[g][k][c][s][r]*I[n][g][c][ia0][ia1]"
    dw = zigzag_layer(zoo.layer("mobilenet_v2/b3_dw")).entry
    assert "I[n][g][c][ia0][ia1]" in dw["equation"] and dw["operator_type"] == "Conv"
    pointwise = zigzag_layer(conv2d("pw", C=8, K=8, H=6, W=6)).entry  # a 1x1 window is a plain axis
    assert pointwise["equation"].endswith("*I[n][c][q][s][p][r]") and pointwise["dimension_relations"] == []


def test_a_batched_matmul_is_a_gemm_with_renamed_dims():
    layer = zigzag_layer(zoo.layer("bert_base_128/attention_scores"))
    assert layer.entry["operator_type"] == "Gemm"
    assert layer.entry["equation"] == "O[batch][m][n]+=W[batch][k][n]*I[batch][m][k]"
    assert layer.tensors == {"W": "B", "I": "A", "O": "C"} or layer.tensors == {"I": "A", "W": "B", "O": "C"}
    assert "dimension_relations" in layer.entry and layer.entry["dimension_relations"] == []


def test_workloads_zigzag_cannot_state_are_refused_with_the_reason():
    with pytest.raises(ZigZagConversionError, match="dense"):
        zigzag_layer(spmm("s", m=16, n=16, r=8, density=0.1))
    with pytest.raises(ZigZagConversionError, match="one input, one weight and one output"):
        zigzag_layer(einsum("ik,kj,jl->il", {"i": 4, "j": 4, "k": 4, "l": 4}))


def test_simba_becomes_three_array_dims_served_from_the_level_that_fans_out():
    arch = preset("simba")
    hw = zigzag_accelerator(arch, zoo.layer("resnet50/res2a_branch2b"))
    assert hw.entry["operational_array"]["sizes"] == [16, 8, 8]
    mem = hw.entry["memories"]
    assert list(mem) == ["Registers", "AccumulationBuffer", "WeightBuffer", "InputBuffer", "GlobalBuffer", "DRAM"]
    assert mem["GlobalBuffer"]["served_dimensions"] == ["D1", "D2", "D3"]
    assert mem["InputBuffer"]["served_dimensions"] == ["D2", "D3"]
    assert mem["WeightBuffer"]["served_dimensions"] == ["D3"] and mem["Registers"]["served_dimensions"] == []
    assert hw.memories == {"O": (4, 1, 0), "W": (5, 3, 0), "I": (2, 1, 0)}
    # 24-bit accumulator words for 8-bit outputs: ZigZag's 8-bit words, one per accumulator word
    assert mem["AccumulationBuffer"]["size"] == 192 * 8 // 3


@pytest.mark.parametrize("name", ["simba", "eyeriss"])
def test_per_access_energies_are_our_per_word_energies(name):
    arch = preset(name)
    w = zoo.layer("resnet50/res2a_branch2b")
    hw = zigzag_accelerator(arch, w)
    for lv in arch.levels:
        if lv.name not in hw.entry["memories"]:
            continue
        m = hw.entry["memories"][lv.name]
        read = next(p for p in m["ports"] if p["type"] in ("read", "read_write"))
        word_pj = lv.read_energy_pj_per_byte * lv.bytes_per_word(w.tensors[0])
        assert m["r_cost"] / read["bandwidth_max"] * 8 == pytest.approx(word_pj)
        assert read["bandwidth_min"] == 1  # no rounding of accesses up to the port width


def test_archs_zigzag_cannot_state_are_refused_with_the_reason():
    with pytest.raises(ZigZagConversionError, match="does not model") as info:
        zigzag_accelerator(preset("gemmini"), zoo.layer("resnet50/res2a_branch2b"))
    assert info.value.exit_code == 2


def test_the_mapping_entry_links_operands_and_hints_shaped_axes():
    hw = zigzag_accelerator(preset("simba"), zoo.layer("resnet50/res2a_branch2b"))
    assert zigzag_mapping_entry(hw) == [{"name": "default", "memory_operand_links": {"O": "O", "W": "I2", "I": "I1"}}]


@pytest.mark.parametrize("arch_name", ["simba", "eyeriss"])
@pytest.mark.parametrize("layer", ROUND_TRIP_LAYERS)
def test_our_mappings_survive_the_round_trip_through_zigzags_loops(layer, arch_name):
    w, arch = zoo.layer(layer), preset(arch_name)
    zl, hw = zigzag_layer(w), zigzag_accelerator(arch, w)
    for seed in range(3):
        m = random_mapping(w, arch, random.Random(seed))
        temporal, spatial = to_zigzag_loops(m, w, arch, zl, hw)
        back = from_zigzag_loops(temporal, spatial, w, arch, zl, hw)
        dims = list(w.dims)
        assert list(back.loops(dims)) == list(m.loops(dims))
        for op, levels in temporal.items():  # each operand's memories hold every temporal loop once
            assert sum(len(lv) for lv in levels) == sum(1 for x in m.loops(dims) if not x.spatial)


def test_a_loop_our_levels_cannot_place_is_named_or_moved_outwards_into_a_fitting_mapping():
    w, arch = zoo.layer("bert_base_128/attention_context"), preset("simba")
    zl, hw = zigzag_layer(w), zigzag_accelerator(arch, w)
    m = Mapping(tuple(LevelMapping(dict(w.dims) if i == 0 else {}, {}, tuple(w.dims)) for i in range(6)))
    temporal, spatial = to_zigzag_loops(m, w, arch, zl, hw)
    assert all(not any(levels[:-1]) for levels in temporal.values())  # every loop in DRAM for every operand
    # ZigZag's freedom: W's innermost loop inside its WeightBuffer tile while O and I stay at DRAM for it
    temporal["W"][1].append(temporal["W"][-1].pop(0))
    with pytest.raises(ZigZagConversionError, match="nest these memories the other way round") as info:
        from_zigzag_loops(temporal, spatial, w, arch, zl, hw)
    assert info.value.exit_code == 1 and "WeightBuffer" in str(info.value)
    near, moved = nearest_mapping(temporal, spatial, w, arch, zl, hw)
    assert len(moved) == 1 and "placed at DRAM" in moved[0]
    validate(near, w, arch)
    assert list(near.loops(list(w.dims))) == list(m.loops(list(w.dims)))  # moved outwards: back to DRAM
    inner, moved_in = nearest_mapping(temporal, spatial, w, arch, zl, hw, inward=True)
    assert len(moved_in) == 1 and "placed at WeightBuffer" in moved_in[0]
    validate(inner, w, arch)  # W's reuse kept: the loop sits inside W's WeightBuffer tile
    assert sum(lm.temporal_factor(d) > 1 for lm in inner.levels[3:4] for d in w.dims) == 1


def test_an_arch_read_from_a_timeloop_file_converts_like_its_preset():
    from pathlib import Path

    from costmodel import load_arch

    path = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "arch" / "cosa-simba.yaml"
    if not path.is_file():
        pytest.skip("the CoSA Simba arch file is not here")
    w = zoo.layer("resnet50/res2a_branch2b")
    from_file, from_preset = zigzag_accelerator(load_arch(path), w), zigzag_accelerator(preset("simba"), w)
    assert from_file.memories == from_preset.memories and from_file.array_dims == from_preset.array_dims
    assert [m["size"] for m in from_file.entry["memories"].values()] == \
        [m["size"] for m in from_preset.entry["memories"].values()]


def test_a_ragged_or_fractional_zigzag_unrolling_is_refused():
    w, arch = matmul("mm", M=12, N=10, K=8), preset("eyeriss")
    zl, hw = zigzag_layer(w), zigzag_accelerator(arch, w)
    temporal = {op: [[] for _ in levels] for op, levels in hw.memories.items()}
    for op in temporal:
        temporal[op][-1] = [("N", 10), ("K", 8)]
    with pytest.raises(ZigZagConversionError, match="ragged"):
        from_zigzag_loops(temporal, {"D1": {"M": 14}}, w, arch, zl, hw)
    with pytest.raises(ZigZagConversionError, match="fraction"):
        from_zigzag_loops(temporal, {"D1": {"M": 12 / 5}}, w, arch, zl, hw)


def test_a_mapping_that_bypasses_a_level_zigzag_fills_is_refused():
    w, arch = zoo.layer("bert_base_128/attention_context"), preset("simba")
    m = Mapping(tuple(LevelMapping(dict(w.dims) if i == 0 else {}, {}, tuple(w.dims),
                                   frozenset({"A"}) if i == 1 else frozenset()) for i in range(6)))
    with pytest.raises(ZigZagConversionError, match="bypasses"):
        to_zigzag_loops(m, w, arch, zigzag_layer(w), zigzag_accelerator(arch, w))


def test_an_unlimited_memory_gets_a_port_per_operand_and_direction():
    # ZigZag serialises the transfers sharing a port: a psum scratchpad read and written every cycle through
    # one shared port stalled three cycles in four, which our unlimited bandwidth does not
    mem = zigzag_accelerator(preset("eyeriss"), zoo.layer("resnet50/res2a_branch2b")).entry["memories"]
    psum = mem["PsumSpad"]["ports"]
    assert sorted((p["type"], tuple(p["allocation"])) for p in psum) == [
        ("read", ("O, th",)), ("read", ("O, tl",)), ("write", ("O, fh",)), ("write", ("O, fl",))]
    assert len(mem["GlobalBuffer"]["ports"]) == 6  # inputs: read to low, write from high; outputs: all four
    assert [p["type"] for p in mem["DRAM"]["ports"]] == ["read_write"]  # a bandwidth: one port, shared as ours


def test_a_mapping_stated_on_a_sibling_order_reads_back_exactly_on_that_order():
    from cosa.baselines.zigzag_mapper import read_back
    from costmodel.arch import sibling_orders

    w, arch = zoo.layer("mobilenet_v2/b5_expand"), preset("eyeriss")
    zl = zigzag_layer(w)
    found = 0
    for other in sibling_orders(arch)[1:]:
        hw = zigzag_accelerator(other, w)
        for seed in range(40):
            m = random_mapping(w, other, random.Random(seed))
            temporal, spatial = to_zigzag_loops(m, w, other, zl, hw)
            try:
                from_zigzag_loops(temporal, spatial, w, arch, zl, zigzag_accelerator(arch, w))
                continue  # the preset's order states it too
            except ZigZagConversionError:
                pass
            mapping, moved, on, target, padded, error = read_back(temporal, spatial, w, arch, zl)
            assert error is None and not moved and not padded and target is w
            validate(mapping, w, on)
            back, _ = to_zigzag_loops(mapping, w, on, zl, zigzag_accelerator(on, w))
            assert back == temporal  # every loop where ZigZag put it, for every operand
            found += 1
    assert found >= 5


def test_a_ragged_unrolling_reads_back_as_the_padded_layer():
    from cosa.baselines.zigzag_mapper import read_back

    w, arch = matmul("mm", M=12, N=10, K=8), preset("eyeriss")
    zl = zigzag_layer(w)
    temporal = {op: [[] for _ in levels] for op, levels in zigzag_accelerator(arch, w).memories.items()}
    for op in temporal:
        temporal[op][-1] = [("N", 10), ("K", 8)]
    mapping, moved, on, target, padded, error = read_back(temporal, {"D1": {"M": 14}}, w, arch, zl)
    assert error is None and not moved and padded == {"M": (12, 14)}
    assert target.dims == {"M": 14, "N": 10, "K": 8} and target.tensors == w.tensors
    validate(mapping, target, on)


def test_a_nearest_read_back_takes_the_choice_its_caller_ranks_first():
    from cosa.baselines.zigzag_mapper import read_back

    w, arch = zoo.layer("bert_base_128/attention_context"), preset("simba")
    zl, hw = zigzag_layer(w), zigzag_accelerator(arch, w)
    m = Mapping(tuple(LevelMapping(dict(w.dims) if i == 0 else {}, {}, tuple(w.dims)) for i in range(6)))
    temporal, spatial = to_zigzag_loops(m, w, arch, zl, hw)
    temporal["W"][1].append(temporal["W"][-1].pop(0))  # inside W's WeightBuffer tile only: one loop to move
    seen = []

    def rank(mapping, on, target):
        seen.append(mapping)
        return 0 if mapping.levels[0].temporal == dict(w.dims) else 1  # prefer the loop moved outwards

    out = read_back(temporal, spatial, w, arch, zl, rank)
    assert len(seen) == 4  # two sibling orders, the moved loop inwards or outwards on each
    assert len(out[1]) == 1 and out[0].levels[0].temporal == dict(w.dims)
    inward = read_back(temporal, spatial, w, arch, zl, lambda mapping, on, target: -rank(mapping, on, target))
    assert inward[0].levels[0].temporal != dict(w.dims)  # W's reuse kept: the loop sits in its WeightBuffer tile
