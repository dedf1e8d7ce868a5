"""``cosa run mpi spmm|sddmm|fusedmm``: a distributed sparse kernel on MPI ranks (``targets.mpi``).

    cosa run mpi KERNEL --m M --n N --r R (--density D | --nnz-per-row K | --matrix F.mtx)
                 --ranks P [--algorithm auto|15d-dense|15d-sparse|25d-dense|25d-sparse] [--c C]
                 [--elide none|reuse|fusion] [--generator erdos_renyi|rmat] [--seed S]
                 [--local-kernel cosa|scipy] [--arch cluster.yaml] [--timeout S] [--repeat N] [--json]

``auto`` (and any of --algorithm, --c, --elide left out) is the scheduler's choice with the alpha-beta-
gamma model (``targets.mpi.choose``; alpha, beta, gamma and memory per rank from ``--arch``, e.g. the
YAML ``cosa arch calibrate cluster`` writes).  The command starts mpiexec itself with a time-out (a
rank that raises, dies or hangs ends the job with one line naming it, exit 1), or, started under
mpiexec with several ranks, runs on those ranks.  The result must equal SciPy's to 1e-10 and the
measured words and messages must equal the model's, else exit 1.  Bad input: one line, exit 2.

``--local-kernel``: what each rank runs on its blocks: ``cosa`` (default), the CPU target's SpMM and
SDDMM kernels (FusedMM: the two in turn), each scheduled by the CoSA MIP on the ``cpu`` preset
(``local_mappings``; solved once per shape and kept on disk by ``cosa.schedule_cache``, built once by
``targets.cpu``'s cache), or ``scipy``, SciPy's CSR product and NumPy row dot products.  ``cosa`` is the
default because it is not slower: ``bench/distributed_local.py`` measured the distributed kernels with it
at 0.43-0.95x SciPy's time at p = 2 (every kernel, 1.5D algorithms).
Like ``cosa/cli.py`` this module may import ``targets``.
"""

from __future__ import annotations

import argparse
import sys

KERNELS = ("spmm", "sddmm", "fusedmm")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (through cosa.cli.main), not argparse's usage block
        from targets.mpi import MpiError

        raise MpiError(message, source="cosa run mpi")


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="cosa run mpi", description="a distributed sparse kernel on MPI ranks")
    ap.add_argument("workload", metavar="KERNEL", help="spmm, sddmm or fusedmm")
    ap.add_argument("--m", type=int, help="rows of S")
    ap.add_argument("--n", type=int, help="columns of S")
    ap.add_argument("--r", type=int, help="columns of the dense operands")
    ap.add_argument("--density", type=float, help="fraction of nonzeros of S")
    ap.add_argument("--nnz-per-row", type=int, help="nonzeros in every row of S")
    ap.add_argument("--matrix", help="S from a Matrix Market file")
    ap.add_argument("--generator", choices=["erdos_renyi", "rmat"], default="erdos_renyi",
                    help="random S: uniform nonzeros (erdos_renyi, default) or a power-law R-MAT graph")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generated matrices (default 0)")
    ap.add_argument("--ranks", type=int, help="MPI ranks")
    ap.add_argument("--algorithm", default="auto", choices=["auto", "15d-dense", "15d-sparse", "25d-dense", "25d-sparse"],
                    help="1.5D or 2.5D, replicating the dense or the sparse operand; auto: the model's cheapest")
    ap.add_argument("--c", type=int, default=None, help="replication factor (default: the model's choice)")
    ap.add_argument("--elide", choices=["none", "reuse", "fusion"], default=None,
                    help="communication eliding: none, reuse (one replication serves both passes) or fusion "
                         "(local kernel fusion, 15d-dense only); default: the model's choice")
    ap.add_argument("--arch", default=None, help="cluster arch YAML (alpha_s, beta_s_per_word, gamma_s_per_flop, "
                                                 "memory_per_rank_bytes), e.g. from cosa arch calibrate cluster")
    ap.add_argument("--local-kernel", choices=["cosa", "scipy"], default="cosa",
                    help="the ranks' local kernels: the scheduled CPU kernels (cosa) or SciPy's")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds before the job is ended")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs; seconds is the fastest")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    return ap


def main(argv: list[str]) -> int:
    """``cosa run mpi ...`` (``cosa.cli_targets.TARGETS["mpi"].command``): the exit code."""
    from .cli_common import guarded

    return guarded(cmd_run_mpi, parser().parse_args(argv))


def _require(args) -> None:
    from targets.mpi import MpiError

    if args.workload not in KERNELS:
        raise MpiError(f"{args.workload!r} is not one of {', '.join(KERNELS)}", field="kernel")
    for opt in ("r", "ranks"):
        if getattr(args, opt) is None:
            raise MpiError("is required", field=f"--{opt}")
    given = [o for o in ("density", "nnz_per_row", "matrix") if getattr(args, o) is not None]
    if len(given) != 1:
        raise MpiError(f"give exactly one of --density, --nnz-per-row, --matrix (got {len(given)})", field="--density")
    if args.ranks < 1:
        raise MpiError(f"must be >= 1, got {args.ranks}", field="--ranks")
    if args.timeout <= 0:
        raise MpiError(f"must be > 0, got {args.timeout}", field="--timeout")
    if args.repeat < 1:
        raise MpiError(f"must be >= 1, got {args.repeat}", field="--repeat")


def _problem(args):
    from targets.mpi.problem import Problem
    from workloads.sparse import BUILDERS

    nest = BUILDERS[args.workload](m=args.m, n=args.n, r=args.r, density=args.density, nnz_per_row=args.nnz_per_row,
                                 matrix=args.matrix, generator=args.generator, seed=args.seed)
    return Problem.from_nest(nest, seed=args.seed)


def _machine(args):
    from targets.mpi.model import Machine

    if not args.arch:
        return Machine()
    from costmodel import load_arch

    return Machine.from_arch(load_arch(args.arch))


def configure(args, problem, machine) -> tuple[str, int, str, object]:
    """(algorithm, c, elide, choice or None): the given ones, the rest chosen by the model."""
    from targets.mpi import MpiError
    from targets.mpi.choose import choose
    from targets.mpi.model import check
    from targets.mpi.problem import sparse

    given = args.algorithm != "auto" and args.c is not None and args.elide is not None
    if given and machine.memory_words is None:
        return args.algorithm, args.c, args.elide, None
    s = sparse(problem)
    restrict = {"algorithms": None if args.algorithm == "auto" else [args.algorithm],
                "cs": None if args.c is None else [args.c],
                "elides": None if args.elide is None else [args.elide]}
    if args.c is not None and (args.c < 1 or args.ranks % args.c):
        raise MpiError(f"{args.c} does not divide the {args.ranks} ranks", field="--c")
    try:
        ch = choose(problem.kernel, problem.m, problem.n, problem.r, s.nnz, args.ranks, machine, s, **restrict)
    except MpiError as exc:
        if not exc.reason.startswith("no algorithm"):
            raise
        # say why the requested part cannot run, with the first value of what was left open
        why = check(args.algorithm if args.algorithm != "auto" else "15d-dense", problem.kernel,
                    args.elide or "none", problem.m, problem.n, problem.r, args.ranks, args.c or 1)
        if not why:
            raise
        field, _, reason = why.partition(": ")
        raise MpiError(reason, field=field) from None
    if given:  # checked against the memory per rank, not chosen
        return args.algorithm, args.c, args.elide, None
    return ch.best.algorithm, ch.best.c, ch.best.elide, ch


def local_mappings(problem, ranks: int, alg: str, c: int, elide: str) -> dict:
    """{local nest name: mapping dict} of every local kernel the ranks will call
    (``targets.mpi.local.local_nests``), each the CoSA MIP's schedule on the ``cpu`` preset, solved once
    for all processes (``cosa.schedule_cache``)."""
    from mappings import mapping_to_dict
    from targets.mpi.local import cpu_arch, local_nests
    from targets.mpi.problem import sparse

    from .schedule_cache import cached_mapping

    out = {}
    for nest in local_nests(problem, ranks, alg, c, elide, sparse(problem).nnz):
        arch = cpu_arch(nest)
        out[nest.name] = mapping_to_dict(cached_mapping(nest, arch, time_limit_s=20, seed=0), arch)
    return out


def _inside_mpiexec(problem, args, alg, c, elide, machine, mappings) -> dict | None:
    """Run on the ranks of the mpiexec this process belongs to; the report at rank 0, None elsewhere."""
    from mpi4py import MPI

    from targets.mpi.ranks import Ranks
    from targets.mpi.run import _check, execute, summarise

    comm = MPI.COMM_WORLD
    try:
        _check(problem, comm.Get_size(), alg, c, elide)
        res = execute(Ranks(comm), problem.to_dict(), alg, c, elide, args.repeat, args.local_kernel, mappings)
    except Exception as exc:  # noqa: BLE001 - one rank's failure ends every rank
        print(f"cosa: rank {comm.Get_rank()}: {exc}", file=sys.stderr, flush=True)
        comm.Abort(1)
        raise
    results = comm.gather(res, root=0)
    return summarise(problem, comm.Get_size(), alg, c, elide, results, machine, args.local_kernel) \
        if comm.Get_rank() == 0 else None


def cmd_run_mpi(args) -> int:
    """``cosa run mpi KERNEL ...`` on parsed arguments (``parser``)."""
    from targets.mpi import under_mpiexec
    from targets.mpi.launch import require_mpi4py

    from .cli_common import RunFailed, _print_json

    require_mpi4py()
    _require(args)
    if under_mpiexec():
        from mpi4py import MPI

        from targets.mpi import MpiError

        if MPI.COMM_WORLD.Get_size() != args.ranks:
            raise MpiError(f"is {args.ranks} but mpiexec started {MPI.COMM_WORLD.Get_size()} ranks", field="--ranks")
    problem = _problem(args)
    machine = _machine(args)
    alg, c, elide, choice = configure(args, problem, machine)
    mappings = local_mappings(problem, args.ranks, alg, c, elide) if args.local_kernel == "cosa" else None
    if under_mpiexec():
        d = _inside_mpiexec(problem, args, alg, c, elide, machine, mappings)
        if d is None:
            return 0
    else:
        from targets.mpi.run import run

        d = run(problem, args.ranks, alg, c, elide, repeat=args.repeat, timeout_s=args.timeout, machine=machine,
                local_kernel=args.local_kernel, mappings=mappings)
    d.pop("phases", None)
    d["chosen_by_model"] = choice is not None
    from targets.exceptions import UNCHECKED  # the distributed kernels do not scan (targets/exceptions.py)

    d["exception_status"] = UNCHECKED.to_dict()
    if choice is not None:
        from lowerbounds.sparse import sparse_parallel_bound

        d["lower_bound_words"] = sparse_parallel_bound(problem.kernel, problem.m, problem.n, problem.r, d["nnz"],
                                                       args.ranks).memory_independent_words
    if args.json:
        _print_json(d)
    else:
        print(f"{problem.kernel} m={problem.m} n={problem.n} r={problem.r} nnz={d['nnz']} on {d['ranks']} ranks: "
              f"{alg} c={c} elide={elide}{' (model choice)' if choice else ''}, local kernels {args.local_kernel}")
        print(f"  {'verified' if d['verified'] else 'MISMATCH'} against SciPy (max abs err {d['max_abs_err']:.3g}); "
              f"words received per rank {d['words_per_rank']} (model {d['model_words']}), messages "
              f"{d['messages_per_rank']}")
        print(f"  {d['seconds'] * 1e3:.3f} ms measured, {d['model_seconds'] * 1e3:.3f} ms modelled")
    if not d["verified"]:
        raise RunFailed(f"result differs from SciPy (max abs err {d['max_abs_err']:.3g})")
    if not d["counts_match"]:
        raise RunFailed("measured words or messages differ from the model")
    return 0
