"""Fuzzed input files through every command that reads one: no traceback, no hang, one line on bad input.

Seeded mutations of the shipped workload files (``examples/``, the zoo) and of
workload, architecture, mapping and ONNX files in every form the readers
accept (truncation, wrong numbers, repeated keys, unknown and swapped dims,
tabs, binary bytes, empty files, alias bombs, deep nesting, corrupted ONNX
bytes and fields) go through ``cosa show``, ``schedule``, ``bound``,
``evaluate --mapping`` and ``arch show``.  Each case must exit 0 with JSON on
stdout and nothing on stderr, or exit 2 with exactly one line on stderr, within
a time limit.  Cases run in-process through ``cosa.cli.main``; a few run
through a real ``python -m cosa.cli`` process too.
"""

import random
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz_support import (CONV3X3, NETWORKS, ONNX_MUTATIONS, SINGLE_LAYER, TEXT_MUTATIONS, Case, _arch_seeds, _bomb,
                          _deep, _mapping_seeds, _onnx_models, _write, check_outcome, mutate, mutate_onnx,
                          run_in_process)

ROOT = Path(__file__).resolve().parents[2]
SEED = 19

WORKLOAD_COMMANDS = ["show", "schedule", "bound", "bound-arch", "evaluate"]
ARCH_COMMANDS = ["arch-show", "bound", "evaluate", "schedule"]
ONNX_COMMANDS = ["show", "schedule", "bound"]


def build_cases() -> list[Case]:
    rng = random.Random(SEED)
    cases: list[Case] = []

    def add(kind, command, content, suffix=".yaml"):
        cases.append(Case(f"{len(cases):03d}-{kind}-{command}", kind, command, content, suffix))

    for round_ in range(2):
        for s, seed in enumerate(SINGLE_LAYER):
            for how in TEXT_MUTATIONS:
                add("workload", WORKLOAD_COMMANDS[(s + round_ + len(cases)) % len(WORKLOAD_COMMANDS)],
                    mutate(rng, seed, how))
    for seed in NETWORKS:
        for how in TEXT_MUTATIONS:
            add("workload", "show", mutate(rng, seed, how))
    add("workload", "show", mutate(rng, CONV3X3, "problem_wrapper"))
    add("workload", "schedule", mutate(rng, CONV3X3, "problem_wrapper"))
    for a, seed in enumerate(_arch_seeds()):
        for how in TEXT_MUTATIONS:
            add("arch", ARCH_COMMANDS[(a + len(cases)) % len(ARCH_COMMANDS)], mutate(rng, seed, how))
    for round_ in range(2):
        for seed in _mapping_seeds():
            for how in TEXT_MUTATIONS:
                add("mapping", "evaluate", mutate(rng, seed, how))
    for round_ in range(3):
        for m, model in enumerate(_onnx_models()):
            for how in ONNX_MUTATIONS:
                add("onnx", ONNX_COMMANDS[(m + round_ + len(cases)) % len(ONNX_COMMANDS)],
                    mutate_onnx(rng, model, how), ".onnx")
    return cases


CASES = build_cases()
CONV3X3_PATH = str(ROOT / "examples" / "conv3x3.yaml")


def argv_for(case: Case, path: Path, good_mapping: Path) -> list[str]:
    f = str(path)
    sched = ["--scheduler", "gemmini-default", "--json"]
    if case.kind in ("workload", "onnx"):
        return {"show": ["show", f, "--json"],
                "schedule": ["schedule", f, "--arch", "gemmini", *sched],
                "bound": ["bound", f, "--memory", "64KiB", "--json"],
                "bound-arch": ["bound", f, "--arch", "gemmini", "--json"],
                "evaluate": ["evaluate", f, "--arch", "gemmini", "--mapping", str(good_mapping), "--json"],
                }[case.command]
    if case.kind == "arch":
        return {"arch-show": ["arch", "show", f, "--json"],
                "bound": ["bound", CONV3X3_PATH, "--arch", f, "--json"],
                "evaluate": ["evaluate", CONV3X3_PATH, "--arch", f, "--mapping", str(good_mapping), "--json"],
                "schedule": ["schedule", CONV3X3_PATH, "--arch", f, *sched],
                }[case.command]
    return ["evaluate", CONV3X3_PATH, "--arch", "gemmini", "--mapping", f, "--json"]



@pytest.fixture(scope="module")
def good_mapping(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "conv3x3_mapping.yaml"
    path.write_text(_mapping_seeds()[0])
    return path



def test_enough_cases_of_every_kind():
    kinds = {(c.kind, c.command) for c in CASES}
    assert len(CASES) >= 300
    assert {("workload", c) for c in WORKLOAD_COMMANDS} <= kinds
    assert {("arch", c) for c in ARCH_COMMANDS} <= kinds and ("mapping", "evaluate") in kinds
    assert {("onnx", c) for c in ONNX_COMMANDS} <= kinds


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.ident)
def test_fuzzed_file(case, tmp_path, good_mapping):
    path = _write(case, tmp_path)
    code, out, err = run_in_process(argv_for(case, path, good_mapping))
    check_outcome(code, out, err)


def test_deep_nesting_names_the_file(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("problem: " + _deep(5000) + "\n")
    for argv in (["show", str(path)], ["schedule", str(path), "--scheduler", "gemmini-default"]):
        code, out, err = run_in_process(argv)
        assert code == 2 and err.count("\n") == 1
        assert str(path) in err and "nesting too deep" in err


def test_alias_bomb_and_repeated_key_are_named(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_bomb() + "kind: matmul\nM: *x8\nN: 4\nK: 4\n")
    code, _, err = run_in_process(["show", str(bomb)], limit_s=10)
    assert code == 2 and "alias" in err and err.count("\n") == 1
    arch = tmp_path / "arch.yaml"
    arch.write_text("name: a\nlevels:\n  - {name: DRAM}\nname: b\n")
    code, _, err = run_in_process(["arch", "show", str(arch)])
    assert code == 2 and "'name' appears twice" in err


SUBPROCESS_CASES = [
    ("deep.yaml", ("problem: " + _deep(5000) + "\n").encode(), ["show", "{f}"]),
    ("bomb.yaml", (_bomb() + CONV3X3.replace("C: 256", "C: *x8")).encode(),
     ["schedule", "{f}", "--scheduler", "gemmini-default"]),
    ("arch.yaml", b"name: x\nlevels:\n  - {name: DRAM\xff\xfe}\n", ["arch", "show", "{f}"]),
    ("map.yaml", b"levels:\n  - {name: DRAM}\n  - {name: DRAM}\nlevels: []\n",
     ["evaluate", CONV3X3_PATH, "--arch", "gemmini", "--mapping", "{f}"]),
    ("model.onnx", b"\x08\x07\x12\x04junk" * 20, ["show", "{f}"]),
]


@pytest.mark.parametrize("name,content,argv", SUBPROCESS_CASES, ids=[c[0] for c in SUBPROCESS_CASES])
def test_real_process(tmp_path, name, content, argv):
    path = tmp_path / name
    path.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "cosa.cli", *[a.format(f=path) for a in argv]], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and str(path) in proc.stderr
