"""Request arrivals: one Gamma renewal process per model (bursty when cv > 1), seeded.

Inter-arrival times of a model with rate ``r`` requests/s are Gamma(shape = 1/cv^2,
scale = cv^2 / r): mean 1/r, coefficient of variation cv (cv = 1 is a Poisson
process), as in Computron's and AlpaServe's workloads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import SRC, ServingError


@dataclass(frozen=True)
class Request:
    """One request: ``rid`` (0.. in arrival order), ``model`` id, ``arrival_s``."""

    rid: int
    model: int
    arrival_s: float


def gamma_times(rng: np.random.Generator, rate: float, cv: float, seconds: float) -> np.ndarray:
    """Arrival times in [0, seconds) of a Gamma renewal process (rate requests/s, cv > 0); empty for rate 0."""
    if rate <= 0:
        return np.empty(0)
    shape, scale = 1.0 / cv**2, cv**2 / rate
    times: list[np.ndarray] = []
    t, chunk = 0.0, max(16, int(rate * seconds * 1.2) + 16)
    while t < seconds:
        gaps = rng.gamma(shape, scale, size=chunk)
        ts = t + np.cumsum(gaps)
        times.append(ts)
        t = float(ts[-1])
    all_t = np.concatenate(times)
    return all_t[all_t < seconds]


def generate(rates, cv: float, seconds: float, seed: int) -> list[Request]:
    """Requests of every model merged in arrival order; model i draws from its own stream
    (``SeedSequence(seed).spawn``), so adding a model does not change the others' arrivals."""
    if cv <= 0:
        raise ServingError(f"must be > 0, got {cv!r}", source=SRC, field="cv")
    streams = np.random.SeedSequence(seed).spawn(len(rates))
    pairs = []
    for m, (rate, ss) in enumerate(zip(rates, streams)):
        if rate < 0:
            raise ServingError(f"must be >= 0, got {rate!r}", source=SRC, field=f"rates[{m}]")
        pairs.extend((float(t), m) for t in gamma_times(np.random.default_rng(ss), float(rate), cv, seconds))
    pairs.sort()
    return [Request(i, m, t) for i, (t, m) in enumerate(pairs)]


def skewed_rates(total_rate: float, models: int, skew: float = 1.0) -> tuple[float, ...]:
    """Rates summing to ``total_rate`` with Zipf weights 1/(i+1)^skew (skew 0: equal rates)."""
    if models < 1 or total_rate < 0 or skew < 0:
        raise ServingError(f"need models >= 1, total_rate >= 0, skew >= 0; got {models}, {total_rate}, {skew}",
                           source=SRC, field="rates")
    w = 1.0 / np.arange(1, models + 1) ** skew
    return tuple(float(x) for x in total_rate * w / w.sum())
