"""bench/peers_zigzag.py: every layer is a full row, a skipped one with its reason, never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import peers_zigzag as pz  # noqa: E402
from cosa.baselines.zigzag_mapper import zigzag_version  # noqa: E402
from costmodel import preset  # noqa: E402
from workloads import zoo  # noqa: E402

# CI installs the test extra, which has zigzag-dse: these run there; elsewhere they need the zigzag extra
needs_zigzag = pytest.mark.skipif(zigzag_version() is None,
                                  reason="ZigZag is not installed (pip install cosa-framework[zigzag])")

COSA = {"cycles": 100.0, "energy_pj": 2e6, "zigzag_cycles": 110.0, "zigzag_energy_pj": 2.1e6, "cpu_s": 1.0,
        "why": "ZigZag adds 5 cycles to fill and 5 to drain"}
ROWS = [
    {"layer": "a", "arch": "simba", "cosa": COSA,
     "default": {"cycles": 120.0, "energy_pj": 2.2e6, "zigzag_cycles": 115.0, "zigzag_energy_pj": 2.0e6,
                 "cpu_s": 20.0, "exact": True, "moved_loops": [], "readback_error": None}},
    {"layer": "b", "arch": "simba", "cosa": COSA,
     "default": {"cycles": 300.0, "energy_pj": 3e6, "zigzag_cycles": 90.0, "zigzag_energy_pj": 1.9e6, "cpu_s": 9.0,
                 "exact": False, "moved_loops": ["loop K=2 sits ..."], "readback_error": None,
                 "adapted_zigzag_cycles": 200.0, "adapted_zigzag_energy_pj": 2.5e6}},
    {"layer": "b2", "arch": "simba", "cosa": {**COSA, "padded": {"K": [512, 513]}},
     "default": {"cycles": 150.0, "energy_pj": 3e6, "zigzag_cycles": 90.0, "zigzag_energy_pj": 1.9e6, "cpu_s": 9.0,
                 "exact": False, "moved_loops": ["loop K=2 sits ..."], "readback_error": None,
                 "adapted_zigzag_cycles": 90.5, "adapted_zigzag_energy_pj": 1.9e6, "padded": {"P": [56, 64]}}},
    {"layer": "a2", "arch": "simba", "cosa": COSA,
     "default": {"cycles": 100.0, "energy_pj": 2e6, "zigzag_cycles": 100.0, "zigzag_energy_pj": 2.0e6,
                 "cpu_s": 20.0, "exact": True, "moved_loops": [], "readback_error": None,
                 "level_order": ["DRAM", "GlobalBuffer", "InputBuffer", "AccumulationBuffer", "WeightBuffer"]}},
    {"layer": "c", "arch": "simba", "cosa": COSA,
     "default": {"zigzag_cycles": 90.0, "zigzag_energy_pj": 1.9e6, "cpu_s": 9.0, "exact": False, "moved_loops": [],
                 "readback_error": "ZigZag covers P=56 with factors multiplying to 64 (a ragged tiling)"}},
    {"layer": "d", "arch": "simba", "cosa": COSA, "default": {"error": "ZigZag failed on layer d: boom"}},
    {"layer": "e", "arch": "simba", "skip": "level DRAM sets read_row_extra_cycles, which ZigZag does not model"},
]


@pytest.mark.parametrize("what", ["cycles", "energy"])
def test_every_row_of_the_schedule_table_is_full_and_says_why_when_empty(what):
    text = pz.schedule_table(ROWS, "simba", "default", what)
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    header, body = lines[0], lines[2:]
    assert len(body) == len(ROWS)
    assert all(ln.count("|") == header.count("|") for ln in body)
    assert "| 1.200 |" in body[0] or what == "energy"
    # a nearest mapping ZigZag prices far from LOMA's own is not LOMA's: no number in its columns
    assert "nearest: 1 loop(s) moved, which ZigZag prices at 2.222x LOMA's own; ours 300" in body[1] or \
        what == "energy"
    assert "| b | 100 | - | - |" in body[1] or what == "energy"
    # ... one it prices within NEAR stands for LOMA's
    assert "| b2 | 100 | 150 | 1.500 |" in body[2] or what == "energy"
    assert "(P 56 padded to 64)" in body[2]
    assert "| K 512 to 513 |" in body[2] or what == "energy"
    assert "exact (levels as GlobalBuffer > InputBuffer > AccumulationBuffer > WeightBuffer)" in body[3]
    assert "not expressible: ZigZag covers P=56" in body[4]
    assert "failed: ZigZag failed on layer d" in body[5]
    assert "skipped: level DRAM sets read_row_extra_cycles" in body[6]


def test_the_disagreement_table_gives_ratios_and_the_mechanisms():
    text = pz.disagreement_table(ROWS, "simba")
    assert "| a | 1.100 | 1.050 | ZigZag adds 5 cycles to fill" in text
    assert "| e |" not in text  # a skipped layer has no mapping to price


def test_the_no_ties_table_sets_the_search_without_tie_breaks_beside_cosa_and_loma():
    fast = {"cycles": 101.0, "energy_pj": 3e6, "zigzag_cycles": 111.0, "cpu_s": 0.5}
    rows = [{**ROWS[0], "cosa_no_ties": fast}, {**ROWS[5], "cosa_no_ties": {**fast, "error": "ZigZag cannot price it"}},
            ROWS[6]]
    del rows[1]["cosa_no_ties"]["zigzag_cycles"]
    lines = [ln for ln in pz.no_ties_table(rows, "simba", ["default"]).splitlines() if ln.startswith("|")]
    assert len(lines) == 4 and all(ln.count("|") == lines[0].count("|") for ln in lines[2:])
    # cycles 101 / 100 with ties, energy 3 / 2 uJ, ZigZag 111 / LOMA's 115, LOMA's 20 s / 0.5 s
    assert lines[2] == "| a | 101 | 1.010 | 1.500 | 111 | 0.965 | 0.50 | 40.0 |"
    assert lines[3] == "| d | 101 | 1.010 | 1.500 | ZigZag cannot price it | - | 0.50 | - |"


@needs_zigzag
def test_an_arch_zigzag_cannot_state_is_a_row_with_the_reason():
    row = pz.run_layer(zoo.layer("bert_base_128/attention_context"), preset("gemmini"), ["default"], 5.0)
    assert set(row) == {"layer", "arch", "skip"} and "does not model" in row["skip"]


def test_zigzag_rules_set_only_the_flags_asked_for():
    simba = preset("simba")
    assert pz.zigzag_rules(simba) is simba
    arch = pz.zigzag_rules(simba, refill_needs_room=True, fill_before_compute=True, whole_windows=True)
    assert arch.params["refill_needs_room"] and arch.params["fill_before_compute"]
    assert arch.params["delta_fetch"] is False and simba.params["delta_fetch"] is True
    assert pz.zigzag_rules(simba, whole_windows=True).params.keys() == simba.params.keys()


@needs_zigzag
def test_whole_windows_count_a_sliding_input_tile_as_zigzag_does_but_for_the_padding_rows():
    from cosa.baselines.zigzag_compare import count_differences
    from cosa.baselines.zigzag_mapper import build, zigzag_evaluate
    from costmodel import evaluate
    from mappings import LevelMapping, Mapping, validate
    from workloads import conv2d

    w = conv2d("c3", C=16, K=16, P=16, Q=16, R=3, S=3, padding=1)
    simba = preset("simba")
    m = Mapping((LevelMapping({"P": 4}, {}, ("P",)), LevelMapping(spatial={"K": 2, "C": 2, "Q": 4}),
                 LevelMapping(spatial={"K": 8}), LevelMapping(), LevelMapping({"R": 3, "S": 3}, {"C": 8}),
                 LevelMapping({"P": 4, "Q": 4})))
    validate(m, w, simba)
    theirs = zigzag_evaluate(w, simba, m)
    _, _, _, hw = build(w, simba)

    def dram_input_reads(arch):
        cost = evaluate(w, arch, m)
        diff = [d for d in count_differences(w, arch, m, cost, theirs, hw)
                if (d.level, d.tensor, d.kind) == ("DRAM", "Inputs", "reads")]
        return cost.accesses["DRAM"]["Inputs"].reads, diff[0].zigzag

    # four row tiles of 4 output rows: 6 input rows each, 16 x 16 channels by columns
    delta, zz = dram_input_reads(simba)  # the preset (Timeloop's rule): only the 4 new rows after the first tile
    assert delta == 16 * 16 * 16 and zz == pytest.approx(24 * 256, abs=8)  # ZigZag: 6 rows every tile
    whole, _ = dram_input_reads(pz.zigzag_rules(simba, whole_windows=True))
    assert whole == (5 + 6 + 6 + 5) * 256  # every window again, less the padding rows at the two borders


def test_a_tie_tolerance_outside_zero_to_one_is_refused(capsys):
    import peers

    assert peers.main(["zigzag", "--tie-tolerance", "1.5", "--quick"]) == 2
    assert "--tie-tolerance" in capsys.readouterr().err


def test_a_repeat_below_one_is_refused(capsys):
    import peers

    assert peers.main(["zigzag", "--repeat", "0", "--quick"]) == 2
    assert "--repeat" in capsys.readouterr().err


def test_more_rounds_keep_each_searchs_fastest_cpu_seconds_and_every_round(monkeypatch):
    import types

    import cosa
    import cosa.baselines.zigzag_mapper as zm

    cpu = iter([0.5, 0.2, 7.0, 0.6, 0.1, 9.0])  # round 2: cosa, no ties, LOMA; round 3 the same
    clock = {"t": 0.0}

    def tick():
        return clock["t"]

    def search():
        clock["t"] += next(cpu)

    def fake_schedule(workload, arch, **options):
        search()
        return types.SimpleNamespace(cost=types.SimpleNamespace(cycles=100.0, energy_pj=2e6))

    def fake_loma(workload, arch, setting):
        start = clock["t"]
        search()
        return types.SimpleNamespace(cpu_s=clock["t"] - start, wall_s=clock["t"] - start)

    monkeypatch.setattr(cosa, "schedule", fake_schedule)
    monkeypatch.setattr(zm, "loma", fake_loma)
    monkeypatch.setattr(pz.time, "process_time", tick)
    monkeypatch.setattr(pz.time, "perf_counter", tick)
    row = {"cosa": {"cycles": 100.0, "energy_pj": 2e6, "cpu_s": 1.0, "wall_s": 1.0},
           "cosa_no_ties": {"cycles": 100.0, "energy_pj": 2e6, "cpu_s": 0.3, "wall_s": 0.3},
           "default": {"cpu_s": 8.0, "wall_s": 8.0}, "large": {"error": "ZigZag failed"}}
    layer, arch = types.SimpleNamespace(name="res2a"), types.SimpleNamespace(name="eyeriss")
    pz._more_rounds(row, layer, arch, ["default", "large"], 2, {})
    assert row["cosa"]["cpu_rounds"] == pytest.approx([1.0, 0.5, 0.6]) and row["cosa"]["cpu_s"] == pytest.approx(0.5)
    assert row["cosa_no_ties"]["cpu_rounds"] == pytest.approx([0.3, 0.2, 0.1])
    assert row["cosa_no_ties"]["cpu_s"] == pytest.approx(0.1)
    assert row["default"]["cpu_rounds"] == pytest.approx([8.0, 7.0, 9.0]) and row["default"]["cpu_s"] == 7.0
    assert "cpu_rounds" not in row["large"]  # a setting that failed is not run again

    # cosa's search is deterministic: another schedule in a later round is an error, not a silent minimum
    row["cosa"]["cycles"] = 99.0
    cpu = iter([0.5, 0.2, 7.0])
    with pytest.raises(RuntimeError, match="another schedule"):
        pz._more_rounds(row, layer, arch, ["default"], 1, {})
