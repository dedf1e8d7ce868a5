"""TVM as a measured peer on the CPU: the loop nest as a TE compute, MetaSchedule's kernel against NumPy,
its rows in ``cosa compare``, and the refusals.

The tests that run TVM skip when the ``tvm`` extra is not installed; the missing-extra path, the refusals
and the rows of a failing or fake peer run without it."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from cosa import SchedulingError, compare
from cosa.compare_peers import measured_rows
from targets import TargetError
from targets.cpu import tvm_peer
from workloads import conv2d, matmul
from workloads.dtypes import apply_dtype

GEMM = apply_dtype(matmul("gemm64", M=64, N=64, K=64), "float32", False, "test", "dtype")
CONV = apply_dtype(conv2d("conv8", N=1, C=3, K=8, H=6, W=5, R=3, S=3, padding=1), "float32", False, "test", "dtype")
GEMM_YAML = "kind: matmul\nname: gemm64\nM: 64\nN: 64\nK: 64\ndtype: float32\n"
FAKE_RUN = {"verified": True, "max_abs_err": 0.0, "seconds": 1e-4, "gflops": 1.0, "tuning_s": 1.0,
            "target": {"kind": "llvm"}, "times_s": [1e-4]}  # a stand-in for a tuned kernel's numbers


def _needs_tvm():
    for name in ("tvm", "tvm.s_tir.meta_schedule", "xgboost", "psutil"):
        pytest.importorskip(name, reason="the tvm extra is not installed (pip install cosa-framework[tvm])")


def test_a_missing_tvm_names_the_extra_and_is_bad_input(monkeypatch, tmp_path, capsys):
    from cosa.cli import main

    monkeypatch.setitem(sys.modules, "tvm", None)  # import tvm now fails
    assert tvm_peer.tvm_version() is None
    with pytest.raises(TargetError, match=r"pip install cosa-framework\[tvm\]") as info:
        tvm_peer.measure(GEMM, trials=2)
    assert info.value.exit_code == 2
    layer = tmp_path / "gemm64.yaml"
    layer.write_text(GEMM_YAML)
    assert main(["compare", str(layer), "--arch", "cpu", "--schedulers", "cosa,tvm", "-q"]) == 2
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1 and "cosa-framework[tvm]" in captured.err
    assert captured.out == ""  # refused before anything was scheduled


def test_tvm_needs_a_cpu_arch_and_a_positive_trial_count(tmp_path, capsys):
    from cosa.cli import main

    layer = tmp_path / "gemm64.yaml"
    layer.write_text(GEMM_YAML)
    assert main(["compare", str(layer), "--arch", "gemmini", "--schedulers", "cosa,tvm", "-q"]) == 2
    assert "not a CPU arch" in capsys.readouterr().err
    assert main(["compare", str(layer), "--arch", "cpu", "--schedulers", "cosa,tvm", "--tvm-trials", "0", "-q"]) == 2
    assert "--tvm-trials" in capsys.readouterr().err
    with pytest.raises(SchedulingError, match="needs a CPU arch"):
        compare([GEMM], "cpu", ["cosa", "tvm"], progress=False)  # a peer named without its runner


def test_peer_rows_sit_beside_the_schedulers_and_a_failure_is_a_row():
    calls = []

    def peer(workload):
        calls.append(workload.name)
        if workload.name == "conv8":
            raise TargetError("TVM failed: RuntimeError: boom", source=f"tvm on {workload.name}", exit_code=1)
        return {"seconds": 2e-5, "verified": True, "gflops": 2 * workload.macs / 2e-5 / 1e9, "tuning_s": 3.5,
                "trials": 4, "times_s": [2e-5]}

    def ours(workload, arch, mapping):
        return {"seconds": 4e-5, "verified": True, "gflops": 2 * workload.macs / 4e-5 / 1e9}

    result = compare([GEMM, CONV], "cpu", ["tvm", "cosa"], progress=False, time_limit_s=10, measure=ours,
                     peers={"tvm": peer})
    assert calls == ["gemm64", "conv8"]
    assert [(r.layer, r.scheduler) for r in result.rows] == [("gemm64", "tvm"), ("gemm64", "cosa"),
                                                             ("conv8", "tvm"), ("conv8", "cosa")]
    good, bad = result.row("gemm64", "tvm"), result.row("conv8", "tvm")
    assert good.ok and good.status == "measured" and good.seconds == 3.5 and good.measured_s == 2e-5
    assert good.measured_verified and math.isnan(good.cycles) and good.extra["trials"] == 4
    assert "times_s" not in good.extra
    assert not bad.ok and "boom" in bad.error and "conv8" in bad.error
    assert result.row("conv8", "cosa").ok  # the other scheduler's row of that layer stands
    recs = {(r["layer"], r["scheduler"]): r for r in measured_rows(result, "tvm")}
    assert recs[("gemm64", "cosa")]["over_peer"] == pytest.approx(0.5)  # ours takes twice TVM's time
    assert recs[("conv8", "cosa")]["over_peer"] is None and recs[("conv8", "tvm")]["gflops"] is None


def test_a_tvm_failure_on_a_layer_is_one_line_not_a_traceback(monkeypatch, tmp_path, capsys):
    from cosa.cli import main

    def broken(*args, **kwargs):
        raise RuntimeError("LLVM said no\nand a long trace")

    monkeypatch.setattr(tvm_peer, "tvm_version", lambda: "0.27")
    monkeypatch.setattr(tvm_peer, "te_compute", lambda workload: (None, None))
    monkeypatch.setattr(tvm_peer, "_tune", broken)
    with pytest.raises(TargetError, match="TVM failed: RuntimeError: LLVM said no$"):
        tvm_peer.tune(GEMM, trials=2)
    layer = tmp_path / "gemm64.yaml"
    layer.write_text(GEMM_YAML)
    assert main(["compare", str(layer), "--arch", "cpu", "--schedulers", "cosa,tvm", "--json", "-q"]) == 1
    captured = capsys.readouterr()
    rows = {r["scheduler"]: r for r in json.loads(captured.out)["rows"]}
    assert rows["tvm"]["status"] == "failed" and "LLVM said no" in rows["tvm"]["error"]
    assert rows["cosa"]["measured_verified"] is True and rows["cosa"]["extra"]["measured"]["threads"] == 1
    assert rows["cosa"]["extra"]["measured"]["levels"][-1] == "Registers"  # as cosa run cpu schedules it
    assert "Traceback" not in captured.err and "and a long trace" not in captured.err


def test_beside_tvm_ours_runs_as_cosa_run_cpu_builds_it_and_tvm_gets_the_layer_as_given(monkeypatch, tmp_path,
                                                                                          capsys):
    """A 14 x 14 1x1 convolution: our kernel on the fused pixels with a ragged last tile (the MIP's option on
    the CPU), measured and verified; the peer tunes the layer as written (plain P and Q)."""
    from cosa.cli import main

    seen = []

    def fake(workload, trials, seed):
        seen.append(dict(workload.dims))
        return tvm_peer.TvmRun(**{**FAKE_RUN, "trials": trials, "seed": seed})

    monkeypatch.setattr(tvm_peer, "require_tvm", lambda source="tvm": "0.27")
    monkeypatch.setattr(tvm_peer, "measure", fake)
    layer = tmp_path / "c1.yaml"
    layer.write_text("kind: conv2d\nname: c1\nC: 16\nK: 32\nH: 14\nW: 14\nR: 1\nS: 1\ndtype: float32\n")
    assert main(["compare", str(layer), "--arch", "cpu", "--schedulers", "cosa,tvm", "--tvm-trials", "2",
                 "--time-limit", "20", "--json", "-q"]) == 0
    rows = {r["scheduler"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert seen and "P" in seen[0] and "Q" in seen[0] and "QP" not in seen[0]
    ours = rows["cosa"]
    assert ours["measured_verified"] is True and ours["layer"] == "c1" and ours["macs"] == 16 * 32 * 14 * 14
    # the MIP tried ragged tiles of the 196 fused pixels (a 14-pixel row would pad to 16)
    assert {t["padded"] for t in ours["extra"]["ragged_tried"]} == {224, 256}
    assert ours["extra"]["measured"]["levels"][-1] == "Registers"


def test_the_te_compute_of_a_padded_convolution_equals_numpy():
    """The conversion alone, built with TVM's default schedule (no tuning): padding, strides of the views."""
    _needs_tvm()
    import tvm
    from tvm import te

    from targets.cpu.plan import stored_shape
    from targets.cpu.reference import random_inputs, reference

    placeholders, output = tvm_peer.te_compute(CONV)
    built = tvm.compile(tvm.IRModule({"main": te.create_prim_func([*placeholders, output])}), target="llvm")
    shapes = {t.name: stored_shape(t, CONV.dims) for t in CONV.tensors}
    arrays = random_inputs(CONV, {t.name: "float32" for t in CONV.tensors}, shapes, 1)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(arrays[t.name], dev) for t in CONV.inputs]
    args.append(tvm.runtime.tensor(np.zeros(shapes["Outputs"], "float32"), dev))
    built(*args)
    ref = reference(CONV, arrays, shapes, "float32")
    assert np.max(np.abs(args[-1].numpy() - ref)) < 1e-5 * np.max(np.abs(ref))
    x = arrays["Inputs"][0]  # an independent check of one output pixel at the padded corner
    w = arrays["Weights"]
    corner = sum(float(w[3, c, s, r]) * float(x[c, s - 1, r - 1])
                 for c in range(3) for s in range(1, 3) for r in range(1, 3))
    assert args[-1].numpy()[0, 3, 0, 0] == pytest.approx(corner, rel=1e-5)


def test_metaschedule_tunes_a_small_gemm_and_its_kernel_matches_numpy():
    _needs_tvm()
    kernel = tvm_peer.tune(GEMM, trials=8, seed=0)
    run = tvm_peer.run_kernel(kernel, repeat=3)
    assert run.verified and run.max_abs_err < 1e-4
    assert run.trials == 8 and run.seed == 0 and run.threads == 1 and len(run.times_s) == 3
    assert run.target["kind"] == "llvm" and run.target["num-cores"] == 1 and run.target["mcpu"]
    assert run.tuning_s > 0 and run.gflops == pytest.approx(2 * GEMM.macs / run.seconds / 1e9)
    # the same compiled kernel on inputs of our own, against A @ B in float64
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    call, result = kernel.bind({"A": a, "B": b})
    call()
    np.testing.assert_allclose(result(), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
