"""workloads.fusion: fused dims address the same memory in the same order; what may not fuse does not."""

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

import workloads
from workloads.fusion import fusable, fuse_all, squeeze, subsample


def _shape(t, bounds):
    return t.shape or tuple(e.value_range(bounds)[1] + 1 for e in t.indices)


def _stored(nest, name: str, flat: int) -> int:
    """The flat address in the stored tensor of word ``flat`` of the tensor ``name`` as ``nest`` reads it:
    the word itself, or for a subsampled tensor (``subsample``) the stored word its copy holds."""
    how = nest.op.get("subsampled", {}).get(name)
    if how is None:
        return flat
    at, rest = [], flat
    for size in reversed(how["copy_shape"]):
        at.append(rest % size)
        rest //= size
    out = 0
    for v, s, size in zip(reversed(at), how["strides"], how["shape"]):
        out = out * size + v * s
    return out


def _accesses(nest):
    """The sorted list over the nest's points of the flat C-order address each tensor (by name) reads
    there, in the stored tensor (``_stored``): two nests with equal lists run the same multiply-adds on the
    same memory."""
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
            row.append(_stored(nest, name, flat))
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


def test_a_strided_1x1_convolution_reads_a_strided_copy_whose_pixels_fuse():
    w = workloads.load_one("resnet50/res5a_branch1")  # 1024 -> 2048 channels, 14 x 14 -> 7 x 7, stride 2
    sub = subsample(w)
    assert sub.op["subsampled"] == {"Inputs": {"strides": [1, 1, 2, 2], "shape": [1, 1024, 14, 14],
                                               "copy_shape": [1, 1024, 7, 7]}}
    f = fuse_all(sub)
    assert f.dims == {"K": 2048, "C": 1024, "QP": 49} and f.tensor("Inputs").shape == (1, 1024, 49)
    for name in ("resnet50/res4b_branch2a", "resnet50/res3a_branch2b"):  # no stride; a stride with a window
        plain = workloads.load_one(name)
        assert subsample(plain) is plain


@settings(max_examples=25, deadline=None)
@given(c=st.integers(1, 3), k=st.integers(1, 3), h=st.integers(1, 7), w=st.integers(1, 7), n=st.integers(1, 2),
       stride=st.sampled_from([1, 2, 3]), pad=st.sampled_from([0, 1]))
def test_the_strided_copy_keeps_every_access_of_a_1x1_convolution(c, k, h, w, n, stride, pad):
    nest = workloads.conv2d("c", C=c, K=k, H=h, W=w, R=1, S=1, N=n, stride=stride, padding=pad)
    sub = subsample(nest)
    fused = fuse_all(sub)
    assert fused.macs == nest.macs
    assert _accesses(fused) == _accesses(nest)  # the same multiply-adds on the same stored words
    if stride > 1 and pad == 0 and nest.dims["P"] > 1:
        assert "subsampled" in sub.op
