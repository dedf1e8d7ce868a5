"""The ranks' local kernels: the CPU target's scheduled SpMM / SDDMM (``--local-kernel cosa``) give SciPy's
results in every distributed algorithm, with the same words and messages."""

import json

import numpy as np
import pytest

pytest.importorskip("mpi4py")

import cosa  # noqa: E402
from mappings import mapping_to_dict  # noqa: E402
from targets.mpi import MpiError  # noqa: E402
from targets.mpi.local import Csr, CosaLocal, ScipyLocal, cpu_arch, local_density, local_nests  # noqa: E402
from targets.mpi.problem import Problem, sparse  # noqa: E402
from targets.mpi.run import run_batch  # noqa: E402
from workloads import fusedmm, sddmm, spmm  # noqa: E402


def quick_mappings(configs, p):
    """Valid mappings of every local nest from the random sampler (fast; any valid mapping must give the
    same numbers, which is what these tests check; the MIP's own run through the CLI is tested below)."""
    out = {}
    for prob, alg, c, e in configs:
        for nest in local_nests(prob, p, alg, c, e, sparse(prob).nnz):
            if nest.name not in out:
                arch = cpu_arch(nest)
                mapping = cosa.schedule(nest, arch, scheduler="random", samples=20, seed=0, bound=False).mapping
                out[nest.name] = mapping_to_dict(mapping, arch)
    return out


def test_every_algorithm_with_the_cpu_kernels_equals_scipy():
    configs = []
    for build in (spmm, sddmm, fusedmm):
        prob = Problem.from_nest(build(m=32, n=48, r=8, nnz=150, generator="rmat", seed=4))
        for alg, cs in (("15d-dense", (1, 2)), ("15d-sparse", (1, 2)), ("25d-dense", (1, 4)), ("25d-sparse", (1, 4))):
            elides = ["none"] if build is not fusedmm else ["none", "reuse"] + (["fusion"] if alg == "15d-dense" else [])
            configs += [(prob, alg, c, e) for c in cs for e in elides]
    maps = quick_mappings(configs, 4)
    results = run_batch(configs, ranks=4, timeout_s=180, mappings=maps, threads=1, local_kernel="cosa")
    for cfg, d in zip(configs, results):
        # verified against SciPy's product; the words and messages equal the model's (as with SciPy's kernels)
        assert d["verified"] and d["counts_match"], (cfg[0].kernel, *cfg[1:], d["max_abs_err"])
        assert d["local_kernel"] == "cosa"

def test_a_missing_mapping_is_named():
    prob = Problem.from_nest(spmm(m=16, n=16, r=4, nnz_per_row=2))
    with pytest.raises(MpiError, match="no scheduled mapping for the local kernel mpi_spmm_8x16x2"):
        run_batch([(prob, "15d-sparse", 1, "none", "cosa")], ranks=2, timeout_s=60, mappings={})


def test_local_kernels_agree_on_one_block():
    """SDDMM and SpMM (and the transposed SpMM) of one random block: CPU kernel against SciPy, both modes."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    mat = sp.random(24, 40, density=0.1, format="csr", random_state=rng)
    blk = Csr.of(mat)
    a, b, bt = rng.random((24, 8)), rng.random((40, 8)), rng.random((24, 8))
    d = local_density(blk.nnz, 24, 40)
    from targets.mpi.local import local_nest

    maps = {}
    for kind, rows, cols in (("sddmm", 24, 40), ("spmm", 24, 40), ("spmm", 40, 24)):
        nest = local_nest(kind, rows, cols, 8, d)
        arch = cpu_arch(nest)
        maps[nest.name] = mapping_to_dict(cosa.schedule(nest, arch, scheduler="random", samples=10, seed=1,
                                                        bound=False).mapping, arch)
    cpu, ref = CosaLocal(maps, d, 1), ScipyLocal()
    for acc in (False, True):
        start = rng.random(blk.nnz)
        got, want = cpu.sddmm(blk, a, b, start.copy(), acc), ref.sddmm(blk, a, b, start.copy(), acc)
        assert np.allclose(got, want, rtol=1e-13, atol=1e-13)
        start = rng.random((24, 8))
        assert np.allclose(cpu.spmm(blk, b, start.copy(), acc), ref.spmm(blk, b, start.copy(), acc), atol=1e-13)
        start = rng.random((40, 8))
        assert np.allclose(cpu.spmm_t(blk, bt, start.copy(), acc), ref.spmm_t(blk, bt, start.copy(), acc), atol=1e-13)


def test_cli_schedules_the_local_kernels_with_the_mip(capsys, tmp_path, monkeypatch):
    from cosa.cli import main

    monkeypatch.setenv("COSA_CACHE_DIR", str(tmp_path))
    base = ["run", "mpi", "fusedmm", "--m", "16", "--n", "16", "--r", "4", "--nnz-per-row", "2", "--ranks", "2",
            "--algorithm", "15d-dense", "--c", "1", "--elide", "fusion", "--repeat", "1", "--json"]
    assert main(base) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["local_kernel"] == "cosa" and d["verified"] and d["words_per_rank"] == d["model_words"]
    assert len(list((tmp_path / "schedules").glob("*.json"))) == 2      # SDDMM and SpMM, 8 x 8 blocks
    assert len(list((tmp_path / "cpu").glob("*.so"))) == 2
    assert main(base[:-1] + ["--local-kernel", "scipy", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["local_kernel"] == "scipy"
    assert main(base[:-1] + ["--local-kernel", "mkl"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'mkl'" in err and len(err.strip().splitlines()) == 1
