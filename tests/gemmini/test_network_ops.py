"""The host operators of an int8 network (``gemmini.network_ops``) against ONNX Runtime itself, operator by
operator, on every input pair where the operator has two int8 inputs; and the once-rounded float32 sum they
rest on against exact rational arithmetic."""

from __future__ import annotations

import platform
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from gemmini import network_ops as ops

ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (the 'onnxruntime' extra)")
onnx = pytest.importorskip("onnx")


def _avx2() -> bool:
    """ONNX Runtime's QLinearAdd rounds as ``network_ops`` documents on x86-64 hosts with AVX2 (its kernel)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.is_file() and " avx2" in cpuinfo.read_text()


def _round_f32(value: Fraction) -> np.float32:
    """``value`` rounded once to float32, half to even (exact: the nearest of the neighbours of a guess)."""
    guess = np.float32(float(value))
    cands = {guess, np.nextafter(guess, np.float32(np.inf)), np.nextafter(guess, np.float32(-np.inf))}
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - value), int(np.float32(c).view(np.int32)) & 1))
    return np.float32(best)


def test_the_fused_sum_rounds_once():
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, 4000).astype(np.float64)
    ratio = np.float32(rng.uniform(0.3, 3.0))
    x = a * np.float64(ratio)
    t = (rng.integers(-128, 128, 4000).astype(np.float32) * np.float32(rng.uniform(0.3, 3.0))).astype(np.float64)
    # and terms far apart in magnitude, whose float64 sum is inexact (the two-sum correction's case)
    x[:50] = np.float64(np.float32(1.5)) * 2.0 ** 30
    t[:50] = (np.arange(50) + 0.5) * 2.0 ** -30
    got = ops.fused_add_f32(x, t)
    want = np.array([_round_f32(Fraction(float(xi)) + Fraction(float(ti))) for xi, ti in zip(x, t)], np.float32)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))


def _qlinear_add_model(sa, sb, sc, n) -> bytes:
    h, tp = onnx.helper, onnx.TensorProto
    inits = [h.make_tensor(name, tp.FLOAT, [], [float(v)]) for name, v in (("sa", sa), ("sb", sb), ("sc", sc))]
    inits += [h.make_tensor(name, tp.INT8, [], [0]) for name in ("za", "zb", "zc")]
    node = h.make_node("QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"], domain="com.microsoft")
    graph = h.make_graph([node], "qladd", [h.make_tensor_value_info("a", tp.INT8, [n]),
                                          h.make_tensor_value_info("b", tp.INT8, [n])],
                         [h.make_tensor_value_info("y", tp.INT8, [n])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)])
    return model.SerializeToString()


#: Scale triples where rounding ``a * ra`` before the sum changes two of the 65,536 pairs (found by a seeded
#: search), and one where it changes none.
DECIDING = [(0.08872418105602264, 0.053517118096351624, 0.0377080962061882),
            (0.08177299052476883, 0.05144037306308746, 0.09892605990171432),
            (0.05555524677038193, 0.0822581872344017, 0.09971597790718079)]


@pytest.mark.skipif(not _avx2(), reason="ONNX Runtime's AVX2 QLinearAdd kernel needs an x86-64 host with AVX2")
@pytest.mark.parametrize("scales", DECIDING + [(0.031, 0.047, 0.052)])
def test_qlinear_add_equals_onnxruntime_on_every_pair(scales):
    sa, sb, sc = (np.float32(s) for s in scales)
    a, b = (g.ravel().astype(np.int8) for g in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(_qlinear_add_model(sa, sb, sc, a.size), options,
                                   providers=["CPUExecutionProvider"])
    want = session.run(["y"], {"a": a, "b": b})[0]
    got = ops.qlinear_add(a, sa, b, sb, sc)
    assert np.array_equal(got, want), f"{int(np.count_nonzero(got != want))} of {a.size} pairs differ"


@pytest.mark.parametrize("scales", DECIDING)
def test_the_fused_rounding_is_what_decides_some_pairs(scales):
    """The ONNX Runtime check above can fail: rounding ``a * ra`` first gives another result on some pairs."""
    sa, sb, sc = (np.float32(s) for s in scales)
    a, b = (g.ravel() for g in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)))
    ra, rb = sa / sc, sb / sc
    unfused = np.clip(np.rint(a.astype(np.float32) * ra + b.astype(np.float32) * rb), -128, 127)
    assert np.count_nonzero(ops.qlinear_add(a.astype(np.int8), sa, b.astype(np.int8), sb, sc) != unfused) == 2


def _dequantized_global_average_pool_model(shape, scale) -> bytes:
    """int8 -> DequantizeLinear -> Relu -> GlobalAveragePool: where the quantizer leaves the pool float in the
    networks (a float GlobalAveragePool on a graph input runs another ONNX Runtime kernel, in another order)."""
    h, tp = onnx.helper, onnx.TensorProto
    inits = [h.make_tensor("s", tp.FLOAT, [], [float(scale)]), h.make_tensor("z", tp.INT8, [], [0])]
    nodes = [h.make_node("DequantizeLinear", ["x", "s", "z"], ["f"]), h.make_node("Relu", ["f"], ["r"]),
             h.make_node("GlobalAveragePool", ["r"], ["y"])]
    graph = h.make_graph(nodes, "gap", [h.make_tensor_value_info("x", tp.INT8, list(shape))],
                         [h.make_tensor_value_info("y", tp.FLOAT, list(shape[:2]) + [1, 1])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="MLAS's summation order is its x86 kernel's")
@pytest.mark.parametrize("shape", [(1, 1280, 7, 7), (2, 64, 14, 14), (1, 32, 5, 3), (1, 8, 1, 2)])
def test_global_average_pool_equals_onnxruntime_bit_for_bit(shape):
    scale = np.float32(0.0371)
    x = np.random.default_rng(5).integers(-128, 128, shape).astype(np.int8)
    session = ort.InferenceSession(_dequantized_global_average_pool_model(shape, scale),
                                   providers=["CPUExecutionProvider"])
    want = session.run(["y"], {"x": x})[0]
    f = np.maximum(ops.dequantize_linear(x, scale), np.float32(0))
    got = ops.global_average_pool(f)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))
    # the order matters: a plain sequential sum differs from ONNX Runtime on these
    seq = (np.add.accumulate(f.reshape(shape[0], shape[1], -1), axis=2, dtype=np.float32)[:, :, -1]
           / np.float32(shape[2] * shape[3])).reshape(got.shape)
    if shape[2] * shape[3] >= 15:
        assert not np.array_equal(seq.view(np.int32), want.view(np.int32))
