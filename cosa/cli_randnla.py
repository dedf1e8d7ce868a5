"""``cosa run lstsq|rsvd|pencil``: the RandNLA drivers of ``algorithms`` on the command line.

    cosa run lstsq (--synthetic m,n,cond | --matrix F.mtx) --sketch gaussian|sjlt|srht|countsketch|...
                   --method solve|precondition [--d D] [--json]
    cosa run rsvd (--synthetic n[,decay] | --matrix F.mtx) --rank k --power q [--json]
    cosa run pencil --n N --kind random|planted|ill-conditioned --eps E [--json]

Bad input (a sketch smaller than the column count, an unknown operator, a singular pencil, NaN/Inf,
an unreadable matrix) prints one line and exits 2.  Like ``cosa/cli.py`` this module may import
``algorithms``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

DRIVER_HELP = {"lstsq": "sketch-and-solve / sketch-and-precondition least squares",
               "rsvd": "randomized SVD",
               "pencil": "randomized inverse-free pencil diagonalization"}
DRIVERS = tuple(DRIVER_HELP)


def _ints_floats(text: str, field: str, count: tuple[int, ...]):
    from algorithms.sketch import SketchError

    try:
        parts = [float(x) for x in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) not in count or not all(np.isfinite(parts)):
        raise SketchError(f"'{text}' is not {' or '.join(str(c) for c in count)} comma-separated numbers",
                          field=field)
    return parts


def _read_matrix(path: str):
    import scipy.io
    import scipy.sparse as sp

    from algorithms.sketch import SketchError

    try:
        m = scipy.io.mmread(path)
    except (OSError, ValueError) as exc:
        raise SketchError(f"cannot read a Matrix Market file ({exc})", source=path, field="--matrix") from None
    return sp.csr_matrix(m, dtype=np.float64) if sp.issparse(m) else np.asarray(m, dtype=np.float64)


def _lstsq(args) -> dict:
    import scipy.linalg as sl
    import scipy.sparse as sp

    from algorithms import randnla as R
    from algorithms.sketch import SketchError

    if args.synthetic:
        m, n, cond = _ints_floats(args.synthetic, "--synthetic", (3,))
        if m != int(m) or n != int(n):
            raise SketchError(f"m and n must be integers, got '{args.synthetic}'", field="--synthetic")
        a, b, xs = R.synthetic_lstsq(int(m), int(n), cond, residual=args.residual, seed=args.seed,
                                     density=args.density)
        norm_a = 1.0 if args.density is None else None
    else:
        a = _read_matrix(args.matrix)
        if a.shape[0] < a.shape[1]:
            raise SketchError(f"A is {a.shape[0]} x {a.shape[1]}: least squares needs m >= n", source=args.matrix,
                              field="--matrix")
        b, xs = R.plant(a, residual=args.residual, seed=args.seed)
        norm_a = None
    solve = R.sketch_and_solve if args.method == "solve" else R.sketch_and_precondition
    kw = {"tol": args.tol, "kernel": args.kernel} if args.method == "precondition" else {}
    out = solve(a, b, sketch=args.sketch, d=args.d, seed=args.seed, exceptions=args.exceptions, **kw)
    dense = a.toarray() if sp.issparse(a) else a
    t0 = time.perf_counter()
    ref = sl.lstsq(dense, b)[0]
    t_ref = time.perf_counter() - t0
    err = lambda x: float(np.linalg.norm(x - xs) / np.linalg.norm(xs))
    return {"driver": "lstsq", "method": args.method, "sketch": args.sketch, "m": a.shape[0], "n": a.shape[1],
            "d": out.d, "residual": float(np.linalg.norm(b - a @ out.x) / np.linalg.norm(b)),
            "rel_error_vs_truth": err(out.x), "lstsq_rel_error_vs_truth": err(ref),
            "backward_error": R.backward_error(a, b, out.x, norm_a),
            "lstsq_backward_error": R.backward_error(a, b, ref, norm_a), "iterations": out.iterations,
            "condition_estimate": out.condition_estimate, "reachable_error": out.reachable_error,
            "seconds": out.seconds, "seconds_sketch": out.sketch_seconds, "seconds_lstsq": t_ref,
            "seed": args.seed, "exception_status": out.exception_status}


def spectral_norm_of_difference(a, u, s, vt, *, iters: int = 30, seed: int = 0) -> float:
    """||A - U diag(s) V^T||_2 by power iteration on the difference (never formed)."""
    x = np.random.default_rng(seed).standard_normal(a.shape[1])
    est = 0.0
    for _ in range(iters):
        x /= np.linalg.norm(x)
        y = a @ x - u @ (s * (vt @ x))
        x = a.T @ y - vt.T @ (s * (u.T @ y))
        est = float(np.sqrt(np.linalg.norm(x)))
    return est


def _rsvd(args) -> dict:
    import scipy.sparse as sp

    from algorithms import randnla as R

    sigma = None
    if args.synthetic:
        vals = _ints_floats(args.synthetic, "--synthetic", (1, 2))
        a, sigma = R.decaying_matrix(int(vals[0]), decay=vals[1] if len(vals) > 1 else 0.9, seed=args.seed)
    else:
        a = _read_matrix(args.matrix)
    out = {}
    t0 = time.perf_counter()
    u, s, vt = R.rsvd(a, args.rank, oversample=args.oversample, power=args.power, seed=args.seed)
    out["seconds"] = time.perf_counter() - t0
    if args.compare:
        import scipy.linalg as sl

        t0 = time.perf_counter()
        sigma = sl.svd(a.toarray() if sp.issparse(a) else a, compute_uv=False)
        out["seconds_svd"] = time.perf_counter() - t0
    err = spectral_norm_of_difference(a, u, s, vt, seed=args.seed)
    d = {"driver": "rsvd", "rank": args.rank, "power": args.power, "oversample": args.oversample,
         "shape": list(a.shape), "spectral_error": err}
    if sigma is not None:
        d["optimal_error"] = float(sigma[args.rank])
        d["error_over_optimal"] = err / float(sigma[args.rank])
    d.update(out)
    d["seed"] = args.seed
    from targets.exceptions import ExceptionStatus   # power iterations are checked (a NaN stops them, exit 1)

    d["exception_status"] = ExceptionStatus(args.exceptions, 0).to_dict()
    return d


def _pencil(args) -> dict:
    from algorithms import pencil as P

    if args.n < 1:
        raise P.PencilError(f"must be >= 1, got {args.n}", field="--n")
    a, b, _ = P.test_pencil(args.n, args.kind, seed=args.seed)
    res = P.diagonalize(a, b, eps=args.eps, seed=args.seed, threshold=args.threshold, kernels=args.kernels,
                        exceptions=args.exceptions)
    if res.exception_status["code"]:      # stopped on Inf/NaN (or a non-finite input under check)
        return {"driver": "pencil", "n": args.n, "kind": args.kind, "eps": args.eps, "seconds": res.seconds,
                "seed": args.seed, "exception_status": res.exception_status}
    ea, eb = P.backward_errors(a, b, res)
    t0 = time.perf_counter()
    match = P.eig_match(a, b, res.eigenvalues, args.eps)
    st = res.stats
    return {"driver": "pencil", "n": args.n, "kind": args.kind, "eps": args.eps, "backward_error_A": ea,
            "backward_error_B": eb, "eig_match_vs_scipy": match["max_over_prediction"],
            "eig_max_abs_diff": match["max_abs_diff"], "eig_max_condition": match["max_condition"],
            "seconds": res.seconds, "seconds_scipy_eig": time.perf_counter() - t0, "splits": len(st.splits),
            "split_balance_min": min(min(s, 1 - s) for s in st.splits) if st.splits else None,
            "qz_fallbacks": st.qz_fallbacks, "qz_calls": st.qz_calls, "lines_checked": st.lines_checked,
            "irs_steps": st.irs_steps, "max_deflation_residual": st.max_deflation_residual,
            "kernels": args.kernels, "threshold": args.threshold, "seed": args.seed,
            "exception_status": res.exception_status}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cosa run", description="RandNLA drivers (algorithms package)")
    sub = ap.add_subparsers(dest="driver", required=True)
    p = sub.add_parser("lstsq", help=DRIVER_HELP["lstsq"], description=DRIVER_HELP["lstsq"])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--synthetic", help="m,n,cond: planted x* with a residual orthogonal to range(A)")
    src.add_argument("--matrix", help="Matrix Market file (b = A x* + r, r orthogonal to range(A))")
    p.add_argument("--sketch", default="sjlt", help="gaussian, rademacher, sjlt, countsketch, srft, srht")
    p.add_argument("--method", choices=["solve", "precondition"], default="precondition",
                   help="solve: sketch-and-solve; precondition: LSQR preconditioned by the sketch (default)")
    p.add_argument("--d", type=int, default=None,
                   help="sketch rows (default: m/16 kept within 4n..16n for precondition, 4n for solve)")
    p.add_argument("--residual", type=float, default=1e-4, help="planted ||r|| / ||x*|| (||A|| = 1)")
    p.add_argument("--density", type=float, default=None, help="synthetic sparse A with this density")
    p.add_argument("--tol", type=float, default=1e-14, help="LSQR's atol and btol")
    p.add_argument("--kernel", choices=["fused", "blas"], default="fused",
                   help="LSQR's products: one fused pass over A (default) or NumPy's two dgemv passes")
    p = sub.add_parser("rsvd", help=DRIVER_HELP["rsvd"], description=DRIVER_HELP["rsvd"])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--synthetic", help="n[,decay]: n x n with singular values decay^i")
    src.add_argument("--matrix", help="Matrix Market file")
    p.add_argument("--rank", type=int, required=True, help="target rank k")
    p.add_argument("--power", type=int, default=2, help="power iterations q (default 2)")
    p.add_argument("--oversample", type=int, default=10, help="extra sketch columns beyond k (default 10)")
    p.add_argument("--compare", action="store_true", help="also time scipy.linalg.svd (optimal error)")
    p = sub.add_parser("pencil", help=DRIVER_HELP["pencil"], description=DRIVER_HELP["pencil"])
    p.add_argument("--n", type=int, required=True, help="pencil size n (n x n matrices A and B)")
    p.add_argument("--kind", default="random", help="random, planted, ill-conditioned")
    p.add_argument("--eps", type=float, default=1e-8, help="target backward error (default 1e-8)")
    p.add_argument("--threshold", type=int, default=16, help="QZ at or below this size")
    p.add_argument("--kernels", default="cosa", help="cosa (scheduled CPU GEMMs) or numpy")
    for p in sub.choices.values():
        p.add_argument("--seed", type=int, default=0, help="seed of the problem and the sketches (default 0)")
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        p.add_argument("--exceptions", default="ieee", help="NaN/Inf: ieee (default) or check (targets/exceptions.py)")
    return ap


def main(argv: list[str]) -> int:
    """``argv`` after ``run``; errors are the callers' (``cosa.cli.main`` prints FrameworkError)."""
    args = build_parser().parse_args(argv)
    from targets.exceptions import check_mode

    check_mode(args.exceptions, field="--exceptions")
    d = {"lstsq": _lstsq, "rsvd": _rsvd, "pencil": _pencil}[args.driver](args)
    if args.json:
        print(json.dumps(d, indent=2))
    else:
        print("  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in d.items()))
    status = d.get("exception_status") or {}
    if status.get("code"):
        from .cli_common import RunFailed

        raise RunFailed(f"{args.driver}: stopped on Inf/NaN: {status['message']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
