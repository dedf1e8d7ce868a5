"""Timing model: causality and monotonicity, DMA- and compute-bound regimes, queue depths, dependencies,
and the per-command rates of our RTL (measured on its co-simulation at DIM 16, 16-cycle memory latency)."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemmini import SimulationError, isa
from gemmini.config import DEFAULT_CONFIG
from gemmini.config import SMALL_CONFIG as CFG
from gemmini.sim import dma_beats, dma_transfer, execute, timing

from test_functional import _operands, os_matmul, ws_matmul

DIM = CFG.dim


def test_dma_beats_are_one_request_per_beat_of_each_row():
    # the RTL requests one 16-byte beat at a time, counted from each row's start: alignment does not matter
    assert dma_beats(0, 64, 1, 64, CFG) == 4
    assert dma_beats(8, 64, 1, 64, CFG) == 4
    assert dma_beats(0, 4, 4, 16, CFG) == 4  # 4 rows of 4 B: one beat each
    assert dma_beats(0, 17, 1, 17, CFG) == 2
    assert dma_beats(0, 128, 2, 128, CFG) == 16
    assert dma_transfer(8, 64, 2, 64, CFG) == (8, 8)


def test_requests_in_flight_limit_with_long_latency():
    # 64 one-beat rows in 16 mvins, 400-cycle latency.  With 64 beats in flight every request leaves at
    # once and the assembler takes 2 cycles per one-beat row: 400 + 2 * 64 (+ a few cycles of pipeline).
    # With 16 in flight the requests leave in four waves, each waiting for the one before to return.
    cmds = [isa.config_ld(64, config=CFG)] + [isa.mvin(64 * 4 * i, isa.sp(4 * i), 4, 4, config=CFG)
                                              for i in range(16)]
    deep_queue = replace(CFG, dma_latency_cycles=400, ld_queue=64)
    fast = timing(cmds, replace(deep_queue, dma_max_inflight=64))
    limited = timing(cmds, replace(deep_queue, dma_max_inflight=16))
    assert 400 + 2 * 64 <= fast.cycles <= 400 + 2 * 64 + 8
    assert limited.cycles >= 4 * 400


def _matmul_stream(builder, m, k, n, seed=0):
    a, b, bias = _operands(np.random.default_rng(seed), m, k, n)
    cmds, mem, _ = builder(a, b, bias, 0.01, False)
    return cmds, mem


@pytest.mark.parametrize("builder", [ws_matmul, os_matmul])
def test_monotone_in_work(builder):
    cycles = [timing(_matmul_stream(builder, m, m, m)[0], CFG).cycles for m in (4, 8, 12, 16)]
    assert cycles == sorted(cycles) and len(set(cycles)) == len(cycles)


@settings(max_examples=20, deadline=None)
@given(dims=st.tuples(st.integers(1, 12), st.integers(1, 12), st.integers(1, 12)),
       cut=st.floats(0, 1), dataflow=st.sampled_from(["ws", "os"]))
def test_causality_prefix_never_changes_earlier_commands(dims, cut, dataflow):
    cmds, _ = _matmul_stream(ws_matmul if dataflow == "ws" else os_matmul, *dims)
    full = timing(cmds, CFG)
    n = max(1, int(cut * len(cmds)))
    prefix = timing(cmds[:n], CFG)
    # later commands never move an earlier one's start; they can only delay the completion of an mvin
    # whose scratchpad writes lose their bank to a later compute's reads
    assert prefix.starts == full.starts[:n]
    names = [isa.decode_fields(c)["name"] for c in cmds[:n]]
    assert all(p == f if not name.startswith("mvin") else p <= f
               for p, f, name in zip(prefix.ends, full.ends[:n], names))
    assert prefix.cycles <= full.cycles
    assert all(e >= s for s, e in zip(full.starts, full.ends))
    for unit in ("load", "execute", "store"):
        assert 0 <= prefix.busy[unit] <= full.busy[unit] <= full.cycles


def test_dma_bound_stream():
    # 32 mvins of 4 rows x 64 int8 columns at DIM 4: the writer stores one DIM-column block per cycle,
    # 16 blocks per row, so it sets the pace: 32 * 4 * 16 cycles from the first row.  That row is written
    # from cycle 24: config_ld at 0, mvin handed over at 1 and taken at 2, first request at 3, data back
    # 16 cycles later and taken at 20, 4 beats (20..23).  The last mvin completes 2 cycles after its last
    # block (as measured on the RTL at DIM 4: 90 cycles for one such mvin, 64 more per mvin).
    cmds = [isa.config_ld(64, config=CFG)]
    cmds += [isa.mvin(64 * 4 * i, isa.sp(64 * (i % 16)), 4, 64, config=CFG) for i in range(32)]
    t = timing(cmds, CFG)
    assert t.cycles == 24 + 32 * 4 * 16 + 2
    assert timing(cmds[:2], CFG).cycles == 90
    assert t.load_bytes == 32 * 4 * 64
    # 16 columns: 4 blocks per row and one beat, assembled in 2 cycles: the writer still sets the pace
    narrow = [cmds[0]] + [isa.mvin(16 * 4 * i, isa.sp(64 * (i % 16)), 4, 16, config=CFG) for i in range(32)]
    assert timing(narrow, CFG).cycles == 21 + 32 * 4 * 4 + 2
    slow = timing(narrow, replace(CFG, dma_bytes_per_cycle=4))  # 4 beats per row: 5 cycles per row
    assert slow.cycles == 24 + 31 * 4 * 5 + 3 * 5 + 4 + 2


def test_compute_bound_stream():
    # weights loaded once, then 64 computes reusing them: the array streams DIM rows per compute, and
    # 8 queue entries held for DIM + 2*DIM + 4 cycles each never hold it back
    cmds = [isa.config_ex("ws", config=CFG), isa.preload(isa.sp(0), isa.acc(0), DIM, DIM, DIM, DIM, config=CFG),
            isa.compute_preloaded(isa.sp(DIM), isa.GARBAGE, DIM, DIM, DIM, DIM, config=CFG)]
    for i in range(63):
        cmds += [isa.preload(isa.GARBAGE, isa.acc(DIM * (i % 8), accumulate=True), DIM, DIM, DIM, DIM, config=CFG),
                 isa.compute_accumulated(isa.sp(DIM * (2 + i % 8)), isa.GARBAGE, DIM, DIM, DIM, DIM, config=CFG)]
    t = timing(cmds, CFG)
    assert t.array_cycles == 64 * DIM
    macs = 64 * DIM ** 3
    assert 0.85 < t.utilization(macs, CFG) <= 1.0
    assert t.busy["load"] == t.busy["store"] == 0


def test_dma_bound_versus_compute_bound_matmul():
    # OS reloads A and B for every step: more bytes per MAC than WS, which keeps operands resident
    cmds_ws, _ = _matmul_stream(ws_matmul, 16, 16, 16)
    cmds_os, _ = _matmul_stream(os_matmul, 16, 16, 16)
    t_ws, t_os = timing(cmds_ws, CFG), timing(cmds_os, CFG)
    assert t_os.load_bytes > t_ws.load_bytes
    assert t_os.busy["load"] > t_os.busy["execute"]  # DMA-bound
    assert t_ws.busy["execute"] >= t_ws.array_cycles
    assert t_ws.cycles < t_os.cycles


def _streaming_stream(steps=16):
    """Double-buffered: load the next block while computing the current one, store each result."""
    cmds = [isa.config_ex("ws", config=CFG), isa.config_ld(DIM, config=CFG), isa.config_st(DIM, config=CFG)]
    for step in range(steps):
        buf = step % 4
        cmds.append(isa.mvin(64 * step, isa.sp(DIM * buf), DIM, DIM, config=CFG))
        cmds.append(isa.preload(isa.sp(DIM * 8), isa.acc(DIM * buf), DIM, DIM, DIM, DIM, config=CFG))
        cmds.append(isa.compute_preloaded(isa.sp(DIM * buf), isa.GARBAGE, DIM, DIM, DIM, DIM, config=CFG))
        cmds.append(isa.mvout(4096 + 64 * step, isa.acc(DIM * buf), DIM, DIM, config=CFG))
    return cmds


def test_queue_depth_effects():
    cmds = _streaming_stream()
    slow_memory = replace(CFG, dma_latency_cycles=40)
    deep = timing(cmds, slow_memory)
    shallow_load = timing(cmds, replace(slow_memory, ld_queue=1))
    shallow_store = timing(cmds, replace(slow_memory, st_queue=1))
    deeper = timing(cmds, replace(slow_memory, ld_queue=16, ex_queue=16, st_queue=8))
    assert shallow_load.cycles > deep.cycles
    assert shallow_store.cycles > deep.cycles
    assert deeper.cycles <= deep.cycles
    # the same work: only the waiting changed (and with it how often an mvin's writes wait for the array's
    # reads of the same bank: the load unit moves 16 mvins of DIM one-beat rows, 2 cycles per row, or more)
    for other in (shallow_load, shallow_store, deeper):
        assert (other.load_bytes, other.busy["store"], other.array_cycles) == \
            (deep.load_bytes, deep.busy["store"], deep.array_cycles)
        assert other.busy["load"] >= 16 * DIM * 2


def test_dependencies_and_fence():
    cmds = [isa.config_ex("ws", config=CFG), isa.config_ld(DIM, config=CFG),
            isa.mvin(0, isa.sp(0), DIM, DIM, config=CFG),
            isa.preload(isa.sp(0), isa.GARBAGE, DIM, DIM, DIM, DIM, config=CFG),  # reads what the mvin wrote
            isa.compute_preloaded(isa.sp(DIM), isa.GARBAGE, DIM, DIM, DIM, DIM, config=CFG)]
    # the preload is merged into its compute (one entry of the execute queue, as in the RTL): the
    # compute waits for the mvin that wrote the weights the preload names
    t = timing(cmds, replace(CFG, dma_latency_cycles=30))
    assert t.ends[3] == t.starts[3] + 1  # the preload itself takes one issue cycle
    assert t.starts[4] >= t.ends[2]
    independent = cmds[:3] + [isa.preload(isa.sp(2 * DIM), isa.GARBAGE, DIM, DIM, DIM, DIM, config=CFG)] + cmds[4:]
    t_ind = timing(independent, replace(CFG, dma_latency_cycles=30))
    assert t_ind.starts[4] < t_ind.ends[2]
    fenced = cmds[:3] + [isa.fence()] + independent[3:]
    t_fence = timing(fenced, replace(CFG, dma_latency_cycles=30))
    assert t_fence.starts[5] >= t_fence.ends[2]
    assert t_fence.instructions == len(fenced)


def test_timing_and_functional_accept_the_same_streams():
    cmds, mem = _matmul_stream(ws_matmul, 8, 12, 8)
    result = execute(cmds, mem, CFG)
    t = timing(cmds, CFG)
    assert t.instructions == result.instructions
    slots = sum(max(f["a_rows"], f["c_rows"]) for f in _merged_computes(cmds))
    assert t.array_cycles == slots


def test_errors_name_the_command():
    with pytest.raises(SimulationError) as info:
        timing([isa.flush(), isa.mvin(0, isa.sp(0), 1, 1, config=CFG)], CFG)
    assert info.value.index == 1
    with pytest.raises(SimulationError) as info:
        timing([isa.config_ex("ws", config=CFG), isa.compute_preloaded(isa.sp(0), isa.GARBAGE, 1, 1, 1, 1,
                                                                        config=CFG)], CFG)
    assert info.value.index == 1 and "preload" in str(info.value)
    with pytest.raises(SimulationError) as info:
        timing([isa.Command(isa.MVOUT, 0, (1 << 48) | (1 << 32) | CFG.sp_rows)], CFG)
    assert info.value.index == 0 and info.value.field == "local"


def _merged_computes(cmds):
    """Fields of each compute with its preload's C rows (the RTL's matrix step)."""
    out, c_rows = [], None
    for cmd in cmds:
        f = isa.decode_fields(cmd)
        if f["name"] == "preload":
            c_rows = 1 if f["c"].is_garbage else f["c_rows"]
        elif f["name"].startswith("compute"):
            out.append({**f, "c_rows": c_rows})
    return out


# --- rates measured on our RTL (DIM 16, 16-cycle memory latency) --------------------------------------
RTL = DEFAULT_CONFIG
BANK = RTL.bank_rows


def _computes(n, rows, per_block, weights_row):
    """n WS computes of ``rows`` rows; new weights (a compute_preloaded) every ``per_block`` computes."""
    d = RTL.dim
    cmds = [isa.config_ex("ws", config=RTL)]
    for i in range(n):
        c, a = isa.acc((i % 8) * d), isa.sp((i % 8) * d)
        if i % per_block == 0:
            cmds += [isa.preload(isa.sp(weights_row + (i // per_block % 2) * d), c, d, d, rows, d, config=RTL),
                     isa.compute_preloaded(a, isa.GARBAGE, rows, d, rows, d, config=RTL)]
        else:
            cmds += [isa.preload(isa.GARBAGE, c, d, d, rows, d, config=RTL),
                     isa.compute_accumulated(a, isa.GARBAGE, rows, d, rows, d, config=RTL)]
    return cmds


@pytest.mark.parametrize("rows, per_block, weights_bank, cycles_per_compute", [
    (16, 1000, 0, 16.0),   # weights kept: the array streams the rows of A
    (8, 1000, 0, 8.0),
    (4, 1000, 0, 5.0),     # 8 queue entries held 2*DIM+4+rows cycles each: (36 + 4) / 8
    (1, 1000, 0, 4.625),   # (36 + 1) / 8
    (4, 4, 0, 8.0),        # 3 * 4 + (4 + 16): new weights are read after the A rows of the same bank
    (4, 4, 1, 7.0),        # 3 * 4 + 16: ... and overlap them from another bank
    (16, 1, 0, 32.0),      # rows + DIM
    (16, 1, 1, 23.5),      # (rows + 2*DIM - 1) / 2: the weight buffer waits for its last reader to leave
    (4, 1, 1, 17.5),
    (1, 1, 1, 16.0),
])
def test_compute_rates_match_the_rtl(rows, per_block, weights_bank, cycles_per_compute):
    # cycles per compute in a long stream (the difference of 128 and 64 computes), as measured on the RTL
    weights_row = weights_bank * BANK + 512
    short = timing(_computes(64, rows, per_block, weights_row), RTL).cycles
    long = timing(_computes(128, rows, per_block, weights_row), RTL).cycles
    assert (long - short) / 64 == cycles_per_compute


def _moves(n, rows, cols, kind, full=False):
    d = RTL.dim
    if kind == "mvout":
        return [isa.config_st(4096, config=RTL)] + [
            isa.mvout(4096 * i, isa.acc((i % 32) * d, full=full), rows, cols, config=RTL) for i in range(n)]
    local = (lambda i: isa.acc((i % 32) * d)) if kind == "mvin_acc" else (lambda i: isa.sp((i % 64) * d))
    return [isa.config_ld(4096, config=RTL)] + [isa.mvin(4096 * i, local(i), rows, cols, config=RTL)
                                                 for i in range(n)]


@pytest.mark.parametrize("rows, cols, kind, full, single, each", [
    (16, 64, "mvin", False, 105, 80.0),     # 4 beats per row + 1 assembler cycle
    (16, 16, "mvin", False, 54, 32.0),      # 1 beat + 1
    (4, 16, "mvin", False, 30, 8.0),
    (1, 16, "mvin", False, 24, 2.875),      # 8 load-queue entries held 23 cycles each
    (16, 16, "mvin_acc", False, 102, 80.0),  # int32 rows: 4 beats, one block
    (16, 16, "mvout", False, 29, 24.0),     # one-beat rows: 2 rows per 3 cycles
    (16, 16, "mvout", True, 70, 64.0),      # full int32 rows: one beat per cycle
    (1, 16, "mvout", False, 7, 3.0),
])
def test_dma_rates_match_the_rtl(rows, cols, kind, full, single, each):
    # cycles of one move (after its config) and per move in a long stream, as measured on the RTL
    assert timing(_moves(1, rows, cols, kind, full), RTL).cycles == single
    short, long = (timing(_moves(n, rows, cols, kind, full), RTL).cycles for n in (32, 64))
    assert (long - short) / 32 == each


def test_mvin_waits_while_the_array_reads_its_bank():
    # the array's operand reads have priority at a scratchpad bank over the load unit's writes
    d = RTL.dim
    stream = [isa.config_ex("ws", config=RTL), isa.config_ld(d, config=RTL),
              isa.preload(isa.sp(BANK + 512), isa.acc(0), d, d, d, d, config=RTL),
              isa.compute_preloaded(isa.sp(0), isa.GARBAGE, d, d, d, d, config=RTL)]
    for i in range(15):
        stream += [isa.preload(isa.GARBAGE, isa.acc(d * (i % 4), accumulate=True), d, d, d, d, config=RTL),
                   isa.compute_accumulated(isa.sp(d * (i % 4)), isa.GARBAGE, d, d, d, d, config=RTL)]
    same = timing(stream + [isa.mvin(0, isa.sp(1024), d, d, config=RTL)], RTL)
    other = timing(stream + [isa.mvin(0, isa.sp(2 * BANK), d, d, config=RTL)], RTL)
    last_read = max(same.ends[3::2]) - 2 * d - 2  # the array's last slot (its result leaves 2*DIM+2 later)
    assert same.ends[-1] > last_read
    assert other.ends[-1] < last_read
    # first request 1 cycle after it starts, data 16 later, taken 1 later, 16 one-beat rows 2 cycles apart,
    # the last row written the cycle after, done 2 cycles after that
    assert other.ends[-1] - other.starts[-1] == 1 + 16 + 1 + 2 * (d - 1) + 2 + 2


def test_d_operand_reads_wait_for_result_writes_in_the_same_bank():
    # a D row read from the accumulator loses the bank to the array's own result writes, which stream
    # one row per cycle 2*DIM cycles after their slots: back-to-back such computes run at half speed
    d = RTL.dim
    def stream(d_row):
        cmds = [isa.config_ex("ws", config=RTL), isa.preload(isa.sp(0), isa.acc(0), d, d, d, d, config=RTL),
                isa.compute_preloaded(isa.sp(d), isa.acc(d_row, full=True), d, d, d, d, config=RTL)]
        for i in range(1, 64):
            cmds += [isa.preload(isa.GARBAGE, isa.acc(d * (i % 8)), d, d, d, d, config=RTL),
                     isa.compute_accumulated(isa.sp(d), isa.acc(d_row, full=True), d, d, d, d, config=RTL)]
        return cmds
    same_bank = timing(stream(256), RTL).cycles
    other_bank = timing(stream(RTL.acc_bank_rows + 256), RTL).cycles
    assert other_bank < 64 * d + 100
    assert same_bank > 1.8 * 64 * d


def test_config_carries_the_calibration():
    assert DEFAULT_CONFIG.dma_latency_cycles == 16 and DEFAULT_CONFIG.dma_max_inflight == 64
    arch = DEFAULT_CONFIG.arch("ws")
    assert arch.params["compute_overhead_cycles"] == DEFAULT_CONFIG.compute_overhead_cycles == 0
    assert type(DEFAULT_CONFIG).from_arch(replace(DEFAULT_CONFIG, compute_overhead_cycles=5).arch("ws")) \
        .compute_overhead_cycles == 5
    with pytest.raises(SimulationError) as info:
        replace(DEFAULT_CONFIG, compute_overhead_cycles=-1)
    assert info.value.field == "compute_overhead_cycles"


GEMMINI_LOAD = replace(DEFAULT_CONFIG, units="f13847e")
DIM_16 = DEFAULT_CONFIG.dim


def _ld(stride: int, repeats: int = 1, config=DEFAULT_CONFIG):
    plain = isa.config_ld(stride, config=config)
    return isa.Command(plain.funct, plain.rs1 | (repeats << 8), plain.rs2)


def test_gemmini_load_unit_writes_address_zero_rows_without_the_dma():
    # Gemmini's zero writer: 16 rows of one block each, a block per cycle, no DMA beat; our RTL fetches them
    cmds = [_ld(16), isa.mvin(0, isa.sp(0), 16, 16)]
    ours, gem = timing(cmds, DEFAULT_CONFIG), timing(cmds, GEMMINI_LOAD)
    assert gem.ends[1] - gem.starts[1] == 1 + 16 + 2
    assert ours.ends[1] - ours.starts[1] > DEFAULT_CONFIG.dma_latency_cycles + 16 * 2
    # rows from any other address are fetched on both, one beat a row: Gemmini assembles a row in its one
    # beat (its BeatMerger takes the request and the first beat in one cycle), our RTL in two
    fetched = [_ld(16), isa.mvin(4096, isa.sp(0), 16, 16)]
    assert timing(fetched, DEFAULT_CONFIG).cycles - timing(fetched, GEMMINI_LOAD).cycles == 16 - 1


def test_gemmini_load_unit_fetches_a_repeated_row_once():
    # a stride-0 mvin (a bias row into 16 accumulator rows): one row fetched, written 16 times
    cmds = [_ld(0), isa.mvin(4096, isa.acc(0), 16, 16)]
    one = [_ld(0), isa.mvin(4096, isa.acc(0), 1, 16)]
    gem, ours = timing(cmds, GEMMINI_LOAD), timing(cmds, DEFAULT_CONFIG)
    assert gem.ends[1] - gem.starts[1] == timing(one, GEMMINI_LOAD).ends[1] - timing(one, GEMMINI_LOAD).starts[1] + 15
    assert ours.ends[1] - ours.starts[1] > gem.ends[1] - gem.starts[1] + 16   # 16 rows of 4 beats each


def test_gemmini_load_unit_holds_each_row_for_its_pixel_repeats():
    # one-beat rows of one block assemble in 1 cycle; 3 pixel repeats hold each of the 16 rows 3 cycles
    rows = [isa.mvin(4096, isa.sp(32), 16, 16)]
    plain, repeated = timing([_ld(16)] + rows, GEMMINI_LOAD), timing([_ld(16, 3)] + rows, GEMMINI_LOAD)
    assert repeated.cycles - plain.cycles == 16 * (3 - 1)
    assert timing([_ld(16, 3)] + rows, DEFAULT_CONFIG).cycles == timing([_ld(16)] + rows, DEFAULT_CONFIG).cycles


def test_gemmini_load_unit_has_two_mvins_in_flight():
    # three independent mvins: on Gemmini's the third waits for the first to complete before it starts
    cmds = [_ld(16)] + [isa.mvin(4096 * (i + 1), isa.sp(256 * i), 4, 16) for i in range(3)]
    length = {c.units: timing(cmds[:2], c).ends[1] - timing(cmds[:2], c).starts[1] for c in (GEMMINI_LOAD, DEFAULT_CONFIG)}
    gem, ours = timing(cmds, GEMMINI_LOAD), timing(cmds, DEFAULT_CONFIG)
    assert gem.ends[3] >= gem.ends[1] + length["f13847e"] and ours.ends[3] < ours.ends[1] + length["ours"]


def test_cold_lines_cross_the_socs_memory_bus_once():
    # 16 rows of 16 B, 64 B apart: 16 lines of 64 B, 8 cycles each on an 8-byte bus, the first time only
    cold = replace(DEFAULT_CONFIG, soc_line_fill_cycles=8)
    first = [_ld(64), isa.mvin(4096, isa.sp(0), 16, 16)]
    again = first + [isa.mvin(4096, isa.sp(64), 16, 16)]
    other = first + [isa.mvin(1 << 20, isa.sp(64), 16, 16)]
    warm = {name: timing(cmds, DEFAULT_CONFIG).cycles for name, cmds in (("first", first), ("again", again))}
    got = {name: timing(cmds, cold).cycles for name, cmds in (("first", first), ("again", again), ("other", other))}
    assert got["first"] - warm["first"] == 16 * 8 - 16   # the fills, less the 16 beats that follow them
    assert got["again"] - got["first"] == warm["again"] - warm["first"]   # lines read before: no fill
    assert got["other"] - got["first"] >= warm["again"] - warm["first"] + 16 * 8 - 16 - 32


def test_units_and_soc_memory_are_checked():
    with pytest.raises(SimulationError, match="units"):
        replace(DEFAULT_CONFIG, units="rocket")
    with pytest.raises(SimulationError, match="soc_line_fill_cycles"):
        replace(DEFAULT_CONFIG, soc_line_fill_cycles=-1)


def test_gemmini_mesh_holds_six_computes():
    # one-row computes on resident weights: Gemmini's mesh has 6 tags and a tag is freed when the next
    # compute completes (its last row out of the array, 2*DIM + 2 cycles after its slot), so a compute waits
    # for the one 5 back to complete: each group of 5 takes at least 2*DIM + 3 cycles; our RTL has no such wait
    cmds = [isa.config_ex("ws"), isa.preload(isa.sp(0), isa.acc(0), DIM_16, DIM_16, 1, DIM_16),
            isa.compute_preloaded(isa.sp(DIM_16), isa.GARBAGE, 1, DIM_16, 1, DIM_16)]
    for i in range(1, 61):
        cmds += [isa.preload(isa.GARBAGE, isa.acc(i, accumulate=True), DIM_16, DIM_16, 1, DIM_16),
                 isa.compute_accumulated(isa.sp(DIM_16 + i), isa.GARBAGE, 1, DIM_16, 1, DIM_16)]
    gem, ours = timing(cmds, GEMMINI_LOAD), timing(cmds, DEFAULT_CONFIG)
    least = 60 // 5 * (2 * DIM_16 + 3)
    assert gem.cycles >= least > ours.cycles


def test_gemmini_store_unit_gathers_a_rows_blocks_before_sending_it():
    # 16 rows of 64 int8 columns (4 DIM blocks, 4 beats) out of the scratchpad: our RTL sends a row's beats
    # while it reads the next row's blocks (about 5 cycles a row); Gemmini's StreamWriter gathers the 4 blocks
    # first, the first in the cycle of the previous row's last beat (4 + 3 = 7 cycles a row)
    cmds = [isa.config_st(64), isa.mvout(4096, isa.sp(0), 16, 64)]
    ours, gem = timing(cmds, DEFAULT_CONFIG), timing(cmds, GEMMINI_LOAD)
    assert 16 * 7 <= gem.cycles <= 16 * 7 + 8 and ours.cycles < 16 * 5 + 8
    narrow = [isa.config_st(16), isa.mvout(4096, isa.sp(0), 16, 16)]   # one block a row: no difference
    assert timing(narrow, GEMMINI_LOAD).cycles == timing(narrow, DEFAULT_CONFIG).cycles


def test_gemmini_scratchpad_serves_the_dmas_writes_before_the_arrays_reads():
    # an mvin issued before 16 computes that read the same scratchpad bank: Gemmini's ScratchpadBank writes
    # first and the array's stream stalls; our RTL's array reads first and the mvin's writes wait
    d = DIM_16
    def stream(row):
        cmds = [_ld(d), isa.mvin(4096, isa.sp(row), d, d), isa.config_ex("ws"),
                isa.preload(isa.sp(BANK + 512), isa.acc(0), d, d, d, d),
                isa.compute_preloaded(isa.sp(0), isa.GARBAGE, d, d, d, d)]
        for i in range(15):
            cmds += [isa.preload(isa.GARBAGE, isa.acc(d * (i % 4), accumulate=True), d, d, d, d),
                     isa.compute_accumulated(isa.sp(d * (i % 4)), isa.GARBAGE, d, d, d, d)]
        return cmds
    same, other = stream(1024), stream(2 * BANK)   # bank 0, as the computes' A rows, or another bank
    for config, mvin_waits in ((GEMMINI_LOAD, False), (DEFAULT_CONFIG, True)):
        s, o = timing(same, config), timing(other, config)
        computes_done = (max(s.ends[5::2]), max(o.ends[5::2]))
        if mvin_waits:
            assert s.ends[1] > o.ends[1] and computes_done[0] == computes_done[1]
        else:
            assert s.ends[1] == o.ends[1] and 0 < computes_done[0] - computes_done[1] <= d   # at most its 16 writes
