"""Sibling levels (per-unit buffers of different tensors side by side) listed in another order: the same
hardware, so the same tiles cost the same."""

from __future__ import annotations

import pytest

from costmodel import evaluate, preset
from costmodel.arch import sibling_orders, sibling_runs
from mappings import LevelMapping, Mapping, validate
from mappings.validate import violations
from workloads import conv2d


@pytest.mark.parametrize("name, runs, orders", [("eyeriss", [(2, 4)], 6), ("simba", [(3, 4)], 2),
                                                ("gemmini", [], 1), ("cpu", [], 1)])
def test_runs_are_disjoint_buffers_of_one_unit(name, runs, orders):
    arch = preset(name)
    assert sibling_runs(arch) == runs
    got = sibling_orders(arch)
    assert got[0] is arch and len(got) == orders
    assert len({o.level_names for o in got}) == orders
    for other in got:  # the fan-outs stay where they were; every other field moves with its level
        assert [lv.fanout for lv in other.levels] == [lv.fanout for lv in arch.levels]
        assert [lv.spatial_axes for lv in other.levels] == [lv.spatial_axes for lv in arch.levels]
        for lv in other.levels:
            mine = arch.level(lv.name)
            assert (lv.capacity_bytes, lv.holds, lv.read_bandwidth, lv.read_energy_pj_per_byte) == \
                (mine.capacity_bytes, mine.holds, mine.read_bandwidth, mine.read_energy_pj_per_byte)


def test_the_same_tiles_cost_the_same_in_every_order():
    # every per-PE loop at the innermost level: each scratchpad keeps the same tile in every order
    w = conv2d("c", C=8, K=16, H=10, W=10, R=3, S=3, padding=1)
    arch = preset("eyeriss")
    mapping = Mapping((LevelMapping({"K": 2, "P": 5}, {}, ("K", "P")), LevelMapping({"Q": 5}, {"K": 8, "C": 8, "P": 2}),
                       LevelMapping({}), LevelMapping({}), LevelMapping({"R": 3, "S": 3, "Q": 2}, {}, ("Q", "R", "S"))))
    costs = []
    for other in sibling_orders(arch):
        validate(mapping, w, other)
        c = evaluate(w, other, mapping)
        costs.append((c.cycles, round(c.energy_pj, 6), {n: c.accesses[n] for n in arch.level_names}))
    assert all(c == costs[0] for c in costs)


def test_loops_at_a_sibling_level_other_than_the_innermost_do_depend_on_the_order():
    w = conv2d("c", C=8, K=16, H=10, W=10, R=3, S=3, padding=1)
    arch = preset("eyeriss")
    mapping = Mapping((LevelMapping({"K": 2, "P": 5}, {}, ("K", "P")), LevelMapping({"Q": 5}, {"K": 8, "C": 8, "P": 2}),
                       LevelMapping({"Q": 2}), LevelMapping({}), LevelMapping({"R": 3, "S": 3}, {}, ("R", "S"))))
    energies = set()
    for other in sibling_orders(arch):
        if not violations(mapping, w, other):
            energies.add(round(evaluate(w, other, mapping).energy_pj, 6))
    assert len(energies) > 1  # the Q loop sits inside a different scratchpad's tile in each order
