"""Timing model sanity: causality and monotonicity, DMA- and compute-bound regimes, queue depths, deps."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemmini import SimulationError, isa
from gemmini.config import SMALL_CONFIG as CFG
from gemmini.sim import dma_beats, dma_transfer, execute, timing

from test_functional import _operands, os_matmul, ws_matmul

DIM = CFG.dim


def test_dma_beats_follow_requests_and_alignment():
    assert dma_beats(0, 64, 1, 64, CFG) == 4  # one aligned 64 B request, 4 beats of 16 B
    assert dma_beats(8, 64, 1, 64, CFG) == 5  # 56 B + 8 B requests: 4 + 1 beats
    assert dma_beats(0, 4, 4, 16, CFG) == 4  # 4 rows of 4 B: one beat each
    assert dma_beats(0, 128, 2, 128, CFG) == 16
    assert dma_transfer(8, 64, 2, 64, CFG) == (4, 10)


def test_requests_in_flight_limit_with_long_latency():
    # 64 one-beat requests in 16 mvins: with 400-cycle latency and 16 requests in flight,
    # requests leave in four waves, each waiting for the one before to return
    cmds = [isa.config_ld(64, config=CFG)] + [isa.mvin(64 * 4 * i, isa.sp(4 * i), 4, 4, config=CFG)
                                              for i in range(16)]
    deep_queue = replace(CFG, dma_latency_cycles=400, ld_queue=64)
    fast = timing(cmds, replace(deep_queue, dma_max_inflight=64))
    limited = timing(cmds, replace(deep_queue, dma_max_inflight=16))
    assert fast.cycles < 400 + 64 + 2
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
    assert prefix.starts == full.starts[:n] and prefix.ends == full.ends[:n]
    assert prefix.cycles <= full.cycles
    assert all(e >= s for s, e in zip(full.starts, full.ends))
    for unit in ("load", "execute", "store"):
        assert 0 <= prefix.busy[unit] <= full.busy[unit] <= full.cycles


def test_dma_bound_stream():
    # 32 mvins of 4 rows x 64 int8 columns (aligned): 16 beats each; no compute
    cmds = [isa.config_ld(64, config=CFG)]
    cmds += [isa.mvin(64 * 4 * i, isa.sp(64 * (i % 16)), 4, 64, config=CFG) for i in range(32)]
    t = timing(cmds, CFG)
    beats = 32 * 16
    assert t.busy["load"] == beats + 1  # + config_ld
    assert beats <= t.cycles <= beats + 4
    assert t.load_bytes == 32 * 4 * 64
    slow = timing(cmds, replace(CFG, dma_bytes_per_cycle=8))
    assert slow.cycles >= 2 * beats  # half the bus, twice the time


def test_compute_bound_stream():
    # weights loaded once, then 64 computes reusing them: the array streams DIM rows per compute
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
    # the same work: only the waiting changed (preload/compute overlap may differ)
    for other in (shallow_load, shallow_store, deeper):
        assert (other.busy["load"], other.busy["store"], other.array_cycles) == \
            (deep.busy["load"], deep.busy["store"], deep.array_cycles)


def test_dependencies_and_fence():
    cmds = [isa.config_ex("ws", config=CFG), isa.config_ld(DIM, config=CFG),
            isa.mvin(0, isa.sp(0), DIM, DIM, config=CFG),
            isa.preload(isa.sp(0), isa.GARBAGE, DIM, DIM, DIM, DIM, config=CFG),  # reads what the mvin wrote
            isa.compute_preloaded(isa.sp(DIM), isa.GARBAGE, DIM, DIM, DIM, DIM, config=CFG)]
    t = timing(cmds, replace(CFG, dma_latency_cycles=30))
    assert t.starts[3] >= t.ends[2]
    independent = cmds[:3] + [isa.preload(isa.sp(2 * DIM), isa.GARBAGE, DIM, DIM, DIM, DIM, config=CFG)] + cmds[4:]
    t_ind = timing(independent, replace(CFG, dma_latency_cycles=30))
    assert t_ind.starts[3] < t_ind.ends[2]
    fenced = cmds[:3] + [isa.fence()] + independent[3:]
    t_fence = timing(fenced, replace(CFG, dma_latency_cycles=30))
    assert t_fence.starts[4] >= t_fence.ends[2]
    assert t_fence.instructions == len(fenced)


def test_timing_and_functional_accept_the_same_streams():
    cmds, mem = _matmul_stream(ws_matmul, 8, 12, 8)
    result = execute(cmds, mem, CFG)
    t = timing(cmds, CFG)
    assert t.instructions == result.instructions
    assert t.array_cycles == DIM * result.counts["compute_preloaded"]


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
