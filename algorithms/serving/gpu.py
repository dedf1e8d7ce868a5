"""Pinned host-to-device swaps with CuPy, where a CUDA GPU and CuPy are present (skipped otherwise).

``measure_h2d(model_bytes, shards, repeats)`` copies a pinned host buffer into a
device buffer as ``shards`` contiguous pieces, one CUDA stream each, and returns
the wall seconds of each whole copy (all streams synchronised).  On one GPU all
streams share one PCIe link, so the time should not fall with ``shards``; on a
group of GPUs (one device per shard) it should fall as the swap law says.  Raises
ServingError (exit 2 on the command line) when CuPy or a GPU is missing.
"""

from __future__ import annotations

import time

import numpy as np

from .model import SRC, ServingError
from .real import shard_ranges


def available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device
        return False


def measure_h2d(model_bytes: int, shards: int = 1, repeats: int = 3) -> list[float]:
    """Wall seconds of ``repeats`` pinned host-to-device copies of ``model_bytes`` bytes over ``shards`` streams."""
    if not available():
        raise ServingError("needs CuPy and a CUDA GPU", source=SRC, field="gpu")
    import cupy

    n = int(model_bytes)
    mem = cupy.cuda.alloc_pinned_memory(n)
    host = np.frombuffer(mem, np.uint8, n)
    host[:] = (np.arange(n, dtype=np.uint32) % 251).astype(np.uint8)
    dev = cupy.empty(n, cupy.uint8)
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(shards)]
    ranges = shard_ranges(n, shards)
    times = []
    for _ in range(repeats + 1):               # the first copy warms up the driver and is dropped
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for (a, b), s in zip(ranges, streams):
            dev[a:b].set(host[a:b], stream=s)
        for s in streams:
            s.synchronize()
        times.append(time.perf_counter() - t0)
    if not bool((dev[:1024].get() == host[:1024]).all()):
        raise ServingError("device copy differs from the host buffer", source=SRC, exit_code=1)
    return times[1:]
