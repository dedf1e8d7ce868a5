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
  assembler.
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
  accesses see only commands earlier in program order.
* Config commands take one cycle on their unit.

Results: total cycles, per-unit busy cycles (the union of the intervals in
which the unit was moving data or computing), the command count and
per-command start (the cycle it entered its unit) and end (the cycle it
completed).
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass

import numpy as np

from .. import isa
from ..config import DEFAULT_CONFIG, GemminiConfig
from ..errors import IsaError, SimulationError
from .loops import has_loops, issue_order

SOURCE = "gemmini timing model"
UNITS = ("load", "execute", "store")

#: Cycles from a command's last action (a compute's results leaving the array, an mvin's last block
#: write, an mvout's last beat: see the module docstring) to its completion as the front end sees it.
DONE_CYCLES = 3


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


def array_fill_cycles(config: GemminiConfig) -> int:
    """Cycles from a row's slot in the array to its result leaving the array (2*DIM - 1)."""
    return 2 * config.dim - 1


def compute_slots(fields: dict, dataflow: str) -> int:
    """Stage-2 slots (cycles) of a compute with ``fields`` (its own and its preload's, merged).

    WS streams the rows of A together with the rows of C (one garbage C row
    when C is not written); OS streams the columns of A with the rows of B.
    """
    if dataflow == "os":
        return max(fields["a_cols"], 1 if fields["bd"].is_garbage else fields["bd_rows"])
    return max(fields["a_rows"], 1 if fields["c"].is_garbage else fields["c_rows"])


def dma_requests(addr: int, row_bytes: int, rows: int, stride: int, config: GemminiConfig) -> list[int]:
    """Beats of each DMA request moving ``rows`` rows of ``row_bytes`` bytes, ``stride`` bytes apart, from ``addr``.

    As in the RTL, every request is one beat of at most ``dma_bytes_per_cycle``
    bytes, counted from the start of its row (the address does not matter).
    """
    del addr, stride  # the RTL counts beats from each row's start
    return [1] * (rows * -(-row_bytes // config.dma_bytes_per_cycle))


def dma_transfer(addr: int, row_bytes: int, rows: int, stride: int, config: GemminiConfig) -> tuple[int, int]:
    """(requests, beats) of a transfer; see ``dma_requests``."""
    beats = dma_requests(addr, row_bytes, rows, stride, config)
    return len(beats), sum(beats)


def dma_beats(addr: int, row_bytes: int, rows: int, stride: int, config: GemminiConfig) -> int:
    """Bus cycles (beats) of a transfer; see ``dma_requests``."""
    return dma_transfer(addr, row_bytes, rows, stride, config)[1]


class _Rows:
    """Per-row completion times of the last write and the last read by each unit, for one local memory.

    A unit runs its own commands in order through one pipeline, so only
    commands of the other units are waited for (as the RTL's front end does).
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


_EMPTY = np.zeros(0, dtype=np.int64)


def _rows(local: isa.LocalAddr, count: int, stride: int = 1) -> np.ndarray:
    if local.is_garbage or count <= 0:
        return _EMPTY
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


class _BankBusy:
    """Cycles in which the banks of a memory (or the DMA port, one "bank") are held.

    Scratchpad: the array's operand reads; accumulator: the array's result
    writes (``add``).  They have priority at a bank over the D-operand reads
    (for the accumulator), the load unit's writes and the store unit's reads,
    which take the bank's free cycles (``wait_free``).  The DMA port: beats
    of the load and store units, first come first served (``reserve``).
    Per bank: disjoint [first, end) intervals in time order.
    """

    def __init__(self, rows: int, banks: int):
        self.bank_rows = rows // banks
        self.starts = [[] for _ in range(banks)]
        self.ends = [[] for _ in range(banks)]

    def bank(self, row: int) -> int:
        return min(row // self.bank_rows, len(self.starts) - 1)

    def add(self, bank: int, first: int, count: int) -> None:
        if count > 0:
            starts, ends = self.starts[bank], self.ends[bank]
            if ends and first < ends[-1]:  # keep the intervals disjoint
                first = ends[-1]
            if ends and first == ends[-1]:
                ends[-1] = first + count
            else:
                starts.append(first)
                ends.append(first + count)

    def forget_before(self, t: int) -> None:
        """Drop intervals that end before ``t`` (no later command asks about earlier cycles)."""
        for starts, ends in zip(self.starts, self.ends):
            n = bisect.bisect_right(ends, t)
            if n > 64:
                del starts[:n]
                del ends[:n]

    def free_from(self, bank: int, t: int) -> int:
        """The first cycle >= ``t`` in which ``bank`` is held (a large number when none is known)."""
        starts, ends = self.starts[bank], self.ends[bank]
        i = bisect.bisect_right(ends, t)
        return max(t, starts[i]) if i < len(starts) else 1 << 62

    def reserve(self, bank: int, t: int, count: int) -> int:
        """Take the first ``count`` free cycles of ``bank`` from cycle ``t`` on; the cycle after the last."""
        starts, ends = self.starts[bank], self.ends[bank]
        i = bisect.bisect_right(ends, t)
        while count > 0:
            if i < len(starts) and starts[i] <= t:
                t = ends[i]
                i += 1
                continue
            stop = t + count if i == len(starts) else min(t + count, starts[i])
            if i > 0 and ends[i - 1] == t:  # extend the interval before
                ends[i - 1] = stop
                if i < len(starts) and starts[i] == stop:
                    ends[i - 1] = ends[i]
                    del starts[i], ends[i]
            elif i < len(starts) and starts[i] == stop:
                starts[i] = t
            else:
                starts.insert(i, t)
                ends.insert(i, stop)
                i += 1
            count -= stop - t
            t = stop
        return t

    def wait_free(self, bank: int, t: int, count: int) -> int:
        """The cycle after ``count`` free cycles of ``bank`` from cycle ``t`` on."""
        starts, ends = self.starts[bank], self.ends[bank]
        i = bisect.bisect_right(ends, t)
        while i < len(starts) and count > 0:
            if starts[i] > t:
                gap = starts[i] - t
                if gap >= count:
                    break
                count -= gap
            t = max(t, ends[i])
            i += 1
        return t + count


class _Execute:
    """The execute unit's two-stage pipeline (see the module docstring)."""

    def __init__(self, config: GemminiConfig, banks: _BankBusy, acc_banks: _BankBusy):
        self.dim = config.dim
        self.banks = banks
        self.acc_banks = acc_banks
        self.fill = array_fill_cycles(config)
        self.free = 0           # cycle the next compute may enter (the current one moved to stage 2)
        self.last_enter = -1
        self.stage2_start = -1  # cycle before the previous compute's first slot
        self.stage2_end = 0     # cycle of the previous compute's last slot
        self.stage2_bank = None  # scratchpad bank the previous compute's stage 2 reads (WS: A, OS: B)
        self.stage2_reads = 0    # ... in its first slots
        self.buffer = 0          # the PE buffer (weights / accumulators) the array computes with
        self.buffer_last_slot = [None, None]
        self.last_output_slot = None  # OS: last slot of the previous compute that wrote results
        self.dataflow = None
        self.reads: list[tuple[int, int, int]] = []

    def enter(self, ready: int) -> int:
        """The cycle a compute or config_ex enters the unit (in order, one per cycle)."""
        start = max(ready, self.free, self.last_enter + 1)
        self.last_enter = start
        return start

    def _sp_bank(self, local: isa.LocalAddr):
        return None if local.is_garbage or local.is_acc else self.banks.bank(local.row)

    def compute(self, start: int, f: dict, pre: dict, dataflow: str) -> tuple[int, int]:
        """(slots, completion) of a compute that entered at ``start``; ``pre`` is its preload's fields.

        ``self.reads`` lists the (bank, first, end) cycles in which it reads scratchpad banks."""
        dim, ws = self.dim, dataflow == "ws"
        self.reads = []
        preloaded = f["name"] == "compute_preloaded"
        if dataflow != self.dataflow and self.dataflow is not None:
            start = max(start, self.stage2_end + self.fill + 3)  # a dataflow change drains the mesh
        self.dataflow = dataflow
        slots = compute_slots({**f, "c": pre["c"], "c_rows": pre["c_rows"]}, dataflow)
        if preloaded:
            self.buffer ^= 1
        if preloaded or not ws:
            stage1 = start + 1
            last = self.buffer_last_slot[self.buffer]
            if preloaded and last is not None:
                stage1 = max(stage1, last + dim)  # the buffer's last reader has crossed the array
            # scratchpad rows stage 1 reads: WS the weights in its last steps, OS the A rows in its first
            bank, reads = (self._sp_bank(pre["bd"]), pre["bd_rows"]) if ws else (self._sp_bank(f["a"]), f["a_rows"])
            if ws and not preloaded:
                bank = None
            first_read = stage1 + dim - reads if ws else stage1
            if bank is not None and bank == self.stage2_bank:  # stage 2's reads of the bank come first
                first_read = max(first_read, self.stage2_start + self.stage2_reads + 1)
            done1 = max(stage1 + dim - 1, first_read + reads - 1) if ws else first_read + dim - 1
            if bank is not None:
                self.banks.add(bank, first_read, reads)
                self.reads.append((bank, first_read, first_read + reads))
        else:
            done1 = start + 1
        begin = max(done1, self.stage2_end)
        end_slot = begin + slots
        d_operand = f["bd"]
        d_bank = self.acc_banks.bank(d_operand.row) if ws and d_operand.is_acc and not d_operand.is_garbage \
            else None
        slot_times = None
        if d_bank is not None:
            # each slot reading a D row from the accumulator waits for a cycle without a result write
            slot_times, t = [], begin + 1
            for i in range(slots):
                if i < f["bd_rows"]:
                    t = self.acc_banks.wait_free(d_bank, t, 1) - 1
                slot_times.append(t)
                t += 1
            end_slot = slot_times[-1]
        if not ws and not pre["c"].is_garbage:
            if self.last_output_slot is not None:
                end_slot = max(end_slot, self.last_output_slot + 2 * dim)
                begin = end_slot - slots
            self.last_output_slot = end_slot
        self.free = begin
        self.stage2_start, self.stage2_end = begin, end_slot
        self.stage2_bank, self.stage2_reads = (self._sp_bank(f["a"]), f["a_rows"]) if ws else \
            (self._sp_bank(f["bd"]), f["bd_rows"])
        if self.stage2_bank is not None:
            self.banks.add(self.stage2_bank, begin + 1, self.stage2_reads)
            self.reads.append((self.stage2_bank, begin + 1, begin + 1 + self.stage2_reads))
        out = pre["c"]
        if ws and out.is_acc and not out.is_garbage:  # results are written a fixed delay after their slots
            out_bank, delay = self.acc_banks.bank(out.row), self.fill + 1
            if slot_times is None:
                self.acc_banks.add(out_bank, begin + 1 + delay, min(pre["c_rows"], slots))
            else:
                for t in slot_times[:pre["c_rows"]]:
                    self.acc_banks.add(out_bank, t + delay, 1)
        self.buffer_last_slot[self.buffer] = end_slot
        if not ws and pre["c"].is_garbage:
            return slots, end_slot + DONE_CYCLES
        return slots, end_slot + self.fill + DONE_CYCLES


class _Load:
    """The load unit: request generator, row assembler and writer (see the module docstring)."""

    def __init__(self, config: GemminiConfig, sp_banks: _BankBusy, acc_banks: _BankBusy, bus: _BankBusy):
        self.sp_banks, self.acc_banks, self.bus = sp_banks, acc_banks, bus
        self.beat = config.dma_bytes_per_cycle
        self.dim = config.dim
        self.latency = config.dma_latency_cycles
        self.credits = config.dma_max_inflight
        self.free = 0            # cycle the generator may take the next mvin
        self.last_enter = -1
        self.assembler_free = 0  # cycle the assembler may start the next row
        self.writer_ends = [0, 0]  # cycles after the writer's last blocks of the last two rows
        self.writer_free = 0     # cycle after the writer's last block
        self.pops: deque[tuple[int, int]] = deque()  # (cycle of an mvin's last beat, beats taken so far)
        self.popped = 0

    def enter(self, ready: int) -> int:
        start = max(ready, self.free, self.last_enter + 1)
        self.last_enter = start
        return start

    def _pop_cycle(self, beat: int) -> int:
        """Cycle the assembler took the ``beat``-th beat (counted over all mvins) from the responses."""
        while len(self.pops) > 1 and self.pops[0][1] < beat:
            self.pops.popleft()
        cycle, total = self.pops[0]
        return cycle - max(0, total - beat)

    def mvin(self, start: int, rows: int, row_bytes: int, cols: int, local: isa.LocalAddr) -> tuple[int, int, int]:
        """(cycle its first beat is taken, cycle after its last block is written, completion) of an mvin to
        ``local`` that entered the unit at ``start``."""
        banks = self.acc_banks if local.is_acc else self.sp_banks
        bank = banks.bank(local.row)
        beats = -(-row_bytes // self.beat)
        blocks = -(-cols // self.dim)
        count = rows * beats
        first = self.bus.wait_free(0, start + 1, 1) - 1  # the first free cycle of the DMA port
        last_request = self.bus.reserve(0, first, count) - 1  # the DMA port is shared with the store unit
        behind = self.popped + count - self.credits  # this beat must have left the response buffer
        if behind > 0 and self.pops:
            last_request = max(last_request, self._pop_cycle(behind) + 1)
        row_start = data_start = max(self.assembler_free, first + self.latency + 1)
        last_pop = max(row_start + (rows - 1) * (beats + 1) + beats - 1, last_request + self.latency + 1)
        if blocks <= beats + 1 and self.writer_free <= row_start + beats and \
                banks.free_from(bank, row_start) > last_pop + blocks:
            # the assembler sets the pace: (beats + 1) cycles per row, the writer keeps up
            self.writer_ends = [last_pop - beats + blocks, last_pop + 1 + blocks]
            self.writer_free = last_pop + 1 + blocks
        else:
            # two row buffers between the assembler and the writer (one block per cycle, after the array's reads)
            for _ in range(rows):
                row_start = max(row_start, self.writer_ends[0])
                last_pop = row_start + beats - 1
                write = max(last_pop + 1, self.writer_free)
                done = banks.wait_free(bank, write, blocks)
                self.writer_ends = [self.writer_ends[1], done]
                self.writer_free = done
                row_start = last_pop + 2
        self.assembler_free = last_pop + 2
        self.popped += count
        self.pops.append((last_pop, self.popped))
        self.free = last_request + 1
        return data_start, self.writer_free, self.writer_free + DONE_CYCLES - 1


class _Store:
    """The store unit: row reader and DMA write beats (see the module docstring)."""

    def __init__(self, config: GemminiConfig, sp_banks: _BankBusy, acc_banks: _BankBusy, bus: _BankBusy):
        self.sp_banks, self.acc_banks, self.bus = sp_banks, acc_banks, bus
        self.beat = config.dma_bytes_per_cycle
        self.free = 0
        self.last_enter = -1
        self.sent = 0           # cycle after the last beat sent
        self.freed = [0, 0]     # cycle each row buffer is free again
        self.buffer = 0         # the row buffer the next read fills (they alternate)

    def enter(self, ready: int) -> int:
        start = max(ready, self.free, self.last_enter + 1)
        self.last_enter = start
        return start

    def mvout(self, start: int, rows: int, row_bytes: int, local: isa.LocalAddr, reads: int = 1) -> int:
        """Completion of an mvout from ``local`` that entered the unit at ``start``.

        Rows are read one per cycle (in cycles the array leaves the bank free)
        into two row buffers; a buffer is sent beat by beat from 2 cycles after
        its read and is free again after its last beat.  ``reads``: local rows
        read per row sent (a wide mvout's blocks, a pooling window)."""
        beats = -(-row_bytes // self.beat)
        banks = self.acc_banks if local.is_acc else self.sp_banks
        bank = banks.bank(local.row)
        read, freed = start, self.freed
        for _ in range(rows):
            read = banks.wait_free(bank, max(read + 1, freed[self.buffer]), reads) - 1
            self.sent = self.bus.reserve(0, max(read + 2, self.sent), beats)
            freed[self.buffer] = self.sent
            self.buffer ^= 1
        self.free = read + 1
        return self.sent + DONE_CYCLES - 2


def _push_back_writes(writing, bank: int, first: int, stop: int, load: _Load, ends: list, queue: list,
                      sp_rows: _Rows) -> int:
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
        sp_rows.record("load", _EMPTY, rows, old + moved)
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
    sp_banks, acc_banks = _BankBusy(cfg.sp_rows, cfg.sp_banks), _BankBusy(cfg.acc_rows, cfg.acc_banks)
    bus = _BankBusy(1, 1)  # the DMA port, shared by the load and store units
    load, execute = _Load(cfg, sp_banks, acc_banks, bus), _Execute(cfg, sp_banks, acc_banks)
    store = _Store(cfg, sp_banks, acc_banks, bus)
    intervals: dict[str, list[tuple[int, int]]] = {u: [] for u in UNITS}
    sp_rows, acc_rows = _Rows(cfg.sp_rows), _Rows(cfg.acc_rows)
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
            issue += 1
            continue
        unit = "load" if name in ("config_ld", "mvin", "mvin2", "mvin3") else \
            "store" if name in ("config_st", "mvout") else "execute"
        queue = in_queue[unit]
        if len(queue) >= depth[unit]:  # wait for the oldest entry still in the queue to complete
            queue.sort()
            issue = max(issue, queue[len(queue) - depth[unit]])
        queue[:] = [t for t in queue if t > issue]
        reads_sp = reads_acc = writes_sp = writes_acc = _EMPTY
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
            written = _rows(local, (blocks - 1) * ld["local_stride"] + rows)
            if ld["pixel_repeats"] > 1:  # each row also lands in the pixel_repeats - 1 rows above it
                written = np.arange(max(0, local.row - ld["pixel_repeats"] + 1), int(written.max()) + 1)
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
                reads_acc = _rows(local, span)
            else:
                reads_sp = _rows(local, span)
        else:  # compute
            if ex_state is None:
                raise SimulationError(f"{name} before any config_ex", source=SOURCE, field="config_ex", index=index)
            if pending_preload is None:
                raise SimulationError(f"{name} without a preceding preload", source=SOURCE, field="preload",
                                      index=index)
            pre = pending_preload
            a_span = f["a_cols"] if ex_state["a_transpose"] else f["a_rows"]  # a transposed A: a row per column
            a_rows = _rows(f["a"], (a_span - 1) * ex_state["a_stride"] + 1)  # the span, as the front end
            bd_rows = _rows(f["bd"], f["bd_rows"])
            pieces = [(a_rows, f["a"]), (bd_rows, f["bd"])]
            if name == "compute_preloaded":
                b_span = pre["bd_cols"] if ex_state["b_transpose"] and ex_state["dataflow"] == "ws" else pre["bd_rows"]
                pieces.append((_rows(pre["bd"], b_span), pre["bd"]))
            sp_parts = [r for r, local in pieces if r.size and not local.is_acc]
            acc_parts = [r for r, local in pieces if r.size and local.is_acc]
            reads_sp = np.concatenate(sp_parts) if sp_parts else _EMPTY
            reads_acc = np.concatenate(acc_parts) if acc_parts else _EMPTY
            c_rows = _rows(pre["c"], (pre["c_rows"] - 1) * ex_state["c_stride"] + 1)
            writes_acc, writes_sp = (c_rows, _EMPTY) if pre["c"].is_acc else (_EMPTY, c_rows)
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
                busy_from, busy_until, end = load.mvin(start, f["rows"], row_bytes, f["cols"], f["local"])
                load_bytes += f["rows"] * row_bytes
                if not f["local"].is_acc:
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
        issue += 1
        if index % 512 == 0:
            sp_banks.forget_before(issue)
            acc_banks.forget_before(issue)
            bus.forget_before(issue)

    busy = {u: _merge_busy(intervals[u]) for u in UNITS}
    return TimingResult(cycles=max(all_done, issue), busy=busy, instructions=len(starts), array_cycles=array_cycles,
                        load_bytes=load_bytes, store_bytes=store_bytes, starts=tuple(starts), ends=tuple(ends))
