"""Fuzzed fields through every command: no traceback, no hang, one line on bad input.

The seed files of ``test_fuzz_inputs`` (workloads in every form, networks,
arch files in both forms, mapping files in both forms, ONNX graphs) are parsed
and one field is removed, given a value of the wrong type, or a huge (2^24 ..
2^63, 1e300) or tiny (0, -1, 1e-300) number; ONNX graphs get attributes of the
wrong type, nodes without outputs or op type, and huge or tiny shapes.  Each
file goes through one of the commands that read its kind: ``show``,
``schedule``, ``bound``, ``evaluate``, ``compare``, ``emit gemmini``, ``run
gemmini``, ``arch show``.  Exit 0 with the command's output, exit 2 with one
line naming the file, or (``compare``, where a scheduler may fail on a layer)
exit 1; never a traceback, never longer than the per-case limit.  Cases run
in-process through ``cosa.cli.main``, like ``test_fuzz_inputs``.
"""

import random
from dataclasses import replace
from pathlib import Path

import pytest

from fuzz_support import (CONV3X3, COSA_V02_ARCH, FLAT_CNN, NETWORKS, SINGLE_LAYER, STRUCT_MUTATIONS, Case,
                          _arch_seeds, _mapping_seeds, _onnx_models, _write, check_outcome, mutate_onnx,
                          mutate_structure, run_in_process)

ROOT = Path(__file__).resolve().parents[2]
SEED = 23
CONV3X3_PATH = str(ROOT / "examples" / "conv3x3.yaml")

WORKLOAD_COMMANDS = ["show", "schedule", "bound", "bound-arch", "evaluate", "compare", "emit-gemmini",
                     "run-gemmini"]
ARCH_COMMANDS = ["arch-show", "bound", "evaluate", "schedule", "compare"]
MAPPING_COMMANDS = ["evaluate", "emit-gemmini"]
ONNX_COMMANDS = ["show", "schedule", "bound", "compare", "emit-gemmini"]
LARGE_SEEDS = (CONV3X3, FLAT_CNN)  # 256 x 256 and 32 x 64 channels: executing them takes long, emitting does not


def build_cases() -> list[Case]:
    rng = random.Random(SEED)
    cases: list[Case] = []

    def add(kind, command, content, suffix=".yaml"):
        cases.append(Case(f"{len(cases):03d}-{kind}-{command}", kind, command, content, suffix))

    for round_ in range(3):
        for s, seed in enumerate(SINGLE_LAYER):
            for how in STRUCT_MUTATIONS:
                command = WORKLOAD_COMMANDS[(s + round_ + len(cases)) % len(WORKLOAD_COMMANDS)]
                if command == "run-gemmini" and seed in LARGE_SEEDS:
                    command = "emit-gemmini"
                add("workload", command, mutate_structure(rng, seed, how))
    for n, seed in enumerate(NETWORKS):
        for how in STRUCT_MUTATIONS:
            add("workload", ("show", "compare")[(n + len(cases)) % 2] if seed is NETWORKS[-1] else "show",
                mutate_structure(rng, seed, how))
    for round_ in range(3):
        for a, seed in enumerate(_arch_seeds()):
            for how in STRUCT_MUTATIONS:
                add("arch", ARCH_COMMANDS[(a + round_ + len(cases)) % len(ARCH_COMMANDS)],
                    mutate_structure(rng, seed, how))
    for round_ in range(3):
        for seed in _mapping_seeds():
            for how in STRUCT_MUTATIONS:
                add("mapping", MAPPING_COMMANDS[(round_ + len(cases)) % len(MAPPING_COMMANDS)],
                    mutate_structure(rng, seed, how))
    for round_ in range(2):
        for m, model in enumerate(_onnx_models()):
            for how in ("fields-wide",) * 4 + ("fields",) * 2:
                add("onnx", ONNX_COMMANDS[(m + round_ + len(cases)) % len(ONNX_COMMANDS)],
                    mutate_onnx(rng, model, how), ".onnx")
    return cases


CASES = build_cases()


def argv_for(case: Case, path: Path, good_mapping: Path, out_dir: Path) -> list[str]:
    f = str(path)
    sched = ["--scheduler", "gemmini-default"]
    compare = ["--schedulers", "gemmini-default,random", "--random-samples", "3", "--json"]
    emit = ["emit", "gemmini", "-o", str(out_dir / "out.c")]
    if case.kind in ("workload", "onnx"):
        return {"show": ["show", f, "--json"],
                "schedule": ["schedule", f, "--arch", "gemmini", *sched, "--json"],
                "bound": ["bound", f, "--memory", "64KiB", "--json"],
                "bound-arch": ["bound", f, "--arch", "gemmini", "--json"],
                "evaluate": ["evaluate", f, "--arch", "gemmini", "--mapping", str(good_mapping), "--json"],
                "compare": ["compare", f, *compare],
                "emit-gemmini": [*emit, f, *sched],
                "run-gemmini": ["run", "gemmini", f, *sched, "--json"],
                }[case.command]
    if case.kind == "arch":
        return {"arch-show": ["arch", "show", f, "--json"],
                "bound": ["bound", CONV3X3_PATH, "--arch", f, "--json"],
                "evaluate": ["evaluate", CONV3X3_PATH, "--arch", f, "--mapping", str(good_mapping), "--json"],
                "schedule": ["schedule", CONV3X3_PATH, "--arch", f, *sched, "--json"],
                "compare": ["compare", CONV3X3_PATH, "--arch", f, *compare],
                }[case.command]
    return {"evaluate": ["evaluate", CONV3X3_PATH, "--arch", "gemmini", "--mapping", f, "--json"],
            "emit-gemmini": [*emit, CONV3X3_PATH, "--mapping", f]}[case.command]


@pytest.fixture(scope="module")
def good_mapping(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "conv3x3_mapping.yaml"
    path.write_text(_mapping_seeds()[0])
    return path


def test_enough_cases_of_every_kind():
    import test_fuzz_inputs

    kinds = {(c.kind, c.command) for c in CASES}
    assert {("workload", c) for c in WORKLOAD_COMMANDS} <= kinds
    assert {("arch", c) for c in ARCH_COMMANDS} <= kinds and {("mapping", c) for c in MAPPING_COMMANDS} <= kinds
    assert {("onnx", c) for c in ONNX_COMMANDS} <= kinds
    both = CASES + test_fuzz_inputs.CASES
    assert len(both) >= 500
    assert all(sum(c.kind == kind for c in both) >= 60 for kind in ("workload", "arch", "mapping", "onnx"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.ident)
def test_fuzzed_field(case, tmp_path, good_mapping):
    path = _write(case, tmp_path)
    code, out, err = run_in_process(argv_for(case, path, good_mapping, tmp_path))
    emits = case.command == "emit-gemmini"
    check_outcome(code, out, err, json_out=not emits, note="wrote" if emits else None,
                  may_fail=case.command == "compare")


def test_the_mutations_change_the_seeds():
    rng = random.Random(1)
    for how in STRUCT_MUTATIONS:
        assert mutate_structure(rng, COSA_V02_ARCH, how) != COSA_V02_ARCH
    assert replace(CASES[0], content="") != CASES[0]
