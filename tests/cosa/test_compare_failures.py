"""cosa compare when schedulers fail: the failure summary by cause, the table's failed cells and its
total and geomean rows, the plot's hatched bars and bounded size, progress, and the exit status."""

import io
import json
import math
import struct
import sys

import pytest
from rich.console import Console

from costmodel import preset
from cosa import CompareResult, CompareRow, compare, report
from cosa.compare_progress import Progress
from workloads import dump_short, einsum, matmul

SMALL = preset("gemmini", dim=2, scratchpad_kib=1, accumulator_kib=1)
# the vendor heuristic handles matmuls and convolutions only: it fails on an MTTKRP, one cause although the
# layers' names and bounds differ
GROUPED = [einsum("ikl,kj,lj->ij", {"i": 8, "j": 4, "k": 3, "l": 4}, name="grp"),
           einsum("ikl,kj,lj->ij", {"i": 4, "j": 8, "k": 2, "l": 2}, name="grp4")]
MM = matmul("mm", M=8, N=8, K=8, repeat=2)


@pytest.fixture(scope="module")
def failing():
    return compare(GROUPED + [MM], SMALL, ["gemmini-default", "random"], progress=False, random_samples=20)


def _row(layer, scheduler, cycles=None, error=None, repeat=1):
    if error is not None:
        return CompareRow(layer, scheduler, repeat=repeat, seconds=0.1, status="failed", error=error)
    return CompareRow(layer, scheduler, repeat=repeat, cycles=cycles, energy_pj=2e6, utilization=0.5,
                      dram_bytes=1000.0, seconds=1.0, objective_value=cycles, ratio=1.0)


def test_failures_are_grouped_by_cause(failing):
    assert [r.ok for r in failing.rows] == [False, True, False, True, True, True]
    causes = report.failure_causes(failing)
    assert len(causes) == 1  # one reason, although the group count (2, 4) and the layer differ
    cause = causes[0]
    assert (cause.number, cause.scheduler, cause.layers, cause.count) == (1, "gemmini-default", ("grp", "grp4"), 2)
    assert "handles matmuls" in cause.message and "grp" in cause.message
    lines = report.failure_summary(failing)
    assert lines[0].startswith("2 of 6 runs failed") and len(lines) == 2
    assert lines[1].strip().startswith("[1] gemmini-default failed on 2 layers (grp, grp4): ")
    assert report.to_json(failing)["failures"] == [cause.to_dict()]


def test_distinct_causes_get_their_own_lines():
    rows = tuple(_row(f"l{k}", "p", error=f"workload l{k}: tiles need {100 + k} rows of 16 bytes") for k in range(5))
    rows += (_row("l0", "q", error="no schedule within 3 s"), _row("l1", "q", cycles=10.0),
             _row("l2", "q", error="workload l2: field 'G': something else"))
    rows += tuple(_row(f"l{k}", "q", cycles=10.0) for k in (3, 4))
    res = CompareResult(rows, tuple(f"l{k}" for k in range(5)), ("p", "q"), "toy", "latency")
    causes = report.failure_causes(res)
    assert [(c.scheduler, c.count) for c in causes] == [("p", 5), ("q", 1), ("q", 1)]
    assert causes[0].line() == ("[1] p failed on 5 layers (l0, l1, l2, ... (2 more)): workload l0: tiles need 100 "
                                "rows of 16 bytes")
    assert report.failure_number(causes, res.row("l2", "q")) == 3
    assert report.failure_number(causes, res.row("l1", "q")) is None


def test_clip_words_never_cuts_a_word():
    text = "factors of 'G' multiply to 1 but its bound is 4 (per level, temporal*spatial: [1, 1, 1, 1])"
    for limit in range(8, len(text) + 5):
        clipped = report.clip_words(text, limit)
        assert len(clipped) <= max(limit, len(text.split()[0]) + 4)
        kept, words = clipped.removesuffix(" ...").split(), text.split()
        assert kept[:-1] == words[:len(kept) - 1] and kept[-1] == words[len(kept) - 1].rstrip(",;:")  # whole words
    assert report.clip_words("short text", 60) == "short text"
    assert report.error_reason("layer x: field 'mapping': outer: field 'factors.G': the reason") == "the reason"


def _render(result, width=160) -> str:
    console = Console(width=width, record=True, color_system=None)
    report.print_table(result, console)
    return console.export_text()


def _cells(text: str, first: str) -> list[list[str]]:
    """The cells of the table lines whose first cell is ``first``."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0] == first:
            out.append(cells)
    return out


def test_table_marks_failures_and_names_total_and_geomean_rows(failing):
    text = _render(failing)
    failed = [c for c in _cells(text, "grp") + _cells(text, "grp4") if c[1] == "gemmini-default"]
    assert len(failed) == 2 and all(c[2] == "FAILED" and c[-1].startswith("[1] the gemmini-default") for c in failed)
    totals, geomeans = _cells(text, "total"), _cells(text, "geomean")
    assert [c[1] for c in totals] == [c[1] for c in geomeans] == ["gemmini-default", "random"]
    g = report.geomeans(failing)
    for cells in totals:
        mm = failing.row("mm", cells[1])
        assert cells[2] == f"{2 * mm.cycles:,.0f}" == f"{g[cells[1]]['total_cycles']:,.0f}"  # only mm is common
        assert cells[7] == "-"  # a ratio is not a total
    for cells in geomeans:
        assert cells[7] == f"{g[cells[1]]['ratio_geomean_weighted']:.3f}" and cells[2] == "-"
    assert "over the 1 of 3 layers where every scheduler succeeded" in " ".join(text.split())
    assert "[1] gemmini-default failed on 2 layers (grp, grp4)" in text  # the summary after the table


@pytest.mark.parametrize("width", [80, 100, 160])
def test_error_cells_wrap_between_words(width):
    message = ("workload big: field 'mapping': tiles need 21828 rows of 16 bytes but the scratchpad holds 16384 "
               "rows, and the accumulator another 1024 rows of 64 bytes")
    rows = (_row("big", "p", error=message), _row("big", "q", cycles=5.0))
    res = CompareResult(rows, ("big",), ("p", "q"), "toy", "latency")
    words = set(report.error_reason(message).split()) | {"[1]", "..."}
    text = _render(res, width)
    cell_words = []
    for line in text.splitlines():
        cells = line.split("│")
        if len(cells) > 3 and cells[1].strip() in ("big", ""):
            cell_words += cells[-2].split()
    # wide enough: the reason's first words, whole; too narrow for them: the cause's number alone
    assert cell_words[:3] == (["[1]", "tiles", "need"] if width == 160 else ["[1]"]) and set(cell_words) <= words
    assert message in text  # in full, in the summary after the table


def test_no_common_layer_prints_no_totals():
    rows = (_row("a", "p", error="boom"), _row("a", "q", cycles=5.0))
    text = _render(CompareResult(rows, ("a",), ("p", "q"), "toy", "latency"))
    assert all(c[2] == "-" for c in _cells(text, "total"))


def _png_size(path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


def _synthetic(n_layers: int, schedulers=("cosa", "gemmini-default", "random")) -> CompareResult:
    rows = []
    for k in range(n_layers):
        for s, name in enumerate(schedulers):
            if name == "gemmini-default" and k % 3 == 0:
                rows.append(_row(f"layer{k}", name, error="factors of 'G' multiply to 1 but its bound is 4"))
            else:
                rows.append(_row(f"layer{k}", name, cycles=100.0 + 37 * ((k + s) % 5)))
    return CompareResult(tuple(rows), tuple(f"layer{k}" for k in range(n_layers)), tuple(schedulers), "toy", "latency")


@pytest.mark.parametrize("n_layers", [2, 60, 400])
def test_plot_hatches_failures_in_bounded_panels(n_layers, tmp_path):
    res = _synthetic(n_layers)
    fig = report.plot_figure(res)
    hatched = [p for ax in fig.axes for p in ax.patches if p.get_hatch() == report.FAILED_HATCH]
    assert len(hatched) == sum(1 for r in res.rows if not r.ok) == math.ceil(n_layers / 3)
    drawn = [p for ax in fig.axes for p in ax.patches if not p.get_hatch()]
    assert len(drawn) == sum(1 for r in res.rows if r.ok)
    panels = len(fig.axes)
    assert panels == max(1, math.ceil(n_layers / max(report.PLOT_LAYERS_PER_PANEL,
                                                     math.ceil(n_layers / report.PLOT_MAX_PANELS))))
    assert sum(len(ax.get_xticks()) for ax in fig.axes) == n_layers  # every layer labelled once
    width, height = _png_size(report.plot(res, tmp_path / "p.png"))
    assert width <= report.PLOT_MAX_PX[0] and height <= report.PLOT_MAX_PX[1]
    if n_layers == 60:
        assert panels == 3 and width >= 1000  # wrapped, not one 5,000-pixel strip


def test_progress_lines_and_per_scheduler_bars(capsys, monkeypatch):
    compare(GROUPED + [MM], SMALL, ["gemmini-default", "random"], progress="lines", random_samples=10)
    err = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in err] == ["compare [1/3] grp", "compare [2/3] grp4", "compare [3/3] mm"]
    assert err[0].endswith("gemmini-default FAILED, random 1.000")

    events = []

    class Recording(Progress):
        def scheduler_done(self, k, name, ok):
            events.append((k, name, ok))
            super().scheduler_done(k, name, ok)

    monkeypatch.setattr(sys.modules["cosa.compare"], "Progress", Recording)
    compare(GROUPED[:1] + [MM], SMALL, ["gemmini-default", "random"], progress="bar", random_samples=10)
    # in one process each scheduler reports as it finishes, before its layer's rows are collected
    assert events[:2] == [(0, "gemmini-default", False), (0, "random", True)]
    bar = Progress("bar", ["grp", "mm"], ["gemmini-default", "random"], stream=io.StringIO())
    bar.start()
    bar.scheduler_done(0, "gemmini-default", False)
    bar.layer_done(0, [_row("grp", "gemmini-default", error="x"), _row("grp", "random", cycles=1.0)])
    bar.stop()
    assert bar.failed == {"gemmini-default": 1, "random": 0} and bar.done == 1  # counted once


def test_cli_exit_status_and_summary(tmp_path, capsys):
    from cosa.cli import main

    path = tmp_path / "net.yaml"
    path.write_text(dump_short(GROUPED + [MM]))
    argv = ["compare", str(path), "--arch", "gemmini", "--schedulers", "gemmini-default,random",
            "--random-samples", "10"]
    assert main(argv + ["--csv", str(tmp_path / "c.csv"), "--plot", str(tmp_path / "c.png")]) == 1
    out, err = capsys.readouterr()
    assert "FAILED" in out and "[1] gemmini-default failed on 2 layers (grp, grp4)" in out
    err = err.strip().splitlines()
    assert [line.split(" (")[0] for line in err[:3]] == ["compare [1/3] grp", "compare [2/3] grp4", "compare [3/3] mm"]
    assert err[-1] == "cosa: compare: 2 of 6 runs failed (gemmini-default on 2 of 3 layers); causes after the table"
    assert (tmp_path / "c.csv").exists() and (tmp_path / "c.png").exists()  # written before the exit status

    assert main(argv + ["--json", "-q"]) == 1
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert [f["layers"] for f in doc["failures"]] == [["grp", "grp4"]]
    assert "compare [" not in err and err.strip().splitlines()[-1].startswith("cosa: compare: 2 of 6 runs failed")

    only = tmp_path / "grp.yaml"
    only.write_text(dump_short(GROUPED[:1]))
    assert main(["compare", str(only), "--schedulers", "gemmini-default", "-q"]) == 1  # every scheduler failed
    capsys.readouterr()
    mm = tmp_path / "mm.yaml"
    mm.write_text(dump_short([MM]))
    assert main(["compare", str(mm), "--schedulers", "gemmini-default,random", "--random-samples", "10", "-q"]) == 0
    assert "failed" not in capsys.readouterr().err
