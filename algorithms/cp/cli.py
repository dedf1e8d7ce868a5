"""``cosa run cp``: CP decomposition of a FROSTT tensor or a planted sparse tensor (``algorithms.cp``).

    cosa run cp (--tensor F.tns | --synthetic I1,I2,...:nnz:rank) --rank R [--method als|arls-lev|sts-cp]
                [--samples J] [--iters K] [--noise E] [--seed S] [--init svd|random] [--dense]
                [--backend cpu|numpy] [--compare tensorly] [--ranks P] [--schedule accumulator|tensor] [--json]

JSON keys: fit, fit_per_iter, seconds, seconds_per_iter (the sweeps; the initialisation and the fit
evaluations are not counted), words_per_rank and model_words (words received per rank over the sweeps,
measured by the rank wrapper and from the collectives' closed forms; null on one rank), the tensor's
shape and nnz, and with ``--compare tensorly`` TensorLy's parafac fit and seconds from the same starting
factors on the dense tensor.  ``--ranks P`` runs ``algorithms.cp.dist`` (als or sts-cp) on P ranks.  Bad input (a
malformed .tns, rank < 1, samples < rank, an order-1 tensor) is one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from .tensors import CpError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (through cosa.cli.main)
        raise CpError(message, source="cosa run cp")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cosa run cp", description="CP-ALS, CP-ARLS-LEV and STS-CP on a sparse or dense tensor")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--tensor", help="a FROSTT .tns file (one-based indices, one nonzero per line)")
    src.add_argument("--synthetic", help="I1,I2,...:nnz:rank: a planted sparse tensor of that exact rank")
    p.add_argument("--rank", type=int, required=True, help="CP rank R")
    p.add_argument("--method", choices=["als", "arls-lev", "sts-cp"], default="als",
                   help="als: exact CP-ALS (default); arls-lev: leverage-score sampled ALS; sts-cp: the exact "
                        "Khatri-Rao leverage sampler")
    p.add_argument("--samples", type=int, default=None, help="J, rows of the Khatri-Rao product sampled "
                   "(arls-lev, sts-cp; default 4 R log R rounded)")
    p.add_argument("--iters", type=int, default=20, help="ALS sweeps")
    p.add_argument("--noise", type=float, default=0.0, help="--synthetic: relative Gaussian noise on the nonzeros")
    p.add_argument("--seed", type=int, default=0, help="seed of the data, the start and the samples (default 0)")
    p.add_argument("--init", choices=["svd", "random"], default="svd",
                   help="starting factors: leading singular vectors of the unfoldings (default) or random")
    p.add_argument("--dense", action="store_true", help="decompose the tensor as a dense array")
    p.add_argument("--backend", choices=["cpu", "numpy"], default="cpu",
                   help="dense exact ALS: the MTTKRP loop nest scheduled on the cpu arch and compiled, or NumPy")
    p.add_argument("--compare", choices=["tensorly"], default=None, help="run TensorLy's parafac beside (dense)")
    p.add_argument("--ranks", type=int, default=1, help="MPI ranks (mpiexec started here with a time-out)")
    p.add_argument("--schedule", choices=["tensor", "accumulator"], default="accumulator",
                   help="with --ranks > 1 and sts-cp: accumulator- or tensor-stationary MTTKRP (als: tensor)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def parse_synthetic(text: str) -> tuple[tuple[int, ...], int, int]:
    parts = text.split(":")
    try:
        if len(parts) != 3:
            raise ValueError
        shape = tuple(int(s) for s in parts[0].split(","))
        nnz, rank = int(float(parts[1])), int(parts[2])
    except ValueError:
        raise CpError(f"expected I1,I2,...:nnz:rank, got {text!r}", field="--synthetic") from None
    return shape, nnz, rank


def load(args):
    from .tensors import check_shape, density_for_nnz, planted_sparse, read_tns

    if args.tensor:
        return read_tns(args.tensor), args.tensor
    shape, nnz, rank = parse_synthetic(args.synthetic)
    check_shape(shape, "--synthetic")
    if not 0 <= args.noise < 1:
        raise CpError(f"must be in [0, 1), got {args.noise}", field="--noise")
    t, _ = planted_sparse(shape, rank, density=density_for_nnz(shape, nnz, rank), noise=args.noise, seed=args.seed)
    return t, f"planted {'x'.join(map(str, shape))} rank {rank} noise {args.noise:g}"


def run(args) -> dict:
    from .als import cp, init_factors, svd_init

    if args.rank < 1:
        raise CpError(f"must be >= 1, got {args.rank}", field="--rank")
    if args.ranks < 1:
        raise CpError(f"must be >= 1, got {args.ranks}", field="--ranks")
    samples = args.samples
    if args.method != "als" and samples is None:
        samples = int(np.ceil(4 * args.rank * max(1.0, np.log(args.rank))))
    t, name = load(args)
    if args.ranks > 1:
        return run_distributed(args, t, name, samples)
    x = t.to_dense() if (args.dense or args.compare) else t
    init = svd_init(x, args.rank, args.seed) if args.init == "svd" else init_factors(x.shape, args.rank, args.seed)
    r = cp(x, args.rank, method=args.method, iters=args.iters, samples=samples, seed=args.seed,
           init=[u.copy() for u in init], backend=args.backend)
    d = {"tensor": name, "shape": list(t.shape), "nnz": t.nnz, "dense": not isinstance(x, type(t)),
         **r.to_dict(), "ranks": args.ranks, "words_per_rank": None, "model_words": None}
    if args.compare == "tensorly":
        import tensorly as tl
        from tensorly.cp_tensor import CPTensor
        from tensorly.decomposition import parafac

        t0 = time.perf_counter()
        _, errs = parafac(tl.tensor(x), args.rank, n_iter_max=args.iters, tol=0, return_errors=True,
                          init=CPTensor((np.ones(args.rank), [u.copy() for u in init])))
        secs = time.perf_counter() - t0
        d["tensorly"] = {"fit": 1.0 - float(errs[-1]), "seconds": secs, "seconds_per_iter": secs / args.iters,
                         "version": tl.__version__}
    return d


def run_distributed(args, t, name: str, samples) -> dict:
    """``--ranks P``: ``algorithms.cp.dist`` on P mpiexec ranks (sparse only; SVD start, STS-CP or ALS)."""
    from targets.exceptions import ExceptionStatus

    from .dist import run as dist_run

    if args.method == "arls-lev" or args.dense or args.compare:
        raise CpError("on ranks: --method als or sts-cp on the sparse tensor (no --dense, --compare)", field="--ranks")
    if args.method != "als" and samples < args.rank:
        raise CpError(f"samples must be >= rank ({args.rank}), got {samples}", field="--samples")
    cfg = {"ranks": args.ranks, "rank": args.rank, "samples": samples, "iters": args.iters, "seed": args.seed,
           "method": args.method, "schedule": args.schedule, "noise": args.noise}
    if args.tensor:
        cfg["tensor"] = str(args.tensor)
    else:
        shape, nnz, prank = parse_synthetic(args.synthetic)
        cfg.update(shape=list(shape), nnz=nnz, planted_rank=prank)
    d = dist_run(cfg)
    return {"tensor": name, "shape": list(t.shape), "nnz": t.nnz, "dense": False, "method": args.method,
            "rank": args.rank, "samples": samples if args.method != "als" else None, "ranks": args.ranks,
            "schedule": "tensor" if args.method == "als" else args.schedule,
            "exception_status": ExceptionStatus().to_dict(), **d}   # ranks do not scan (targets/exceptions.py)


def main(argv: list[str]) -> int:
    """``argv`` after ``run cp``; errors are the caller's (``cosa.cli.main`` prints FrameworkError)."""
    args = build_parser().parse_args(argv)
    d = run(args)
    if args.json:
        print(json.dumps(d, indent=2))
    else:
        _print(d)
    if d.get("counts_match") is False:  # a failed run: exit 1
        import sys

        print(f"cosa: cp on {d['ranks']} ranks: words per rank {d['words_per_rank']} differ from the model "
              f"{d['model_words']}", file=sys.stderr)
        return 1
    return 0


def _print(d: dict) -> None:
    print(f"{d['method']} rank {d['rank']} on {d['tensor']} ({'x'.join(map(str, d['shape']))}, {d['nnz']} nonzeros"
          f"{', dense' if d['dense'] else ''}){'' if d['samples'] is None else ', J=' + str(d['samples'])}")
    print(f"  fit {d['fit']:.6f} after {len(d['fit_per_iter'])} sweeps, {d['seconds']:.3f} s "
          f"({np.mean(d['seconds_per_iter']) * 1e3:.2f} ms per sweep)")
    if d.get("words_per_rank"):
        print(f"  {d['ranks']} ranks, {d['schedule']}-stationary: words received per rank {d['words_per_rank']}, "
              f"model {d['model_words']} ({'equal' if d['counts_match'] else 'DIFFERENT'})")
    if "tensorly" in d:
        tl = d["tensorly"]
        print(f"  tensorly {tl['version']} parafac: fit {tl['fit']:.6f}, {tl['seconds']:.3f} s "
              f"({tl['seconds_per_iter'] * 1e3:.2f} ms per sweep)")
