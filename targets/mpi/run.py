"""Run a distributed SpMM / SDDMM / FusedMM on P mpiexec ranks, verify it against SciPy and compare
its measured words and messages with the model, rank by rank and phase by phase.

``run(problem, ranks=4, algorithm="15d-dense", c=1, elide="none")`` -> dict with the keys of
``cosa run mpi --json``: verified, max_abs_err, algorithm, c, elide, local_kernel (``scipy`` or ``cosa``:
the scheduled CPU kernels, built on the ranks from ``mappings``, see ``targets.mpi.local``),
words_per_rank (words received),
words_sent_per_rank, messages_per_rank (messages received), model_words, model_messages,
model_seconds, counts_match, phases (measured, per rank), seconds (the slowest rank's wall time of
the kernel).  ``execute`` is what every rank runs.
"""

from __future__ import annotations

import time

import numpy as np

from . import model
from .launch import MpiError, launch
from .local import LOCAL_KERNELS
from .problem import KERNELS, Problem, full_data, reference

TOLERANCE = 1e-10
COUNTED = ("words_sent", "words_recv", "msgs_sent", "msgs_recv")


def _algorithm(name: str):
    if name == "15d-dense":
        from .shift15d import dense_shift

        return dense_shift
    if name == "15d-sparse":
        from .shift15d import sparse_shift

        return sparse_shift
    from .rep25d import dense_replicate, sparse_replicate

    return dense_replicate if name == "25d-dense" else sparse_replicate


def _assemble(problem: Problem, pieces: list, s) -> np.ndarray:
    if problem.kernel == "sddmm":
        import scipy.sparse as sp

        rows = np.concatenate([pc["sparse"][0] for pc in pieces])
        cols = np.concatenate([pc["sparse"][1] for pc in pieces])
        vals = np.concatenate([pc["sparse"][2] for pc in pieces])
        if len(rows) != s.nnz:
            raise MpiError(f"the ranks returned {len(rows)} values for {s.nnz} nonzeros", exit_code=1)
        # positions of the returned nonzeros in S's CSR order (indices are sorted in every row)
        key = rows.astype(np.int64) * problem.n + cols
        ref_rows = np.repeat(np.arange(problem.m), np.diff(s.indptr))
        ref_key = ref_rows.astype(np.int64) * problem.n + s.indices
        out = np.full(s.nnz, np.nan)
        out[np.searchsorted(ref_key, key)] = vals
        return out
    out = np.full((problem.m, problem.r), np.nan)
    for pc in pieces:
        for r0, c0, block in pc["dense"]:
            out[r0:r0 + block.shape[0], c0:c0 + block.shape[1]] = block
    return out


def execute(ranks, problem: dict, algorithm: str, c: int, elide: str, repeat: int = 1, local_kernel: str = "scipy",
            mappings: dict | None = None, threads: int | None = None) -> dict:
    """One rank's part: build its data, run the kernel ``repeat`` times (counts of the first run), verify.
    ``local_kernel``, ``mappings``, ``threads``: the local kernels (``targets.mpi.local.make_local``)."""
    from .local import local_density, local_shapes, make_local

    prob = Problem(**problem)
    s, a, b = full_data(prob)
    fn = _algorithm(algorithm)
    local = make_local(local_kernel, mappings, local_density(s.nnz, prob.m, prob.n), ranks.size, threads)
    if local_kernel == "cosa":  # build (or load) every kernel before the clock starts
        for shape in sorted(local_shapes(prob.kernel, prob.m, prob.n, prob.r, ranks.size, algorithm, c, elide)):
            local.kernel(*shape)
    times, traffic, pieces = [], None, None
    for k in range(max(1, repeat)):
        ranks.reset()
        ranks.barrier()
        t0 = time.perf_counter()
        pieces = fn(ranks, prob, s, a, b, c, elide, local)
        times.append(time.perf_counter() - t0)
        if traffic is None:
            traffic = {ph: t.to_dict() for ph, t in ranks.traffic().items()}
    gathered = ranks.comm.gather(pieces, root=0)  # verification: not counted
    out = {"rank": ranks.rank, "traffic": traffic, "seconds": min(times)}
    if ranks.rank == 0:
        got = _assemble(prob, gathered, s)
        ref = reference(prob, s, a, b)
        out["max_abs_err"] = float(np.max(np.abs(got - ref))) if got.size else 0.0
        out["scale"] = float(np.max(np.abs(ref))) if ref.size else 0.0
    return out


def modelled(problem: Problem, p: int, algorithm: str, c: int, elide: str, s=None) -> list[dict]:
    """The model's counts for every rank: ``[{phase: (ws, wr, ms, mr)}]``."""
    blocks = None
    if algorithm != "15d-dense":
        from .problem import sparse

        blocks = model.block_counts(sparse(problem) if s is None else s, p, algorithm, c)
    return [model.phase_counts(algorithm, problem.kernel, elide, problem.m, problem.n, problem.r, p, c, rk, blocks)
            for rk in range(p)]


def _check(problem: Problem, ranks: int, algorithm: str, c: int, elide: str) -> None:
    if problem.kernel not in KERNELS:
        raise MpiError(f"{problem.kernel!r} is not one of {', '.join(KERNELS)}", field="kernel")
    why = model.check(algorithm, problem.kernel, elide, problem.m, problem.n, problem.r, ranks, c)
    if why:
        field, _, reason = why.partition(": ")
        raise MpiError(reason, field=field)


def execute_batch(ranks, runs: list) -> list:
    """Several ``execute`` calls in one launch (``runs``: their keyword arguments)."""
    return [execute(ranks, **kw) for kw in runs]


def run(problem: Problem, ranks: int = 4, algorithm: str = "15d-dense", c: int = 1, elide: str = "none",
        repeat: int = 1, timeout_s: float = 120.0, machine: model.Machine | None = None, local_kernel: str = "scipy",
        mappings: dict | None = None, threads: int | None = None) -> dict:
    """Launch, verify, compare with the model (see the module docstring)."""
    return run_batch([(problem, algorithm, c, elide)], ranks, repeat, timeout_s, machine, local_kernel, mappings,
                     threads)[0]


def run_batch(configs: list, ranks: int = 4, repeat: int = 1, timeout_s: float = 120.0,
              machine: model.Machine | None = None, local_kernel: str = "scipy", mappings: dict | None = None,
              threads: int | None = None) -> list[dict]:
    """``run`` for several (problem, algorithm, c, elide) on the same ranks, in one mpiexec launch; a config
    may carry a fifth entry, its local kernels (``local_kernel`` otherwise).  ``mappings``: {local nest name:
    mapping dict} for the ``cosa`` local kernels (``targets.mpi.local.local_nests``)."""
    configs = [tuple(cfg) + (local_kernel,) if len(cfg) == 4 else tuple(cfg) for cfg in configs]
    for problem, algorithm, c, elide, lk in configs:
        _check(problem, ranks, algorithm, c, elide)
        if lk not in LOCAL_KERNELS:
            raise MpiError(f"{lk!r} is not one of {', '.join(LOCAL_KERNELS)}", field="--local-kernel")
    runs = [{"problem": pr.to_dict(), "algorithm": al, "c": c, "elide": el, "repeat": repeat, "local_kernel": lk,
             "mappings": mappings if lk == "cosa" else None, "threads": threads}
            for pr, al, c, el, lk in configs]
    per_rank = launch("targets.mpi.run:execute_batch", ranks, {"runs": runs}, timeout_s=timeout_s)
    return [summarise(cfg[0], ranks, *cfg[1:4], [res[k] for res in per_rank], machine, cfg[4])
            for k, cfg in enumerate(configs)]


def summarise(problem: Problem, ranks: int, algorithm: str, c: int, elide: str, results: list,
              machine: model.Machine | None = None, local_kernel: str = "scipy") -> dict:
    """The report of one run from every rank's ``execute`` result."""
    want = modelled(problem, ranks, algorithm, c, elide)
    measured = [{ph: tuple(t[k] for k in COUNTED) for ph, t in res["traffic"].items() if any(t[k] for k in COUNTED)}
                for res in results]
    expected = [{ph: tuple(v) for ph, v in w.items() if any(v)} for w in want]
    total = lambda d, k: int(sum(v[k] for v in d.values()))
    machine = machine or model.Machine()
    from .problem import sparse

    s = sparse(problem)
    flops = model.local_flops(problem.kernel, s.nnz / ranks, problem.r)
    secs = [model.seconds(w, machine, flops)["total"] for w in want]
    r0 = results[0]
    err = r0["max_abs_err"]
    return {
        "verified": bool(np.isfinite(err) and err <= TOLERANCE * max(1.0, r0["scale"])),
        "max_abs_err": err, "algorithm": algorithm, "c": c, "elide": elide, "local_kernel": local_kernel, "ranks": ranks,
        "kernel": problem.kernel, "m": problem.m, "n": problem.n, "r": problem.r, "nnz": int(s.nnz),
        "words_per_rank": [total(mm, 1) for mm in measured],
        "words_sent_per_rank": [total(mm, 0) for mm in measured],
        "messages_per_rank": [total(mm, 3) for mm in measured],
        "model_words": [total(e, 1) for e in expected],
        "model_messages": [total(e, 3) for e in expected],
        "counts_match": measured == expected,
        "model_seconds": max(secs),
        "seconds": max(res["seconds"] for res in results),
        "phases": measured,
    }
