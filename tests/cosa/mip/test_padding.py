"""Padded layers: a dim rounded up so its factors fill the spatial fan-out (``cosa.mip.padding``)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosa import SchedulingError, schedule
from cosa.mip.padding import best_fill, candidates
from cosa.mip.problem import SpatialSlot, build_problem
from costmodel import evaluate, preset
from mappings import validate
from workloads import matmul
from workloads.divisors import divisors


def _brute_fill(bounds, slots):
    """Every per-slot, per-dim divisor choice: the largest product that fits."""
    best = 1
    choices = []
    for s in slots:
        choices.append([dict(zip(s.dims, fs)) for fs in itertools.product(*(divisors(bounds[d]) for d in s.dims))
                        if math.prod(fs) <= s.size])
    for pick in itertools.product(*choices):
        used = {d: 1 for d in bounds}
        for per in pick:
            for d, f in per.items():
                used[d] *= f
        if all(bounds[d] % used[d] == 0 for d in bounds):
            best = max(best, math.prod(math.prod(per.values()) for per in pick))
    return best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=2, max_size=3), st.lists(st.integers(2, 24), min_size=1, max_size=2),
       st.randoms(use_true_random=False))
def test_best_fill_is_the_largest_product_any_choice_of_spatial_factors_reaches(bounds, sizes, rnd):
    dims = {f"D{i}": b for i, b in enumerate(bounds)}
    slots = [SpatialSlot(k, "fanout", size, tuple(d for d in dims if rnd.random() < 0.8) or tuple(dims))
             for k, size in enumerate(sizes)]
    assert best_fill(dims, slots) == _brute_fill(dims, slots)


def test_a_dim_without_the_arrays_prime_is_padded_to_one_that_has_it():
    # Eyeriss has 168 = 2^3 * 3 * 7 PEs; 16 x 96 x 32 = 2^14 * 3 fills at most 128 of them
    w, arch = matmul("mm", M=16, N=96, K=32), preset("eyeriss")
    slots = build_problem(w, arch).slots
    assert best_fill(w.dims, slots) == 128
    got = candidates(w, slots, max_growth=0.125)
    assert got and got[0].fill == 168 and all(p.score > 128 for p in got)
    for p in got:
        (d, (bound, padded)), = p.dims.items()
        assert bound == w.dims[d] and bound < padded <= bound * 1.125
    assert candidates(w, slots, max_growth=0.0) == []


def test_the_scheduler_keeps_a_padded_layer_only_when_the_cost_model_says_it_is_faster():
    w, arch = matmul("mm", M=64, N=96, K=256), preset("eyeriss")  # compute-bound: 128 of 168 PEs busy
    plain = schedule(w, arch, bound=False)
    padded = schedule(w, arch, bound=False, pad=0.125)
    tried = padded.extra["pad_tried"]
    assert tried[0]["padded"] == {} and tried[0]["objective"] == plain.cost.cycles and len(tried) > 1
    assert padded.cost.cycles == min(t["objective"] for t in tried) < plain.cost.cycles
    d, (bound, to) = next(iter(padded.extra["padded"].items()))
    assert padded.workload.dims[d] == to and w.dims[d] == bound
    assert padded.claim().endswith(f"; of the layer padded {d} {bound} -> {to}")  # every report says so
    validate(padded.mapping, padded.workload, arch)
    again = evaluate(padded.workload, arch, padded.mapping)
    assert again.cycles == padded.cost.cycles
    # the real layer's work: utilization and MACs are not inflated by the padding
    assert padded.cost.macs == w.macs
    assert padded.cost.utilization == pytest.approx(w.macs / arch.total_macs_per_cycle / padded.cost.cycles)
    # a layer the array already fills is left as written
    full = matmul("f", M=64, N=84, K=256)
    assert "padded" not in schedule(full, arch, bound=False, pad=0.125).extra


@pytest.mark.parametrize("bad", [-0.1, 1.5, "x", True])
def test_a_bad_pad_is_refused_naming_the_option(bad):
    with pytest.raises(SchedulingError, match="pad must be a fraction") as info:
        schedule(matmul("mm", M=4, N=4, K=4), preset("eyeriss"), bound=False, pad=bad)
    assert info.value.field == "pad" and info.value.exit_code == 2


def test_cosa_schedule_pad_reports_the_padding_and_the_real_layers_roofline(capsys):
    import json

    from cosa.cli import main

    assert main(["schedule", "bert_base_128/qkv_projection", "--arch", "eyeriss", "--pad", "0.125", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (d, (bound, to)), = out["padded"].items()
    assert out["cost"]["cycles"] < 1_572_864  # unpadded: 144 of 168 PEs at best
    assert out["cycles_over_roofline"] == pytest.approx(out["cost"]["cycles"] / out["roofline_cycles"])
    assert out["roofline_cycles"] == pytest.approx(128 * 768 * 2304 / 168)  # the real layer's MACs
    assert main(["schedule", "bert_base_128/qkv_projection", "--arch", "eyeriss", "--pad", "0.1",
                 "--scheduler", "random"]) == 2
    assert "--pad is an option of the cosa scheduler" in capsys.readouterr().err


def test_compare_passes_pad_to_the_mip_only_and_refuses_it_with_measured_runs():
    from cosa import compare

    w, arch = matmul("mm", M=64, N=96, K=256), preset("eyeriss")
    rows = {r.scheduler: r for r in compare([w], arch, ["cosa", "random"], pad=0.125, progress=False,
                                            random_samples=20).rows}
    assert rows["cosa"].extra["padded"] and "padded" not in rows["random"].extra
    assert rows["cosa"].cycles < schedule(w, arch, bound=False).cost.cycles
    assert rows["cosa"].seconds == pytest.approx(sum(t["seconds"] for t in rows["cosa"].extra["pad_tried"]))
    with pytest.raises(SchedulingError, match="--pad and --measure") as info:
        compare([w], arch, ["cosa"], pad=0.125, measure=lambda *a: None, progress=False)
    assert info.value.exit_code == 2
