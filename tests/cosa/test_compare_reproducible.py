"""The random baseline is reproducible: same seed, same rows (cycles, DRAM bytes, energy and the number of
samples drawn), in one process, in a pool of processes and in fresh interpreters with different hash seeds."""

import json
import os
import subprocess
import sys
from pathlib import Path

from costmodel import preset
from cosa import compare
from workloads import dump_short, matmul

ROOT = Path(__file__).resolve().parents[2]
SMALL = preset("gemmini", dim=2, scratchpad_kib=1, accumulator_kib=1)
LAYERS = [matmul("a", M=4, N=8, K=6), matmul("b", M=8, N=4, K=6)]


def _random_rows(rows) -> list[tuple]:
    return [(r["layer"], r["cycles"], r["dram_bytes"], r["energy_pj"], r["extra"]["samples"])
            for r in rows if r["scheduler"] == "random"]


def test_same_seed_same_random_rows_with_the_mip_beside_it():
    """The MIP runs first on each layer; the random baseline's default budget is samples, not its seconds."""
    runs = [compare(LAYERS[:1], SMALL, ["cosa", "random"], time_limit_s=10, progress=False, seed=5) for _ in range(2)]
    keys = [_random_rows([r.to_dict() for r in run.rows]) for run in runs]
    assert keys[0] == keys[1]
    for row in runs[0].rows:
        if row.scheduler == "random":
            assert row.extra["budget"] == {"samples": 1000, "seconds": None} and row.extra["samples"] == 1000


def test_processes_with_different_hash_seeds_agree(tmp_path):
    path = tmp_path / "layers.yaml"
    path.write_text(dump_short(LAYERS))
    arch = tmp_path / "arch.yaml"
    from costmodel import dump_arch

    arch.write_text(dump_arch(SMALL))
    outs = []
    for hash_seed, jobs in (("1", "1"), ("2", "2")):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run([sys.executable, "-m", "cosa.cli", "compare", str(path), "--arch", str(arch),
                               "--schedulers", "gemmini-default,random", "--random-samples", "40", "--seed", "9",
                               "--jobs", jobs, "--json"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(_random_rows(json.loads(proc.stdout)["rows"]))
    assert outs[0] == outs[1] and len(outs[0]) == 2
