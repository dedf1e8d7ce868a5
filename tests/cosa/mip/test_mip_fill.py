"""The scheduler under ``params["fill_before_compute"]``: the MIP does not price the first fill, the driver's
fill search (``cosa.mip.fill``) does, so the schedule it returns is never slower, with the fill counted, than
the one it returns without the option."""

import dataclasses

import pytest

import workloads
from costmodel import evaluate, preset
from cosa.scheduler import schedule


@pytest.mark.parametrize("room", [False, True])
def test_schedule_with_the_fill_is_no_slower_once_the_fill_counts(room):
    w = workloads.matmul("qkv", M=128, N=2304, K=768)
    simba = preset("simba")
    base = dataclasses.replace(simba, params={**simba.params, "refill_needs_room": room})
    fill = dataclasses.replace(base, params={**base.params, "fill_before_compute": True})
    without = schedule(w, base, time_limit_s=30, bound=False, seed=0)
    with_fill = schedule(w, fill, time_limit_s=30, bound=False, seed=0)
    priced = evaluate(w, fill, without.mapping)
    assert priced.fill_cycles > 0
    assert with_fill.cost.cycles == evaluate(w, fill, with_fill.mapping).cycles
    assert with_fill.cost.cycles <= priced.cycles
