"""Our mapping YAML, Timeloop's mapping YAML and the loop-nest printer."""

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from costmodel.arch import Arch, Level, SpatialAxis
from mappings import (LevelMapping, Mapping, MappingError, dump_mapping, dump_timeloop, format_loopnest,
                      from_timeloop, load_mapping, mapping_from_dict, mapping_to_dict, to_timeloop, validate)
from workloads import conv2d, matmul


def arch4(dim=4):
    return Arch("mini", (
        Level("DRAM"),
        Level("Scratchpad", 1 << 20, frozenset({"input", "weight"})),
        Level("Accumulator", 1 << 16, frozenset({"output"}), word_bits=32, fanout=dim * dim, spatial_axes=(
            SpatialAxis("rows", dim, frozenset({"input", "weight"})),
            SpatialAxis("cols", dim, frozenset({"weight", "output"})))),
        Level("Registers", 1, frozenset({"weight"})),
    ))


CONV = conv2d("conv", C=8, K=8, P=4, Q=4, R=3, S=3)


def conv_mapping():
    return Mapping((
        LevelMapping(temporal={"K": 2, "Q": 2}, order=("Q", "K")),
        LevelMapping(temporal={"C": 2, "R": 3, "S": 3}, order=("S", "R", "C")),
        LevelMapping(temporal={"Q": 2}, spatial={"C": 4, "K": 4}),
        LevelMapping(temporal={"P": 4}),
    ))


def normal(mapping, dims):
    """Comparable form: full loop orders."""
    return [(lm.temporal, lm.spatial, lm.loop_order(dims), lm.bypass) for lm in mapping.levels]


def test_our_yaml_round_trip(tmp_path):
    arch, m = arch4(), conv_mapping()
    validate(m, CONV, arch)
    text = dump_mapping(m, arch)
    assert "name: Scratchpad" in text
    path = tmp_path / "m.yaml"
    path.write_text(text)
    assert load_mapping(path, arch) == m
    assert mapping_from_dict(mapping_to_dict(m, arch), arch) == m


def test_levels_by_name_any_order_and_omitted():
    doc = {"levels": [{"name": "Registers", "temporal": {"P": 4}}, {"name": "DRAM", "temporal": {"K": 2}}]}
    m = mapping_from_dict(doc, arch4())
    assert m.levels[3].temporal == {"P": 4} and m.levels[0].temporal == {"K": 2}
    assert m.levels[1] == LevelMapping() and len(m.levels) == 4


@pytest.mark.parametrize("doc, words", [
    ({"levels": [{"name": "L2"}]}, "'L2' is not a level"),
    ({"levels": [{"name": "DRAM"}, {"name": "DRAM"}]}, "given twice"),
    ({"levels": [{"name": "DRAM", "temporal": {"K": 0}}]}, "positive integer"),
    ({"levels": [{"name": "DRAM", "temporal": {"K": 2}, "tile": 3}]}, "unknown key"),
    ({"levels": [{"temporal": {"K": 2}}]}, "needs the name"),
    ({"levels": [{"name": "DRAM", "bypass": [1]}]}, "list of names"),
    ({"lvls": []}, "'levels'"),
])
def test_our_yaml_errors(doc, words):
    with pytest.raises(MappingError, match=words):
        mapping_from_dict(doc, arch4(), "m.yaml")


def test_load_mapping_errors(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("levels: [ {name: DRAM\n")
    with pytest.raises(MappingError, match=r"bad.yaml.*line"):
        load_mapping(path, arch4())
    with pytest.raises(MappingError, match="cannot read"):
        load_mapping(tmp_path / "none.yaml", arch4())


def test_timeloop_export_shape():
    arch, m = arch4(), conv_mapping()
    doc = to_timeloop(m, CONV, arch)
    entries = {(d["target"], d["type"]): d for d in doc["mapping"]}
    dram = entries[("DRAM", "temporal")]
    # every dim listed; permutation inner to outer, so the outermost Q comes last, after K
    assert dram["factors"].split() == ["N=1", "K=2", "C=1", "P=1", "Q=2", "R=1", "S=1"]
    assert dram["permutation"][-2:] == "KQ" and sorted(dram["permutation"]) == sorted("NKCPQRS")
    spatial = entries[("Accumulator", "spatial")]
    assert "C=4" in spatial["factors"] and "K=4" in spatial["factors"]
    assert spatial["permutation"][:2] == "CK" and spatial["split"] == 1   # C on X (rows), K on Y (cols)
    assert ("DRAM", "bypass") not in entries and ("Scratchpad", "spatial") not in entries
    assert entries[("Registers", "bypass")] == {"target": "Registers", "type": "bypass", "keep": ["Weights"],
                                                 "bypass": ["Inputs", "Outputs"]}


def test_timeloop_round_trip_text_and_file(tmp_path):
    arch, m = arch4(), conv_mapping()
    text = dump_timeloop(m, CONV, arch)
    back = from_timeloop(text, CONV, arch)
    assert normal(back, CONV.dims) == normal(m, CONV.dims)
    path = tmp_path / "tl.yaml"
    path.write_text(text)
    assert load_mapping(path, arch, CONV) == back
    assert from_timeloop(path, CONV, arch) == back


def test_timeloop_import_conventions():
    arch = arch4()
    doc = {"mapping": [
        {"target": "DRAM", "type": "temporal", "factors": "K8 C0", "permutation": "C K"},
        {"target": 2, "type": "spatial", "factors": "K=1"},
        {"target": "Scratchpad", "type": "datatype", "keep": ["Weights"], "bypass": ["Inputs", "Outputs"]},
    ]}
    wl = conv2d("c", C=4, K=8, P=1, Q=1)
    m = from_timeloop(doc, wl, arch)
    assert m.levels[0].temporal == {"K": 8, "C": 4}          # C0: the whole bound
    assert m.levels[0].loop_order(wl.dims)[:2] == ("K", "C")  # inner to outer "C K"
    assert m.levels[1].bypass == {"Inputs"}                   # Outputs cannot be held there anyway


@pytest.mark.parametrize("directive, words", [
    ({"target": "L9", "type": "temporal", "factors": "K=1"}, "not a level"),
    ({"target": "DRAM", "type": "temporal", "factors": "Z=2"}, "unknown dimension 'Z'"),
    ({"target": "DRAM", "type": "temporal", "factors": "K=?"}, "cannot parse factors"),
    ({"target": "DRAM", "type": "temporal", "permutation": "KX"}, "unknown dimension"),
    ({"target": "DRAM", "type": "loop"}, "not temporal, spatial or bypass"),
    ({"target": "Scratchpad", "type": "bypass", "keep": ["Outputs"]}, "cannot hold"),
    ({"target": "Scratchpad", "type": "bypass", "bypass": ["Psums"]}, "data spaces"),
])
def test_timeloop_import_errors(directive, words):
    with pytest.raises(MappingError, match=words):
        from_timeloop({"mapping": [directive]}, CONV, arch4(), source="tl.yaml")


def test_multi_letter_dims_use_spaced_permutations():
    wl = matmul("b", M=4, N=4, K=4, batch=2)
    arch = Arch("flat", (Level("DRAM"), Level("Buf", 1 << 20)))
    m = Mapping((LevelMapping(temporal={"batch": 2, "M": 4}, order=("M", "batch")), LevelMapping(temporal={"N": 4, "K": 4})))
    doc = to_timeloop(m, wl, arch)
    assert doc["mapping"][0]["permutation"] == "K N batch M"
    assert normal(from_timeloop(doc, wl, arch), wl.dims) == normal(m, wl.dims)


def _split(bound, parts, draw):
    out = []
    for _ in range(parts - 1):
        f = draw(st.sampled_from([d for d in range(1, bound + 1) if bound % d == 0]))
        out.append(f)
        bound //= f
    return out + [bound]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_round_trips_property(data):
    """Random factorisations, orders and bypasses survive both formats."""
    arch = arch4()
    wl = conv2d("p", C=4, K=8, P=4, Q=2, R=3, S=1)
    dims = list(wl.dims)
    temporal = [dict() for _ in range(4)]
    spatial = {}
    for d, bound in wl.dims.items():
        parts = _split(bound, 5, data.draw)
        for level in range(4):
            temporal[level][d] = parts[level]
        if d in ("C", "K"):
            spatial[d] = parts[4]
        else:
            temporal[0][d] *= parts[4]
    levels = []
    for i in range(4):
        order = tuple(data.draw(st.permutations(dims)))[: data.draw(st.integers(0, len(dims)))]
        bypass = frozenset(data.draw(st.sets(st.sampled_from(["Inputs", "Weights"])))) if i == 1 else frozenset()
        levels.append(LevelMapping(temporal=temporal[i], spatial=spatial if i == 2 else {}, order=order, bypass=bypass))
    m = Mapping(tuple(levels))
    assert all(m.factor(d) == b for d, b in wl.dims.items())
    assert mapping_from_dict(yaml.safe_load(dump_mapping(m, arch)), arch) == m
    assert normal(from_timeloop(dump_timeloop(m, wl, arch), wl, arch), dims) == normal(m, dims)


def test_format_loopnest():
    arch, m = arch4(), conv_mapping()
    text = format_loopnest(m, CONV, arch)
    lines = text.splitlines()
    loops = [l for l in lines if "for " in l]
    assert len(loops) == len(list(m.loops(CONV.dims))) == 9
    assert loops[0] == "for Q1 in [0:2)  # DRAM"
    assert loops[1] == "  for K1 in [0:2)  # DRAM"
    assert any(l.strip() == "parallel_for C0 in [0:4)  # Accumulator (spatial)" for l in loops)
    assert loops[-1].strip() == "for P0 in [0:4)  # Registers"
    # one indentation step per loop; the statement is innermost
    assert lines[-1].startswith("  " * 9) and not lines[-1].startswith("  " * 10) and "Outputs[N, K, Q, P] +=" in lines[-1]
    assert "# Scratchpad holds Weights" in text and "Inputs" in text
    assert "# Registers holds Weights 1 B" in text
    assert "holds" not in format_loopnest(m, CONV, arch, show_tiles=False)
