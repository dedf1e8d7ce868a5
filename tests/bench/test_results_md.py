"""bench/RESULTS.md says only what its tables say: every figure of a section's prose is in that section's
tables (or their min, max, sum, mean, median, geomean, a count of rows), its console output, header or
sidecar, and each summary is the one its tables give (bench/results_section.py)."""

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import results_section as rs  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS.md"
SCRIPTS = {"gemmini_chipyard_calibration": ("gemmini_chipyard", "CALIBRATION_SUMMARY"),
           "gemmini_chipyard_recorded": ("gemmini_chipyard", "RECORDED_SUMMARY"),
           "gemmini_loop_model_chipyard": ("gemmini_loop_model", "SUMMARY"),
           "gemmini_loop_model_chipyard_mip_ours": ("gemmini_loop_model", "SUMMARY"),
           "gemmini_spike_loops": ("gemmini_spike", "LOOPS_SUMMARY"),
           "cpu_kernels_tvm": ("cpu_kernels", ("SUMMARY", "TVM_COLUMNS")),
           "cpu_kernels_threads": ("cpu_kernels", ("SUMMARY", "SCALING")),
           "cpu_kernels_staged": ("cpu_kernels", "SUMMARY"),
           "cpu_kernels_unstaged": ("cpu_kernels", "SUMMARY"),
           "gemmini_network_spike_isa": ("gemmini_network_spike", "SUMMARY"),
           "peers_zigzag": ("peers_zigzag", "SUMMARY_WITH_TIES"),
           "peers_zigzag_networks": ("peers_zigzag", "SUMMARY_WITH_TIES"),
           "peers_zigzag_room": ("peers_zigzag", "SUMMARY_WITH_TIES"),
           "peers_zigzag_fill": ("peers_zigzag", "SUMMARY_WITH_TIES"),
           "peers_zigzag_windows": ("peers_zigzag", "SUMMARY_WITH_TIES"),
           "peers_zigzag_strict": ("peers_zigzag", ("SUMMARY_WITH_TIES", "NO_TIES_SUMMARY")),
           "peers_zigzag_no_ties": ("peers_zigzag", ("SUMMARY_WITH_TIES", "NO_TIES_SUMMARY"))}


def test_results_file_says_only_what_its_tables_say():
    assert rs.check_file(RESULTS) == []


def test_each_sections_summary_spec_is_the_one_its_script_declares():
    for name in rs.sections(RESULTS.read_text()):
        script, constants = SCRIPTS.get(name, (name, "SUMMARY"))
        constants = (constants,) if isinstance(constants, str) else constants
        sidecar = json.loads(rs.sidecar_path(RESULTS, name).read_text())
        assert sidecar["summary"] == [spec for c in constants
                                      for spec in rs.summary_spec(ROOT / "bench" / f"{script}.py", c)], name


def _doctor(tmp_path: Path, old: str, new: str, count: int = 1) -> list[str]:
    """The check's problems on a copy of the results file (and its sidecars) with ``old`` replaced."""
    text = RESULTS.read_text()
    assert old in text, old
    (tmp_path / "RESULTS.md").write_text(text.replace(old, new, count))
    shutil.copytree(RESULTS.parent / rs.SIDECAR_DIR, tmp_path / rs.SIDECAR_DIR)
    return rs.check_file(tmp_path / "RESULTS.md")


def test_the_copy_itself_passes(tmp_path):
    assert _doctor(tmp_path, "# Benchmark results", "# Benchmark results") == []


def test_a_prose_figure_no_table_holds_fails(tmp_path):
    """The drift of issue 19: a sentence quoting medians the tables do not give."""
    problems = _doctor(tmp_path, "How the comparison may be biased.",
                       "The timing model is within 0.37% (ResNet-50) and 0.93% (BERT) of the RTL, median.  "
                       "How the comparison may be biased.")
    assert any("gemmini_cycles" in p and "'0.37%'" in p for p in problems)
    assert any("'0.93%'" in p for p in problems)


def test_a_summary_figure_typed_over_fails(tmp_path):
    section = rs.sections(RESULTS.read_text())["gemmini_cycles"]
    summary = rs.split_section(section).summary
    figure = summary.split("geomean ", 1)[1].split(";")[0]
    problems = _doctor(tmp_path, f"geomean {figure};", f"geomean {float(figure) + 0.1:.3f};")
    assert any("gemmini_cycles: summary is not the one its tables give" in p for p in problems)


def test_a_table_cell_changed_under_its_summary_fails(tmp_path):
    """A table edited (or rerun) without its summary: the summary no longer matches."""
    problems = _doctor(tmp_path, "| _outputs_3356 | 205,005 | 1.6 | 205,005 | 24.6 | 1.00 |",
                       "| _outputs_3356 | 205,005 | 1.6 | 205,005 | 24.6 | 0.90 |")
    assert any(p.startswith("peers: summary is not the one its tables give") for p in problems)


def test_text_outside_the_sections_fails(tmp_path):
    problems = _doctor(tmp_path, "# Benchmark results\n",
                       "# Benchmark results\n\n### Reading the tables\n\nThe bench table gives 0.2% median.\n")
    assert any("outside any benchmark's section" in p for p in problems)


def test_a_section_without_its_sidecar_fails(tmp_path):
    _doctor(tmp_path, "# Benchmark results", "# Benchmark results")
    (tmp_path / rs.SIDECAR_DIR / "peers.json").unlink()
    assert "peers: no sidecar results/peers.json" in rs.check_file(tmp_path / "RESULTS.md")


def test_prose_numbers_skip_identifiers_code_and_versions():
    text = ("res2a_branch2b 3x3 64->64 @14 on x86_64, Gemmini f13847e, Chipyard 1.10.0, ResNet-50, "
            "`--time-limit 60`: took 1.3-2.3x, 12% and 1,311,744 cycles")
    assert [t for t, _, _ in rs.prose_numbers(text)] == ["1.3", "2.3x", "12%", "1,311,744"]
    assert rs.prose_numbers("0.25 s")[0][1:] == (0.25, 0.005)
    assert rs.cell_number("5e867") is None and rs.cell_number("7.4e-07") == (7.4e-07, 0.05e-07)


def _console(rows, title="toy: ratios") -> Console:
    console = Console(record=True, width=100)
    table = Table(title=title)
    for col in ("layer", "program", "cycles", "ratio", "err", "check"):
        table.add_column(col)
    for r in rows:
        table.add_row(*r)
    console.print(table)
    return console


ROWS = [("a_layer_with_a_long_name", "cosa", "1,000", "2.00", "-10%", "PASS"),
        ("", "vendor", "2,000", "-", "+30%", "FAIL"),
        ("b", "cosa", "4,000", "0.50 SLOWER", "+5%", "PASS"),
        ("geomean", "", "2,000", "1.00", "", "")]


def test_tables_are_parsed_with_groups_wrapped_cells_and_aggregate_rows():
    console = Console(record=True, width=60)
    table = Table(title="wrapped")
    table.add_column("layer", max_width=8, overflow="fold")
    table.add_column("x")
    table.add_row("a_very_long_layer", "1.5")
    table.add_row("b", "2.5")
    console.print(table)
    [parsed] = rs.parse_tables(console.export_text())
    assert parsed.title == "wrapped" and parsed.columns == ["layer", "x"]
    assert [r[1] for r in parsed.rows] == ["1.5", "2.5"] and parsed.rows[0][0].replace(" ", "") == "a_very_long_layer"
    [toy] = rs.parse_tables(_console(ROWS).export_text())
    assert len(toy.rows) == 4 and toy.rows[1][:2] == ["", "vendor"]


def test_summary_stats():
    tables = rs.parse_tables(_console(ROWS).export_text())
    ratio = rs.summarize_one(tables, {"table": 0, "column": "ratio", "what": "vendor over cosa",
                                      "stats": ["geomean", "min", "max", "below:1"]})
    assert ratio == ("vendor over cosa (3 rows, 2 with a number): geomean 1.000; min 0.50 (b); "
                     "max 2.00 (a_layer_with_a_long_name); below 1 on 1 of 2 (b).")
    err = rs.summarize_one(tables, {"table": 0, "column": "err", "rows": {"program": "cosa"}, "what": "error",
                                    "stats": ["absmedian", "absmax"]})
    assert err == "error (2 rows): |median| 7.5%; |max| 10% (a_layer_with_a_long_name)."
    checks = rs.summarize_one(tables, {"title": "toy", "column": "check", "what": "checks", "stats": ["equal:PASS"]})
    assert checks == "checks (3 rows): PASS on 2 of 3."
    assert rs.summarize_one(tables, {"title": "absent", "column": "check", "stats": ["equal:PASS"]}) == ""
    with pytest.raises(ValueError):
        rs.summarize_one(tables, {"table": 0, "column": "ratio", "stats": ["mode"]})


def test_save_outputs_writes_a_section_and_sidecar_that_pass_the_check(tmp_path):
    results = tmp_path / "RESULTS.md"
    spec = [{"table": 0, "column": "cycles", "what": "cycles", "stats": ["sum", "max"]}]
    for name in ("toy", "other"):
        rs.save_outputs(name=name, title="Toy", command="python bench/toy.py --limit 60", date="2026-01-01 00:00 UTC",
                        machine="Linux x86_64, 2 cores", console=_console(ROWS), data={"raw": [1000.4, 1999.6]},
                        json_path=None, results_path=str(results), notes="Limit 60 s per layer.", summary=spec)
    text = results.read_text()
    assert "Summary (computed from the tables below): cycles (3 rows): sum 7,000; max 4,000 (b)." in text
    assert re.search(r"^Versions: .*numpy \d", text, re.M) and "Command: `python bench/toy.py --limit 60`" in text
    assert rs.check_file(results) == []
    rs.save_outputs(name="toy", title="Toy", command="python bench/toy.py", date="2026-01-01 00:00 UTC",
                    machine="Linux x86_64, 2 cores", console=_console(ROWS), data={}, json_path=None,
                    results_path=str(results), notes="About 37 cycles per command.", summary=spec)
    assert list(rs.sections(results.read_text())) == ["toy", "other"]
    assert [p for p in rs.check_file(results) if "'37'" in p]


def test_the_recorded_tvm_summary_is_the_one_the_script_computes():
    import importlib.util

    spec = importlib.util.spec_from_file_location("cpu_kernels_bench", ROOT / "bench" / "cpu_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.TVM_COLUMNS == mod.tvm_summary((64, 256))
