"""The timing model's units: DMA beat counts, per-row and per-bank busy bookkeeping, and the execute,
load and store units that ``gemmini.sim.timing`` drives command by command (see its docstring for the
rules they follow)."""

from __future__ import annotations

import bisect
from collections import deque

import numpy as np

from .. import isa
from ..config import GemminiConfig

UNITS = ("load", "execute", "store")

#: Cycles from a command's last action (a compute's results leaving the array, an mvin's last block
#: write, an mvout's last beat: see ``gemmini.sim.timing``) to its completion as the front end sees it.
DONE_CYCLES = 3

#: Gemmini f13847e's DMACommandTracker: mvins in flight at once (``LoadUnit.mvin_command``).
GEMMINI_MVINS_IN_FLIGHT = 2
#: Gemmini f13847e's MeshWithDelays: tags for requests in the array (max_simultaneous_matmuls + 1); a request's
#: tag is freed when the next request's last row has left the array (``ExecuteUnit.compute``).
GEMMINI_MESH_TAGS = 6


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


class RowTimes:
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


EMPTY_ROWS = np.zeros(0, dtype=np.int64)


def local_rows(local: isa.LocalAddr, count: int, stride: int = 1) -> np.ndarray:
    if local.is_garbage or count <= 0:
        return EMPTY_ROWS
    return local.row + stride * np.arange(count, dtype=np.int64)


def merge_busy(intervals: list[tuple[int, int]]) -> int:
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


class BankBusy:
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


class ExecuteUnit:
    """The execute unit's two-stage pipeline (see the module docstring)."""

    def __init__(self, config: GemminiConfig, banks: BankBusy, acc_banks: BankBusy, dma_writes: BankBusy | None = None):
        self.dim = config.dim
        self.banks = banks
        self.acc_banks = acc_banks
        # Gemmini's scratchpad banks (ScratchpadBank, single-ported) serve the DMA's writes before the array's
        # reads: with the load unit's record of its write cycles, the array's reads take the cycles left free
        self.dma_writes = dma_writes
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
        # Gemmini's mesh tags: completions of the last computes, the oldest of which frees the tag a new one needs
        tags = GEMMINI_MESH_TAGS if config.gemmini_units else 0
        self.tag_frees: deque[int] | None = deque(maxlen=tags - 1) if tags else None

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
            if bank is not None and self.dma_writes is not None:  # the mvins' writes come first
                first_read = self.dma_writes.wait_free(bank, first_read, reads) - reads
            done1 = max(stage1 + dim - 1, first_read + reads - 1) if ws else first_read + dim - 1
            if bank is not None:
                self.banks.add(bank, first_read, reads)
                self.reads.append((bank, first_read, first_read + reads))
        else:
            done1 = start + 1
        begin = max(done1, self.stage2_end)
        if self.tag_frees is not None and len(self.tag_frees) == self.tag_frees.maxlen:
            # a free tag: the compute GEMMINI_MESH_TAGS - 1 back has completed (its tag's holder's successor)
            begin = max(begin, self.tag_frees[0])
        stage2_bank, stage2_reads = (self._sp_bank(f["a"]), f["a_rows"]) if ws else \
            (self._sp_bank(f["bd"]), f["bd_rows"])
        stall = 0  # cycles the stream waits while mvins write the bank it reads
        if stage2_bank is not None and self.dma_writes is not None:
            stall = self.dma_writes.wait_free(stage2_bank, begin + 1, stage2_reads) - (begin + 1 + stage2_reads)
        end_slot = begin + slots + stall
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
            end_slot = slot_times[-1] + stall
        if not ws and not pre["c"].is_garbage:
            if self.last_output_slot is not None:
                end_slot = max(end_slot, self.last_output_slot + 2 * dim)
                begin = end_slot - slots
            self.last_output_slot = end_slot
        self.free = begin
        self.stage2_start, self.stage2_end = begin, end_slot
        self.stage2_bank, self.stage2_reads = stage2_bank, stage2_reads
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
        done = end_slot + DONE_CYCLES if not ws and pre["c"].is_garbage else end_slot + self.fill + DONE_CYCLES
        if self.tag_frees is not None:
            self.tag_frees.append(done)
        return slots, done


class LoadUnit:
    """The load unit: request generator, row assembler and writer (see the module docstring)."""

    def __init__(self, config: GemminiConfig, sp_banks: BankBusy, acc_banks: BankBusy, bus: BankBusy):
        self.gemmini = config.gemmini_units
        # Gemmini's scratchpad banks take the DMA's writes before the array's reads (ScratchpadBank): there the
        # unit's writes wait for nothing but each other, and ``sp_writes`` records their cycles for the array
        self.sp_writes = BankBusy(config.sp_rows, config.sp_banks) if self.gemmini else None
        self.sp_banks = self.sp_writes if self.gemmini else sp_banks
        self.acc_banks, self.bus = acc_banks, bus
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
        # cycles the assembler spends per row beyond its beats: 1 in our RTL; none in Gemmini's (its BeatMerger
        # takes a row's request and its first beat in the same cycle)
        self.gap = 0 if self.gemmini else 1
        self.line_bytes, self.line_fill = config.soc_line_bytes, config.soc_line_fill_cycles
        self.lines_read: set[int] = set()  # main-memory lines an earlier mvin of the run read
        self.memory_free = 0     # cycle the SoC's memory bus is free of line fills
        self.ends: deque[int] = deque(maxlen=GEMMINI_MVINS_IN_FLIGHT)  # completions of the last mvins

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

    def mvin_command(self, start: int, rows: int, row_bytes: int, cols: int, local: isa.LocalAddr, dram: int,
                     stride: int, repeats: int) -> tuple[int, int, int]:
        """``mvin``'s three cycles for an mvin command from main-memory address ``dram`` (0: the zero writer's
        rows), ``stride`` bytes between its rows and ``repeats`` pixel repeats, on the configured load unit
        and SoC memory (``GemminiConfig.units``, ``soc_line_fill_cycles``).  Gemmini f13847e's load path
        (its Scala) differs from our RTL's in five ways:

        * at most ``GEMMINI_MVINS_IN_FLIGHT`` mvins in flight (``DMACommandTracker``): an mvin starts after
          the completion of the one that many before it;
        * an mvin from address 0 fetches nothing: the ``ZeroWriter`` writes its rows, a DIM-column block per
          cycle (``repeats`` times each row), while the DMA is free for others;
        * a stride-0 mvin (a bias row repeated) fetches its row once and writes it ``rows`` times
          (``LoadController``);
        * the ``PixelRepeater`` holds each row ``repeats`` cycles per block, so a row takes
          max(repeats * blocks, beats) cycles instead of beats;
        * a row costs the assembler its beats only, not one cycle more (``mvin``'s ``gap``).
        """
        blocks = -(-cols // self.dim)
        if self.gemmini and len(self.ends) == self.ends.maxlen:
            start = max(start, self.ends[0])
        repeats = max(1, repeats) if self.gemmini else 1
        if self.gemmini and dram == 0:
            first = max(start + 1, self.writer_free)
            done = first + rows * blocks * repeats
            self._record_writes(local, [(first, rows * blocks * repeats)])
            self.writer_free, self.writer_ends = done, [done - 1, done]
            self.free = done - 1
            self.ends.append(done + DONE_CYCLES - 1)
            return first, done, done + DONE_CYCLES - 1
        fetched, held = rows, 0  # rows the DMA fetches; cycles the writer is held beyond the assembler's pace
        if self.gemmini and stride == 0:
            fetched, held = 1, (rows - 1) * blocks
        beats = -(-row_bytes // self.beat)
        if repeats > 1:
            held += max(0, repeats * blocks - (beats + self.gap)) * rows
        fills = None
        if self.line_fill:
            start, fills = self._after_line_fills(start, dram, stride, fetched, row_bytes)
        first, done, end = self.mvin(start, fetched, row_bytes, cols, local)
        if held:
            self.writer_free += held
            self.writer_ends = [t + held for t in self.writer_ends]
            if repeats > 1:
                self.assembler_free += held
            done, end = done + held, end + held
        writes = rows * blocks * repeats
        if fills:  # the rows are written as their lines cross the memory bus, a share after each line
            t0, lines = fills
            self._record_writes(local, [(t0 + (i + 1) * self.line_fill, writes * (i + 1) // lines - writes * i // lines)
                                        for i in range(lines)])
        else:
            self._record_writes(local, [(first, writes)])
        self.ends.append(end)
        return first, done, end

    def _record_writes(self, local: isa.LocalAddr, pieces: list[tuple[int, int]]) -> None:
        """On Gemmini's units, note an mvin's scratchpad block writes: ``count`` write cycles from each
        (cycle, count) piece on (``sp_writes``, which the array's reads of the bank wait for)."""
        if self.sp_writes is None or local.is_acc or local.is_garbage:
            return
        bank = self.sp_writes.bank(local.row)
        for t, count in pieces:
            self.sp_writes.reserve(bank, t, count)

    def _after_line_fills(self, start: int, dram: int, stride: int, rows: int, row_bytes: int) \
            -> tuple[int, tuple[int, int] | None]:
        """(the cycle an mvin of ``rows`` rows from ``dram`` may start so that its DMA reads do not finish
        before the main-memory lines no earlier mvin read have crossed the SoC's memory bus, one after
        another (``soc_line_fill_cycles`` each); (the cycle its first such line starts across, their count),
        None when all its lines were read before)."""
        lines = set()
        for r in range(rows):
            at = dram + r * stride
            lines.update(range(at // self.line_bytes, (at + row_bytes - 1) // self.line_bytes + 1))
        cold = lines - self.lines_read
        if not cold:
            return start, None
        self.lines_read |= cold
        across = max(self.memory_free, start)
        self.memory_free = across + self.line_fill * len(cold)
        return max(start, self.memory_free - rows * -(-row_bytes // self.beat)), (across, len(cold))

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
        last_pop = max(row_start + (rows - 1) * (beats + self.gap) + beats - 1, last_request + self.latency + 1)
        if blocks <= beats + self.gap and self.writer_free <= row_start + beats and \
                banks.free_from(bank, row_start) > last_pop + blocks:
            # the assembler sets the pace: (beats + gap) cycles per row, the writer keeps up
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
                row_start = last_pop + 1 + self.gap
        self.assembler_free = last_pop + 1 + self.gap
        self.popped += count
        self.pops.append((last_pop, self.popped))
        self.free = last_request + 1
        return data_start, self.writer_free, self.writer_free + DONE_CYCLES - 1


class StoreUnit:
    """The store unit: row reader and DMA write beats (see the module docstring)."""

    def __init__(self, config: GemminiConfig, sp_banks: BankBusy, acc_banks: BankBusy, bus: BankBusy):
        self.sp_banks, self.acc_banks, self.bus = sp_banks, acc_banks, bus
        self.beat = config.dma_bytes_per_cycle
        self.free = 0
        self.last_enter = -1
        self.sent = 0           # cycle after the last beat sent
        self.freed = [0, 0]     # cycle each row buffer is free again
        self.buffer = 0         # the row buffer the next read fills (they alternate)
        # Gemmini f13847e's StreamWriter (DMA.scala) takes a new row only when idle, gathers its blocks one per
        # cycle (the first in the cycle of the previous row's last beat) and sends the beats after the last one
        self.gathers_rows = config.gemmini_units

    def enter(self, ready: int) -> int:
        start = max(ready, self.free, self.last_enter + 1)
        self.last_enter = start
        return start

    def mvout(self, start: int, rows: int, row_bytes: int, local: isa.LocalAddr, reads: int = 1) -> int:
        """Completion of an mvout from ``local`` that entered the unit at ``start``.

        Rows are read one per cycle (in cycles the array leaves the bank free)
        into two row buffers; a buffer is sent beat by beat from 2 cycles after
        its read and is free again after its last beat.  ``reads``: local rows
        read per row sent (a wide mvout's blocks, a pooling window).  On Gemmini's
        units a row of ``reads`` blocks is sent no earlier than ``reads`` - 1
        cycles after the previous row's last beat (its writer gathers the blocks
        first), so rows of several blocks do not overlap."""
        beats = -(-row_bytes // self.beat)
        banks = self.acc_banks if local.is_acc else self.sp_banks
        bank = banks.bank(local.row)
        read, freed = start, self.freed
        for _ in range(rows):
            read = banks.wait_free(bank, max(read + 1, freed[self.buffer]), reads) - 1
            first_beat = max(read + 2, self.sent)
            if self.gathers_rows:
                first_beat = max(first_beat, self.sent - 1 + reads)
            self.sent = self.bus.reserve(0, first_beat, beats)
            freed[self.buffer] = self.sent
            self.buffer ^= 1
        self.free = read + 1
        return self.sent + DONE_CYCLES - 2
