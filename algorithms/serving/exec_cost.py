"""Per-batch execution time of a transformer on a GPU preset, from our cost model.

A decoder layer's work is dominated by four GEMMs (hidden h, feed-forward f,
tokens T = batch x prompt tokens): QKV T x h x 3h, output projection T x h x h,
FC1 T x h x f, FC2 T x f x h.  Attention's score and context products add
2 x T x prompt x h MACs per layer, under 1% of the GEMMs' 12 x T x h^2 at
h = 5120 and 128-token prompts, and are left out.  Tensor parallelism (Megatron
style) splits QKV and FC1 by columns and the projections by rows over ``tp``
GPUs; pipeline parallelism puts ``layers / pp`` layers on each stage, so one
batch still passes every layer in turn: batch seconds = layers x (sum of the
four GEMMs' seconds on one GPU at the tp split).  All-reduce and pipeline
hand-off times are not modelled.

Each GEMM is mapped by ``cosa.baselines.random_search`` (seeded, a small sample
budget) and costed by ``costmodel.evaluate`` on the arch (``gpu-h200`` by
default: fp32 FMA lanes, so fp16 tensor-core speed is not modelled; the figure
is the cost model's, an upper-bound-ish estimate).  The time for batch sizes
between the two evaluated points (1 and ``max_batch``) is interpolated
linearly (the GEMMs' time is close to affine in T once T fills the machine).
Default sizes: OPT-13B (40 layers, h = 5120, f = 20480; Zhang et al. 2022).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .model import SRC, ServingError


@dataclass(frozen=True)
class Transformer:
    """A decoder-only transformer's sizes (OPT-13B by default); ``prompt`` tokens per request;
    ``split_pad``: a tensor-parallel piece is padded up to a multiple of this many columns/rows."""

    layers: int = 40
    hidden: int = 5120
    ffn: int = 20480
    prompt: int = 128
    bits: int = 16
    split_pad: int = 64


OPT13B = Transformer()


def layer_gemms(t: Transformer, batch: int, tp: int) -> list[tuple[str, int, int, int]]:
    """(name, M, N, K) of one layer's GEMMs on one GPU of a ``tp``-way tensor-parallel group (a split that
    does not divide evenly: the GPU with the largest piece, ceil(n / tp) padded up to ``split_pad``, sets
    the time; padding keeps the piece tileable, e.g. 20480 / 3 -> 6848, not the prime 6827)."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ServingError(f"must be a positive integer, got {tp!r}", source=SRC, field="tp")
    m, h, f = batch * t.prompt, t.hidden, t.ffn
    pad = max(1, t.split_pad)
    c = lambda n: n // tp if n % tp == 0 else -(-(-(-n // tp)) // pad) * pad
    return [("qkv", m, c(3 * h), h), ("out", m, h, c(h)), ("fc1", m, c(f), h), ("fc2", m, h, c(f))]


@lru_cache(maxsize=256)
def gemm_seconds(arch_name: str, m: int, n: int, k: int, bits: int = 16, samples: int = 24, seed: int = 0) -> float:
    """Seconds of one M x N x K GEMM on the preset ``arch_name`` (best of ``samples`` random mappings)."""
    from cosa.baselines import random_search
    from costmodel import preset
    from workloads.builders import matmul

    arch = preset(arch_name)
    sched = random_search(matmul("gemm", M=m, N=n, K=k, bits=bits), arch, samples=samples, seed=seed)
    return float(sched.cost.cycles) / float(arch.frequency_hz)


def batch_seconds(t: Transformer, batch: int, tp: int = 1, arch: str = "gpu-h200", samples: int = 24) -> float:
    """Cost-model seconds of one batch of ``batch`` requests through every layer (see the module doc)."""
    return t.layers * sum(gemm_seconds(arch, m, n, k, t.bits, samples) for _, m, n, k in layer_gemms(t, batch, tp))


@dataclass(frozen=True)
class ExecTable:
    """Affine per-batch time ``base_s + per_request_s x batch`` (seconds), from two evaluated points."""

    base_s: float
    per_request_s: float
    source: str

    def __call__(self, model: int, batch: int) -> float:
        return self.base_s + self.per_request_s * batch


def from_costmodel(t: Transformer = OPT13B, max_batch: int = 8, tp: int = 1, arch: str = "gpu-h200",
                   samples: int = 24) -> ExecTable:
    """ExecTable through the cost model's times at batch 1 and ``max_batch`` (one point when max_batch is 1)."""
    t1 = batch_seconds(t, 1, tp, arch, samples)
    if max_batch <= 1:
        return ExecTable(0.0, t1, f"costmodel {arch}")
    tb = batch_seconds(t, max_batch, tp, arch, samples)
    slope = max(0.0, (tb - t1) / (max_batch - 1))
    return ExecTable(max(0.0, t1 - slope), slope, f"costmodel {arch}")


def fixed(per_batch_s: float) -> ExecTable:
    """A given per-batch time, whatever the batch size."""
    if not per_batch_s >= 0:
        raise ServingError(f"must be >= 0, got {per_batch_s!r}", source=SRC, field="exec_s")
    return ExecTable(float(per_batch_s), 0.0, "given")
