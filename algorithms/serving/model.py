"""Configuration of a serving simulation: the models, the model-parallel group, the links.

Swap-time law (Computron, Zou et al., arXiv 2306.13835): a model sharded over
``shards = tp x pp`` GPUs loads each shard over its own GPU's host link at the
same time, so

    swap_s = model_bytes / (shards x link_bytes_per_s) + swap_latency_s.

Optionally the links share a host-side limit (``host_gbps``: host memory, a PCIe
switch), and the aggregate is min(shards x link, host), the roofline form; the
default (None) is the pure law.

Default link: one PCIe 4.0 x16 link per GPU.  PCIe 4.0 signals 16 GT/s per lane
with 128b/130b encoding, 31.5 GB/s per direction for x16 (PCI-SIG, PCI Express
Base Specification 4.0); pinned host-to-device copies reach about 80% of that,
so we assume 25 GB/s effective (``LINK_GBPS``; NVIDIA's bandwidthTest on PCIe 4.0
x16 hosts typically reports 24-26 GB/s).  Default model: OPT-13B (Zhang et al.
2022, arXiv 2205.01068), 13e9 parameters in fp16 = 26 GB (``OPT13B_BYTES``).
Units: bytes, seconds, GB = 1e9 bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from workloads import FrameworkError

OPT13B_BYTES = 26e9          # 13e9 parameters x 2 bytes (fp16)
LINK_GBPS = 25.0             # effective GB/s of one PCIe 4.0 x16 host-to-device link
SRC = "serve"


class ServingError(FrameworkError, ValueError):
    """Bad input to the serving simulator: rates, cv, residency, shard counts, sizes."""


def swap_time_s(model_bytes: float, shards: int, link_gbps: float, latency_s: float = 0.0,
                host_gbps: float | None = None) -> float:
    """Seconds to load ``model_bytes`` split over ``shards`` links of ``link_gbps`` GB/s each, plus a fixed
    latency (the law above; ``shards`` >= 1; ``host_gbps`` caps the links' sum when given)."""
    gbps = shards * link_gbps if host_gbps is None else min(shards * link_gbps, host_gbps)
    return model_bytes / (gbps * 1e9) + latency_s


@dataclass(frozen=True)
class ServeConfig:
    """One serving experiment.

    models: number of models (each ``model_bytes`` bytes, ids 0..models-1).
    max_loaded: most models resident on the group at once (LRU eviction).
    tp, pp: tensor- and pipeline-parallel degree; shards = tp x pp GPUs, one host link each.
    link_gbps: GB/s of one GPU's host link; swap_latency_s: fixed seconds added to every swap;
    host_gbps: optional cap on the links' summed GB/s (None: none).
    rates: requests per second of each model (len == models, each >= 0); cv: coefficient of
    variation of the inter-arrival times (Gamma process, > 0; 1 is Poisson).
    seconds: arrivals are generated in [0, seconds); the run continues until every request is served.
    max_batch: most requests of one model executed together.
    warm: the first ``max_loaded`` models start loaded (no cold-start swaps).
    seed: seed of the arrival generator.
    """

    models: int = 3
    max_loaded: int = 2
    tp: int = 1
    pp: int = 1
    model_bytes: float = OPT13B_BYTES
    link_gbps: float = LINK_GBPS
    swap_latency_s: float = 0.0
    host_gbps: float | None = None
    rates: tuple[float, ...] = (1.0, 1.0, 1.0)
    cv: float = 1.0
    seconds: float = 60.0
    max_batch: int = 8
    warm: bool = True
    seed: int = 0

    @property
    def shards(self) -> int:
        return self.tp * self.pp

    @property
    def swap_s(self) -> float:
        return swap_time_s(self.model_bytes, self.shards, self.link_gbps, self.swap_latency_s, self.host_gbps)


def _positive_int(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ServingError(f"must be a positive integer, got {value!r}", source=SRC, field=name)


def _finite(value, name: str, *, positive: bool = False, non_negative: bool = False) -> None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ServingError(f"must be a number, got {value!r}", source=SRC, field=name) from None
    if not math.isfinite(v):
        raise ServingError(f"must be finite, got {value!r}", source=SRC, field=name)
    if positive and v <= 0:
        raise ServingError(f"must be > 0, got {value!r}", source=SRC, field=name)
    if non_negative and v < 0:
        raise ServingError(f"must be >= 0, got {value!r}", source=SRC, field=name)


def validate(cfg: ServeConfig) -> ServeConfig:
    """Raise ServingError (one line naming the field) for bad input; return ``cfg``."""
    for name in ("models", "max_loaded", "tp", "pp", "max_batch"):
        _positive_int(getattr(cfg, name), name)
    if cfg.max_loaded > cfg.models:
        raise ServingError(f"{cfg.max_loaded} resident models but only {cfg.models} models", source=SRC,
                           field="max_loaded")
    _finite(cfg.model_bytes, "model_bytes", positive=True)
    _finite(cfg.link_gbps, "link_gbps", positive=True)
    _finite(cfg.swap_latency_s, "swap_latency_s", non_negative=True)
    if cfg.host_gbps is not None:
        _finite(cfg.host_gbps, "host_gbps", positive=True)
    _finite(cfg.cv, "cv", positive=True)
    _finite(cfg.seconds, "seconds", positive=True)
    if len(cfg.rates) != cfg.models:
        raise ServingError(f"{len(cfg.rates)} rates for {cfg.models} models", source=SRC, field="rates")
    for i, r in enumerate(cfg.rates):
        _finite(r, f"rates[{i}]", non_negative=True)
    if isinstance(cfg.seed, bool) or not isinstance(cfg.seed, int) or cfg.seed < 0:
        raise ServingError(f"must be a non-negative integer, got {cfg.seed!r}", source=SRC, field="seed")
    return cfg
