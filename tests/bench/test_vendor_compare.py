"""The ratios the Gemmini benchmarks print (bench/vendor_compare.py), and one vendor row run for real."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import vendor_compare as vc  # noqa: E402

import workloads  # noqa: E402


def test_summarize_ratios_weighting_and_slower_layers():
    rows = [{"layer": "a", "repeat": 1, "vendor": 200, "cosa": 100},
            {"layer": "b", "repeat": 3, "vendor": 90, "cosa": 100},
            {"layer": "c", "repeat": 2, "vendor": None, "cosa": 50}]
    s = vc.summarize(rows)
    assert s["speedups"] == {"a": 2.0, "b": 0.9, "c": None}
    assert s["geomean"] == pytest.approx(math.sqrt(2.0 * 0.9))
    assert s["weighted"] == pytest.approx((200 + 3 * 90) / (100 + 3 * 100))
    assert s["slower"] == ["b"]
    assert s["compared"] == 2


def test_geomean_skips_missing_and_fmt_dashes():
    assert vc.geomean([4.0, None, float("nan"), 1.0]) == pytest.approx(2.0)
    assert math.isnan(vc.geomean([None]))
    assert vc.fmt(None, ".2f") == "-" and vc.fmt(1.234, ".1f") == "1.2"


def test_vendor_row_runs_the_library_stream_bit_exact():
    wl = workloads.matmul("mm", M=40, N=24, K=36)  # ragged in every dimension
    row = vc.vendor_row(wl, scale=1.0 / 16)
    assert row.get("verified") is True, row
    assert row["path"] == "tiled_matmul_auto"
    assert row["cycles"] > wl.macs / 256 and 0 < row["utilization"] < 1
