"""timeloop-mapper as a scheduler: the plumbing with a stand-in binary, and the real one when TIMELOOP_MAPPER is set."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from cosa import SchedulingError, compare, schedule
from costmodel import evaluate, load_arch
from mappings import validate
from mappings.timeloop import dump_timeloop, mapspace_constraints
from workloads import conv2d

ARCH_FILE = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "arch" / "cosa-simba.yaml"
LAYER = conv2d("c", C=32, K=32, H=14, W=14, R=3, S=3, padding=1)


@pytest.fixture(scope="module")
def arch():
    if not ARCH_FILE.is_file():
        pytest.fail(f"the CoSA Simba arch file is missing: {ARCH_FILE}")
    return load_arch(ARCH_FILE)


def _stand_in(tmp_path: Path, mapping_yaml: str, cycles: int, fail: bool = False) -> Path:
    """A script that acts like timeloop-mapper: checks its four arguments and writes a mapping and stats."""
    (tmp_path / "answer.yaml").write_text(mapping_yaml)
    script = tmp_path / "fake-timeloop-mapper"
    script.write_text(f"""#!{sys.executable}
import shutil, sys
args = sys.argv[1:]
assert len(args) == 4 and args[1] == "problem.yaml" and args[3] == "mapper.yaml", args
print("mapper starting")
if {fail!r}:
    print("ERROR: the stand-in fails on purpose")
    sys.exit(3)
shutil.copy({str(tmp_path / "answer.yaml")!r}, "timeloop-mapper.map.yaml")
open("timeloop-mapper.stats.txt", "w").write("Summary Stats\\n-------------\\nCycles: {cycles}\\nEnergy: 1.00 uJ\\n")
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_the_mappers_best_mapping_comes_back_validated_and_priced(arch, tmp_path):
    known = schedule(LAYER, arch, scheduler="random", bound=False).mapping
    binary = _stand_in(tmp_path, dump_timeloop(known, LAYER, arch), cycles=12345)
    s = schedule(LAYER, arch, scheduler="timeloop-mapper", time_limit_s=2, bound=False, binary=str(binary),
                 workdir=str(tmp_path / "run"))
    assert s.scheduler == "timeloop-mapper" and s.mapping == known
    validate(s.mapping, LAYER, arch)
    assert s.cost.cycles == evaluate(LAYER, arch, known).cycles
    assert s.extra["timeloop_cycles"] == 12345 and s.extra["search_size"] == 200
    space = (tmp_path / "run" / "mapspace.yaml").read_text()
    assert "bypass" in space  # CoSA's mapspace: each level keeps only the tensors it may hold


def test_mapspace_keeps_what_each_level_may_hold(arch):
    doc = mapspace_constraints(LAYER, arch)["mapspace"]["constraints"]
    for c in doc:
        level = next(lv for lv in arch.levels if lv.name == c["target"])
        assert all(level.may_hold(LAYER.tensor(t)) for t in c["keep"])
        assert not any(level.may_hold(LAYER.tensor(t)) for t in c["bypass"])


def test_refusals_are_one_line(arch, tmp_path, monkeypatch):
    monkeypatch.delenv("TIMELOOP_MAPPER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SchedulingError, match="TIMELOOP_MAPPER"):
        schedule(LAYER, arch, scheduler="timeloop-mapper", bound=False)
    with pytest.raises(SchedulingError, match="Timeloop/CoSA YAML"):
        schedule(LAYER, load_arch("simba"), scheduler="timeloop-mapper", bound=False, binary="/bin/true")
    failing = _stand_in(tmp_path, "", cycles=1, fail=True)
    with pytest.raises(SchedulingError) as info:
        schedule(LAYER, arch, scheduler="timeloop-mapper", bound=False, binary=str(failing),
                 workdir=str(tmp_path / "run"))
    text = str(info.value)
    assert "exit 3" in text and "fails on purpose" in text and "timeloop-mapper.log" in text and "\n" not in text
    assert info.value.exit_code == 1


def test_compare_runs_it_beside_cosa(arch, tmp_path, monkeypatch):
    known = schedule(LAYER, arch, scheduler="random", bound=False).mapping
    binary = _stand_in(tmp_path, dump_timeloop(known, LAYER, arch), cycles=1)
    monkeypatch.setenv("TIMELOOP_MAPPER", str(binary))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the mapper's work folder, which it keeps
    result = compare([LAYER], arch, ["cosa", "timeloop-mapper"], progress=False, time_limit_s=10)
    rows = {r.scheduler: r for r in result.rows}
    assert rows["timeloop-mapper"].ok and rows["cosa"].cycles <= rows["timeloop-mapper"].cycles


@pytest.mark.skipif(not os.environ.get("TIMELOOP_MAPPER"), reason="set TIMELOOP_MAPPER to a timeloop-mapper binary")
def test_live_mapper_agrees_with_our_cost_model(arch, tmp_path):
    s = schedule(LAYER, arch, scheduler="timeloop-mapper", time_limit_s=2, bound=False, workdir=str(tmp_path))
    assert s.cost.cycles == pytest.approx(s.extra["timeloop_cycles"], rel=0.01)
