"""Where an NVIDIA GPU exists, the CUDA kernels run through the driver API and match NumPy."""

import random

import pytest

import costmodel
import workloads as W
from cosa.baselines.mapspace import random_mapping
from targets.gpu import cuda, run_many

ARCH = costmodel.preset("gpu", sms=8, lanes_per_sm=32, shared_kib=8, register_words=32)


@pytest.fixture(scope="module", autouse=True)
def gpu():
    reason = cuda.available()
    if reason is not None:
        pytest.skip(f"no GPU to run CUDA kernels: {reason}")


@pytest.mark.parametrize("nest", [
    W.matmul("gemm", M=16, N=12, K=10, bits=32),
    W.conv2d("conv", C=8, K=4, H=6, W=6, R=3, S=3, groups=2, padding=1, stride=2, bits=32),
    W.einsum("ijk,jr,kr->ir", {"i": 6, "j": 4, "k": 5, "r": 4}, name="mttkrp", bits=64),
], ids=["gemm", "conv", "mttkrp_fp64"])
def test_cuda_runs_and_matches_numpy(nest):
    rng = random.Random(11)
    runs = run_many(nest, ARCH, [random_mapping(nest, ARCH, rng) for _ in range(4)], "cuda", repeat=3)
    for r in runs:
        assert r.verified, r.max_abs_err
        assert r.seconds > 0 and len(r.runs) == 3
