"""The MIP under ``params["refill_needs_room"]`` (ZigZag's double-buffering rule): the levels a double-buffered
level refills keep their tiles within half their capacity, so every refill overlaps compute as the model says."""

import dataclasses

import workloads
from costmodel import evaluate, preset
from cosa.scheduler import schedule
from mappings.validate import tile_bytes


def test_refilled_levels_keep_room_for_the_next_tile():
    w = workloads.matmul("ffn", M=128, N=768, K=768)
    simba = preset("simba")
    arch = dataclasses.replace(simba, params={**simba.params, "refill_needs_room": True})
    s = schedule(w, arch, time_limit_s=30, bound=False, seed=0)
    refilled = [i for i in range(len(arch.levels)) if arch.refilled_by_double_buffer(i)]
    assert refilled
    for i in refilled:
        assert sum(tile_bytes(s.mapping, w, arch, i).values()) <= arch.levels[i].capacity_bytes / 2
    assert s.cost.cycles == evaluate(w, arch, s.mapping).cycles
    assert s.cost.cycles == evaluate(w, simba, s.mapping).cycles  # no refill stalls: priced as without the rule
