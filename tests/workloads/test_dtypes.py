"""Number types in the IR: the short form's dtype, its agreement with bits, what bits mean per target."""

import pytest

import workloads
from workloads import WorkloadError, resolve_dtype
from workloads.loaders import parse_yaml_text


def _one(text):
    return parse_yaml_text(text, "layer", "layer.yaml")[0]


def test_dtype_for_all_tensors_sets_bits():
    nest = _one("kind: matmul\nM: 4\nN: 4\nK: 4\ndtype: float64\n")
    assert [(t.dtype, t.bits) for t in nest.tensors] == [("float64", 64)] * 3


def test_dtype_by_role_and_round_trip():
    nest = _one("kind: conv2d\nC: 4\nK: 4\nH: 5\nW: 5\nR: 3\nS: 3\n"
                "dtype: {input: int8, weight: int8, output: int32}\n")
    assert {t.role: (t.dtype, t.bits) for t in nest.tensors} == {
        "input": ("int8", 8), "weight": ("int8", 8), "output": ("int32", 32)}
    assert _one(workloads.dump_short(nest)) == nest


def test_einsum_list_and_loopnest_per_tensor():
    nest = _one("kind: einsum\nspec: 'ik,kj->ij'\nbounds: {i: 2, j: 3, k: 4}\n"
                "dtype: [float32, float32, float64]\n")
    assert [t.dtype for t in nest.tensors] == ["float32", "float32", "float64"]
    nest = _one("kind: loopnest\ndims: {i: 4, k: 3}\ndtype: float32\ntensors:\n"
                "  - {name: A, indices: [i, k]}\n  - {name: x, indices: [k], dtype: float64}\n"
                "  - {name: y, role: output, indices: [i]}\n")
    assert [(t.dtype, t.bits) for t in nest.tensors] == [("float32", 32), ("float64", 64), ("float32", 32)]
    assert _one(workloads.dump_short(nest)) == nest


@pytest.mark.parametrize("doc, field", [
    ("kind: matmul\nM: 4\nN: 4\nK: 4\ndtype: float16\n", "field 'dtype'"),
    ("kind: matmul\nM: 4\nN: 4\nK: 4\ndtype: {input: int4}\n", "field 'dtype.input'"),
    ("kind: matmul\nM: 4\nN: 4\nK: 4\nbits: 8\ndtype: float32\n", "field 'dtype"),
    ("kind: loopnest\ndims: {i: 4}\ntensors:\n  - {name: y, role: output, indices: [i], dtype: int9}\n",
     "field 'tensors.y.dtype'"),
])
def test_bad_dtype_names_file_and_field(doc, field):
    with pytest.raises(WorkloadError) as err:
        _one(doc)
    assert "layer.yaml" in str(err.value) and field in str(err.value)


def test_bits_only_mean_float_on_cpu_and_int_on_gemmini():
    nest = workloads.matmul(M=2, N=2, K=2, bits={"input": 8, "weight": 8, "output": 32})
    assert nest.tensors[0].dtype is None
    assert resolve_dtype(nest.output, "gemmini") == "int32"
    assert resolve_dtype(nest.output, "cpu") == "float32"
    assert resolve_dtype(nest.tensors[0], "cpu") == "int8"
    with pytest.raises(WorkloadError, match="16-bit"):
        resolve_dtype(workloads.matmul(M=2, N=2, K=2, bits=16).output, "cpu")
    with pytest.raises(WorkloadError, match="field 'dtype'"):
        workloads.tensor("x", ["i"], bits=8, dtype="float32")
