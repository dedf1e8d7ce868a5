"""The roofline: its two terms by hand, and the law that no priced schedule beats it."""

from __future__ import annotations

import json
import random

import pytest

from cosa.baselines.mapspace import random_mapping
from cosa.cli import main
from costmodel import ArchError, evaluate, preset
from lowerbounds import roofline
from workloads import WorkloadError, conv2d, load_one, matmul


def test_matmul_terms_by_hand():
    arch = preset("gemmini")
    w = matmul(M=64, N=128, K=96)
    r = roofline(w, arch)
    dim = arch.params.get("dim", 16) if arch.params else 16
    assert r.peak_macs_per_cycle == dim * dim
    assert r.compute_cycles == pytest.approx(64 * 128 * 96 / (dim * dim))
    a, b, c = (t.bytes_per_word for t in w.tensors)
    read = 64 * 96 * a + 96 * 128 * b
    write = 64 * 128 * c
    assert (r.read_bytes, r.write_bytes) == (pytest.approx(read), pytest.approx(write))
    dram = arch.levels[0]
    assert r.memory_cycles == pytest.approx(read / dram.read_bandwidth + write / dram.write_bandwidth)
    assert r.cycles == max(r.compute_cycles, r.memory_cycles)
    assert r.bound_by == ("compute" if r.compute_cycles >= r.memory_cycles else "memory")


def test_padding_is_not_compulsory():
    arch = preset("gemmini")
    padded = conv2d(C=16, K=16, H=8, W=8, R=3, S=3, padding=1)
    r = roofline(padded, arch)
    inp, wgt = (t for t in padded.tensors if not t.is_output)
    in_bytes = 16 * 8 * 8 * inp.bytes_per_word  # the stored input, not its padded box
    w_bytes = 16 * 16 * 9 * wgt.bytes_per_word
    assert r.read_bytes == pytest.approx(in_bytes + w_bytes)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("shape", [("mm", dict(M=32, N=48, K=64)), ("conv", dict(C=32, K=16, H=14, W=14, R=3, S=3))])
def test_no_priced_schedule_beats_the_roofline(seed, shape):
    kind, dims = shape
    w = matmul(**dims) if kind == "mm" else conv2d(**dims, padding=1)
    for arch in (preset("gemmini"), preset("simba")):
        r = roofline(w, arch)
        mapping = random_mapping(w, arch, random.Random(seed))
        cost = evaluate(w, arch, mapping)
        assert cost.cycles >= r.cycles * (1 - 1e-9)
        assert r.over(cost.cycles) >= 1 - 1e-9


def test_bad_arguments_raise():
    with pytest.raises(WorkloadError):
        roofline("mm", preset("gemmini"))
    with pytest.raises(ArchError):
        roofline(matmul(M=4, N=4, K=4), "gemmini")


def test_schedule_json_reports_the_roofline(capsys):
    rc = main(["schedule", "bert_base_128/attention_scores", "--arch", "gemmini", "--scheduler", "gemmini-default",
               "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    expected = roofline(load_one("bert_base_128/attention_scores"), preset("gemmini")).cycles
    assert out["roofline_cycles"] == pytest.approx(expected)
    assert out["cycles_over_roofline"] == pytest.approx(out["cost"]["cycles"] / out["roofline_cycles"])
    assert out["cycles_over_roofline"] >= 1.0
