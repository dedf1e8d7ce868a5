"""The footprint of a tile (``workloads.footprint``): hand-computed cases, and a property that every user of it
agrees tile by tile with a brute-force count over the tile's points.

The users: ``mappings.validate.tile_bytes``/``tile_rows`` (capacity), the cost model's footprints
(``Cost.footprint_words``/``footprint_rows``, counted by its own exact enumeration), the MIP's tensor records
(``WindowAxis.extent``/``stored_extent``), the Gemmini code generator's plan (``make_plan``: input window,
rows of each tile) and the GPU target's tile layout.  The oracle enumerates the index values of each tensor
axis over the tile: the span is max - min + 1, the entries a row-addressed buffer keeps are one block per
group value times the range over the gcd of the differences, and the words that move are the distinct values
inside the stored tensor at the worst tile position.
"""

from __future__ import annotations

import math
import random
from functools import reduce

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import workloads as W
from cosa.mip.problem import build_problem
from costmodel import Arch, Level, evaluate
from costmodel.presets import gemmini
from gemmini import GemminiConfig
from gemmini.codegen.tiling import make_plan, problem_of
from mappings import LevelMapping, Mapping, tile_bytes, tile_rows, violations
from targets.gpu.layout import array_shape, tile_layout
from workloads import WorkloadError
from workloads.divisors import prime_factor_counts
from workloads.footprint import (box_rows, clipped_span_entries, group_dims, span_entries, stored_axis,
                                 stored_box_words, stored_span_entries, tile_words)

from gemmini_mappings import random_gemmini_mapping

# --- hand-computed cases ------------------------------------------------------------------------------------


def test_span_halo_stride_dilation():
    window = (("P", 1), ("R", 1))
    assert span_entries(window, {"P": 4, "R": 3}) == 6  # P + R - 1
    assert span_entries((("P", 2), ("R", 3)), {"P": 4, "R": 2}) == 1 + 2 * 3 + 3 * 1
    assert span_entries(window, {}) == 1
    assert clipped_span_entries(window, {"P": 4, "R": 3}, 5) == 5
    assert clipped_span_entries(window, {"P": 4, "R": 3}, None) == 6


def test_stored_axis_skips_a_common_strides_gaps_and_keeps_groups_as_blocks():
    # a stride-2 window over one kernel column keeps every other input: 5 entries, not 9
    assert span_entries((("P", 2), ("R", 1)), {"P": 5}) == 9
    assert stored_axis((("P", 2), ("R", 1)), {"P": 5}) == stored_axis((("P", 2),), {"P": 5})
    box = stored_axis((("P", 2), ("R", 1)), {"P": 5})
    assert (box.step, box.rest, box.entries) == (2, 5, 5)
    # stride 2 and dilation 4: common step 2
    assert stored_span_entries((("P", 2), ("R", 4)), {"P": 3, "R": 2}) == 1 + (4 + 4) // 2
    # grouped channels G*Cg + C: one block per group value, the channels inside
    box = stored_axis((("G", 4), ("C", 1)), {"G": 2, "C": 3}, frozenset({"G"}))
    assert (box.blocks, box.rest, box.entries) == ((("G", 4, 2),), 3, 6)
    assert span_entries((("G", 4), ("C", 1)), {"G": 2, "C": 3}) == 7
    # a negative coefficient: the smallest entry sits below the tile base's value
    assert stored_axis((("P", 1), ("R", -1)), {"P": 2, "R": 3}).shift == 2


def test_tile_words_clip_and_the_stored_box_keeps_the_padding():
    conv = W.conv2d("pad", C=2, K=2, H=4, W=4, R=3, S=3, padding=1)
    inputs = conv.tensor("Inputs")
    whole = dict(conv.dims)
    assert tile_words(inputs, whole) == 2 * 4 * 4 == inputs.tile_words(whole)
    assert stored_box_words(inputs, whole) == 2 * 6 * 6


def test_box_rows_packed_and_in_blocks():
    assert box_rows(24, 1, 4) == 6  # packed
    assert box_rows(24, 1, 4, 3) == 8  # blocks of 3 words, one row each
    assert box_rows(16, 1, 2, 4) == 8  # blocks of 4 words take 2 rows each
    assert box_rows(10, 4, 16) == 3  # 40 bytes in 16-byte rows


def test_group_dims():
    assert group_dims(W.matmul("bmm", M=2, N=2, K=2, batch=3)) == frozenset({"batch"})
    assert group_dims(W.depthwise_conv2d("dw", C=4, H=5, W=5, R=3, S=3)) == frozenset({"G"})
    assert group_dims(W.matmul("mm", M=2, N=2, K=2)) == frozenset()


# --- the oracle -----------------------------------------------------------------------------------------------

def _values(terms, extents, base=None) -> list[int]:
    """Index values sum c * (base + x) over the points x of the tile (the offset left out)."""
    vals = [0]
    for d, c in terms:
        start = (base or {}).get(d, 0)
        vals = [v + c * (start + x) for v in vals for x in range(extents.get(d, 1))]
    return vals


def oracle_span(expr, extents) -> int:
    vals = _values(expr.terms, extents)
    return max(vals) - min(vals) + 1


def oracle_stored(expr, extents, groups) -> int:
    """One block per value of the group dims, inside it the range of the other terms over their common step."""
    blocks = math.prod(extents.get(d, 1) for d, _ in expr.terms if d in groups)
    vals = _values([(d, c) for d, c in expr.terms if d not in groups], extents)
    step = reduce(math.gcd, (v - min(vals) for v in vals), 0) or 1
    return blocks * ((max(vals) - min(vals)) // step + 1)


def oracle_moved(expr, extents, bounds, stored) -> int:
    """Distinct values inside [0, stored) at the tile position where they are most."""
    dims = [d for d, _ in expr.terms]
    best = 0
    for starts in _positions(dims, extents, bounds):
        vals = {v + expr.offset for v in _values(expr.terms, extents, starts)}
        best = max(best, sum(1 for v in vals if 0 <= v < stored))
    return best


def _positions(dims, extents, bounds):
    out = [{}]
    for d in dims:
        out = [dict(p, **{d: k}) for p in out for k in range(0, bounds[d], extents.get(d, 1))]
    return out


# --- the property ---------------------------------------------------------------------------------------------

@st.composite
def workloads_(draw):
    kind = draw(st.sampled_from(["conv", "conv", "conv", "matmul", "bmm"]))
    if kind == "matmul":
        return W.matmul("mm", M=draw(st.integers(1, 12)), N=draw(st.integers(1, 8)), K=draw(st.integers(1, 8)))
    if kind == "bmm":
        return W.matmul("bmm", M=draw(st.integers(1, 6)), N=draw(st.integers(1, 4)), K=draw(st.integers(1, 4)),
                        batch=draw(st.integers(2, 3)))
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    depthwise = groups > 1 and draw(st.booleans())
    cg, kg = (1, 1) if depthwise else (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    pair = st.tuples
    stride = draw(pair(st.integers(1, 3), st.integers(1, 3)))
    dilation = draw(pair(st.integers(1, 2), st.integers(1, 2)))
    padding = draw(pair(st.integers(0, 2), st.integers(0, 2)))
    try:
        return W.conv2d("conv", N=draw(st.integers(1, 2)), C=cg * groups, K=kg * groups, groups=groups,
                        P=draw(st.integers(1, 6)), Q=draw(st.integers(1, 5)), R=draw(st.integers(1, 3)),
                        S=draw(st.integers(1, 3)), stride=stride, dilation=dilation, padding=padding)
    except WorkloadError:  # the padding leaves no input
        assume(False)


def _primes(n: int) -> list[int]:
    return [p for p, k in sorted(prime_factor_counts(n).items()) for _ in range(k)]


@st.composite
def mappings_(draw, workload, arch):
    """Any valid mapping on ``arch`` (no capacities): each prime factor of each dim at a random level,
    temporal or spatial, random bypass below DRAM."""
    n = len(arch.levels)
    temporal, spatial = [dict() for _ in range(n)], [dict() for _ in range(n)]
    for d, bound in workload.dims.items():
        for f in _primes(bound):
            i = draw(st.integers(0, n - 1))
            used = math.prod(spatial[i].values())
            kind = temporal if not draw(st.booleans()) or used * f > arch.levels[i].fanout else spatial
            kind[i][d] = kind[i].get(d, 1) * f
    levels = []
    for i in range(n):
        bypass = frozenset(t.name for t in workload.tensors if i > 0 and draw(st.booleans()) and draw(st.booleans()))
        levels.append(LevelMapping(temporal=temporal[i], spatial=spatial[i], bypass=bypass))
    return Mapping(tuple(levels))


DIM = 4
PLAIN = Arch("plain", (Level("DRAM", fanout=8), Level("L2", fanout=8), Level("L1", fanout=4), Level("L0")))
WS = gemmini(dim=DIM, scratchpad_kib=256, accumulator_kib=256)
OS = gemmini(dim=DIM, scratchpad_kib=256, accumulator_kib=256, dataflow="os")


def check_tiles(workload, arch, mapping) -> int:
    """Every user's footprint of every stored tile equals the oracle's; returns the tiles checked."""
    assert not violations(mapping, workload, arch)
    cost = evaluate(workload, arch, mapping)
    problem = build_problem(workload, arch)
    groups = group_dims(workload)
    checked = 0
    for i, lv in enumerate(arch.levels):
        ext = mapping.tile_extents(i, workload.dims)
        rows = tile_rows(mapping, workload, arch, i)
        nbytes = tile_bytes(mapping, workload, arch, i)
        for t in workload.tensors:
            if not mapping.stores(i, t, arch):
                assert t.name not in nbytes
                continue
            shape = array_shape(t, workload.dims)
            span = [oracle_span(e, ext) for e in t.indices]
            clipped = [min(s, n) if t.shape is not None else s for s, n in zip(span, shape)]
            stored = [oracle_stored(e, ext, groups) for e in t.indices]
            moved = [oracle_moved(e, ext, workload.dims, n) for e, n in zip(t.indices, shape)]
            words, box = math.prod(clipped), math.prod(stored)
            # the footprint module and the IR
            assert [e.extent(ext) for e in t.indices] == span
            assert tile_words(t, ext) == t.tile_words(ext) == words
            assert stored_box_words(t, ext, groups) == box
            # mappings.validate and the cost model: the words a tile moves never exceed either box; a
            # word-addressed level reports (and the cost model counts) the moved words, while capacity is
            # checked on the clipped box; a row-addressed level reports the rows of the stored box
            assert cost.footprint_words[lv.name][t.name] == math.prod(moved) <= min(words, box)
            if rows is None:
                assert nbytes[t.name] == words * lv.bytes_per_word(t)
                assert cost.footprint_bytes[lv.name][t.name] == math.prod(moved) * lv.bytes_per_word(t)
            else:
                assert nbytes[t.name] == rows[t.name] * lv.row_bytes == cost.footprint_bytes[lv.name][t.name]
                assert rows[t.name] * lv.row_bytes >= box * lv.bytes_per_word(t)
                assert cost.footprint_rows[lv.name][t.name] == rows[t.name]
            # the MIP's tensor records
            axes = problem.axes[t.name]
            plain = math.prod(ext[d] for d in axes.plain)
            assert plain * math.prod(w.extent(ext) for w in axes.windows) == words
            assert plain * math.prod(w.stored_extent(ext, groups) for w in axes.windows) == box
            # the GPU target's tile layout: the stored axis, or the whole axis when that is smaller
            layout = tile_layout(t, ext, groups, workload.dims)
            assert [a.span for a in layout.axes] == [min(s, n) for s, n in zip(stored, shape)]
            assert all(a.whole == (s > n) for a, s, n in zip(layout.axes, stored, shape))
            checked += 1
    return checked


def check_plan(workload, arch, mapping, flow: str) -> None:
    """The Gemmini plan's input window and tile rows are the oracle's (one block of bc / bk per row)."""
    plan = make_plan(problem_of(workload), mapping, GemminiConfig.from_arch(arch), flow, source="test")
    groups = group_dims(workload)
    role = {t.role: t for t in workload.tensors}
    e1, e2 = (mapping.tile_extents(i, workload.dims) for i in (1, 2))
    inv = problem_of(workload).names
    assert all(plan.extents[i][inv[d]] == mapping.tile_extents(i, workload.dims)[d]
               for i in range(3) for d in workload.dims)  # level 3 may take folded level-2 loops
    inp = role["input"]
    if "Q" in workload.dims:  # a convolution: the input's height and width axes
        assert (plan.stored_h, plan.stored_w) == tuple(oracle_stored(e, e1, groups) for e in inp.indices[2:])
    box_in = math.prod(oracle_stored(e, e1, groups) for e in inp.indices)
    assert plan.a_pix * plan.extents[1]["g"] * plan.extents[1]["c"] == box_in
    assert plan.a_rows * plan.bc == box_in
    assert plan.b_rows * plan.bk == math.prod(oracle_stored(e, e1, groups) for e in role["weight"].indices)
    assert plan.acc_rows * plan.bk == math.prod(oracle_stored(e, e2, groups) for e in role["output"].indices)
    for i, expect in ((1, {inp.name: plan.a_rows, role["weight"].name: plan.b_rows}),
                      (2, {role["output"].name: plan.acc_rows})):
        rows = tile_rows(mapping, workload, arch, i)
        if rows is not None:
            assert rows == expect


CASES = 150


@settings(max_examples=CASES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_footprint_agrees_with_the_points_of_the_tile(data):
    workload = data.draw(workloads_())
    mapping = data.draw(mappings_(workload, PLAIN))
    assert check_tiles(workload, PLAIN, mapping) > 0


@settings(max_examples=CASES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(workload=workloads_(), flow=st.sampled_from(["ws", "os"]), seed=st.integers(0, 10_000))
def test_gemmini_plan_tiles_agree_with_every_footprint(workload, flow, seed):
    arch = WS if flow == "ws" else OS
    mapping = random_gemmini_mapping(workload, flow, DIM, random.Random(seed))
    assert check_tiles(workload, arch, mapping) > 0
    check_plan(workload, arch, mapping, flow)


@pytest.mark.parametrize("workload", [
    W.conv2d("s2x1", C=3, K=4, H=11, W=11, stride=2),  # the strided 1x1 layer whose tiles once disagreed
    W.conv2d("dil", C=2, K=2, H=9, W=9, R=3, S=3, dilation=2, padding=2),
    W.depthwise_conv2d("dw", C=6, H=7, W=7, R=3, S=3, padding=1, stride=2),
])
def test_named_layers(workload):
    for seed in range(5):
        mapping = random_gemmini_mapping(workload, "ws", DIM, random.Random(seed))
        check_tiles(workload, WS, mapping)
        check_plan(workload, WS, mapping, "ws")
