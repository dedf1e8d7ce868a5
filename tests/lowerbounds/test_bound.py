"""bound / bound_for_arch / bound_curve: what is counted, the report, units and errors."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import Arch, ArchError, Level
from costmodel.presets import gemmini
from lowerbounds import BoundReport, bound, bound_curve, bound_for_arch, compulsory, onchip_bytes, parse_memory
from lowerbounds.counts import touched_words, working_iterations
from workloads import WorkloadError, conv2d, einsum, matmul

JSON_KEYS = {"s_hbl", "khat", "bound_words", "bound_bytes", "compulsory_bytes", "binding", "tile"}


def test_report_json_keys_and_binding():
    rep = bound(matmul(M=256, N=256, K=256), 2 ** 12)
    d = rep.to_dict()
    assert JSON_KEYS <= set(d)
    json.dumps(d)  # plain JSON
    assert d["binding"] in ("lp", "hbl", "compulsory")
    assert d["bound_bytes"] == max(d["lp_bytes"], d["hbl_bytes"], d["compulsory_bytes"])
    assert d["bound_bytes"] == d[f"{d['binding']}_bytes"]
    assert d["s_hbl"] == pytest.approx(1.5) and d["khat"] == pytest.approx(1.5)
    assert d["tile"] == {"M": 64, "N": 64, "K": 64}
    assert rep.ratio(2 * rep.bound_bytes) == pytest.approx(2.0)


def test_large_matmul_segment_bound_beats_the_leading_term():
    """The explicit-constant bound is about sqrt(2) mnk / sqrt(M) for large sizes."""
    n, mem = 2 ** 12, 2 ** 12
    rep = bound(matmul(M=n, N=n, K=n), mem)
    assert rep.binding == "hbl"
    assert rep.lp_bytes == pytest.approx(n ** 3 / math.sqrt(mem) - mem)
    assert 1.40 * n ** 3 / math.sqrt(mem) < rep.hbl_bytes < 1.42 * n ** 3 / math.sqrt(mem)


def test_everything_fits_leaves_compulsory_traffic():
    nest = matmul(M=16, N=16, K=16)
    rep = bound(nest, "1MiB")
    assert rep.binding == "compulsory"
    assert rep.lp_bytes == 0.0 and rep.hbl_bytes == 0.0
    assert rep.bound_bytes == 3 * 256


def test_words_and_bytes_with_mixed_precision():
    nest = matmul(M=512, N=512, K=512, bits={"input": 8, "weight": 8, "output": 32})
    rep = bound(nest, 2 ** 14)
    assert rep.compulsory_bytes == 512 * 512 * (1 + 1 + 4)
    assert rep.compulsory_words == 3 * 512 * 512
    assert rep.memory_words == 2 ** 14  # the narrowest element is one byte
    assert rep.bound_bytes > rep.bound_words  # outputs cost four bytes each
    same = bound(nest, memory_words=2 ** 12)  # 2^12 words of the widest (4-byte) element
    assert same.memory_bytes == 2 ** 14


def test_uniform_words_are_bytes_over_element_size():
    nest = matmul(M=256, N=256, K=256, bits=16)
    rep = bound(nest, 2 ** 12)
    assert rep.bound_words == pytest.approx(rep.bound_bytes / 2)
    assert rep.khat_words == pytest.approx(rep.khat)


def _brute_iterations(nest):
    count = 0
    ranges = [range(b) for b in nest.dims.values()]
    names = list(nest.dims)
    for point in itertools.product(*ranges):
        env = dict(zip(names, point))
        ok = True
        for t in nest.tensors:
            if t.shape is None:
                continue
            for e, extent in zip(t.indices, t.shape):
                if not 0 <= e.evaluate(env) < extent:
                    ok = False
        count += ok
    return count


def _brute_touched(nest, t):
    seen = set()
    names = list(nest.dims)
    for point in itertools.product(*[range(b) for b in nest.dims.values()]):
        env = dict(zip(names, point))
        idx = tuple(e.evaluate(env) for e in t.indices)
        if t.shape is None or all(0 <= i < x for i, x in zip(idx, t.shape)):
            seen.add(idx)
    return len(seen)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2), st.integers(0, 2), st.integers(2, 5),
       st.integers(1, 3))
def test_counts_match_enumeration(stride, filt, dilation, padding, size, channels):
    try:
        nest = conv2d(N=1, C=channels, K=2, H=size + 2, W=size, R=filt, S=1, stride=(1, stride),
                      dilation=(1, dilation), padding=(0, padding))
    except WorkloadError:
        return  # no output for this shape
    assert working_iterations(nest) == _brute_iterations(nest)
    for t in nest.tensors:
        assert touched_words(nest, t) == _brute_touched(nest, t)


def test_padding_and_strides_in_compulsory_traffic():
    # stride 2 with a 1x1 filter reads every other column and row: a quarter of the input
    nest = conv2d(N=1, C=4, K=4, P=4, Q=4, R=1, S=1, stride=2)
    words, _ = compulsory(nest)
    assert touched_words(nest, "Inputs") == 4 * 16 < nest.size_words("Inputs")
    assert words == 4 * 4 + 4 * 16 + 4 * 16


def test_bound_for_arch_uses_all_onchip_storage():
    arch = gemmini()
    registers = arch.level("Registers").capacity_bytes  # one per PE of the 16 x 16 array
    assert onchip_bytes(arch) == 256 * 1024 + 64 * 1024 + 256 * registers
    nest = matmul(M=1024, N=1024, K=1024)
    rep = bound_for_arch(nest, arch)
    assert rep.memory_bytes == onchip_bytes(arch)
    assert rep.bound_bytes == bound(nest, onchip_bytes(arch)).bound_bytes


def test_unbounded_onchip_memory_leaves_compulsory():
    arch = Arch("open", (Level("DRAM"), Level("Buffer")))
    rep = bound_for_arch(matmul(M=64, N=64, K=64), arch)
    assert rep.memory_bytes is None and rep.binding == "compulsory" and rep.khat is None
    assert rep.notes


def test_sparse_nest_claims_only_compulsory():
    nest = einsum("ik,kj->ij", {"i": 64, "j": 64, "k": 64}, density=[0.1, 1.0, 1.0])
    rep = bound(nest, 256)
    assert rep.binding == "compulsory" and rep.lp_bytes == 0.0
    assert rep.compulsory_bytes == pytest.approx(64 * 64 * (0.1 + 1 + 1))


def test_curve_ends_at_compulsory():
    nest = matmul(M=64, N=64, K=64)
    curve = bound_curve(nest)
    assert len(curve.reports) >= 8
    assert curve.memories_bytes == sorted(curve.memories_bytes)
    assert curve.reports[0].binding != "compulsory"
    assert curve.reports[-1].binding == "compulsory"
    assert curve.bounds_bytes[0] > curve.bounds_bytes[-1]
    assert all(isinstance(r, BoundReport) for r in curve.reports)
    custom = bound_curve(nest, ["1KiB", 4096])
    assert custom.memories_bytes == [1024.0, 4096.0]
    assert json.dumps(custom.to_dict())


@pytest.mark.parametrize("text,value", [(65536, 65536.0), ("65536", 65536.0), ("64KiB", 65536.0),
                                        ("64 kib", 65536.0), ("1MiB", 2.0 ** 20), ("32KB", 32000.0),
                                        ("2^15", 2.0 ** 15), (1.5e3, 1500.0)])
def test_parse_memory(text, value):
    assert parse_memory(text) == value


@pytest.mark.parametrize("text", ["lots", "-5", 0, "12 parsecs", True])
def test_parse_memory_rejects(text):
    with pytest.raises(ArchError, match="memory"):
        parse_memory(text)


def test_bad_calls_raise_framework_errors():
    nest = matmul(M=8, N=8, K=8, bits=32)
    with pytest.raises(ArchError, match="exactly one"):
        bound(nest)
    with pytest.raises(ArchError, match="element"):
        bound(nest, 2)
    with pytest.raises(WorkloadError, match="LoopNest"):
        bound("matmul", 1024)
    with pytest.raises(ArchError, match="on-chip"):
        bound_for_arch(nest, Arch("bare", (Level("DRAM"),)))


def test_depthwise_and_grouped_layers_are_bounded():
    """G + C with C = 1 (depthwise) and cg*G + C (grouped) both reduce to small lattices."""
    depthwise = conv2d(N=1, C=32, K=32, P=28, Q=28, R=3, S=3, groups=32, padding=1)
    grouped = conv2d(N=1, C=32, K=64, P=14, Q=14, R=3, S=3, groups=4)
    for nest in (depthwise, grouped):
        rep = bound(nest, 512)
        assert rep.binding in ("lp", "hbl", "compulsory")
        assert rep.bound_bytes >= rep.compulsory_bytes > 0
        assert set(rep.tile) == set(nest.dims)


def test_a_lattice_too_large_falls_back_to_the_projective_relaxation():
    # two different windows over the same pair of dims: four generic planes in Q^3 per block
    from workloads import LoopNest, Tensor
    nest = LoopNest("skew", {"i": 64, "j": 64, "k": 64},
                    (Tensor("A", ("i + j", "k")), Tensor("B", ("i + 2*k", "j")), Tensor("O", ("i", "j + k"), "output")))
    rep = bound(nest, 256)
    assert rep.bound_bytes >= rep.compulsory_bytes > 0
    assert rep.khat is not None and 1.0 <= rep.khat <= math.log(nest.macs, 256)


def test_no_working_iteration_gives_no_segment_term():
    """A layer whose every index falls in the padding has no iteration that touches data: the segment
    term is 0 (it was log(0): a ValueError on a fuzzed ONNX graph)."""
    from lowerbounds.segments import segment_bound

    nest = matmul(M=8, N=8, K=8, bits=8)
    assert segment_bound(nest, 64.0, None, 0) == 0.0
