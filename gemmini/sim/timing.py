"""A command-level timing model of Gemmini's decoupled load, execute and store units.

What is modelled (all times in cycles):

* Issue: the core issues one command per cycle, in program order.  A command
  enters the queue of its unit (load: config_ld and mvin*; execute: config_ex,
  preload, compute_*; store: config_st and mvout) only when that queue has a
  free entry (``ld_queue``, ``ex_queue``, ``st_queue`` entries, an entry is
  held until its command completes); while it waits the core stalls, so later
  commands of every unit wait too.  A fence stalls the core until every
  earlier command has completed.  flush costs one issue cycle.
* Dependencies: through scratchpad and accumulator rows.  A command starts
  only after every earlier command of another unit that wrote a row it reads
  or writes (read-after-write, write-after-write) and every earlier command of
  another unit that read a row it writes (write-after-read) has completed.
  Within a unit, commands run in order through one pipeline (accumulating
  computes into the same rows do not stall each other).  Main memory is not
  tracked, as in Gemmini: a program that reads what it wrote needs a fence.
* DMA (load and store units, one bus each way): a row of ``b`` bytes at
  address ``a`` is split into requests at ``dma_request_bytes`` boundaries;
  each request takes one cycle per ``dma_bytes_per_cycle``-aligned beat it
  touches.  Requests are pipelined: a request returns ``dma_latency_cycles``
  after its last beat, and at most ``dma_max_inflight`` may be outstanding
  (a new one waits for the oldest to return), across commands.  The unit is
  busy until its last request has left the bus; the command completes when
  its last request returns.
* Execute: a compute streams DIM rows through the array (DIM cycles of the
  array) and its results leave the array ``array_fill_cycles = 2*DIM``
  cycles later (the systolic skew).  A preload that loads a real operand
  (WS weights, OS bias) shifts DIM rows into the array's second buffer: DIM
  cycles that overlap the previous compute (it may start once that compute
  has started); a garbage preload takes one cycle.
* Config commands take one cycle on their unit.

Results: total cycles, per-unit busy cycles (the union of the intervals in
which the unit was occupied), the command count and per-command start/end.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from .. import isa
from ..config import DEFAULT_CONFIG, GemminiConfig
from ..errors import IsaError, SimulationError

SOURCE = "gemmini timing model"
UNITS = ("load", "execute", "store")


@dataclass(frozen=True)
class TimingResult:
    """Cycles of a command stream.

    cycles: completion of the last command.  busy: cycles each unit
    ("load", "execute", "store") was occupied.  instructions: commands
    (fences included).  array_cycles: cycles the array streamed rows
    (DIM per compute).  load_bytes / store_bytes: main-memory bytes moved.
    starts / ends: per command, when it started and completed.
    """

    cycles: int
    busy: dict
    instructions: int
    array_cycles: int
    load_bytes: int
    store_bytes: int
    starts: tuple
    ends: tuple

    def utilization(self, macs: int, config: GemminiConfig) -> float:
        """Gemmini's accounting: ideal cycles (MACs / DIM^2) over measured cycles."""
        return config.ideal_cycles(macs) / self.cycles if self.cycles else 0.0


def array_fill_cycles(config: GemminiConfig) -> int:
    """Cycles from the last row entering the array to the last result leaving it."""
    return 2 * config.dim


def dma_requests(addr: int, row_bytes: int, rows: int, stride: int, config: GemminiConfig) -> list[int]:
    """Beats of each DMA request moving ``rows`` rows of ``row_bytes`` bytes, ``stride`` bytes apart, from ``addr``.

    A row is split into requests at ``dma_request_bytes``-aligned boundaries;
    a request takes one beat per ``dma_bytes_per_cycle``-aligned chunk it touches.
    """
    beat, request = config.dma_bytes_per_cycle, config.dma_request_bytes
    beats = []
    for r in range(rows):
        pos = addr + r * stride
        end = pos + row_bytes
        while pos < end:
            stop = min(end, (pos // request + 1) * request)
            beats.append((stop - 1) // beat - pos // beat + 1)
            pos = stop
    return beats


def dma_transfer(addr: int, row_bytes: int, rows: int, stride: int, config: GemminiConfig) -> tuple[int, int]:
    """(requests, beats) of a transfer; see ``dma_requests``."""
    beats = dma_requests(addr, row_bytes, rows, stride, config)
    return len(beats), sum(beats)


def dma_beats(addr: int, row_bytes: int, rows: int, stride: int, config: GemminiConfig) -> int:
    """Bus cycles (beats) of a transfer; see ``dma_requests``."""
    return dma_transfer(addr, row_bytes, rows, stride, config)[1]


class _Dma:
    """One direction of the DMA: a bus of one beat per cycle and at most ``dma_max_inflight``
    requests waiting for memory (each returns ``dma_latency_cycles`` after its last beat)."""

    def __init__(self, config: GemminiConfig):
        self.latency = config.dma_latency_cycles
        self.window: deque[int] = deque(maxlen=config.dma_max_inflight)

    def transfer(self, start: int, beats: list[int]) -> tuple[int, int]:
        """(cycle the bus is free again, cycle the last request completes) for requests issued from ``start``."""
        cursor = done = start
        for count in beats:
            if len(self.window) == self.window.maxlen:
                cursor = max(cursor, self.window[0])  # wait for the oldest request to return
            cursor += count
            done = cursor + self.latency
            self.window.append(done)
        return max(cursor, start + 1), max(done, start + 1)


class _Rows:
    """Per-row completion times of the last write and the last read by each unit, for one local memory.

    A unit runs its own commands in order through one pipeline, so only
    commands of the other units are waited for (as Gemmini's reorder buffer does).
    """

    def __init__(self, n: int):
        self.write = {u: np.zeros(n, dtype=np.int64) for u in UNITS}
        self.read = {u: np.zeros(n, dtype=np.int64) for u in UNITS}

    def ready(self, unit: str, reads: np.ndarray, writes: np.ndarray) -> int:
        t = 0
        for other in UNITS:
            if other == unit:
                continue
            if reads.size:
                t = max(t, int(self.write[other][reads].max()))
            if writes.size:
                t = max(t, int(self.write[other][writes].max()), int(self.read[other][writes].max()))
        return t

    def record(self, unit: str, reads: np.ndarray, writes: np.ndarray, end: int) -> None:
        if reads.size:
            self.read[unit][reads] = np.maximum(self.read[unit][reads], end)
        if writes.size:
            self.write[unit][writes] = np.maximum(self.write[unit][writes], end)


def _rows(local: isa.LocalAddr, count: int, stride: int = 1) -> np.ndarray:
    if local.is_garbage or count <= 0:
        return np.zeros(0, dtype=np.int64)
    return local.row + stride * np.arange(count, dtype=np.int64)


def _merge_busy(intervals: list[tuple[int, int]]) -> int:
    total, cur_start, cur_end = 0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def timing(commands, config: GemminiConfig | None = None) -> TimingResult:
    """Cycles of ``commands`` on ``config`` (see the module docstring for the model)."""
    cfg = config or DEFAULT_CONFIG
    cmds = isa.decode_stream(commands)
    dim = cfg.dim
    fill = array_fill_cycles(cfg)
    depth = {"load": cfg.ld_queue, "execute": cfg.ex_queue, "store": cfg.st_queue}
    in_queue: dict[str, list[int]] = {u: [] for u in UNITS}  # end times of the queue's last entries
    unit_free = {u: 0 for u in UNITS}
    dma = {"load": _Dma(cfg), "store": _Dma(cfg)}
    intervals: dict[str, list[tuple[int, int]]] = {u: [] for u in UNITS}
    sp_rows, acc_rows = _Rows(cfg.sp_rows), _Rows(cfg.acc_rows)
    ld_state: dict[int, dict] = {}
    st_stride = None
    ex_state = None
    pending_preload = None  # (fields, end time)
    weight_path_free = 0
    last_compute_start = 0
    array_cycles = load_bytes = store_bytes = 0
    issue = 0  # the cycle the core issues the next command
    all_done = 0
    starts, ends = [], []

    for index, cmd in enumerate(cmds):
        try:
            f = isa.validate(cmd, cfg)
        except IsaError as exc:
            raise SimulationError(exc.reason, source=SOURCE, field=exc.field, index=index) from None
        name = f["name"]
        if name == "fence":
            issue = max(issue, all_done)
            starts.append(issue)
            ends.append(issue)
            continue
        if name == "flush":
            starts.append(issue)
            ends.append(issue + 1)
            issue += 1
            continue
        unit = "load" if name in ("config_ld", "mvin", "mvin2", "mvin3") else \
            "store" if name in ("config_st", "mvout") else "execute"
        queue = in_queue[unit]
        if len(queue) >= depth[unit]:  # wait for the oldest entry still in the queue to leave
            queue.sort()
            issue = max(issue, queue[len(queue) - depth[unit]])
        queue[:] = [t for t in queue if t > issue]
        reads_sp = reads_acc = writes_sp = writes_acc = np.zeros(0, dtype=np.int64)
        occupancy, latency, earliest = 1, 0, 0
        requests = None  # beats of each DMA request of an mvin/mvout

        if name == "config_ld":
            ld_state[f["id"]] = f
        elif name == "config_st":
            st_stride = f["stride_bytes"]
        elif name == "config_ex":
            ex_state = f
        elif name.startswith("mvin"):
            ld = ld_state.get(f["id"])
            if ld is None:
                raise SimulationError(f"{name} before any config_ld with id {f['id']}", source=SOURCE,
                                      field="config_ld", index=index)
            local, rows, cols = f["local"], f["rows"], f["cols"]
            elem = 4 if local.is_acc and not ld["shrunk"] else 1
            blocks = -(-cols // dim)
            written = np.concatenate([_rows(isa.LocalAddr(local.row + b * ld["local_stride"], local.is_acc), rows)
                                      for b in range(blocks)])
            limit = cfg.acc_rows if local.is_acc else cfg.sp_rows
            if written.max() >= limit:
                raise SimulationError(f"mvin reaches row {written.max()}, outside {limit} rows", source=SOURCE,
                                      field="local", index=index)
            if local.is_acc:
                writes_acc = written
            else:
                writes_sp = written
            requests = dma_requests(f["dram_addr"], cols * elem, rows, ld["stride_bytes"], cfg)
            load_bytes += rows * cols * elem
        elif name == "mvout":
            if st_stride is None:
                raise SimulationError("mvout before any config_st", source=SOURCE, field="config_st", index=index)
            local, rows, cols = f["local"], f["rows"], f["cols"]
            elem = 4 if local.is_acc and local.full else 1
            if local.is_acc:
                reads_acc = _rows(local, rows)
            else:
                reads_sp = _rows(local, rows)
            requests = dma_requests(f["dram_addr"], cols * elem, rows, st_stride, cfg)
            store_bytes += rows * cols * elem
        else:  # preload / compute
            if ex_state is None:
                raise SimulationError(f"{name} before any config_ex", source=SOURCE, field="config_ex", index=index)
            if name == "preload":
                if pending_preload is not None:
                    raise SimulationError("two preloads without a compute in between", source=SOURCE,
                                          field="preload", index=index)
                operand = f["bd"]
                reads = _rows(operand, f["bd_rows"])
                reads_acc, reads_sp = (reads, reads_sp) if operand.is_acc else (reads_acc, reads)
                occupancy = 1 if operand.is_garbage else dim
                earliest = max(weight_path_free, last_compute_start)
            else:
                if pending_preload is None:
                    raise SimulationError(f"{name} without a preceding preload", source=SOURCE, field="preload",
                                          index=index)
                pre, pre_end = pending_preload
                pending_preload = None
                a_rows = _rows(f["a"], f["a_rows"], ex_state["a_stride"])
                bd_rows = _rows(f["bd"], f["bd_rows"])
                for rows_, local in ((a_rows, f["a"]), (bd_rows, f["bd"])):
                    if local.is_acc:
                        reads_acc = np.concatenate([reads_acc, rows_])
                    else:
                        reads_sp = np.concatenate([reads_sp, rows_])
                c_rows = _rows(pre["c"], pre["c_rows"], ex_state["c_stride"])
                writes_acc, writes_sp = (c_rows, writes_sp) if pre["c"].is_acc else (writes_acc, c_rows)
                occupancy, latency = dim, fill
                earliest = max(pre_end, unit_free["execute"])
                array_cycles += dim
            for rows_, limit, field in ((reads_sp, cfg.sp_rows, "bd_local"), (writes_sp, cfg.sp_rows, "c_local"),
                                        (reads_acc, cfg.acc_rows, "bd_local"), (writes_acc, cfg.acc_rows, "c_local")):
                if rows_.size and rows_.max() >= limit:
                    raise SimulationError(f"{name} reaches row {rows_.max()}, outside {limit} rows", source=SOURCE,
                                          field=field, index=index)

        ready = max(sp_rows.ready(unit, reads_sp, writes_sp), acc_rows.ready(unit, reads_acc, writes_acc))
        if name == "preload":
            start = max(issue, ready, earliest)
            weight_path_free = start + occupancy
        elif name.startswith("compute"):
            start = max(issue, ready, earliest)
            last_compute_start = start
            unit_free["execute"] = start + occupancy
        else:
            start = max(issue, ready, unit_free[unit])
            if requests is not None:
                bus_free, done = dma[unit].transfer(start, requests)
                occupancy, latency = bus_free - start, done - bus_free
            unit_free[unit] = start + occupancy
        end = start + occupancy + latency
        if name == "preload":
            pending_preload = (f, start + occupancy)
        sp_rows.record(unit, reads_sp, writes_sp, end)
        acc_rows.record(unit, reads_acc, writes_acc, end)
        intervals[unit].append((start, start + occupancy))
        queue.append(end)
        all_done = max(all_done, end)
        starts.append(start)
        ends.append(end)
        issue += 1

    busy = {u: _merge_busy(intervals[u]) for u in UNITS}
    return TimingResult(cycles=max(all_done, issue), busy=busy, instructions=len(cmds), array_cycles=array_cycles,
                        load_bytes=load_bytes, store_bytes=store_bytes, starts=tuple(starts), ends=tuple(ends))
