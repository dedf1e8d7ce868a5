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


def test_an_input_loaded_once_is_tried(monkeypatch):
    """BERT's attention context (softmax(QK) V, batch 12) on Simba under ZigZag's rules: a tile loaded once in
    the run leaves the loops' DRAM transfers for the first fill, which the MIP does not price; the driver's
    re-solve with an input loaded once finds a faster schedule (29,568 cycles against 30,336 without it)."""
    import cosa.mip.driver as driver
    from costmodel.onload import once_loaded

    w = workloads.zoo.layer("bert_base_128/attention_context")
    simba = preset("simba")
    arch = dataclasses.replace(simba, params={**simba.params, "refill_needs_room": True,
                                              "fill_before_compute": True, "whole_windows": True})
    found = schedule(w, arch, time_limit_s=30, bound=False, seed=0)
    monkeypatch.setattr(driver, "once_loaded_fills", lambda *args, **kwargs: ([], 0.0))
    without = schedule(w, arch, time_limit_s=30, bound=False, seed=0)
    assert found.cost.cycles < without.cost.cycles
    assert found.cost.cycles == evaluate(w, arch, found.mapping).cycles
    first_holders = {t.name: next(i for i in range(1, len(arch.levels)) if found.mapping.stores(i, t, arch))
                     for t in w.tensors if not t.is_output}
    assert any((name, level) in once_loaded(w, arch, found.mapping) for name, level in first_holders.items())
