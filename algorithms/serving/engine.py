"""The discrete-event engine: several models served by one model-parallel group, with swapping.

Each model is ``offloaded``, ``loading`` or ``loaded``; at most ``max_loaded`` are
loading or loaded at once.  The group executes one batch at a time (all of its
GPUs work on every batch, as tensor/pipeline parallelism does); the host links
load one model at a time, all shards at once, overlapping execution (Computron's
asynchronous swapping).  Offloading is free: weights are read-only and the host
keeps its copy, so eviction only frees the slot.

Policies (deterministic):
  * execution: when the group is idle, the loaded model whose oldest waiting
    request arrived first runs a batch of up to ``max_batch`` of its waiting
    requests (FCFS across models, batching within a model);
  * loading: models are loaded in the order their first waiting request made
    them wanted; when every slot is taken the victim is the least recently used
    loaded model that is not executing, preferring models with no waiting
    request (LRU); a load with no possible victim waits for the next event.

Times come from two callables, so the same engine runs simulated and real swaps:
``exec_s(model, batch_size) -> seconds`` and ``swap(model, victim) -> seconds``
(``victim`` is the evicted model or None; a real swapper does the copy when called
and returns the time it measured).

Per request: latency = completion - arrival = swap + queue + execute, where swap
is the time from arrival until its model's last load before its batch finished
(0 when the model was loaded at arrival), execute the batch's run time, queue
the rest.  A hit is a request whose model was loaded when it arrived.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .arrivals import Request
from .model import ServeConfig

OFFLOADED, LOADING, LOADED = "offloaded", "loading", "loaded"
_ARRIVE, _LOAD_DONE, _EXEC_DONE = 0, 1, 2   # at equal times: arrivals, then loads, then batches end


@dataclass(frozen=True)
class Served:
    """One completed request (seconds)."""

    rid: int
    model: int
    arrival_s: float
    start_s: float
    done_s: float
    swap_s: float
    queue_s: float
    execute_s: float
    hit: bool

    @property
    def latency_s(self) -> float:
        return self.done_s - self.arrival_s


@dataclass(frozen=True)
class Swap:
    """One load: ``model`` loaded over [start_s, done_s), evicting ``victim`` (None: a free slot)."""

    model: int
    victim: int | None
    start_s: float
    done_s: float

    @property
    def seconds(self) -> float:
        return self.done_s - self.start_s


@dataclass
class Result:
    """What a run produced: every served request, every swap, batches run and the end time."""

    served: list[Served] = field(default_factory=list)
    swaps: list[Swap] = field(default_factory=list)
    batches: int = 0
    end_s: float = 0.0
    initially_loaded: tuple[int, ...] = ()


def run(cfg: ServeConfig, requests: list[Request], exec_s: Callable[[int, int], float],
        swap: Callable[[int, int | None], float] | None = None) -> Result:
    """Serve ``requests`` (sorted by arrival) under ``cfg``'s residency and batching; see the module doc."""
    swap = swap or (lambda m, v: cfg.swap_s)
    n, cap = cfg.models, cfg.max_loaded
    state = [OFFLOADED] * n
    warm = tuple(range(cap)) if cfg.warm else ()
    for m in warm:
        state[m] = LOADED
    last_use = [0.0] * n          # LRU clock: last execution end or load end
    loaded_at = [0.0] * n         # end of the latest load of each model
    queues: list[deque] = [deque() for _ in range(n)]
    wanted: deque = deque()       # models waiting for the link, in order of demand
    fresh: set = set()            # loaded, with waiting requests, no batch run since the load
    hits: dict[int, bool] = {}
    events: list = []
    seq = 0

    def push(t, kind, payload):
        nonlocal seq
        heapq.heappush(events, (t, kind, seq, payload))
        seq += 1

    for r in requests:
        push(r.arrival_s, _ARRIVE, r)
    res = Result(initially_loaded=warm)
    executing: int | None = None
    link_busy = False

    def try_load(now: float) -> None:
        nonlocal link_busy
        while not link_busy and wanted:
            m = wanted[0]
            if state[m] != OFFLOADED:
                wanted.popleft()
                continue
            resident = [k for k in range(n) if state[k] != OFFLOADED]
            victim = None
            if len(resident) >= cap:
                cands = [k for k in resident if state[k] == LOADED and k != executing and k not in fresh]
                if not cands:
                    return
                victim = min(cands, key=lambda k: (bool(queues[k]), last_use[k], k))
                state[victim] = OFFLOADED
                if queues[victim]:
                    wanted.append(victim)
            wanted.popleft()
            state[m] = LOADING
            dt = float(swap(m, victim))
            res.swaps.append(Swap(m, victim, now, now + dt))
            link_busy = True
            push(now + dt, _LOAD_DONE, m)

    def try_execute(now: float) -> None:
        nonlocal executing
        if executing is not None:
            return
        ready = [m for m in range(n) if state[m] == LOADED and queues[m]]
        if not ready:
            return
        m = min(ready, key=lambda k: (queues[k][0].arrival_s, k))
        batch = [queues[m].popleft() for _ in range(min(cfg.max_batch, len(queues[m])))]
        dt = float(exec_s(m, len(batch)))
        executing = m
        fresh.discard(m)
        res.batches += 1
        push(now + dt, _EXEC_DONE, (m, batch, now))

    while events:
        now, kind, _, payload = heapq.heappop(events)
        if kind == _ARRIVE:
            r = payload
            hits[r.rid] = state[r.model] == LOADED
            queues[r.model].append(r)
            if state[r.model] == OFFLOADED and r.model not in wanted:
                wanted.append(r.model)
        elif kind == _LOAD_DONE:
            m = payload
            state[m] = LOADED
            loaded_at[m] = last_use[m] = now
            link_busy = False
            if queues[m]:
                fresh.add(m)
        else:
            m, batch, start = payload
            executing = None
            last_use[m] = now
            for r in batch:
                sw = max(0.0, loaded_at[m] - r.arrival_s)
                ex = now - start
                res.served.append(Served(r.rid, m, r.arrival_s, start, now, sw, start - r.arrival_s - sw, ex,
                                         hits[r.rid]))
        try_execute(now)
        try_load(now)
        res.end_s = now
    res.served.sort(key=lambda s: s.rid)
    return res


def summary(res: Result) -> dict:
    """The issue's keys: mean/p50/p95/p99 latency, mean swap seconds, swaps, hit rate, and the mean
    per-request breakdown (``swap_s + queue_s + execute_s == mean_latency_s``); None where undefined."""
    lat = np.array([s.latency_s for s in res.served])
    pct = (lambda q: float(np.percentile(lat, q))) if lat.size else (lambda q: None)
    mean = (lambda xs: float(np.mean(xs))) if lat.size else (lambda xs: None)
    swaps = [s.seconds for s in res.swaps]
    return {
        "mean_latency_s": mean(lat), "p50_latency_s": pct(50), "p95_latency_s": pct(95), "p99_latency_s": pct(99),
        "mean_swap_s": float(np.mean(swaps)) if swaps else 0.0,
        "swaps": len(swaps),
        "hit_rate": mean([s.hit for s in res.served]),
        "breakdown": {"swap_s": mean([s.swap_s for s in res.served]),
                      "queue_s": mean([s.queue_s for s in res.served]),
                      "execute_s": mean([s.execute_s for s in res.served])},
        "requests": int(lat.size), "batches": res.batches, "end_s": res.end_s,
    }


def latency_cdf_plot(results: dict[str, Result], path: str, title: str = "request latency") -> None:
    """Write a PNG of the latency CDF of each labelled run (matplotlib, Agg back end)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, res in results.items():
        lat = np.sort([s.latency_s for s in res.served])
        if lat.size:
            ax.step(lat, np.arange(1, lat.size + 1) / lat.size, where="post", label=label)
    ax.set_xlabel("latency (s)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
