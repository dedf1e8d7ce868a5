import pytest

from workloads import AffineExpr, LoopNest, Tensor, WorkloadError, conv2d, einsum, matmul


def test_affine_parse_roundtrip():
    e = AffineExpr.parse("2*P + R - 1")
    assert e.coef("P") == 2 and e.coef("R") == 1 and e.offset == -1
    assert AffineExpr.parse(str(e)) == e
    assert AffineExpr.parse("P*2+3*R+1") == AffineExpr((("P", 2), ("R", 3)), 1)


def test_conv_sizes_and_halo():
    c = conv2d("c", C=8, K=16, H=10, W=10, R=3, S=3, stride=2, padding=1)
    assert (c.dims["P"], c.dims["Q"]) == (5, 5)
    assert c.macs == 16 * 8 * 5 * 5 * 9
    assert c.size_words("Inputs") == 8 * 10 * 10
    # a 2x2 output tile with a 3x3 filter at stride 2 touches 5x5 input pixels
    assert c.tensor("Inputs").tile_words({"N": 1, "C": 1, "P": 2, "Q": 2, "R": 3, "S": 3}) == 25
    assert c.window_dims() == {"P", "Q", "R", "S"}


def test_depthwise_and_groups():
    d = conv2d("dw", C=32, K=32, groups=32, P=7, Q=7, R=3, S=3)
    assert d.dims["G"] == 32 and d.dims["C"] == 1 and d.dims["K"] == 1
    assert d.macs == 32 * 49 * 9


def test_matmul_einsum_relevance():
    m = matmul(M=4, N=5, K=6)
    e = einsum("mk,kn->mn", {"m": 4, "n": 5, "k": 6})
    assert m.macs == e.macs == 120
    assert m.relevance().tolist() == [[1, 0, 1], [0, 1, 1], [1, 1, 0]]


@pytest.mark.parametrize("bad", [
    lambda: LoopNest("x", {"i": 0}, (Tensor("O", ("i",), "output"),)),
    lambda: LoopNest("x", {"i": 2}, (Tensor("O", ("j",), "output"),)),
    lambda: LoopNest("x", {"i": 2}, (Tensor("O", ("i",), "input"),)),
    lambda: einsum("ik,kj->ij", {"i": 2, "k": 2}),
    lambda: AffineExpr.parse("2**P"),
])
def test_bad_input_raises_workload_error(bad):
    with pytest.raises(WorkloadError):
        bad()


def test_hash_is_cached_but_never_pickled():
    """Tensors and expressions cache their hash (the cost model's caches hash them in every key); a string's
    hash differs from process to process, so a pickled copy must compute its own."""
    import pickle
    import subprocess
    import sys

    t = Tensor("A", ("M + K", "K"), bits=32)
    assert hash(t) == hash(Tensor("A", ("M + K", "K"), bits=32)) and t.dims == frozenset({"M", "K"})
    assert "_hash" in t.__dict__ and "_hash" in t.indices[0].__dict__
    copy = pickle.loads(pickle.dumps(t))
    assert copy == t and "_hash" not in copy.__dict__ and "_hash" not in copy.indices[0].__dict__
    assert hash(copy) == hash(t) and hash(AffineExpr.parse("M + K")) == hash(t.indices[0])
    # the same tensor unpickled in another process (another string hash seed) hashes as that process does
    code = ("import pickle, sys; t = pickle.loads(sys.stdin.buffer.read()); "
            "from workloads.ir import Tensor; print(hash(t) == hash(Tensor('A', ('M + K', 'K'), bits=32)))")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(t), capture_output=True, check=True)
    assert out.stdout.strip() == b"True"
