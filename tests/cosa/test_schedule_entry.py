"""cosa.schedule: dispatch to the MIP and the baselines, options, errors, the lower bound."""

from __future__ import annotations

import pytest

import workloads
from costmodel import Arch, Level
from cosa import SCHEDULERS, Schedule, SchedulingError, schedule
from mappings import validate

NEST = workloads.matmul("mm_entry", M=8, N=8, K=4)


def machine() -> Arch:
    return Arch("entry", (
        Level("DRAM", None, read_bandwidth=4, write_bandwidth=4, read_energy_pj_per_byte=50,
              write_energy_pj_per_byte=50),
        Level("Buffer", 64, read_energy_pj_per_byte=2, write_energy_pj_per_byte=2, fanout=4),
        Level("Regs", 8, frozenset({"weight", "output"}), read_energy_pj_per_byte=0.2, write_energy_pj_per_byte=0.2),
    ), macs_per_cycle=1, mac_energy_pj=1.0)


def test_the_mip_is_the_default_scheduler():
    result = schedule(NEST, machine(), time_limit_s=10)
    assert isinstance(result, Schedule) and result.scheduler == "cosa"
    validate(result.mapping, NEST, machine())
    stats = result.stats.to_dict()
    for key in ("variables", "binaries", "constraints", "status", "gap", "build_s", "solve_s", "cuts", "seed"):
        assert key in stats
    assert stats["variables"] >= stats["binaries"] > 0 and stats["constraints"] > 0
    assert stats["build_s"] > 0 and stats["solve_s"] > 0 and stats["seed"] == 0


@pytest.mark.parametrize("name, options", [("random", {"samples": 20}), ("exhaustive", {})])
def test_baselines_are_dispatched_by_name(name, options):
    nest = workloads.matmul("mm_2", M=2, N=4, K=2)
    result = schedule(nest, machine(), scheduler=name, seed=1, **options)
    assert result.scheduler == name
    validate(result.mapping, nest, machine())


def test_the_mip_is_never_worse_than_random_sampling_here():
    ours = schedule(NEST, machine(), time_limit_s=10)
    sampled = schedule(NEST, machine(), scheduler="random", samples=30, seed=0)
    assert ours.cost.cycles <= sampled.cost.cycles


def test_unknown_names_and_options_raise():
    assert set(SCHEDULERS) == {"cosa", "cosa-cold", "gemmini-default", "random", "exhaustive", "timeloop-mapper",
                               "zigzag"}
    with pytest.raises(SchedulingError, match="scheduler"):
        schedule(NEST, machine(), scheduler="annealing")
    with pytest.raises(SchedulingError, match="unknown option"):
        schedule(NEST, machine(), colour="blue")
    with pytest.raises(SchedulingError, match="unknown option"):
        schedule(NEST, machine(), scheduler="random", limit=3)
    with pytest.raises(SchedulingError, match="unknown option"):
        schedule(NEST, machine(), scheduler="timeloop-mapper", samples=3)
    with pytest.raises(SchedulingError, match="unknown option"):
        schedule(NEST, machine(), scheduler="zigzag", samples=3)


def test_bound_is_attached_when_the_lower_bound_package_provides_it():
    import lowerbounds

    result = schedule(NEST, machine(), time_limit_s=10)
    if hasattr(lowerbounds, "bound_for_arch"):
        assert result.bound is not None
    else:
        assert result.bound is None


def test_the_bound_can_be_skipped():
    assert schedule(NEST, machine(), time_limit_s=10, bound=False).bound is None


def test_the_warm_start_is_stated_and_cosa_cold_runs_without_one(capsys):
    import json

    from cosa.cli import main as cli_main
    from costmodel import preset

    layer = workloads.matmul("mm_warm", M=64, N=64, K=64)
    arch = preset("gemmini")
    warm = schedule(layer, arch, time_limit_s=20, bound=False)
    assert warm.extra["warm_start"] == {"enabled": True, "start": "gemmini-default",
                                        "returned_start": warm.extra["returned"] != "mip"}
    cold = schedule(layer, arch, scheduler="cosa-cold", time_limit_s=20, bound=False)
    assert cold.extra["warm_start"] == {"enabled": False, "start": None, "returned_start": False}
    assert cold.extra["returned"] == "mip"
    validate(cold.mapping, layer, arch)
    assert cli_main(["schedule", "resnet50/res3a_branch2a", "--arch", "gemmini", "--json", "--time-limit", "20"]) == 0
    assert json.loads(capsys.readouterr().out)["warm_start"]["start"] == "gemmini-default"
    assert "cosa-cold" in SCHEDULERS
