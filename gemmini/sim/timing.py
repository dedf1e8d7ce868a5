"""A command-level timing model of Gemmini's decoupled load, execute and store units.

It follows our Gemmini-compatible RTL (``gemmini/rtl``) command by command;
the rates and delays below were checked against its co-simulation (DIM 4
and 16, 16-cycle memory latency).  All times are in cycles.

* Front end: the core hands over one command per cycle, in program order.
  config_ld and mvin* take an entry of the load queue, config_ex and
  compute_* one of the execute queue, config_st and mvout one of the store
  queue (``ld_queue``, ``ex_queue``, ``st_queue`` entries); an entry is held
  until its command completes, and while a queue is full the core stalls, so
  later commands of every unit wait too.  A preload takes an issue cycle but
  no entry: it is held and merged with the next compute into one entry (the
  RTL's matrix step).  A fence stalls the core until every earlier command
  has completed; flush costs one issue cycle.
* Dependencies: through scratchpad and accumulator rows, on the row range a
  command spans (an mvin's column blocks and everything between them; a
  strided A or C from its first row to its last), as the RTL's front end
  checks them.  A command enters its unit only after every earlier command
  of another unit that wrote a row it reads or writes, and every earlier
  command of another unit that read a row it writes, has completed.  Each
  unit takes its commands in order, one per cycle at most.  Main memory is
  not tracked, as in Gemmini.
* Load (mvin): the request generator sends one one-beat DMA read per cycle
  (a row of ``b`` bytes is ceil(b / ``dma_bytes_per_cycle``) beats) on the
  DMA port it shares with the store unit; a beat returns
  ``dma_latency_cycles`` later.  The assembler gathers a row's beats, one
  per cycle, and needs one more cycle per row, so a stream of rows costs
  (beats + 1) cycles per row; the writer then writes the row's DIM-column
  blocks one per cycle (two row buffers sit between them, so wide rows at a
  small DIM are writer-bound).  An mvin completes 3 cycles after the cycle
  its last block is written.  The next mvin may start requesting once the generator
  is free; at most ``dma_max_inflight`` beats are requested ahead of the
  assembler.  With ``units`` "f13847e" the load unit is Gemmini f13847e's
  instead (two mvins in flight, the zero writer, stride-0 rows fetched once,
  the pixel repeater, no extra assembler cycle per row:
  ``timing_units.LoadUnit.mvin_command``), so are the mesh (six tags: a
  compute waits for the one five back to complete) and the store unit (a
  row's blocks gathered before its beats are sent), and with
  ``soc_line_fill_cycles`` the main-memory lines no earlier mvin read cross
  the SoC's memory bus first.
* Store (mvout): rows are read one per cycle into two row buffers that
  alternate; a row is sent as DMA write beats from 2 cycles after its read,
  and its buffer is free again after its last beat (one-beat rows flow at
  2 rows per 3 cycles, wider rows at one beat per cycle); an mvout
  completes 2 cycles after the cycle of its last beat.
* Execute (WS and OS): each compute passes through two stages.  Stage 1
  (compute_preloaded, and every OS compute) takes DIM cycles: WS shifts the
  preloaded weights down into the PEs' idle buffer, OS transposes A.  It
  starts once the compute has entered the unit (the previous compute has
  moved to stage 2) and, for a compute_preloaded, once the buffer it fills
  was last read DIM cycles ago; its scratchpad reads wait while stage 2 of
  the previous compute reads the same bank (stage 2 has priority).  A WS
  compute_accumulated has no stage-1 work.  Stage 2 streams one slot per
  cycle: WS max(A rows, C rows) (1 for a garbage C), OS max(A cols, D rows);
  it starts when stage 1 is done and the previous compute's stage 2 has
  finished.  WS results are written 2*DIM cycles after their slots; the
  compute completes 2*DIM+2 cycles after its last slot (an OS compute
  without output 3 cycles after it); OS computes that write results are
  spaced 2*DIM cycles apart.
* Banks: a scratchpad bank serves one access per cycle, the array's operand
  reads first, then the load unit's writes and the store unit's reads; an
  accumulator bank serves the array's result writes first, then its D-row
  reads (so back-to-back computes whose D rows share a bank with their
  results run at half speed), then the load and store units.  An mvin still
  writing a scratchpad bank when a compute later in program order reads it
  is pushed back by the overlap (and the mvins after it, in order); other
  accesses see only commands earlier in program order.  On Gemmini's units
  it is the other way round (its single-ported ``ScratchpadBank`` serves a
  write before a read): an mvin's block writes (one cycle each, placed as its
  lines cross the SoC's memory bus when they are cold, else from its first
  beat) never wait for the array, and a compute's weight and A-row reads of
  that bank take the cycles they leave free, its stream stalling meanwhile;
  an mvin later in program order does not move a compute already timed.
* Config commands take one cycle on their unit.

Results: total cycles, per-unit busy cycles (the union of the intervals in
which the unit was moving data or computing), the command count and
per-command start (the cycle it entered its unit) and end (the cycle it
completed).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from .. import isa
from ..config import DEFAULT_CONFIG, GemminiConfig
from ..errors import IsaError, SimulationError
from ..isa_loops import LOOP_FUNCTS
from .functional import repeat_floor
from .loops import has_loops, issue_order
from .timing_units import (DONE_CYCLES, EMPTY_ROWS, UNITS, BankBusy, ExecuteUnit, LoadUnit, RowTimes, StoreUnit, array_fill_cycles,
                           compute_slots, dma_beats, dma_requests, dma_transfer, local_rows, merge_busy)

__all__ = ["DONE_CYCLES", "TimingResult", "array_fill_cycles", "compute_slots", "dma_beats", "dma_requests",
           "dma_transfer", "timing"]

SOURCE = "gemmini timing model"



@dataclass(frozen=True)
class TimingResult:
    """Cycles of a command stream.

    cycles: completion of the last command.  busy: cycles each unit
    ("load", "execute", "store") was moving data or computing.  instructions: commands
    (fences included).  array_cycles: stage-2 slots the array streamed
    (max(A rows, C rows) per WS compute).  load_bytes / store_bytes:
    main-memory bytes moved.  starts / ends: per command, the cycle it
    entered its unit and the cycle it completed.
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


def _push_back_writes(writing, bank: int, first: int, stop: int, load: LoadUnit, ends: list, queue: list,
                      sp_rows: RowTimes) -> int:
    """Delay the in-flight mvins that write ``bank`` during a compute's reads of it in [first, stop).

    The writer is in order, so later mvins move back as far as needed too;
    their completions are updated where later commands will look for them.
    Returns the latest completion."""
    latest, shift = 0, 0
    for entry in writing:
        index, mvin_bank, begin, done, rows = entry
        if shift:
            begin, done = begin + shift, done + shift
        elif mvin_bank == bank and begin < stop and done > first:
            shift = min(stop, done) - max(first, begin)
            done += shift
        if (begin, done) == (entry[2], entry[3]):
            continue
        moved = done - entry[3]
        entry[2], entry[3] = begin, done
        old = ends[index]
        ends[index] = old + moved
        if old in queue:
            queue[queue.index(old)] = old + moved
        sp_rows.record("load", EMPTY_ROWS, rows, old + moved)
        latest = max(latest, old + moved)
    if shift:
        load.writer_free += shift
        load.writer_ends = [t + shift for t in load.writer_ends]
    return latest


def timing(commands, config: GemminiConfig | None = None) -> TimingResult:
    """Cycles of ``commands`` on ``config`` (see the module docstring for the model).

    Loop instructions (LOOP_WS, LOOP_CONV_WS) go through ``loops.Unroller``, which this model drives with its
    own queues: a sub-unroller whose queue is full holds its command while the others' go on, so the next
    tile's loads overlap the current tile's computes as on Gemmini.  An error in an unrolled command names the
    loop's start word."""
    cfg = config or DEFAULT_CONFIG
    cmds = isa.decode_stream(commands)
    if not has_loops(cmds):
        return _timing(cmds, cfg, None)
    origins: list[int] = []
    try:
        return _timing(cmds, cfg, origins)
    except SimulationError as exc:
        if exc.index is None or exc.index >= len(origins):
            raise
        raise SimulationError(f"{exc.reason} (unrolled command {exc.index})", source=SOURCE, field=exc.field,
                              index=origins[exc.index]) from None


def _timing(cmds, cfg: GemminiConfig, origins: list | None) -> TimingResult:
    depth = {"load": cfg.ld_queue, "execute": cfg.ex_queue, "store": cfg.st_queue}
    in_queue: dict[str, list[int]] = {u: [] for u in UNITS}  # end times of the queue's last entries
    sp_banks, acc_banks = BankBusy(cfg.sp_rows, cfg.sp_banks), BankBusy(cfg.acc_rows, cfg.acc_banks)
    bus = BankBusy(1, 1)  # the DMA port, shared by the load and store units
    load = LoadUnit(cfg, sp_banks, acc_banks, bus)
    execute = ExecuteUnit(cfg, sp_banks, acc_banks, load.sp_writes)
    store = StoreUnit(cfg, sp_banks, acc_banks, bus)
    intervals: dict[str, list[tuple[int, int]]] = {u: [] for u in UNITS}
    sp_rows, acc_rows = RowTimes(cfg.sp_rows), RowTimes(cfg.acc_rows)
    ld_state: dict[int, dict] = {}
    st_stride = st_pool = None
    ex_state = None
    pending_preload = None
    array_cycles = load_bytes = store_bytes = 0
    # mvins whose scratchpad writes may still be pushed back by the reads of computes later in program
    # order (the array's reads win at a bank): [index, bank, first write, cycle after the last, rows]
    writing: deque[list] = deque()
    issue = 0  # the cycle the core hands over the next command
    all_done = 0
    starts, ends = [], []

    def core_step(index: int) -> int:
        """Cycles until the next command: ``cfg.issue_cycles`` after one the core issued, 1 after an unrolled one."""
        if cfg.issue_cycles == 1 or (origins is not None and cmds[origins[index]].funct in LOOP_FUNCTS):
            return 1
        return cfg.issue_cycles

    order = issue_order(cmds, cfg, origins, lambda kind, t: sum(e > t for e in in_queue[kind]) >= depth[kind],
                         lambda: issue, lambda t: min((e for q in in_queue.values() for e in q if e > t), default=t + 1))
    for index, (cmd, at) in enumerate(order):
        issue = max(issue, at)
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
        if name in ("flush", "preload"):
            if name == "preload":
                if ex_state is None:
                    raise SimulationError("preload before any config_ex", source=SOURCE, field="config_ex",
                                          index=index)
                if pending_preload is not None:
                    raise SimulationError("two preloads without a compute in between", source=SOURCE,
                                          field="preload", index=index)
                for local, rows_, field in ((f["bd"], f["bd_rows"], "bd_local"), (f["c"], f["c_rows"], "c_local")):
                    limit = cfg.acc_rows if local.is_acc else cfg.sp_rows
                    if not local.is_garbage and local.row + rows_ > limit:
                        raise SimulationError(f"preload reaches row {local.row + rows_ - 1}, outside {limit} rows",
                                              source=SOURCE, field=field, index=index)
                pending_preload = f
            starts.append(issue)
            ends.append(issue + 1)
            issue += core_step(index)
            continue
        unit = "load" if name in ("config_ld", "mvin", "mvin2", "mvin3") else \
            "store" if name in ("config_st", "mvout") else "execute"
        queue = in_queue[unit]
        if len(queue) >= depth[unit]:  # wait for the oldest entry still in the queue to complete
            queue.sort()
            issue = max(issue, queue[len(queue) - depth[unit]])
        queue[:] = [t for t in queue if t > issue]
        reads_sp = reads_acc = writes_sp = writes_acc = EMPTY_ROWS
        busy_from = None

        if name == "config_ld":
            ld_state[f["id"]] = f
        elif name == "config_st":
            st_stride = f["stride_bytes"]
            st_pool = f if f["pool_stride"] else None
        elif name == "config_ex":
            ex_state = f
        elif name.startswith("mvin"):
            ld = ld_state.get(f["id"])
            if ld is None:
                raise SimulationError(f"{name} before any config_ld with id {f['id']}", source=SOURCE,
                                      field="config_ld", index=index)
            local, rows, cols = f["local"], f["rows"], f["cols"]
            blocks = -(-cols // cfg.dim)
            # the front end checks dependencies on the row range an mvin spans (all its column blocks)
            written = local_rows(local, (blocks - 1) * ld["local_stride"] + rows)
            if ld["pixel_repeats"] > 1:  # rows also land in the pixel_repeats - 1 rows above, not below the floor
                if local.is_acc:  # as the functional model: Gemmini only repeats scratchpad rows
                    raise SimulationError("pixel repeats into the accumulator", source=SOURCE,
                                          field="pixel_repeats", index=index)
                first = max(repeat_floor(local.row, cfg.sp_rows), local.row - ld["pixel_repeats"] + 1)
                written = np.arange(first, int(written.max()) + 1)
            limit = cfg.acc_rows if local.is_acc else cfg.sp_rows
            if written.max() >= limit:
                raise SimulationError(f"mvin reaches row {written.max()}, outside {limit} rows", source=SOURCE,
                                      field="local", index=index)
            if local.is_acc:
                writes_acc = written
            else:
                writes_sp = written
        elif name == "mvout":
            if st_stride is None:
                raise SimulationError("mvout before any config_st", source=SOURCE, field="config_st", index=index)
            local, rows = f["local"], f["rows"]
            span = st_pool["pool_orows"] * st_pool["pool_ocols"] if st_pool else \
                (-(-f["cols"] // cfg.dim) - 1) * cfg.dim + rows  # a wide mvout: block b from row + b*DIM
            if local.is_acc:
                reads_acc = local_rows(local, span)
            else:
                reads_sp = local_rows(local, span)
        else:  # compute
            if ex_state is None:
                raise SimulationError(f"{name} before any config_ex", source=SOURCE, field="config_ex", index=index)
            if pending_preload is None:
                raise SimulationError(f"{name} without a preceding preload", source=SOURCE, field="preload",
                                      index=index)
            pre = pending_preload
            a_span = f["a_cols"] if ex_state["a_transpose"] else f["a_rows"]  # a transposed A: a row per column
            a_rows = local_rows(f["a"], (a_span - 1) * ex_state["a_stride"] + 1)  # the span, as the front end
            bd_rows = local_rows(f["bd"], f["bd_rows"])
            pieces = [(a_rows, f["a"]), (bd_rows, f["bd"])]
            if name == "compute_preloaded":
                b_span = pre["bd_cols"] if ex_state["b_transpose"] and ex_state["dataflow"] == "ws" else pre["bd_rows"]
                pieces.append((local_rows(pre["bd"], b_span), pre["bd"]))
            sp_parts = [r for r, local in pieces if r.size and not local.is_acc]
            acc_parts = [r for r, local in pieces if r.size and local.is_acc]
            reads_sp = np.concatenate(sp_parts) if sp_parts else EMPTY_ROWS
            reads_acc = np.concatenate(acc_parts) if acc_parts else EMPTY_ROWS
            c_rows = local_rows(pre["c"], (pre["c_rows"] - 1) * ex_state["c_stride"] + 1)
            writes_acc, writes_sp = (c_rows, EMPTY_ROWS) if pre["c"].is_acc else (EMPTY_ROWS, c_rows)
            for rows_, limit, field in ((reads_sp, cfg.sp_rows, "a_local"), (writes_sp, cfg.sp_rows, "c_local"),
                                        (reads_acc, cfg.acc_rows, "bd_local"), (writes_acc, cfg.acc_rows, "c_local")):
                if rows_.size and rows_.max() >= limit:
                    raise SimulationError(f"{name} reaches row {rows_.max()}, outside {limit} rows", source=SOURCE,
                                          field=field, index=index)

        ready = max(issue + 1, sp_rows.ready(unit, reads_sp, writes_sp), acc_rows.ready(unit, reads_acc, writes_acc))
        if unit == "load":
            start = load.enter(ready)
            if name == "config_ld":
                busy_until = end = start + 1
            else:
                ld = ld_state[f["id"]]
                elem = 4 if f["local"].is_acc and not ld["shrunk"] else 1
                row_bytes = f["cols"] * elem
                busy_from, busy_until, end = load.mvin_command(start, f["rows"], row_bytes, f["cols"], f["local"],
                                                               f["dram_addr"], ld["stride_bytes"], ld["pixel_repeats"])
                load_bytes += f["rows"] * row_bytes
                if not f["local"].is_acc and not cfg.gemmini_units:
                    writing.append([index, sp_banks.bank(f["local"].row), busy_from, busy_until, writes_sp])
        elif unit == "store":
            start = store.enter(ready)
            if name == "config_st":
                busy_until = end = start + 1
                store.free = start + 1
            else:
                elem = 4 if f["local"].is_acc and f["local"].full else 1
                row_bytes = f["cols"] * elem
                if st_pool:  # one output row per pooled pixel, a pool_size^2 window read for each
                    out_rows, reads = st_pool["pool_porows"] * st_pool["pool_pocols"], st_pool["pool_size"] ** 2
                else:
                    out_rows, reads = f["rows"], -(-f["cols"] // cfg.dim)
                end = store.mvout(start, out_rows, row_bytes, f["local"], reads)
                busy_until = end
                store_bytes += out_rows * row_bytes
        else:
            start = execute.enter(ready)
            if name == "config_ex":
                busy_until = end = start + 1
            else:
                slots, end = execute.compute(start, f, pending_preload, ex_state["dataflow"])
                pending_preload = None
                while writing and ends[writing[0][0]] <= start:
                    writing.popleft()
                for bank, first, stop in execute.reads:
                    all_done = max(all_done, _push_back_writes(writing, bank, first, stop, load, ends,
                                                               in_queue["load"], sp_rows))
                array_cycles += slots
                busy_until = execute.stage2_end
        sp_rows.record(unit, reads_sp, writes_sp, end)
        acc_rows.record(unit, reads_acc, writes_acc, end)
        busy_from = start if busy_from is None else busy_from
        intervals[unit].append((busy_from, max(busy_until, busy_from + 1)))
        queue.append(end)
        all_done = max(all_done, end)
        starts.append(start)
        ends.append(end)
        issue += core_step(index)
        if index % 512 == 0:
            sp_banks.forget_before(issue)
            if load.sp_writes is not None:
                load.sp_writes.forget_before(issue)
            acc_banks.forget_before(issue)
            bus.forget_before(issue)

    busy = {u: merge_busy(intervals[u]) for u in UNITS}
    return TimingResult(cycles=max(all_done, issue), busy=busy, instructions=len(starts), array_cycles=array_cycles,
                        load_bytes=load_bytes, store_bytes=store_bytes, starts=tuple(starts), ends=tuple(ends))
