"""targets.cpu.profile: a kernel built with counters reports the share of its time each packing copy took,
beside the cost model's share, and computes what the plain kernel computes."""

from dataclasses import replace

import numpy as np
import pytest

import costmodel
import workloads
from costmodel.microkernel import kernel_level, spec_of
from costmodel.evaluate import access_counts
from costmodel.packing import copy_fill_cycles, pack_cycles, pack_cycles_by_tensor
from cosa.scheduler import schedule
from workloads.dtypes import apply_dtype

from targets.cpu import build, compile_kernel, emit, kernel_nest
from targets.cpu.plan import arch_for
from targets.cpu.profile import model_shares, profile_packs, profiled_kernel
from targets.cpu.reference import random_inputs


def _case(name, w):
    w = kernel_nest(apply_dtype(w, "float32", False, "test", "dtype"))
    isa = build.isa()
    base = costmodel.preset("cpu")
    base = replace(base, params={**base.params, "pack_cycles_per_word": 0.3})
    arch = arch_for(w, base, registers=(isa.registers, isa.vector_bytes))
    return w, arch, schedule(w, arch, time_limit_s=10, bound=False, seed=0).mapping


@pytest.fixture(scope="module")
def conv():
    return _case("conv", workloads.conv2d("conv", C=32, K=64, H=14, W=14, R=3, S=3, padding=1))


def test_the_plain_kernel_has_no_counters_and_the_profiled_one_times_every_copy(conv):
    w, arch, mapping = conv
    plain = emit(w, mapping, arch)
    kernel, _ = profiled_kernel(w, mapping, arch)
    assert "cosa_ticks" not in plain and "cosa_prof" not in plain
    packs = list(kernel.plan.packs)
    assert packs, "the case should pack an input"
    src = kernel.source
    assert f"cosa_prof[{1 + len(packs)}]" in src  # the call and one slot per packed input
    for n in range(len(packs) + 1):
        assert src.count(f"&cosa_prof[{n}]") == 1


def test_the_profiled_kernel_computes_what_the_plain_one_does(conv):
    w, arch, mapping = conv
    kernel, _ = profiled_kernel(w, mapping, arch)
    plain = compile_kernel(w, mapping, arch)
    arrays = random_inputs(w, kernel.plan.dtypes, kernel.plan.input_shapes, 3)
    assert np.array_equal(kernel(arrays, threads=1), plain(arrays, threads=1))


@pytest.mark.parametrize("threads", [1, 2])
def test_shares_are_measured_for_every_packed_input(conv, threads):
    w, arch, mapping = conv
    prof = profile_packs(w, mapping, arch, threads=threads, repeat=6)
    kernel, _ = profiled_kernel(w, mapping, arch)
    assert set(prof.measured) == set(kernel.plan.packs)
    assert all(0 < s < 1 for s in prof.measured.values()) and 0 < prof.measured_total < 1
    assert prof.seconds > 0 and prof.threads == threads


def test_the_model_share_is_the_copies_cycles_over_the_mappings_cycles(conv):
    w, arch, mapping = conv
    by = pack_cycles_by_tensor(w, mapping, arch, kernel_level(arch), spec_of(arch).pack_cycles_per_word)
    assert sum(by.values()) == pytest.approx(pack_cycles(w, mapping, arch, kernel_level(arch), 0.3))
    shares = model_shares(w, mapping, arch)
    cycles = costmodel.evaluate(w, arch, mapping).cycles
    accesses, _ = access_counts(w, arch, mapping, {})
    fills = {n: sum(copy_fill_cycles(w, arch, mapping, accesses, kernel_level(arch), only={n}).values()) for n in by}
    assert all(f > 0 for f in fills.values())  # every packed input is read from DRAM inside its copies
    assert shares == pytest.approx({n: (c + fills[n]) / cycles for n, c in by.items()})
    assert set(shares) == set(profiled_kernel(w, mapping, arch)[0].plan.packs)


def test_an_arch_without_micro_kernel_facts_has_no_model_share(conv):
    w, _, mapping = conv
    assert model_shares(w, mapping, costmodel.preset("cpu")) == {}


def test_bad_counts_are_refused(conv):
    from targets import TargetError

    w, arch, mapping = conv
    with pytest.raises(TargetError, match="threads and repeat"):
        profile_packs(w, mapping, arch, repeat=0)
