"""targets.cpu ragged tiles: a mapping of a nest padded along one dim runs on the nest as written, its last
kernel tile cut to the bound, and verifies; fused 1x1 convolutions run on the original arrays."""

import random

import numpy as np
import pytest

import costmodel
import workloads
from cosa.baselines.mapspace import MapSpace, random_mapping
from mappings import LevelMapping, Mapping, MappingError

from targets.cpu import compile_kernel, kernel_nest, make_plan, run
from targets.cpu.plan import kernel_level, stored_shape
from targets.cpu.reference import random_inputs, reference

ARCH = costmodel.preset("cpu")


def _ragged_mappings(workload, dim, padded, count, seed=0):
    """``count`` random mappings of ``workload`` padded to ``padded`` along ``dim`` whose last kernel tile
    alone reaches past the bound."""
    rng = random.Random(seed)
    layer = workload.with_dims(**{dim: padded})
    space = MapSpace(layer, ARCH)
    out = []
    for _ in range(400):
        m = random_mapping(layer, ARCH, rng, space=space)
        extent = m.tile_extents(kernel_level(m, ARCH), [dim])[dim]
        if padded - workload.dims[dim] < extent:
            out.append(m)
        if len(out) == count:
            return out
    raise AssertionError(f"no ragged mapping of {workload.name} along {dim}")


CASES = [
    (workloads.matmul("gemm_n", M=24, N=100, K=18, bits=32), "N", 112),   # the vector dim
    (workloads.matmul("gemm_m", M=20, N=32, K=18, bits=32), "M", 24),     # the register block's rows
    (workloads.matmul("gemm_k", M=12, N=32, K=18, bits=64), "K", 20),     # a reduction dim
    (kernel_nest(workloads.conv2d("conv1x1", C=8, K=16, H=10, W=10, R=1, S=1, bits=32)), "QP", 112),
]


@pytest.mark.parametrize("workload,dim,padded", CASES, ids=lambda c: getattr(c, "name", str(c)))
def test_ragged_mappings_verify(workload, dim, padded):
    for m in _ragged_mappings(workload, dim, padded, 2):
        result = run(workload, m, ARCH, threads=2, repeat=1)
        assert result.verified, (result.max_abs_err, m)
        assert make_plan(workload, m, ARCH).ragged == {dim: padded}


def test_the_cut_tile_is_a_branch_of_the_kernel():
    w = workloads.matmul("gemm", M=8, N=100, K=8, bits=32)
    m = Mapping((LevelMapping(temporal={"N": 2}), LevelMapping(), LevelMapping(),
                 LevelMapping(temporal={"M": 8, "K": 8, "N": 4}, spatial={"N": 16})))
    k = compile_kernel(w, m, ARCH)
    assert k.plan.ragged == {"N": 128}
    assert "+ 64 <= 100)" in k.source   # the full tile, else the last one: 36 columns
    arrays = random_inputs(w, k.plan.dtypes, k.plan.shapes, 0)
    out = np.full((8, 100), np.nan, dtype=np.float32)
    k(arrays, out, threads=1)
    np.testing.assert_allclose(out, reference(w, arrays, k.plan.shapes, "float32"), rtol=1e-5, atol=1e-5)


def test_ragged_mappings_that_leave_an_empty_tile_or_two_ragged_dims_are_refused():
    w = workloads.matmul("gemm", M=8, N=40, K=8, bits=32)
    empty = Mapping((LevelMapping(temporal={"N": 4}), LevelMapping(), LevelMapping(),
                     LevelMapping(temporal={"M": 8, "K": 8}, spatial={"N": 16})))   # 64 = 40 + a tile of 16 + 8
    with pytest.raises(MappingError, match="ragged, and it would be empty"):
        make_plan(w, empty, ARCH)
    two = Mapping((LevelMapping(temporal={"N": 3}), LevelMapping(), LevelMapping(),
                   LevelMapping(temporal={"M": 9, "K": 8}, spatial={"N": 16})))
    with pytest.raises(MappingError, match="only one dim"):
        make_plan(w, two, ARCH)


def test_a_fused_convolution_runs_on_the_original_arrays():
    w = workloads.conv2d("conv1x1", C=8, K=16, H=10, W=10, R=1, S=1, bits=32)
    f = kernel_nest(w)
    assert f.dims == {"K": 16, "C": 8, "QP": 100}
    m = _ragged_mappings(f, "QP", 112, 1, seed=3)[0]
    k = compile_kernel(f, m, ARCH)
    original = random_inputs(w, {t.name: "float32" for t in w.tensors},
                             {t.name: stored_shape(t, w.dims) for t in w.tensors}, 0)
    fused = {name: a.reshape(k.plan.shapes[name]) for name, a in original.items()}
    assert all(np.shares_memory(fused[n], original[n]) for n in original)
    out = k(fused, threads=2)
    want = np.einsum("kc,cqp->kqp", original["Weights"].reshape(16, 8), original["Inputs"].reshape(8, 10, 10))
    np.testing.assert_allclose(out.reshape(16, 10, 10), want, rtol=1e-5, atol=1e-5)
