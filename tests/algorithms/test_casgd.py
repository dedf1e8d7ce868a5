"""CA-SGD: exact against SGD (one process and on mpiexec ranks), words and messages equal to the model,
scheduled kernels against NumPy, data, accuracy against scikit-learn, bad input."""

import gzip

import numpy as np
import pytest
import scipy.sparse as sp

from algorithms import casgd as ca
from algorithms import casgd_run as cr

TOL = 1e-12


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("density", [1.0, 0.2])
@pytest.mark.parametrize("s,b,iters", [(1, 4, 12), (2, 4, 12), (4, 3, 12), (5, 2, 12), (8, 1, 24), (3, 6, 7)])
def test_casgd_iterates_equal_sgd_on_one_process(density, s, b, iters):
    d = ca.synthetic(150, 20, density, seed=3)
    bt = ca.batch_indices(150, b, iters, seed=11)
    k = ca.Kernels("numpy")
    x_sgd = ca.sgd(None, d.a, d.y, np.zeros(20), bt, 0.7, k)
    x_ca = ca.casgd(None, d.a, d.y, np.zeros(20), bt, 0.7, s, k)
    assert np.linalg.norm(x_sgd) > 0.1
    assert rel(x_ca, x_sgd) < TOL


def test_sgd_matches_a_plain_numpy_loop():
    d = ca.synthetic(60, 7, seed=0)
    bt = ca.batch_indices(60, 5, 9, seed=2)
    x = np.zeros(7)
    for idx in bt:
        g = -(d.y[idx, None] * d.a[idx]).T @ (1 / (1 + np.exp(d.y[idx] * (d.a[idx] @ x)))) / 5
        x = x - 0.5 * g
    assert rel(ca.sgd(None, d.a, d.y, np.zeros(7), bt, 0.5, ca.Kernels()), x) < TOL


def test_sampling_is_seeded_and_distinct_within_a_batch():
    a, b = ca.batch_indices(100, 10, 5, 4), ca.batch_indices(100, 10, 5, 4)
    assert np.array_equal(a, b) and not np.array_equal(a, ca.batch_indices(100, 10, 5, 5))
    assert all(len(set(row)) == 10 for row in a)


def test_column_blocks_cover_the_features():
    for n, p in ((30, 4), (7, 7), (10, 3)):
        blocks = [ca.column_block(n, p, r) for r in range(p)]
        assert blocks[0][0] == 0 and blocks[-1][1] == n
        assert all(blocks[i][1] == blocks[i + 1][0] for i in range(p - 1))
        assert [c1 - c0 for c0, c1 in blocks] == [len(x) for x in np.array_split(np.arange(n), p)]


# --- on mpiexec ranks: exactness and counts ---------------------------------------------------------

CONFIGS = [(1, 4), (2, 4), (4, 2), (3, 3)]  # (s, b), H = 12: s = 3 and 4 divide it, a remainder step below


@pytest.fixture(scope="module", params=[1, 2, 3, 4])
def mpi_runs(request):
    pytest.importorskip("mpi4py")
    p = request.param
    cfgs = [cr.Config(synthetic=(120, 10, 1.0 if p % 2 else 0.3), ranks=p, b=b, s=s, eta=0.8, iters=12, seed=5,
                      timeout_s=120) for s, b in CONFIGS]
    cfgs.append(cr.Config(synthetic=cfgs[0].synthetic, ranks=p, b=2, s=5, eta=0.8, iters=12, seed=5, timeout_s=120))
    return p, cfgs, cr.run_many(cfgs)


def test_ranks_iterates_equal_sgd_and_counts_equal_the_model(mpi_runs):
    p, cfgs, results = mpi_runs
    for cfg, r in zip(cfgs, results):
        assert r["iterate_diff_vs_sgd"] < TOL, (p, cfg.s, cfg.b)
        assert r["counts_match"], (p, cfg.s, cfg.b)
        assert r["words_per_rank"] == r["model_words_per_rank"]
        assert r["messages_per_rank"] == r["model_messages_per_rank"]
        steps = -(-cfg.iters // cfg.s)
        assert r["messages_per_rank"] == [2 * (p - 1) * steps] * p
    # the same samples and data: the distributed SGD equals the one-process SGD
    d = cr.dataset(cfgs[0])
    bt = ca.batch_indices(d.shape[0], cfgs[0].b, cfgs[0].iters, cfgs[0].seed)
    x = ca.sgd(None, d.a, d.y, np.zeros(d.shape[1]), bt, cfgs[0].eta, ca.Kernels())
    assert abs(ca.loss_accuracy(d.a, d.y, x)[0] - results[0]["loss"]) < 1e-12


def test_messages_fall_exactly_s_fold(mpi_runs):
    p, cfgs, results = mpi_runs
    if p == 1:
        assert all(r["messages_per_rank"] == [0] for r in results)
        return
    sgd_msgs = 2 * (p - 1) * cfgs[0].iters
    for cfg, r in zip(cfgs, results):
        if cfg.iters % cfg.s == 0:
            assert [m * cfg.s for m in r["messages_per_rank"]] == [sgd_msgs] * p


def test_comm_model_closed_form():
    # ring allreduce of W words over p ranks: 2 (p - 1) messages each way, W - |own block| words twice
    for p in (2, 3, 4):
        for w in (4, 10, 37):
            blocks = [len(x) for x in np.array_split(np.arange(w), p)]
            ws, wr, ms, mr = cr.comm_counts("sgd", 1, w, 1, p, rank=0)
            assert (ms, mr) == (2 * (p - 1), 2 * (p - 1))
            assert ws == (w - blocks[0]) + (w - blocks[1 % p]) and wr == (w - blocks[p - 1]) + (w - blocks[0])
    assert cr.allreduce_words("casgd", 10, 3, 4) == [12 * 13 // 2 + 12] * 2 + [6 * 7 // 2 + 6]
    assert cr.allreduce_words("sgd", 3, 5, 4) == [5, 5, 5]


def test_model_prefers_large_s_when_latency_bound_and_s_1_when_bandwidth_bound():
    lat = cr.best_s(256, 4, 4, 64, 1.0, {"alpha": 50e-6, "beta": 1e-9, "gamma": 1e-10})
    bw = cr.best_s(256, 64, 4, 1 << 16, 1.0, {"alpha": 1e-9, "beta": 1e-6, "gamma": 1e-9})
    assert lat["best_s"] >= 8 and lat["speedup"] > 2
    assert bw["best_s"] == 1 and bw["crossover_s"] == 2


# --- scheduled kernels ---------------------------------------------------------------------------------

@pytest.mark.parametrize("sparse", [False, True])
def test_scheduled_kernels_equal_numpy_and_keep_exactness(sparse):
    d = ca.synthetic(64, 12, 0.3 if sparse else 1.0, seed=1)
    bt = ca.batch_indices(64, 4, 8, 0)
    cosa, ref = ca.Kernels("cosa"), ca.Kernels("numpy")
    y = ca.scaled_rows(d.a, d.y, bt[:4].reshape(-1))
    u = np.linspace(-1, 1, 16)
    x = np.linspace(0, 2, 12)
    for got, want in ((cosa.gram(y), ref.gram(y)), (cosa.matvec(y, x), ref.matvec(y, x)),
                      (cosa.tmatvec(y, u), ref.tmatvec(y, u))):
        assert np.allclose(got, want, rtol=1e-13, atol=1e-13)
    x1 = ca.sgd(None, d.a, d.y, np.zeros(12), bt, 0.5, cosa)
    x2 = ca.casgd(None, d.a, d.y, np.zeros(12), bt, 0.5, 4, cosa)
    assert rel(x2, x1) < TOL
    assert rel(x1, ca.sgd(None, d.a, d.y, np.zeros(12), bt, 0.5, ref)) < TOL


def test_explain_shows_each_kernel_mapping():
    text = cr.explain(cr.Config(synthetic=(64, 12, 1.0), ranks=1, b=4, s=4, iters=8))
    for name in ("casgd_gram_16x12", "casgd_matvec_16x12", "casgd_tmatvec_16x12", "casgd_matvec_4x12"):
        assert f"# {name}" in text
    assert "for " in text


# --- data and accuracy ----------------------------------------------------------------------------------

def test_synthetic_is_seeded_and_conditioned():
    a, b = ca.synthetic(300, 16, 0.25, cond=100.0, seed=9), ca.synthetic(300, 16, 0.25, cond=100.0, seed=9)
    assert sp.issparse(a.a) and (a.a != b.a).nnz == 0 and np.array_equal(a.y, b.y)
    assert abs(a.density - 0.25) < 0.01
    d = ca.synthetic(2000, 8, cond=100.0, seed=1)
    norms = np.linalg.norm(d.a, axis=0)
    assert 50 < norms[0] / norms[-1] < 200
    assert set(np.unique(d.y)) == {-1.0, 1.0}


def test_shipped_data_set_loads():
    d = ca.load_libsvm(ca.SHIPPED)
    assert d.shape == (569, 30) and not d.sparse
    assert int((d.y > 0).sum()) == 357 and d.a.min() >= -1 and d.a.max() <= 1


def test_accuracy_within_one_point_of_sklearn():
    pytest.importorskip("sklearn")
    d = ca.load_libsvm(ca.SHIPPED)
    bt = ca.batch_indices(d.shape[0], 32, 1000, 0)
    x = ca.casgd(None, d.a, d.y, np.zeros(30), bt, 1.0, 8, ca.Kernels())
    loss, acc = ca.loss_accuracy(d.a, d.y, x)
    ref = cr.sklearn_reference(d, 0)
    for name in ("SGDClassifier", "LogisticRegression"):
        assert abs(acc - ref[name]["accuracy"]) <= 0.01, (name, acc, ref[name])
    assert loss < 1.2 * ref["LogisticRegression"]["loss"]


def test_libsvm_zero_one_labels_and_csr(tmp_path):
    f = tmp_path / "t.svm"
    f.write_text("1 1:0.5 4:1\n0 2:-1\n1 3:2 # comment\n")
    d = ca.load_libsvm(f)
    assert d.sparse and d.shape == (3, 4) and list(d.y) == [1, -1, 1]
    g = tmp_path / "t.svm.gz"
    g.write_bytes(gzip.compress(f.read_bytes()))
    assert ca.load_libsvm(g).shape == (3, 4)


@pytest.mark.parametrize("text,words", [
    ("1 1:0.5\n1 2:x\n", ["line 2", "'x'"]),
    ("1 1:0.5\nabc 1:1\n", ["line 2", "label 'abc'"]),
    ("1 1:0.5 3\n", ["line 1", "index:value"]),
    ("1 3:1 2:1\n", ["line 1", "increase"]),
    ("1 1:1\n2 1:1\n3 2:1\n", ["labels must be +-1 or 0/1", "2, 3"]),
])
def test_bad_files_name_the_line_and_reason(tmp_path, text, words):
    f = tmp_path / "bad.svm"
    f.write_text(text)
    with pytest.raises(ca.CasgdError) as e:
        ca.load_libsvm(f)
    msg = str(e.value)
    assert "bad.svm" in msg and "\n" not in msg
    for w in words:
        assert w in msg


@pytest.mark.parametrize("kw,field", [
    ({"s": 0}, "--s"), ({"b": 0}, "--b"), ({"ranks": 0}, "--ranks"), ({"iters": 0}, "--iters"),
    ({"eta": -1.0}, "--eta"), ({"method": "adam"}, "--method"), ({"ranks": 11}, "--ranks"), ({"b": 500}, "--b"),
])
def test_bad_config_is_one_line(kw, field):
    cfg = cr.Config(synthetic=(100, 10, 1.0), **kw)
    with pytest.raises(ca.CasgdError) as e:
        cfg.validate()
        cr.check_sizes(cfg, cr.dataset(cfg))
    assert field in str(e.value)


def test_parse_synthetic():
    assert cr.parse_synthetic("100,8,0.5") == (100, 8, 0.5)
    for bad in ("100,8", "a,b,c", "100,8,0", "100,8,2"):
        with pytest.raises(ca.CasgdError, match="--synthetic"):
            cr.parse_synthetic(bad)


def test_a_rank_failure_ends_the_job_with_an_error():
    pytest.importorskip("mpi4py")
    from targets.mpi import MpiError

    cfg = cr.Config(synthetic=(50, 6, 1.0), ranks=2, b=2, s=2, iters=4, timeout_s=60)
    cfg.kernels = "nonexistent"  # every rank raises while building its kernels
    with pytest.raises(MpiError, match="rank .: CasgdError"):
        cr.run(cfg)
