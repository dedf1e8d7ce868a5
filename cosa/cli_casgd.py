"""``cosa run casgd``: SGD / s-step CA-SGD for logistic regression on P mpiexec ranks (``algorithms.casgd``).

    cosa run casgd (--data F.svm | --synthetic m,n,density) --ranks P --b B --s S --eta E --iters H
                   [--method sgd|casgd] [--kernels cosa|numpy] [--sleep-after-send S] [--explain]
                   [--sklearn] [--arch cluster.yaml] [--alpha A --beta B --gamma G] [--json]

JSON keys: loss, accuracy, iterate_diff_vs_sgd, words_per_rank, messages_per_rank (received, per rank),
model_words_per_rank, model_messages_per_rank, counts_match, model_seconds (alpha-beta-gamma model: a
cluster-like 1 us, 1 ns/word, 0.1 ns/flop, or --arch's, or --alpha/--beta/--gamma), seconds (slowest rank),
best_s and crossover_s (the model's), and with --sklearn scikit-learn's loss and accuracy on the same
data.  Bad input (a file that does not parse, labels, s or b < 1, more ranks than features) is one
line, exit 2; a rank that fails ends the job, exit 1.  Like ``cosa/cli.py`` this module may import
``algorithms`` and ``targets``.
"""

from __future__ import annotations

import argparse
import json
import math


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (through cosa.cli.main), not argparse's usage block
        from algorithms.casgd import CasgdError

        raise CasgdError(message, source="cosa run casgd")


def finite_number(text: str) -> float:
    """argparse type: a finite float (the command lines of casgd and serve)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} is not finite")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cosa run casgd", description="SGD and s-step CA-SGD for logistic regression on MPI ranks")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="a LIBSVM-format file (labels +-1 or 0/1; .gz read too)")
    src.add_argument("--synthetic", help="m,n,density: a seeded synthetic problem (CSR when density < 1)")
    p.add_argument("--ranks", type=int, default=1, help="MPI ranks (features split in column blocks)")
    p.add_argument("--b", type=int, default=8, help="batch size")
    p.add_argument("--s", type=int, default=4, help="iterations per allreduce (CA-SGD)")
    p.add_argument("--eta", type=finite_number, default=1.0, help="step size")
    p.add_argument("--iters", type=int, default=100, help="iterations H")
    p.add_argument("--method", choices=["sgd", "casgd"], default="casgd",
                   help="sgd: one allreduce per iteration; casgd: s-step CA-SGD (default)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling (and of --synthetic data)")
    p.add_argument("--cond", type=finite_number, default=10.0, help="--synthetic: column-norm spread")
    p.add_argument("--kernels", choices=["cosa", "numpy"], default="cosa",
                   help="cosa: Gram, Y x, Y^T u scheduled by the MIP on the cpu preset and compiled")
    p.add_argument("--threads", type=int, default=1, help="threads per rank of the compiled kernels")
    p.add_argument("--sleep-after-send", type=finite_number, default=0.0,
                   help="seconds each rank sleeps after every message it sends (a sleep-based stall, not network "
                        "latency: bench/casgd.py measures a real delayed path)")
    p.add_argument("--no-check", action="store_true", help="do not run SGD beside CA-SGD (no iterate diff)")
    p.add_argument("--explain", action="store_true", help="print each kernel's mapping as a tiled loop nest")
    p.add_argument("--sklearn", action="store_true", help="also fit scikit-learn on the same data")
    p.add_argument("--arch", default=None,
                   help="model: alpha, beta, gamma from a cluster arch (the YAML `cosa arch calibrate cluster` "
                        "writes, or a preset); --alpha/--beta/--gamma override")
    p.add_argument("--alpha", type=finite_number, default=None, help="model: seconds per message")
    p.add_argument("--beta", type=finite_number, default=None, help="model: seconds per word")
    p.add_argument("--gamma", type=finite_number, default=None, help="model: seconds per flop")
    p.add_argument("--timeout", type=finite_number, default=600.0, help="seconds before a hung job is ended")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def main(argv: list[str]) -> int:
    """``argv`` after ``run casgd``; errors are the caller's (``cosa.cli.main`` prints FrameworkError)."""
    from algorithms import casgd_run as cr
    from algorithms.casgd import CasgdError

    args = build_parser().parse_args(argv)
    if args.threads < 1:
        raise CasgdError(f"must be >= 1, got {args.threads}", field="--threads")
    cfg = cr.Config(data=args.data, synthetic=cr.parse_synthetic(args.synthetic) if args.synthetic else None,
                    ranks=args.ranks, b=args.b, s=args.s, eta=args.eta, iters=args.iters, method=args.method,
                    seed=args.seed, cond=args.cond, kernels=args.kernels, threads=args.threads,
                    sleep_after_send_s=args.sleep_after_send, check=not args.no_check, timeout_s=args.timeout)
    cfg.validate()
    machine = dict(cr.CLUSTER_LIKE)
    if args.arch:
        from costmodel import load_arch
        from targets.mpi.model import Machine

        m = Machine.from_arch(load_arch(args.arch))
        machine = {"alpha": m.alpha, "beta": m.beta, "gamma": m.gamma}
    for k in ("alpha", "beta", "gamma"):
        if getattr(args, k) is not None:
            if getattr(args, k) < 0:
                raise CasgdError(f"must be >= 0, got {getattr(args, k)}", field=f"--{k}")
            machine[k] = getattr(args, k)
    text = cr.explain(cfg) if args.explain else None
    if text and not args.json:
        print(text)
    d = cr.run(cfg, machine, reference=args.sklearn)
    from targets.exceptions import UNCHECKED  # CA-SGD does not scan its iterates (targets/exceptions.py)

    d["exception_status"] = UNCHECKED.to_dict()
    if text:
        d["explain"] = text
    if args.json:
        print(json.dumps(d, indent=2))
    else:
        _print(d)
    if not d["counts_match"] or (d["iterate_diff_vs_sgd"] is not None and d["iterate_diff_vs_sgd"] > 1e-8):
        from .cli_common import RunFailed

        raise RunFailed(f"casgd: counts match the model: {d['counts_match']}, "
                        f"iterate difference vs SGD {d['iterate_diff_vs_sgd']:.3g}")
    return 0


def _print(d: dict) -> None:
    diff = "n/a" if d["iterate_diff_vs_sgd"] is None else f"{d['iterate_diff_vs_sgd']:.2e}"
    print(f"{d['method']} on {d['data']} ({d['m']} x {d['n']}, density {d['density']:.3g}), {d['ranks']} rank(s), "
          f"b={d['b']} s={d['s']} eta={d['eta']:g} H={d['iters']} [{d['kernels']} kernels]")
    print(f"  loss {d['loss']:.6f}, accuracy {d['accuracy']:.2%}, iterates vs SGD {diff}")
    print(f"  per rank: messages {d['messages_per_rank']} (model {d['model_messages_per_rank']}), words "
          f"{d['words_per_rank']} (model {d['model_words_per_rank']}): "
          f"{'equal' if d['counts_match'] else 'DIFFERENT'}")
    print(f"  seconds {d['seconds']:.4f} measured (sleep after send {d['sleep_after_send_s']:g} s), {d['model_seconds']:.3g} "
          f"modelled; model's best s {d['best_s']}, crossover s {d['crossover_s']}")
    for name, ref in d.get("sklearn", {}).items():
        print(f"  scikit-learn {name}: loss {ref['loss']:.6f}, accuracy {ref['accuracy']:.2%}")
