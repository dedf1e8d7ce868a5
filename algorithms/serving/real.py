"""Real swapping on this machine: model shards copied from a host pool into a capacity-limited device pool.

Both pools are POSIX shared memory; ``workers`` processes (1..4; one per "GPU")
each copy one contiguous shard of a model (bytes / shards, 64-byte aligned) from
the host pool into a device slot, all at once, as Computron's model-parallel
swap loads each GPU's shard over that GPU's own link.  A swap's time is wall
time from dispatching the shards until every worker has reported (so it includes
the fixed inter-process latency).  ``RealSwapper`` plugs into ``engine.run``: the
same engine, with swaps that really copy.  ``link_limit_gbps`` paces each worker
like a link slower than the memory system (as PCIe is slower than host DRAM), so
the law's premise, independent links that are the bottleneck, can be tested on a
machine whose cores share one memory bus.

Calibration (``calibrate``): the per-link bandwidth is one worker copying a whole
model; the fixed latency is a 64-byte swap over every worker; the host cap is
every worker copying half a model at once (a size no timed swap uses).  The
simulator's prediction for s shards is then ``swap_time_s(bytes, s, bw, latency)``
(the pure law) or with ``host_gbps`` (the roofline form).  Here the "links" are
CPU cores copying through one memory system, so they are not independent as
GPUs' PCIe links are: the host cap says how far they are from it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.shared_memory import SharedMemory

import numpy as np

from .model import SRC, ServingError, swap_time_s

ALIGN = 64
PAGE = 4096


def shard_ranges(nbytes: int, shards: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) byte ranges of ``shards`` near-equal, ALIGN-aligned shards covering nbytes."""
    step = -(-nbytes // shards)
    step = -(-step // ALIGN) * ALIGN
    return [(a, min(nbytes, a + step)) for a in range(0, nbytes, step)] or [(0, 0)]


CHUNK = 1 << 20


def paced_copy(dst: np.ndarray, src: np.ndarray, gbps: float | None) -> None:
    """dst[:] = src, at most ``gbps`` GB/s when given: 1 MiB chunks, sleeping whenever ahead of the pace
    (an emulated link slower than the memory system, as a PCIe link is slower than host DRAM)."""
    if gbps is None:
        dst[:] = src
        return
    t0, n = time.perf_counter(), len(src)
    for a in range(0, n, CHUNK):
        b = min(n, a + CHUNK)
        dst[a:b] = src[a:b]
        ahead = b / (gbps * 1e9) - (time.perf_counter() - t0)
        if ahead > 0:
            time.sleep(ahead)


def _worker(conn, host_name: str, dev_name: str, link_limit_gbps: float | None = None) -> None:
    host, dev = SharedMemory(name=host_name), SharedMemory(name=dev_name)
    try:
        h = np.ndarray((host.size,), np.uint8, host.buf)
        d = np.ndarray((dev.size,), np.uint8, dev.buf)
        int(h[::PAGE].sum())            # map every page in this process before any timed copy
        d[::PAGE] = d[::PAGE]
        conn.send("ready")
        while True:
            msg = conn.recv()
            if msg is None:
                break
            src, dst, n = msg
            paced_copy(d[dst:dst + n], h[src:src + n], link_limit_gbps)
            conn.send(n)
        del h, d
    finally:
        host.close()
        dev.close()
        conn.close()


@dataclass(frozen=True)
class Calibration:
    """Measured per-link GB/s (one worker, whole model), fixed latency (seconds, 64-byte swap) and the
    host cap (GB/s of all workers copying at once); ``cores``: CPUs of this machine."""

    link_gbps: float
    latency_s: float
    host_gbps: float
    cores: int

    def predict_s(self, nbytes: float, shards: int, host_capped: bool = False) -> float:
        return swap_time_s(nbytes, shards, self.link_gbps, self.latency_s,
                           self.host_gbps if host_capped else None)


class Pools:
    """``models`` host copies of ``model_bytes`` bytes each, a device pool of ``slots`` model slots, and
    ``workers`` copy processes, each paced to ``link_limit_gbps`` GB/s when given (``paced_copy``).  Use
    as a context manager (the shared memory is unlinked on exit)."""

    def __init__(self, models: int, slots: int, model_bytes: int, workers: int = 4,
                 link_limit_gbps: float | None = None):
        if not 1 <= workers <= 16:
            raise ServingError(f"must be in 1..16, got {workers}", source=SRC, field="workers")
        if slots < 1 or slots > models:
            raise ServingError(f"need 1 <= slots <= models, got {slots} slots for {models} models", source=SRC,
                               field="slots")
        if model_bytes < 1:
            raise ServingError(f"must be >= 1, got {model_bytes}", source=SRC, field="model_bytes")
        if link_limit_gbps is not None and not link_limit_gbps > 0:
            raise ServingError(f"must be > 0, got {link_limit_gbps}", source=SRC, field="link_limit_gbps")
        self.models, self.slots, self.model_bytes, self.workers = models, slots, int(model_bytes), workers
        self.host = SharedMemory(create=True, size=models * self.model_bytes)
        self.dev = SharedMemory(create=True, size=slots * self.model_bytes)
        self._procs, self._conns = [], []
        try:
            h = self.h
            pattern = (np.arange(self.model_bytes, dtype=np.uint32) % 251).astype(np.uint8)
            for m in range(models):
                h[m * self.model_bytes:(m + 1) * self.model_bytes] = pattern + np.uint8(m + 1)
            self.d[:] = 0
            ctx = get_context("fork")
            for _ in range(workers):
                a, b = ctx.Pipe()
                p = ctx.Process(target=_worker, args=(b, self.host.name, self.dev.name, link_limit_gbps),
                                daemon=True)
                p.start()
                self._procs.append(p)
                self._conns.append(a)
            for c in self._conns:
                if c.recv() != "ready":
                    raise ServingError("a copy worker did not start", source=SRC, exit_code=1)
        except BaseException:
            self.close()
            raise

    @property
    def h(self) -> np.ndarray:
        return np.ndarray((self.host.size,), np.uint8, self.host.buf)

    @property
    def d(self) -> np.ndarray:
        return np.ndarray((self.dev.size,), np.uint8, self.dev.buf)

    def copy(self, model: int, slot: int, shards: int, nbytes: int | None = None) -> float:
        """Copy (the first ``nbytes`` of) ``model`` into ``slot`` with ``shards`` workers; wall seconds."""
        if not 1 <= shards <= self.workers:
            raise ServingError(f"must be in 1..{self.workers} (the workers), got {shards}", source=SRC,
                               field="shards")
        n = self.model_bytes if nbytes is None else int(nbytes)
        src0, dst0 = model * self.model_bytes, slot * self.model_bytes
        t0 = time.perf_counter()
        ranges = shard_ranges(n, shards)
        for (a, b), c in zip(ranges, self._conns):
            c.send((src0 + a, dst0 + a, b - a))
        for _, c in zip(ranges, self._conns):
            c.recv()
        return time.perf_counter() - t0

    def holds(self, model: int, slot: int) -> bool:
        """Whether ``slot`` holds exactly ``model``'s bytes."""
        mb = self.model_bytes
        return bool(np.array_equal(self.d[slot * mb:(slot + 1) * mb], self.h[model * mb:(model + 1) * mb]))

    def close(self) -> None:
        for c in self._conns:
            try:
                c.send(None)
            except (BrokenPipeError, OSError):
                pass
        for p in self._procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
        for c in self._conns:
            c.close()
        self._procs, self._conns = [], []
        for shm in (getattr(self, "host", None), getattr(self, "dev", None)):
            if shm is not None:
                try:
                    shm.close()
                    shm.unlink()
                except FileNotFoundError:
                    pass
        self.host = self.dev = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def calibrate(pools: Pools, repeats: int = 3) -> Calibration:
    """Per-link GB/s: fastest of ``repeats`` whole-model copies by one worker, minus the fixed latency;
    latency: median of 64-byte swaps over all workers; host GB/s: fastest of ``repeats`` half-model copies
    by all workers.  Every shard count copies once untimed first; the three probes alternate round by
    round, so a drift in the machine's load touches them alike.  The fastest (not the median) copy is
    the one least disturbed by other jobs on a shared machine; ``sweep``'s figures are compared likewise."""
    for s in range(1, pools.workers + 1):
        pools.copy(s % pools.models, s % pools.slots, s)
    half = pools.model_bytes // 2
    lat, one, every = [], [], []
    for i in range(max(3, repeats)):
        lat.append(pools.copy(0, 0, pools.workers, nbytes=ALIGN * pools.workers))
        one.append(pools.copy(i % pools.models, i % pools.slots, 1))
        every.append(pools.copy((i + 1) % pools.models, (i + 1) % pools.slots, pools.workers, nbytes=half))
    lat_s = float(np.median(lat))
    t1 = max(min(one) - lat_s, 1e-9)
    tw = max(min(every) - lat_s, 1e-9)
    return Calibration(pools.model_bytes / t1 / 1e9, lat_s, half / tw / 1e9, os.cpu_count() or 1)


def sweep(pools: Pools, shard_counts, repeats: int = 3) -> dict[int, list[float]]:
    """Wall seconds of ``repeats`` whole-model swaps per shard count, the counts alternating round by round
    (models and slots in turn)."""
    out: dict[int, list[float]] = {s: [] for s in shard_counts}
    for i in range(repeats):
        for s in shard_counts:
            out[s].append(pools.copy(i % pools.models, (i + 1) % pools.slots, s))
    return out


class RealSwapper:
    """``swap(model, victim)`` for ``engine.run``: copies ``model`` into the victim's slot (or a free one)
    with ``shards`` workers and returns the measured seconds; ``slot_of`` tracks residency."""

    def __init__(self, pools: Pools, shards: int, initially_loaded: tuple[int, ...] = ()):
        self.pools, self.shards = pools, shards
        self.slot_of: dict[int, int] = {}
        for m in initially_loaded:
            self.slot_of[m] = len(self.slot_of)
            pools.copy(m, self.slot_of[m], shards)

    def __call__(self, model: int, victim: int | None) -> float:
        if victim is not None:
            slot = self.slot_of.pop(victim)
        else:
            used = set(self.slot_of.values())
            slot = next(s for s in range(self.pools.slots) if s not in used)
        self.slot_of[model] = slot
        return self.pools.copy(model, slot, self.shards)
