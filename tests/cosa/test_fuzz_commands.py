"""Fuzzed fields through every command: no traceback, no hang, one line on bad input.

The seed files of ``test_fuzz_inputs`` (workloads in every form, networks,
arch files in both forms, mapping files in both forms, ONNX graphs) are parsed
and one field is removed, given a value of the wrong type, or a huge (2^24 ..
2^63, 1e300) or tiny (0, -1, 1e-300) number; ONNX graphs get attributes of the
wrong type, nodes without outputs or op type, and huge or tiny shapes.  Each
file goes through one of the commands that read its kind: ``show``,
``schedule``, ``bound``, ``evaluate``, ``compare``, ``emit gemmini``, ``run
gemmini``, ``emit cpu``, ``run cpu`` (a mapping for the ``cpu`` arch: the
kernel is built with gcc and run), ``arch show``.  Exit 0 with the command's output, exit 2 with one
line naming the file, or (``compare``, where a scheduler may fail on a layer)
exit 1; never a traceback, never longer than the per-case limit.  Cases run
in-process through ``cosa.cli.main``, like ``test_fuzz_inputs``.
"""

import random
from dataclasses import replace
from pathlib import Path

import pytest

from fuzz_support import (COSA_V02_ARCH, NETWORKS, SHORT_MATMUL, SINGLE_LAYER, STRUCT_MUTATIONS, Case,
                          _arch_seeds, _mapping_seeds, _onnx_models, _write, check_outcome, mutate_onnx,
                          mutate_structure, run_in_process)

ROOT = Path(__file__).resolve().parents[2]
SEED = 23
CONV3X3_PATH = str(ROOT / "examples" / "conv3x3.yaml")

WORKLOAD_COMMANDS = ["show", "schedule", "bound", "bound-arch", "evaluate", "compare", "emit-gemmini",
                     "emit-cpu"]
ARCH_COMMANDS = ["arch-show", "bound", "evaluate", "schedule", "compare"]
MAPPING_COMMANDS = ["evaluate", "emit-gemmini"]
CPU_MAPPING_COMMANDS = ["emit-cpu", "emit-cpu", "run-cpu"]  # run: gcc builds the kernel (a second or two)
ONNX_COMMANDS = ["show", "schedule", "bound", "compare", "emit-gemmini"]
# small layers the Gemmini generator runs (int8 matmul and conv2d), for run gemmini and its neighbours
GEMMINI_SEEDS = ["kind: matmul\nname: mm8\nM: 16\nN: 24\nK: 8\nbits: 8\n",
                 "kind: conv2d\nname: c8\nC: 8\nK: 16\nH: 6\nW: 6\nR: 3\nS: 3\npadding: 1\nstride: 1\nbits: 8\n"]
GEMMINI_COMMANDS = ["run-gemmini", "emit-gemmini", "schedule", "compare", "run-gemmini", "evaluate"]


def build_cases() -> list[Case]:
    rng = random.Random(SEED)
    cases: list[Case] = []

    def add(kind, command, content, suffix=".yaml"):
        cases.append(Case(f"{len(cases):03d}-{kind}-{command}", kind, command, content, suffix))

    for round_ in range(3):
        for s, seed in enumerate(SINGLE_LAYER):
            for how in STRUCT_MUTATIONS:
                command = WORKLOAD_COMMANDS[(s + round_ + len(cases)) % len(WORKLOAD_COMMANDS)]
                add("workload", command, mutate_structure(rng, seed, how))
    for round_ in range(2):
        for seed in GEMMINI_SEEDS:
            for how in STRUCT_MUTATIONS:
                add("workload", GEMMINI_COMMANDS[(round_ + len(cases)) % len(GEMMINI_COMMANDS)],
                    mutate_structure(rng, seed, how))
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
    for round_ in range(3):
        for how in STRUCT_MUTATIONS:
            add("cpu-mapping", CPU_MAPPING_COMMANDS[(round_ + len(cases)) % len(CPU_MAPPING_COMMANDS)],
                mutate_structure(rng, _cpu_mapping_seed(), how))
    for round_ in range(2):
        for m, model in enumerate(_onnx_models()):
            for how in ("fields-wide",) * 4 + ("fields",) * 2:
                add("onnx", ONNX_COMMANDS[(m + round_ + len(cases)) % len(ONNX_COMMANDS)],
                    mutate_onnx(rng, model, how), ".onnx")
    return cases


def _cpu_mapping_seed() -> str:
    """A valid mapping of SHORT_MATMUL (64 x 32 x 48, 32-bit outputs) on the ``cpu`` arch."""
    from costmodel import preset
    from cosa.baselines import random_mapping
    from mappings import dump_mapping
    from workloads import matmul

    arch = preset("cpu")
    layer = matmul("fc", M=64, N=32, K=48, bits={"input": 8, "weight": 8, "output": 32})
    return dump_mapping(random_mapping(layer, arch, random.Random(0)), arch)


CASES = build_cases()


def argv_for(case: Case, path: Path, good_mapping: Path, out_dir: Path, cpu: tuple[Path, Path]) -> list[str]:
    """The command line of a case; ``cpu``: (SHORT_MATMUL's file, a valid cpu mapping of it)."""
    f = str(path)
    sched = ["--scheduler", "gemmini-default"]
    compare = ["--schedulers", "gemmini-default,random", "--random-samples", "3", "--json", "-q"]
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
                "emit-cpu": ["emit", "cpu", f, "--mapping", str(cpu[1]), "-o", str(out_dir / "k.c")],
                }[case.command]
    if case.kind == "cpu-mapping":
        return {"emit-cpu": ["emit", "cpu", str(cpu[0]), "--mapping", f, "-o", str(out_dir / "k.c")],
                "run-cpu": ["run", "cpu", str(cpu[0]), "--mapping", f, "--repeat", "1", "--json"]}[case.command]
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


@pytest.fixture(scope="module")
def cpu_files(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("fuzz_cpu")
    (folder / "fc.yaml").write_text(SHORT_MATMUL)
    (folder / "fc_cpu_mapping.yaml").write_text(_cpu_mapping_seed())
    return folder / "fc.yaml", folder / "fc_cpu_mapping.yaml"


def test_enough_cases_of_every_kind():
    import test_fuzz_inputs

    kinds = {(c.kind, c.command) for c in CASES}
    assert {("workload", c) for c in WORKLOAD_COMMANDS + GEMMINI_COMMANDS} <= kinds
    assert {("arch", c) for c in ARCH_COMMANDS} <= kinds and {("mapping", c) for c in MAPPING_COMMANDS} <= kinds
    assert {("onnx", c) for c in ONNX_COMMANDS} <= kinds
    assert {("cpu-mapping", c) for c in CPU_MAPPING_COMMANDS} <= kinds
    both = CASES + test_fuzz_inputs.CASES
    assert len(both) >= 500
    assert all(sum(c.kind.endswith(kind) for c in both) >= 60 for kind in ("workload", "arch", "mapping", "onnx"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.ident)
def test_fuzzed_field(case, tmp_path, good_mapping, cpu_files):
    path = _write(case, tmp_path)
    code, out, err = run_in_process(argv_for(case, path, good_mapping, tmp_path, cpu_files))
    emits = case.command.startswith("emit-")
    check_outcome(code, out, err, json_out=not emits, note="wrote" if emits else None,
                  may_fail=case.command == "compare")


def test_the_mutations_change_the_seeds():
    rng = random.Random(1)
    for how in STRUCT_MUTATIONS:
        assert mutate_structure(rng, COSA_V02_ARCH, how) != COSA_V02_ARCH
    assert replace(CASES[0], content="") != CASES[0]


def test_the_unmutated_seeds_run(tmp_path, good_mapping, cpu_files):
    """The control: the commands the fuzz drives succeed on the seeds themselves (so a case's exit 2 is
    the mutation's doing), kernels built and checked against NumPy included."""
    fc, cpu_mapping = cpu_files
    seeds = [Case("s1", "cpu-mapping", "run-cpu", cpu_mapping.read_text()),
             Case("s2", "workload", "run-gemmini", GEMMINI_SEEDS[0]),
             Case("s2b", "workload", "run-gemmini", GEMMINI_SEEDS[1]),
             Case("s3", "workload", "emit-cpu", SHORT_MATMUL),
             Case("s4", "mapping", "emit-gemmini", _mapping_seeds()[0])]
    for case in seeds:
        folder = tmp_path / case.ident
        folder.mkdir()
        code, out, err = run_in_process(argv_for(case, _write(case, folder), good_mapping, folder, cpu_files))
        assert code == 0, (case.command, err)
        if case.command.startswith("run-"):
            import json

            assert json.loads(out)["verified"] is True


def _gemmini_arch_with(old: str, new: str) -> str:
    text = _arch_seeds()[0]
    assert old in text
    return text.replace(old, new, 1)


FOUND = [  # what wider fuzzing (other seeds) found: a ZeroDivisionError, a TypeError, hangs, 18 s
    ("arch", "schedule", lambda: _gemmini_arch_with("  dim: 16", "  dim: 0"), 2),
    ("arch", "compare", lambda: _gemmini_arch_with("  dim: 16", "  dim: 1.0e-300"), 2),
    ("mapping", "emit-gemmini", lambda: _mapping_seeds()[1].replace("type: bypass", "type: {}", 1), 2),
    ("workload", "emit-gemmini", lambda: "problem: {shape: cnn-layer, N: 1, C: 16777216, K: 64, P: 14, Q: 14, "
                                         "R: 3, S: 3}\n", 2),
    ("workload", "compare", lambda: "layers:\n  - {kind: depthwise, name: b, C: 16, H: 10, W: 16777216, R: 3, "
                                    "S: 3, stride: 2, bits: 8}\n", 0),
    ("workload", "compare", lambda: GEMMINI_SEEDS[1].replace("padding: 1", "padding: 16777216"), 2),  # P = 2^25
    ("workload", "schedule", lambda: GEMMINI_SEEDS[1].replace("H: 6\nW: 6", "H: 16777216\nW: 16777216"), 0),
    ("workload", "emit-gemmini", lambda: GEMMINI_SEEDS[1].replace("C: 8", "C: 16777216").replace(
        "H: 6\nW: 6", "H: 16777216\nW: 16777216"), 2),  # three huge arguments shrinking in turn
    ("mapping", "evaluate", lambda: _mapping_seeds()[1].replace("R=3", "R=" + "[" * 3000, 1), 2),  # a long line
    ("workload", "show", lambda: "layers:\n  - {kind: matmul, M: 4, N: 4, K: 4}\n  - {kind: {}, M: 4}\n", 2),
    ("mapping", "evaluate", lambda: _mapping_seeds()[1].replace("P=1", "P=" + "3" * 5000, 1), 2),  # int() refuses
]


@pytest.mark.parametrize("kind,command,content,code", FOUND, ids=[f"{k}-{c}-{i}" for i, (k, c, _, _) in
                                                                   enumerate(FOUND)])
def test_found_by_the_fuzz(kind, command, content, code, tmp_path, good_mapping, cpu_files):
    case = Case("found", kind, command, content())
    got, out, err = run_in_process(argv_for(case, _write(case, tmp_path), good_mapping, tmp_path, cpu_files),
                                   limit_s=20)
    check_outcome(got, out, err, json_out=not command.startswith("emit-"), may_fail=command == "compare")
    assert got == code, err
