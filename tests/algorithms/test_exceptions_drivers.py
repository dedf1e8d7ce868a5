"""The iterative drivers stop with a status on NaN/Inf (``targets.exceptions``) instead of iterating on NaNs;
``exceptions="check"`` reports a non-finite input argument as a status."""

import numpy as np
import pytest

from algorithms import pencil as P
from algorithms import randnla as R
from algorithms.cp.als import cp
from algorithms.cp.tensors import CpError
from algorithms.sketch import SketchError
from workloads import FrameworkError


def _fault_after(monkeypatch, module, name, calls):
    """``module.name`` returns NaNs from its ``calls``-th call on (a kernel gone bad); the call counter."""
    real = getattr(module, name)
    count = [0]

    def faulty(*args, **kw):
        count[0] += 1
        out = real(*args, **kw)
        return out * np.nan if count[0] >= calls else out

    monkeypatch.setattr(module, name, faulty)
    return count


def test_lsqr_stops_at_the_first_nonfinite_product(monkeypatch):
    a, b, _ = R.synthetic_lstsq(300, 12, 1e4, seed=1)
    count = _fault_after(monkeypatch, R.sl, "solve_triangular", 6)
    res = R.sketch_and_precondition(a, b, iter_lim=10_000)
    st = res.exception_status
    assert st["code"] == 1 and st["where"] == "created" and st["kind"] == "nan"
    assert res.istop == -1 and np.isnan(res.x).all()
    assert count[0] <= 8, "LSQR went on iterating on NaNs"


def test_lsqr_check_mode_names_the_input():
    a, b, _ = R.synthetic_lstsq(100, 8, 10.0)
    ok = R.sketch_and_precondition(a, b, exceptions="check")
    assert ok.exception_status["code"] == 0 and ok.exception_status["mode"] == "check"
    a[5, 2] = np.inf
    res = R.sketch_and_precondition(a, b, exceptions="check")
    assert res.exception_status["code"] == -1 and res.exception_status["argument"] == "A"
    assert res.exception_status["kind"] == "inf" and res.exception_status["index"] == 5 * 8 + 2
    assert np.isnan(res.x).all()
    a[5, 2] = 1.0
    b[0] = np.nan
    assert R.sketch_and_solve(a, b, exceptions="check").exception_status["code"] == -2
    with pytest.raises(SketchError):                 # ieee: a bad input, one line and exit 2 on the CLI
        R.sketch_and_precondition(a, b)
    with pytest.raises(FrameworkError, match="exceptions"):
        R.sketch_and_solve(a, b, exceptions="loud")


def test_power_iteration_stops_with_a_status(monkeypatch):
    a, _ = R.decaying_matrix(40)
    import algorithms.randnla as mod

    _fault_after(monkeypatch, mod, "_times", 2)
    with pytest.raises(SketchError) as exc:
        R.range_finder(a, 5, power=3)
    assert exc.value.exit_code == 1 and "NaN" in str(exc.value)


def test_cp_als_stops_on_overflow_and_is_scale_safe():
    rng = np.random.default_rng(0)
    x = rng.random((6, 5, 4))
    base = cp(x, 2, iters=3, backend="numpy")
    big = cp(x * 1e200, 2, iters=3, backend="numpy")      # squares overflow: scaled norms give the same fit
    assert base.exception_status["code"] == 0 and big.exception_status["code"] == 0
    assert abs(big.fit - base.fit) < 1e-10
    with np.errstate(all="ignore"):
        res = cp(np.full((6, 5, 4), 1.7e308), 2, iters=50, backend="numpy", init="random")
    assert res.exception_status["code"] == 1 and res.exception_status["where"] == "created"
    assert len(res.seconds_per_iter) == 1 and np.isnan(res.fit)
    assert res.to_dict()["exception_status"]["argument"] == "U_0"


def test_cp_check_mode_and_bad_input():
    x = np.random.default_rng(1).random((4, 3, 5))
    x[1, 2, 3] = np.nan
    res = cp(x, 2, iters=2, backend="numpy", exceptions="check")
    assert res.exception_status["code"] == -1 and res.exception_status["index"] == 1 * 15 + 2 * 5 + 3
    with pytest.raises(CpError):
        cp(x, 2, iters=2, backend="numpy")


def test_pencil_stops_on_a_nonfinite_product(monkeypatch):
    a, b, _ = P.test_pencil(40, "planted", seed=2)
    _fault_after(monkeypatch, P, "matmul", 5)
    res = P.diagonalize(a, b, threshold=8)
    assert res.exception_status["code"] == 1 and res.exception_status["where"] == "created"
    assert np.isnan(res.eigenvalues).all()


def test_pencil_check_mode_names_the_input():
    a, b, _ = P.test_pencil(20, "random")
    ok = P.diagonalize(a, b, exceptions="check")
    assert ok.exception_status["code"] == 0
    b[3, 3] = np.inf
    res = P.diagonalize(a, b, exceptions="check")
    assert res.exception_status["code"] == -2 and res.exception_status["argument"] == "B"
    with pytest.raises(P.PencilError):
        P.diagonalize(a, b)


def test_cli_json_has_exception_status_and_bad_mode_exits_2(capsys):
    import json

    from cosa.cli import main

    assert main(["run", "lstsq", "--synthetic", "200,10,100", "--exceptions", "check", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["exception_status"]["mode"] == "check" and d["exception_status"]["code"] == 0
    assert main(["run", "pencil", "--n", "12", "--kernels", "numpy", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["exception_status"]["code"] == 0
    assert main(["run", "rsvd", "--synthetic", "40", "--rank", "4", "--exceptions", "bad"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--exceptions" in err
