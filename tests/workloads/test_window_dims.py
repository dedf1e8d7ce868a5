"""Sliding windows versus mixed-radix sums: which dims ``LoopNest.window_dims`` names."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import preset
from cosa.scheduler import schedule
from workloads import conv2d
from workloads.ir import AffineExpr, _disjoint_terms


def test_convolution_windows_and_grouped_channels():
    plain = conv2d(C=8, K=8, H=8, W=8, R=3, S=3, padding=1)
    assert plain.window_dims() == {"P", "Q", "R", "S"}
    grouped = conv2d(C=12, K=12, H=8, W=8, R=3, S=3, padding=1, groups=3)
    assert grouped.window_dims() == {"P", "Q", "R", "S"}  # G*Cg + C is not a window: G, C, K stay free
    patches = conv2d(C=8, K=8, H=8, W=8, R=2, S=2, stride=2)  # stride = kernel: windows never overlap
    assert patches.window_dims() == frozenset()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 4)), min_size=2, max_size=3))
def test_disjoint_terms_are_injective(terms):
    dims = [f"d{i}" for i in range(len(terms))]
    expr = AffineExpr(tuple((d, c) for d, (c, _) in zip(dims, terms)))
    bounds = {d: b for d, (_, b) in zip(dims, terms)}
    if not _disjoint_terms(expr, bounds):
        return
    values = [sum(c * v for (c, _), v in zip(terms, point))
              for point in itertools.product(*(range(b) for _, b in terms))]
    assert len(set(values)) == len(values)


def test_grouped_layers_use_the_array():
    """With the group index free, the MIP unrolls C and K of a grouped layer on the array (before: nothing
    could go there, 0.4% utilization), and the program it becomes is bit-exact."""
    from gemmini import generate, run_program

    arch = preset("gemmini")
    layer = conv2d("g3x3", C=48, K=96, H=8, W=8, R=3, S=3, padding=1, groups=3)
    sched = schedule(layer, arch, scheduler="cosa", time_limit_s=10)
    spatial = {d: f for lm in sched.mapping.levels for d, f in lm.spatial.items() if f > 1}
    assert spatial.get("C", 1) * spatial.get("K", 1) >= 64
    assert sched.cost.utilization > 0.3
    assert run_program(generate(layer, sched.mapping, arch)).verified
