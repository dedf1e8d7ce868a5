"""bench/cpu_rank.py: a rank study of a tiny GEMM builds, verifies and times every sampled mapping."""

import sys
from pathlib import Path

import costmodel
import workloads

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.cpu_rank import on_cores, rank_study, register_arch, round_orders, split_half_tau, study_cases  # noqa: E402


def test_rank_study_of_a_tiny_gemm():
    w = workloads.matmul("g", M=16, N=32, K=16, bits=32)
    arch = register_arch(w, costmodel.preset("cpu"))
    s = rank_study(w, arch, samples=4, time_limit=3, threads=1, repeat=1, seed=0)
    assert s["of"] == 5 and s["samples"] == 4 and len(s["points"]) == 5
    assert s["points"][0]["mapping"] == "mip" and len({p["mapping"] for p in s["points"]}) == 5
    assert 1 <= s["mip_rank"] <= 5 and 1 <= s["model_best_rank"] <= 5
    assert -1 <= s["tau"] <= 1 and s["mip_over_fastest"] >= 1
    assert s["measured_tau"] is None  # one round: no second measurement to rank against
    assert all(p["seconds"] > 0 and p["cycles"] > 0 for p in s["points"])


def test_the_study_has_a_gemm_a_3x3_and_a_1x1_convolution():
    kinds = [(w.op.get("kind"), w.dims.get("R")) for w in study_cases()]
    assert kinds == [("matmul", None), ("conv2d", 3), ("conv2d", 1)]


def test_the_study_models_as_many_cores_as_it_runs_threads():
    base = costmodel.preset("cpu")  # 8 cores: the L3 fans out to them
    one = on_cores(base, 1)
    assert one.levels[1].fanout == 1 and one.params["cores"] == 1
    assert [lv.fanout for lv in one.levels[2:]] == [lv.fanout for lv in base.levels[2:]]
    assert on_cores(base, 8) is base and on_cores(base, 16) is base


def test_every_round_runs_every_kernel_once_in_a_seeded_order():
    orders = round_orders(6, 20, seed=0)
    assert len(orders) == 20 and all(sorted(o) == list(range(6)) for o in orders)
    assert orders == round_orders(6, 20, seed=0) and orders != round_orders(6, 20, seed=1)
    assert len({tuple(o) for o in orders}) > 1  # not one fixed order
    assert len({o.index(0) for o in orders}) > 1  # kernel 0 does not always follow the same one


def test_the_measurements_own_tau_compares_even_rounds_with_odd_ones():
    steady = [[1.0, 1.0, 1.1, 1.0], [2.0, 2.1, 2.0, 2.0], [3.0, 3.0, 3.2, 3.0]]
    assert split_half_tau(steady) == 1.0
    # the halves disagree on every pair: kernel 0 is fastest in the even rounds, slowest in the odd ones
    swapped = [[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]]
    assert split_half_tau(swapped) == -1.0
    assert split_half_tau([[1.0], [2.0]]) is None  # one round: no second measurement
