"""compare and its reports on tiny layers."""

import csv
import json
import math

import pytest

from costmodel import preset
from cosa import CompareResult, CompareRow, SchedulingError, compare, report
from cosa.compare import under_mpi
from workloads import dump_short, einsum, matmul

SMALL = preset("gemmini", dim=2, scratchpad_kib=1, accumulator_kib=1)
LAYERS = [matmul("a", M=2, N=4, K=2), matmul("b", M=4, N=2, K=2, repeat=2)]


@pytest.fixture(scope="module")
def energy_run():
    return compare(LAYERS, SMALL, ["cosa", "gemmini-default", "random", "exhaustive"], objective="energy",
                   time_limit_s=20, progress=False, random_time_factor=1.0, seed=3)


def test_rows_and_ratios_are_consistent(energy_run):
    r = energy_run
    assert r.layers == ("a", "b") and len(r.rows) == 8 and all(row.ok for row in r.rows)
    for layer, rows in r.by_layer().items():
        best = min(row.objective_value for row in rows)
        assert min(row.ratio for row in rows) == 1.0
        for row in rows:
            assert row.objective_value == row.energy_pj  # objective "energy"
            assert row.ratio == pytest.approx(row.objective_value / best)
            assert row.utilization == pytest.approx(row.macs / (4 * row.cycles))  # a 2 x 2 array
            assert row.seconds >= 0 and row.repeat == (2 if layer == "b" else 1)
        exhaustive = next(row for row in rows if row.scheduler == "exhaustive")
        assert exhaustive.ratio == 1.0  # the ground truth: nothing beats it on these layers
        assert all(row.bound_ratio >= 1 - 1e-9 for row in rows if row.bound_ratio is not None)
    assert r.row("a", "gemmini-default").extra["tile_args"] == {"tile_I": 1, "tile_J": 2, "tile_K": 1}


def test_geomeans_weight_by_repeats(energy_run):
    g = report.geomeans(energy_run)
    for name in energy_run.schedulers:
        a, b = energy_run.row("a", name), energy_run.row("b", name)
        assert g[name]["total_cycles"] == a.cycles + 2 * b.cycles
        assert g[name]["ratio_geomean_weighted"] == pytest.approx((a.ratio * b.ratio ** 2) ** (1 / 3))
        assert g[name]["ratio_geomean"] == pytest.approx(math.sqrt(a.ratio * b.ratio))


def test_report_files(energy_run, tmp_path):
    csv_path = report.write_csv(energy_run, tmp_path / "c.csv")
    with csv_path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(row["layer"], row["scheduler"]) for row in rows] == [(r.layer, r.scheduler) for r in energy_run.rows]
    assert float(rows[0]["cycles"]) == energy_run.rows[0].cycles
    assert json.loads(rows[1]["tile_args"]) == {"tile_I": 1, "tile_J": 2, "tile_K": 1}
    doc = json.loads(report.write_json(energy_run, tmp_path / "c.json").read_text())
    assert doc["objective"] == "energy" and len(doc["rows"]) == 8 and set(doc["geomeans"]) == set(energy_run.schedulers)
    assert doc["rows"][0]["extra"]["solver"]["solver"] in ("highs", "gurobi")
    png = report.plot(energy_run, tmp_path / "c.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from rich.console import Console

    console = Console(width=150, record=True)
    report.print_table(energy_run, console)
    text = console.export_text()
    assert "geomean" in text and "exhaustive" in text


def test_failures_become_rows_and_leave_the_geomeans():
    chain = einsum("ij,jk,kl->il", {"i": 2, "j": 2, "k": 2, "l": 2}, name="chain")
    r = compare([LAYERS[1], chain], SMALL, ["gemmini-default", "random"], progress=False, random_samples=20)
    failed = r.row("chain", "gemmini-default")
    assert not failed.ok and "matmuls" in failed.error and math.isnan(failed.ratio)
    assert r.row("chain", "random").ok and r.row("chain", "random").ratio == 1.0
    g = report.geomeans(r)
    assert g["gemmini-default"]["layers"] == 1 and g["gemmini-default"]["failed"] == 1
    assert report.to_json(r)["rows"][2]["cycles"] is None  # NaN becomes null


def test_processes_give_the_serial_rows(tmp_path):
    path = tmp_path / "layers.yaml"
    path.write_text(dump_short(LAYERS))
    serial = compare([str(path)], SMALL, ["gemmini-default", "random"], progress=False, random_samples=20, seed=4)
    parallel = compare(LAYERS, SMALL, ["gemmini-default", "random"], jobs=2, progress=False, random_samples=20,
                       seed=4)
    assert parallel.meta["executor"] == "processes" and serial.meta["executor"] == "serial"
    key = lambda res: [(r.layer, r.scheduler, r.cycles, r.energy_pj, r.dram_bytes, r.ratio) for r in res.rows]
    assert key(serial) == key(parallel)


def test_bad_arguments_raise():
    with pytest.raises(SchedulingError, match="unknown scheduler"):
        compare(LAYERS, SMALL, ["cosa", "timeloop"])
    with pytest.raises(SchedulingError, match="repeat"):
        compare(LAYERS, SMALL, ["random", "random"])
    with pytest.raises(SchedulingError, match="jobs"):
        compare(LAYERS, SMALL, ["random"], jobs=0)
    with pytest.raises(SchedulingError, match="no workloads"):
        compare([], SMALL, ["random"])


def test_mpi_is_opt_in(monkeypatch):
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE", "COSA_MPI"):
        monkeypatch.delenv(var, raising=False)
    assert not under_mpi()
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    monkeypatch.setenv("COSA_MPI", "0")
    assert not under_mpi()


def test_weighted_geomean_by_hand():
    rows = (CompareRow("x", "p", repeat=3, cycles=10, energy_pj=1, utilization=0.5, dram_bytes=1, seconds=1,
                       objective_value=10, ratio=1.0),
            CompareRow("x", "q", repeat=3, cycles=20, energy_pj=1, utilization=0.25, dram_bytes=1, seconds=2,
                       objective_value=20, ratio=2.0),
            CompareRow("y", "p", repeat=1, cycles=40, energy_pj=1, utilization=0.5, dram_bytes=1, seconds=1,
                       objective_value=40, ratio=4.0),
            CompareRow("y", "q", repeat=1, cycles=10, energy_pj=1, utilization=1.0, dram_bytes=1, seconds=1,
                       objective_value=10, ratio=1.0))
    res = CompareResult(rows, ("x", "y"), ("p", "q"), "toy", "latency")
    g = report.geomeans(res)
    assert g["p"]["ratio_geomean"] == pytest.approx(2.0)  # sqrt(1 * 4)
    assert g["p"]["ratio_geomean_weighted"] == pytest.approx(4 ** 0.25)  # (1^3 * 4)^(1/4)
    assert g["q"]["ratio_geomean_weighted"] == pytest.approx(8 ** 0.25)  # (2^3 * 1)^(1/4)
    assert g["q"]["total_cycles"] == 3 * 20 + 10


def test_bound_curve_plot(tmp_path):
    from lowerbounds import bound_for_arch

    from cosa import schedule

    w = matmul("m", M=8, N=8, K=8)
    rep = bound_for_arch(w, SMALL)
    sched = schedule(w, SMALL, scheduler="gemmini-default")
    assert sched.cost.dram_bytes >= rep.to_dict()["bound_bytes"]
    png = report.plot_bound_curve(w, rep, [sched], tmp_path / "b.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_progress_bar_and_names_of_repeated_layers():
    twice = [LAYERS[0], LAYERS[0]]
    r = compare(twice, SMALL, ["gemmini-default"], progress=True)
    assert r.layers == ("a", "a#2") and [row.layer for row in r.rows] == ["a", "a#2"]
    assert r.rows[0].cycles == r.rows[1].cycles


def test_measure_runs_every_scheduled_mapping_once():
    from mappings import validate

    seen = []

    def fake(workload, arch, mapping):
        validate(mapping, workload, arch)  # the very mapping the scheduler returned
        seen.append(workload.name)
        return {"seconds": 0.001 * len(seen), "verified": True, "gflops": 1.0}

    result = compare(LAYERS, SMALL, ["cosa", "gemmini-default"], progress=False, time_limit_s=10, measure=fake)
    assert sorted(seen) == ["a", "a", "b", "b"]
    assert all(r.measured_s is not None and r.measured_verified for r in result.rows)
    assert all("_mapping" not in r.extra and r.extra["measured"] == {"gflops": 1.0} for r in result.rows)
    assert json.loads(json.dumps(report.to_json(result)))  # nothing unserialisable left behind
    plain = compare(LAYERS, SMALL, ["gemmini-default"], progress=False)
    assert all(r.measured_s is None and "_mapping" not in r.extra for r in plain.rows)


def test_cli_measure_on_the_cpu_and_refusal_elsewhere(tmp_path, capsys):
    from cosa.cli import main

    layer = tmp_path / "mm.yaml"
    layer.write_text("kind: matmul\nname: mm\nM: 16\nN: 24\nK: 8\ndtype: float32\n")
    assert main(["compare", str(layer), "--arch", "cpu", "--schedulers", "cosa,random",
                 "--random-samples", "3", "--time-limit", "10", "--measure", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 2 and all(r["measured_verified"] is True and r["measured_s"] > 0 for r in rows)
    assert main(["compare", str(layer), "--arch", "gemmini", "--measure"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--measure" in err[0]
