"""What the gpu target refuses, in one line naming the reason; the reference and the check can fail."""

import itertools
import tempfile

import numpy as np
import pytest

import costmodel
import workloads as W
from mappings import LevelMapping, Mapping, MappingError
from targets.gpu import GpuError, build_kernel, emit
from targets.gpu import cuda, opencl
from targets.cpu.reference import compare, random_inputs, reference
from targets.gpu.layout import array_shape
from workloads import WorkloadError, tensor
from workloads.dtypes import apply_dtype

ARCH = costmodel.preset("gpu", sms=4, lanes_per_sm=16, shared_kib=4, register_words=16)
GEMM = W.matmul("gemm", M=8, N=8, K=4, bits=32)


def _one_line(exc) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def _flat(nest, level=0):
    """Every factor at one level (valid on the gpu preset: DRAM is unbounded)."""
    levels = [LevelMapping() for _ in ARCH.levels]
    levels[level] = LevelMapping(temporal=dict(nest.dims))
    return Mapping(tuple(levels))


def test_not_a_gpu_arch():
    with pytest.raises(GpuError) as exc:
        build_kernel(GEMM, costmodel.preset("gemmini"), _flat(GEMM))
    assert "needs 4 levels" in _one_line(exc)


def test_invalid_mapping_for_the_arch():
    levels = [LevelMapping() for _ in ARCH.levels]
    levels[1] = LevelMapping(spatial={"M": 8})  # 8 blocks on a 4-block machine
    levels[0] = LevelMapping(temporal={"N": 8, "K": 4})
    with pytest.raises(MappingError) as exc:
        emit(GEMM, ARCH, Mapping(tuple(levels)), "opencl")
    assert "fanout is 4" in _one_line(exc)


def test_output_index_not_one_to_one():
    nest = W.LoopNest("transposed", {"P": 4, "R": 3}, (
        tensor("In", ["P"], "input", bits=32), tensor("Wt", ["R"], "weight", bits=32),
        tensor("Out", ["P + R"], "output", bits=32)))
    with pytest.raises(GpuError) as exc:
        build_kernel(nest, ARCH, _flat(nest))
    assert "not one-to-one" in _one_line(exc)


def test_mixed_number_types():
    nest = apply_dtype(GEMM, {"input": "float32", "weight": "float32", "output": "float64"}, False, "t", "dtype")
    with pytest.raises(GpuError) as exc:
        build_kernel(nest, ARCH, _flat(nest))
    assert "mixed number types" in _one_line(exc)


def test_word_size_without_a_number_type():
    nest = W.matmul("half", M=4, N=4, K=4, bits=16)
    with pytest.raises(WorkloadError) as exc:
        build_kernel(nest, ARCH, _flat(nest))
    assert "16-bit" in _one_line(exc)


def test_unknown_language():
    with pytest.raises(GpuError) as exc:
        emit(GEMM, ARCH, _flat(GEMM), "metal")
    assert "unknown language" in _one_line(exc)


def test_missing_opencl_platform_names_the_package(monkeypatch):
    import pyopencl

    opencl.context.cache_clear()
    monkeypatch.setattr(pyopencl, "get_platforms", lambda: [])
    try:
        with pytest.raises(GpuError) as exc:
            opencl.context()
        assert "pocl-opencl-icd" in _one_line(exc)
    finally:
        opencl.context.cache_clear()


def test_missing_nvcc_names_the_package(monkeypatch):
    monkeypatch.delenv("NVCC", raising=False)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(GpuError) as exc:
        cuda.nvcc()
    assert "nvidia-cuda-toolkit" in _one_line(exc)


def test_compiler_failures_name_the_log(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the logs a failed build keeps for its user
    with pytest.raises(GpuError) as exc:
        cuda.compile_cuda('extern "C" __global__ void broken( {', "ptx")
    text = _one_line(exc)
    assert exc.value.exit_code == 1 and "nvcc failed" in text
    assert "error" in open(text.rsplit("full log in ", 1)[1]).read()
    with pytest.raises(GpuError) as exc:
        opencl.build("__kernel void broken( {")
    text = _one_line(exc)
    assert exc.value.exit_code == 1 and "full log in" in text


def _brute_force(nest, inputs):
    """The nest's loops, one point at a time (padding reads zero)."""
    out_t = nest.output
    shape = [max(e.value_range(nest.dims)[1] + 1, 1) for e in out_t.indices]
    out = np.zeros(shape)
    for point in itertools.product(*(range(b) for b in nest.dims.values())):
        env = dict(zip(nest.dims, point))
        prod = 1.0
        for t in nest.inputs:
            idx = tuple(e.evaluate(env) for e in t.indices)
            arr = inputs[t.name]
            prod *= float(arr[idx]) if all(0 <= i < n for i, n in zip(idx, arr.shape)) else 0.0
        out[tuple(e.evaluate(env) for e in out_t.indices)] += prod
    return out


@pytest.mark.parametrize("nest", [
    W.conv2d("c", C=4, K=2, H=5, W=6, R=3, S=2, stride=(2, 1), dilation=(1, 2), padding=(1, 2), groups=2, bits=32),
    W.einsum("ijk,jr,kr->ir", {"i": 3, "j": 2, "k": 4, "r": 2}, bits=32),
    W.einsum("ii,ij->j", {"i": 3, "j": 4}, bits=32),
], ids=["conv", "mttkrp", "diagonal"])
def test_shared_reference_equals_the_loops(nest):
    """The NumPy reference every target is checked against (targets.cpu.reference) equals the nest's loops."""
    types = {t.name: "float32" for t in nest.tensors}
    shapes = {t.name: array_shape(t, nest.dims) for t in nest.tensors}
    inputs = random_inputs(nest, types, shapes, seed=3)
    np.testing.assert_allclose(reference(nest, inputs, shapes, "float32"), _brute_force(nest, inputs), rtol=1e-12,
                               atol=1e-12)


def test_compare_rejects_a_wrong_element():
    ref = np.linspace(-2, 2, 12).reshape(3, 4)
    assert compare(ref.astype(np.float32), ref, "float32")[0]
    bad = ref.astype(np.float32)
    bad[1, 2] += 1e-3
    assert not compare(bad, ref, "float32")[0]
    assert not compare(np.array([1, 2], dtype=np.int32), np.array([1, 3]), "int32")[0]


def test_cuda_static_shared_memory_limit():
    big = costmodel.preset("gpu", shared_kib=96)
    nest = W.matmul("big", M=64, N=64, K=96, bits=32)
    levels = [LevelMapping() for _ in big.levels]
    levels[2] = LevelMapping(temporal=dict(nest.dims))  # the whole problem (64 KiB) staged in shared memory
    mapping = Mapping(tuple(levels))
    assert "__local" in emit(nest, big, mapping, "opencl")[1]
    with pytest.raises(GpuError) as exc:
        emit(nest, big, mapping, "cuda")
    assert "static shared arrays" in _one_line(exc)


def test_names_that_clash_with_c_or_the_kernel_locals():
    nest = W.LoopNest("main", {"i": 4, "tid": 3}, (
        tensor("int", ["i", "tid"], "input", bits=32), tensor("i", ["tid"], "weight", bits=32),
        tensor("tid", ["i"], "output", bits=32)))
    levels = [LevelMapping() for _ in ARCH.levels]
    levels[1] = LevelMapping(spatial={"i": 2})
    levels[2] = LevelMapping(spatial={"tid": 3}, temporal={"i": 2})
    mapping = Mapping(tuple(levels))
    from targets.gpu import run

    assert run(nest, ARCH, mapping, "opencl", optimize=False).verified
    cuda.compile_cuda(emit(nest, ARCH, mapping, "cuda")[1], "ptx")
