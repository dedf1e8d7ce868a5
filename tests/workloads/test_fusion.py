"""workloads.fusion: fused dims address the same memory in the same order; what may not fuse does not."""

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

import workloads
from workloads.fusion import fusable, fuse_all, squeeze


def _shape(t, bounds):
    return t.shape or tuple(e.value_range(bounds)[1] + 1 for e in t.indices)


def _accesses(nest):
    """The sorted list over the nest's points of the flat C-order address each tensor (by name) reads
    there: two nests with equal lists run the same multiply-adds on the same memory."""
    dims = list(nest.dims)
    names = sorted(t.name for t in nest.tensors)
    out = []
    for point in itertools.product(*(range(nest.dims[d]) for d in dims)):
        at = dict(zip(dims, point))
        row = []
        for name in names:
            t = nest.tensor(name)
            flat = 0
            for e, size in zip(t.indices, _shape(t, nest.dims)):
                flat = flat * size + e.evaluate(at)
            row.append(flat)
        out.append(tuple(row))
    return sorted(out)


def test_a_1x1_convolution_fuses_its_pixels_and_a_3x3_one_does_not():
    f = fuse_all(workloads.load_one("resnet50/res4b_branch2a"))
    assert f.dims == {"K": 256, "C": 1024, "QP": 196}
    assert f.tensor("Inputs").shape == (1, 1024, 196)
    assert f.op["fused_dims"] == {"QP": ["Q", "P"]}
    for name in ("resnet50/res4b_branch2b", "resnet50/res3a_branch1"):  # a window; a stride
        w = workloads.load_one(name)
        assert fuse_all(w) is w
    g = workloads.matmul("g", M=4, N=5, K=6)
    assert fuse_all(g) is g


def test_a_dim_on_one_tensor_only_or_a_padded_axis_keeps_dims_apart():
    w = workloads.einsum("ab,ab->a", {"a": 3, "b": 4}, name="rowdot")  # b is a reduction: not in the output
    assert not fusable(w, "a", "b")
    padded = workloads.conv2d("c", C=2, K=3, H=5, W=5, R=1, S=1, padding=1)
    assert fuse_all(padded) is padded


@settings(max_examples=25, deadline=None)
@given(c=st.integers(1, 3), k=st.integers(1, 3), h=st.integers(1, 4), w=st.integers(1, 4), n=st.integers(1, 2),
       stride=st.sampled_from([1, 2]), pad=st.sampled_from([0, 1]))
def test_fusion_keeps_every_access_of_a_1x1_convolution(c, k, h, w, n, stride, pad):
    nest = workloads.conv2d("c", C=c, K=k, H=h, W=w, R=1, S=1, N=n, stride=stride, padding=pad)
    fused = fuse_all(nest)
    assert fused.macs == nest.macs
    for t in nest.tensors:
        assert math.prod(_shape(t, nest.dims)) == math.prod(_shape(fused.tensor(t.name), fused.dims))
    assert _accesses(fused) == _accesses(nest)  # the same multiply-adds on the same memory
    if stride == 1 and pad == 0 and h > 1 and w > 1:
        assert len(fused.dims) < len(squeeze(nest).dims)
