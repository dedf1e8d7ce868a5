"""Our timing model against cycles recorded on Gemmini's real RTL (``tests/data/chipyard/real_cycles.json``:
Chipyard 1.10.0, Gemmini f13847e, Verilator 5.006; 9 ResNet-50- and BERT-shaped layers, each as the
library's loop-instruction calls with cosa's tuned tiles and with the library's own).  No simulator is
needed: the programs' streams are rebuilt and timed, and the recorded real cycles are the reference.

Where the model stands (``python bench/gemmini_chipyard.py`` with no simulator set prints the table), at the
recording's configuration (``gemmini.config.CHIPYARD_SOC_CONFIG``: Gemmini f13847e's load, execute and store units
and the SoC's cold 64-byte lines over an 8-byte memory bus, both from the hardware's description, not fitted
to these cycles): median |error| 2.8%, max 15.1% over the 18 programs (11.1% and 39.3% with our RTL's units
and a fixed-latency memory).  The largest errors left: the small BERT attention layer (-14% / -15%: the model
is optimistic).  The median target (5%) is met, the max (15%) is not, by 0.1 point; the bounds below are today's
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
    assert s["all"]["median"] <= 0.03 and s["all"]["max"] <= 0.16, s
    for style in rc.STYLES:
        assert s[style]["median"] <= 0.035, (style, s[style])


def test_recording_is_compared_on_the_recorded_socs_load_unit_and_memory():
    """The recording states the SoC the cycles came from, and our RTL's units and fixed-latency memory
    describe another machine: on them the model is twice as far from the real cycles."""
    from gemmini.config import CHIPYARD_SOC_CONFIG, DEFAULT_CONFIG

    rec = rc.load(DATA)
    assert rec.config == replace(CHIPYARD_SOC_CONFIG, dma_latency_cycles=16)
    ours = replace(rec.config, units=DEFAULT_CONFIG.units, soc_line_fill_cycles=0)
    with pytest.raises(SimulationError, match=r"config\.units"):
        rc.load(DATA, ours)
    other = rc.summary(rc.compare(replace(rec, config=ours)))
    assert other["all"]["median"] > 0.10 and other["all"]["max"] > 0.35, other


def test_timing_model_ranks_each_layers_programs_as_the_real_rtl_does(errors):
    """Where the real RTL runs a layer's two programs more than 3% apart, the model orders them as it does;
    where it runs them within 3% (conv1's: 6,209 and 6,360 cycles), the model puts them within 3% too."""
    by_layer = {}
    for e in errors:
        by_layer.setdefault(e.program.layer, {})[e.program.style] = e
    assert len(by_layer) == 9
    close = []
    for layer, pair in by_layer.items():
        loops, vendor = pair["loops"].program.real_cycles, pair["vendor"].program.real_cycles
        model_loops, model_vendor = pair["loops"].model_cycles, pair["vendor"].model_cycles
        if abs(loops - vendor) <= 0.03 * max(loops, vendor):
            close.append(layer)
            assert abs(model_loops - model_vendor) <= 0.03 * max(model_loops, model_vendor), layer
            continue
        assert (loops < vendor) == (model_loops < model_vendor), layer
    assert [c.split()[0] for c in close] == ["conv1"]


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
