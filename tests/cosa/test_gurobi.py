"""The Gurobi back end through Pyomo, with the size-limited licence that the pip wheel carries.

gurobipy is in the ``test`` extra, so these tests run (never skip) wherever the tests run.
"""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosa import SchedulingError, schedule
from cosa.cli import main
from cosa.mip import build, build_problem, gurobi_available
from costmodel import load_arch, preset
from mappings.validate import violations
from workloads import conv2d, dump_short, load_one, matmul

SMALL = preset("gemmini", dim=4, scratchpad_kib=1, accumulator_kib=1)
SMALL_SPEC = "gemmini:dim=4,scratchpad_kib=1,accumulator_kib=1"
PIP_LICENCE_LIMIT = 2000  # variables, and linear constraints
SIDES = st.sampled_from([2, 3, 4, 6, 8, 12, 16])


def test_gurobipy_and_its_licence_are_installed():
    assert gurobi_available(), "gurobipy is missing or unlicensed: pip install gurobipy (the 'test' extra has it)"


def _both(workload, objective: str):
    return [schedule(workload, SMALL, objective=objective, solver=solver, time_limit_s=20, mip_gap=0.0, bound=False)
            for solver in ("highs", "gurobi")]


@settings(max_examples=6, deadline=None, derandomize=True)
@given(M=SIDES, N=SIDES, K=SIDES, objective=st.sampled_from(["latency", "energy", "cosa"]))
def test_gurobi_and_highs_prove_the_same_optimum(M, N, K, objective):
    highs, gurobi = _both(matmul("mm", M=M, N=N, K=K), objective)
    assert gurobi.stats.solver == "gurobi" and highs.stats.solver == "highs"
    for s in (highs, gurobi):
        assert s.stats.status == "optimal" and s.stats.gap == 0.0
        assert s.stats.variables <= PIP_LICENCE_LIMIT and s.stats.constraints <= PIP_LICENCE_LIMIT
    assert (gurobi.stats.variables, gurobi.stats.constraints) == (highs.stats.variables, highs.stats.constraints)
    assert gurobi.stats.objective == pytest.approx(highs.stats.objective, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("shape", [dict(M=16, N=16, K=16), dict(M=8, N=12, K=20)])
def test_gurobi_schedule_costs_what_the_highs_schedule_costs(shape):
    highs, gurobi = _both(matmul("mm", **shape), "latency")
    assert not violations(gurobi.mapping, gurobi.workload, SMALL)
    assert gurobi.cost.cycles == highs.cost.cycles


def test_cli_schedule_with_gurobi(tmp_path, capsys):
    path = tmp_path / "mm.yaml"
    path.write_text(dump_short([matmul("mm", M=16, N=16, K=16)]))
    runs = {}
    for solver in ("highs", "gurobi"):
        assert main(["schedule", str(path), "--arch", SMALL_SPEC, "--solver", solver, "--json"]) == 0
        runs[solver] = json.loads(capsys.readouterr().out)
    assert runs["gurobi"]["solver"]["solver"] == "gurobi" and runs["gurobi"]["solver"]["status"] == "optimal"
    assert runs["gurobi"]["cost"]["cycles"] == runs["highs"]["cost"]["cycles"]


# a batched 3x3 convolution whose model on the cluster preset, with the loop order decided at every level,
# is over the pip licence (checked, not assumed; the default model decides the order at DRAM only and fits)
OVER_LICENCE = conv2d("big", N=8, C=256, K=512, P=56, Q=56, R=3, S=3, padding=1)


def _over_licence_layer():
    workload, arch = OVER_LICENCE, load_arch("cluster")
    nvars, nint, ncons = build(build_problem(workload, arch, "all"), "latency", None).size()
    assert nvars > PIP_LICENCE_LIMIT or ncons > PIP_LICENCE_LIMIT, (nvars, ncons)
    return workload, arch, (nvars, nint, ncons)


def test_a_model_over_the_size_limited_licence_is_refused_clearly():
    workload, arch, (nvars, nint, ncons) = _over_licence_layer()
    with pytest.raises(SchedulingError) as info:
        schedule(workload, arch, solver="gurobi", time_limit_s=20, bound=False, order_levels="all")
    text = str(info.value)
    assert "too large for Gurobi's size-limited licence" in text and info.value.field == "solver"
    assert f"{nvars} variables ({nint} integer) and {ncons} constraints" in text
    assert "GRB_LICENSE_FILE" in text and "gurobi.com" in text and "solver='highs'" in text
    assert "\n" not in text


def test_cli_over_the_licence_exits_2_with_one_line(capsys, tmp_path):
    _, _, (nvars, _, ncons) = _over_licence_layer()
    path = tmp_path / "big.yaml"
    path.write_text(dump_short([OVER_LICENCE]))
    code = main(["schedule", str(path), "--arch", "cluster", "--solver", "gurobi", "--order-levels", "all"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cosa: ") and "Traceback" not in captured.err
    assert f"{nvars} variables" in lines[0] and f"{ncons} constraints" in lines[0]


def test_time_limit_returns_the_incumbent_with_status_and_gap():
    # gap 0 asked on a ResNet-50 layer with the order decided at every level on the serial (unpipelined)
    # preset, whose transfer terms make it hard: Gurobi needs seconds to prove it, and finds an incumbent at once
    workload, arch = load_one("resnet50/res4a_branch2b"), load_arch("gemmini:pipelined=false")
    s = schedule(workload, arch, solver="gurobi", time_limit_s=1.0, mip_gap=0.0, bound=False, order_levels="all")
    assert s.stats.solver == "gurobi" and s.stats.status == "time_limit"
    assert s.stats.gap is not None and 0 < s.stats.gap < 1
    assert s.stats.variables <= PIP_LICENCE_LIMIT and s.stats.constraints <= PIP_LICENCE_LIMIT
    assert not violations(s.mapping, workload, arch)
    assert math.isfinite(s.cost.cycles) and s.cost.cycles >= workload.macs / arch.total_macs_per_cycle
