"""costmodel.microkernel: the register block of a CPU mapping and its issue cycles; costmodel.evaluate on an
arch with the register file as a level (outputs move with the kernel tile, operand loads issue)."""

import dataclasses
import math

import pytest

import costmodel
import workloads
from costmodel.microkernel import Block, MicroKernelSpec, block, issue_cycles, spec_of, step_cycles
from costmodel.packing import pack_cycles
from mappings import LevelMapping, Mapping

SPEC = MicroKernelSpec(lanes=16, registers=32, fma_per_cycle=1.0, fma_chains=4, loads_per_cycle=1.0)


def _gemm(n=64):
    return workloads.matmul("g", M=n, N=n, K=n, bits=32)


def _reg_arch(w, **params):
    from dataclasses import replace

    from targets.cpu.plan import arch_for

    base = costmodel.preset("cpu")
    base = replace(base, params={**base.params, **params})
    return arch_for(w, base, registers=(32, 64))


def test_a_large_gemm_block_issues_one_fma_per_cycle():
    w = _gemm()
    blk = block(w, {"M": 8, "N": 64, "K": 64}, 16, 32)
    assert (blk.j, blk.i, blk.lanes, blk.mr, blk.nv) == ("N", "M", 16, 4, 4)
    assert step_cycles(w, blk, SPEC) == 16  # 16 FMAs, 4 broadcasts + 4 B vectors: the FMA pipe bounds


def test_a_small_block_waits_on_its_fma_chains():
    w = _gemm()
    assert step_cycles(w, Block("N", "M", 16, 1, 1), SPEC) == 4  # 1 FMA per step, latency 4
    assert step_cycles(w, Block("N", "M", 16, 2, 1), SPEC) == 4
    assert step_cycles(w, Block("N", "M", 16, 2, 2), SPEC) == 4  # 4 chains: the peak


def test_an_input_indexed_by_both_block_dims_is_load_bound():
    conv = workloads.conv2d("c", C=8, K=8, H=14, W=14, R=1, S=1, bits=32)  # Outputs[N, K, Q, P]
    blk = Block("P", "Q", 16, 7, 1)  # rows along Q: every row loads its own input vector
    assert step_cycles(conv, blk, SPEC) == 8  # 7 FMAs, 7 input vectors + 1 weight broadcast


def test_partial_vectors_and_scalar_tiles_issue_whole_instructions():
    conv = workloads.conv2d("c", C=4, K=4, H=14, W=14, R=1, S=1, bits=32)
    rows = Mapping((LevelMapping(), LevelMapping(), LevelMapping(), LevelMapping(temporal={"K": 4, "C": 4, "Q": 14}),
                    LevelMapping(temporal={}, spatial={"P": 14})))
    extents = rows.tile_extents(3, conv.dims)
    blk = block(conv, extents, 16, 32)
    assert blk.lanes == 16 and blk.j == "P"
    # one 16-lane vector per 14-wide row: MACs / 14 vector FMAs
    got = issue_cycles(conv, rows, 3, SPEC)
    vector_fmas = conv.macs / 14
    blocks = vector_fmas / (blk.mr * blk.nv * 4)  # C = 4 reduction steps per block
    assert got == pytest.approx(vector_fmas * step_cycles(conv, blk, SPEC) / (blk.mr * blk.nv)
                                + blocks * 2 * blk.mr * blk.nv / SPEC.loads_per_cycle)  # accumulators in, out
    # a tile 7 wide (7 of 16 lanes) still issues vectors; one 3 wide (under a quarter of a vector) runs
    # scalar: one FMA per MAC
    assert block(conv, {**extents, "P": 7}, 16, 32).lanes == 16
    assert block(conv, {**extents, "P": 3}, 16, 32).lanes == 1


def test_the_register_arch_counts_issue_cycles_and_not_operand_reads_at_l1():
    w = _gemm(64)
    arch = _reg_arch(w, fma_chains=4, loads_per_cycle=2)
    assert arch.params["micro_kernel"]["fma_chains"] == 4
    m = Mapping((LevelMapping(), LevelMapping(), LevelMapping(temporal={"M": 16, "K": 2}, order=("M", "K")),
                 LevelMapping(temporal={"K": 32}), LevelMapping(temporal={"M": 4}, spatial={"N": 64})))
    cost = costmodel.evaluate(w, arch, m)
    spec = spec_of(arch)
    packing = pack_cycles(w, m, arch, 3, spec.pack_cycles_per_word)
    assert spec.pack_cycles_per_word > 0 and packing > 0
    assert cost.compute_cycles == math.ceil(issue_cycles(w, m, 3, spec) + packing)
    l1 = arch.levels[3]
    # L1 holds B only: its transfer cycles are B's fills, not the reads the micro-kernel issues
    b_fill = cost.accesses["L1"]["B"].writes * 4
    assert cost.transfer_cycles["L1"] == pytest.approx(b_fill / arch.instances(3) / l1.write_bandwidth)


def test_output_blocks_move_with_every_run_of_the_kernel_tile():
    """The K loop of L2 runs the kernel tile twice over one C tile: the code stores the blocks and loads
    them back (the model without a micro-kernel keeps them: the tile did not change)."""
    from dataclasses import replace

    w = _gemm(64)
    arch = _reg_arch(w)
    m = Mapping((LevelMapping(), LevelMapping(), LevelMapping(temporal={"M": 16, "K": 2}, order=("M", "K")),
                 LevelMapping(temporal={"K": 32}), LevelMapping(temporal={"M": 4}, spatial={"N": 64})))
    # 32 runs of the kernel tile, each C tile (4 x 64) visited twice: loaded back on the second visit
    got = costmodel.evaluate(w, arch, m)
    assert got.accesses["Registers"]["C"].fills == 64 * 64
    assert got.partial_sums["L2"]["C"].writes == 64 * 64  # the first visit's write-back is a partial sum
    plain = replace(arch, params={k: v for k, v in arch.params.items() if k != "micro_kernel"})
    assert costmodel.evaluate(w, plain, m).accesses["Registers"]["C"].fills == 0


def test_a_cache_refills_only_what_it_could_not_keep():
    """lru_caches: a GEMM whose three matrices fit in the L2 loads each word into it once, however the
    L2 tile the mapping names comes and goes; without the flag the L2 is a scratchpad that refills."""
    from dataclasses import replace

    w = _gemm(64)  # 48 KiB in all
    arch = costmodel.preset("cpu")
    assert "L2" in arch.params["lru_caches"]
    m = Mapping((LevelMapping(temporal={"K": 4, "M": 4}, order=("M", "K")), LevelMapping(),
                 LevelMapping(temporal={"N": 4}), LevelMapping(temporal={"M": 16, "K": 16}, spatial={"N": 16})))
    kept = costmodel.evaluate(w, arch, m).accesses["L2"]
    assert {t: a.fills for t, a in kept.items() if t != "C"} == {"A": 64 * 64, "B": 64 * 64}
    scratch = replace(arch, params={**arch.params, "lru_caches": []})
    assert costmodel.evaluate(w, scratch, m).accesses["L2"]["B"].fills == 4 * 64 * 64  # B again for every M


def test_lanes_go_where_they_fill_the_vectors():
    from costmodel.microkernel import LANE_GAIN, lane_dim, lane_use

    assert lane_use(7, 16) == pytest.approx(7 / 16) and lane_use(32, 16) == 1 and lane_use(24, 16) == 0.75
    conv = workloads.conv2d("c", C=16, K=64, H=7, W=7, R=3, S=3, padding=1, bits=32)
    tile = dict(conv.dims)
    assert lane_dim(conv, tile, 16) == "K"                     # 64 channels fill 16 lanes, 7 columns 44 %
    assert lane_dim(conv, {**tile, "K": 8}, 16) == "P"         # fewer channels than lanes: along the row (P)
    wide = workloads.conv2d("w", C=16, K=64, H=14, W=14, R=3, S=3, padding=1, bits=32)
    assert lane_use(14, 16) * LANE_GAIN >= 1 and lane_dim(wide, dict(wide.dims), 16) == "P"   # 88 %: kept
    assert lane_dim(conv, tile, 1) == "P"                      # scalar code: the contiguous dim
    assert block(conv, tile, 16, 32).j == "K"


def test_strided_accumulators_move_through_a_scratch_once_per_block():
    """Output-channel lanes on a 7 x 7 image: the accumulators live in a scratch with K innermost
    (``scratch_axis``), so a block moves whole vectors, and the scratch's copy into the output is priced
    once, as a packing copy of every output word."""
    from costmodel.microkernel import scratch_axis

    conv = workloads.conv2d("c", C=16, K=32, H=7, W=7, R=3, S=3, padding=1, bits=32)
    short = Mapping((LevelMapping(), LevelMapping(), LevelMapping(temporal={"C": 4}, order=("C",)),
                     LevelMapping(temporal={"K": 32, "C": 4, "R": 3, "S": 3, "P": 7, "Q": 7})))
    long_ = Mapping((LevelMapping(), LevelMapping(), LevelMapping(),
                     LevelMapping(temporal={"K": 32, "C": 16, "R": 3, "S": 3, "P": 7, "Q": 7})))
    blk = block(conv, long_.tile_extents(3, conv.dims), SPEC.lanes, SPEC.registers)
    assert blk.j == "K" and scratch_axis(conv, blk) == 1   # Outputs[N, K, Q, P]
    assert scratch_axis(conv, block(conv, {**long_.tile_extents(3, conv.dims), "K": 8}, 16, 32)) is None  # P lanes
    spec = dataclasses.replace(SPEC, pack_cycles_per_word=0.5)
    fma_only = conv.macs / (blk.lanes * blk.mr * blk.nv) * step_cycles(conv, blk, spec)
    got_long, got_short = issue_cycles(conv, long_, 3, spec), issue_cycles(conv, short, 3, spec)
    blocks_long = conv.macs / (blk.lanes * blk.mr * blk.nv * 16 * 9)
    copy = 32 * 7 * 7 * 0.5
    assert got_long == pytest.approx(fma_only + blocks_long * 2 * blk.mr * blk.nv / spec.loads_per_cycle + copy)
    assert got_short > got_long > fma_only   # a shorter reduction per block moves the accumulators more often


def test_the_micro_kernels_cache_fills_overlap_the_fmas_and_the_next_level_stalls():
    """A line moving into the kernel level is priced where it is read (L2: a stall); its arrival in L1
    overlaps compute.  Without a register level (no micro-kernel) every cache level stalls as before."""
    w = _gemm(64)
    arch = _reg_arch(w)
    m = Mapping((LevelMapping(), LevelMapping(), LevelMapping(temporal={"M": 16, "K": 2}, order=("M", "K")),
                 LevelMapping(temporal={"K": 32}), LevelMapping(temporal={"M": 4}, spatial={"N": 64})))
    cost = costmodel.evaluate(w, arch, m)
    assert cost.overlapped["L1"] and not cost.overlapped["L2"] and not cost.overlapped["L3"]
    assert cost.transfer_cycles["L1"] > 0
    from dataclasses import replace

    def slower(name):  # the arch with level ``name`` at half its bandwidth
        levels = tuple(replace(lv, read_bandwidth=lv.read_bandwidth / 2, write_bandwidth=lv.write_bandwidth / 2)
                       if lv.name == name else lv for lv in arch.levels)
        return costmodel.evaluate(w, replace(arch, levels=levels), m)

    assert cost.compute_cycles > 2 * cost.transfer_cycles["L1"]  # hidden under the FMAs even at half speed
    assert slower("L1").cycles == pytest.approx(cost.cycles)
    assert slower("L2").cycles > cost.cycles
    plain = costmodel.preset("cpu")
    assert not any(costmodel.evaluate(w, plain, _plain_mapping(w)).overlapped[lv.name] for lv in plain.levels[1:])


def _plain_mapping(w):
    """Every loop at DRAM but N across the L1's lanes: a valid mapping of the plain cpu preset."""
    plain = costmodel.preset("cpu")
    lanes = plain.levels[-1].fanout
    levels = [LevelMapping(temporal={"M": 64, "K": 64, "N": 64 // lanes})] + [LevelMapping()] * (len(plain.levels) - 2)
    return Mapping(tuple(levels + [LevelMapping(spatial={"N": lanes})]))
