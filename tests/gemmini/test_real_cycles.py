"""Our timing model against cycles recorded on Gemmini's real RTL (``tests/data/chipyard/real_cycles.json``:
Chipyard 1.10.0, Gemmini f13847e, Verilator 5.006; 9 ResNet-50- and BERT-shaped layers, each as the
library's loop-instruction calls with cosa's tuned tiles and with the library's own).  No simulator is
needed: the programs' streams are rebuilt and timed, and the recorded real cycles are the reference.

Where the model stands (``python bench/gemmini_chipyard.py`` with no simulator set prints the table): median
|error| 11.1%, max 39.3% over the 18 programs; it is optimistic on LOOP_CONV_WS streams with large
kernels or strides (conv1 7x7/2 -39%/-34%, res4a 3x3/2 -29%/-15%) and pessimistic on a 1x1 LOOP_WS with
ragged edges (+30%/+31%).  The targets (median 5%, max 15%) are not met; the bounds below are today's
figures, so a change that makes the model worse against the real machine fails here."""

from dataclasses import replace
from pathlib import Path

import pytest

from gemmini import real_cycles as rc
from gemmini.errors import SimulationError

DATA = Path(__file__).parent.parent / "data" / "chipyard" / "real_cycles.json"


@pytest.fixture(scope="module")
def errors():
    return rc.compare(rc.load(DATA))


def test_recording_states_its_provenance():
    rec = rc.load(DATA)
    assert rec.simulator["chipyard"] == "1.10.0" and rec.simulator["gemmini"] == "f13847e"
    assert rec.simulator["verilator"] and rec.simulator["memory_model"] and rec.recorded["date"]
    assert len(rec.programs) == 18 and {p.style for p in rec.programs} == {"loops", "vendor"}


def test_timing_model_against_the_real_rtl_no_worse_than_recorded(errors):
    s = rc.summary(errors)
    assert s["all"]["n"] == 18
    assert s["all"]["median"] <= 0.12 and s["all"]["max"] <= 0.40, s
    for style in rc.STYLES:
        assert s[style]["median"] <= 0.13, (style, s[style])


def test_timing_model_ranks_each_layers_programs_as_the_real_rtl_does(errors):
    by_layer = {}
    for e in errors:
        by_layer.setdefault(e.program.layer, {})[e.program.style] = e
    assert len(by_layer) == 9
    for layer, pair in by_layer.items():
        real = pair["loops"].program.real_cycles < pair["vendor"].program.real_cycles
        model = pair["loops"].model_cycles < pair["vendor"].model_cycles
        assert real == model, layer


def test_recording_from_another_configuration_is_refused(tmp_path):
    rec = rc.load(DATA)
    with pytest.raises(SimulationError, match=r"config\.dma_latency_cycles.*recorded at 16"):
        rc.load(DATA, replace(rec.config, dma_latency_cycles=40))
    bad = tmp_path / "bad.json"
    bad.write_text(DATA.read_text().replace('"dma_latency_cycles"', '"dram_latency"'))
    with pytest.raises(SimulationError, match=r"config\.dram_latency.*not a GemminiConfig field"):
        rc.load(bad)
    bad.write_text(DATA.read_text().replace('"style": "vendor"', '"style": "explicit"', 1))
    with pytest.raises(SimulationError, match=r"programs\[1\]\.style"):
        rc.load(bad)
