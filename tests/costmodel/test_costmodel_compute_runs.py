"""Per-compute cost at a level with ``compute_rows``: runs of merged loops, compute commands, cycles."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

import workloads as W
from costmodel import Arch, ArchError, Level, arch_from_dict, arch_to_dict, evaluate, trace
from costmodel.compute_runs import address_strides, compute_runs, compute_work
from costmodel.evaluate import quantized_iterations
from gemmini import GemminiConfig, codegen
from mappings import LevelMapping as LM, Mapping
from workloads.divisors import divisors

DIM = 4
# a per-compute overhead of 3 cycles exercises the mechanism (the preset's default is 0)
SMALL = GemminiConfig(dim=DIM, sp_kib=16, acc_kib=8, compute_overhead_cycles=3)
ARCH = SMALL.arch("ws")


def gemmini_conv(dram: dict, acc: dict, regs: dict, c: int = 4, k: int = 4) -> Mapping:
    """A DIM-4 WS mapping: DRAM loops, C x K unrolled on the array, Registers loops walk Q (outer) then P."""
    return Mapping((LM(temporal=dram), LM(), LM(temporal=acc, spatial={"C": c, "K": k}),
                    LM(temporal=regs, order=("N", "Q", "P"))))


def generated_computes(workload, mapping) -> int:
    program = codegen.generate(workload, mapping, ARCH, dataflow="ws", bias=False)
    return sum(1 for cmd in program.commands if cmd.name.startswith("compute"))


def regs_runs(workload, mapping):
    return compute_runs(workload, ARCH, mapping)[3]


def test_matmul_run_is_the_registers_m_loop():
    mm = W.matmul(M=24, N=4, K=4)
    mapping = Mapping((LM(temporal={"M": 4}), LM(), LM(spatial={"K": 4, "N": 4}), LM(temporal={"M": 6})))
    runs = regs_runs(mm, mapping)
    assert (runs.residencies, runs.run_dims, runs.run_length) == (4, ("M",), 6)
    assert runs.computes_per_residency == math.ceil(6 / DIM) == 2
    cost = evaluate(mm, ARCH, mapping)
    assert cost.computes == 8 == generated_computes(mm, mapping)
    assert cost.compute_cycles == 4 * (6 + 3 * 2)  # rows + 3 cycles per compute


def test_3x3_conv_patch_streams_one_image_row_per_compute():
    """P3 = Q3 = 4 under a kernel halo: image rows are not equally spaced in the scratchpad tile."""
    conv = W.conv2d("c3", C=4, K=4, P=8, Q=8, R=3, S=3, padding=1)
    mapping = gemmini_conv({"P": 2, "Q": 2}, {"R": 3, "S": 3}, {"P": 4, "Q": 4})
    runs = regs_runs(conv, mapping)
    assert (runs.run_dims, runs.run_length, runs.computes_per_residency) == (("P",), 4, 4)
    assert runs.residencies == 2 * 2 * 3 * 3
    cost = evaluate(conv, ARCH, mapping)
    assert cost.computes == 36 * 4 == generated_computes(conv, mapping)
    assert cost.compute_cycles == 36 * (16 + 3 * 4)


def test_1x1_conv_whose_tile_width_is_covered_merges_the_rows():
    conv = W.conv2d("c1", C=4, K=4, P=4, Q=8)
    mapping = gemmini_conv({"Q": 2}, {}, {"P": 4, "Q": 4})
    runs = regs_runs(conv, mapping)
    assert (runs.run_dims, runs.run_length, runs.computes_per_residency) == (("P", "Q"), 16, 4)
    assert evaluate(conv, ARCH, mapping).computes == 8 == generated_computes(conv, mapping)
    # the same patch inside a wider tile (P split between the Accumulator and the Registers) does not merge
    wide = W.conv2d("c1w", C=4, K=4, P=8, Q=8)
    split = gemmini_conv({"Q": 2}, {"P": 2}, {"P": 4, "Q": 4})
    assert regs_runs(wide, split).run_dims == ("P",)
    assert regs_runs(wide, split).computes_per_residency == 4


def test_strided_1x1_conv_merges_on_the_compressed_lattice():
    """Stride 2: the scratchpad keeps every other input column, so the tile width is again P3."""
    conv = W.conv2d("s2", C=4, K=4, P=4, Q=8, stride=2)
    mapping = gemmini_conv({"Q": 2}, {}, {"P": 4, "Q": 4})
    inputs = conv.tensors[1]
    source = mapping.tile_extents(1, conv.dims)
    assert address_strides(inputs, source, ("P", "Q"), {}) == {"P": 1, "Q": 4}  # not 2 and 2 * 7
    runs = regs_runs(conv, mapping)
    assert (runs.run_dims, runs.computes_per_residency) == (("P", "Q"), 4)
    assert evaluate(conv, ARCH, mapping).computes == 8 == generated_computes(conv, mapping)


def test_output_tile_breaks_the_run_although_the_input_does_not():
    """Outputs stored transposed (O[k, q, p]): consecutive image rows of the input are one row apart in the
    scratchpad tile, but the accumulator tile steps P fastest, so Q cannot extend the run over P."""
    wl = W.LoopNest("transposed", {"K": 4, "C": 4, "P": 4, "Q": 4}, (
        W.Tensor("Wt", ("K", "C"), "weight"),
        W.Tensor("In", ("C", "Q", "P"), "input"),
        W.Tensor("Out", ("K", "P", "Q"), "output", bits=32),
    ))
    mapping = Mapping((LM(), LM(), LM(spatial={"C": 4, "K": 4}), LM(temporal={"P": 4, "Q": 4}, order=("Q", "P"))))
    inputs, outputs = wl.tensors[1], wl.tensors[2]
    assert address_strides(inputs, mapping.tile_extents(1, wl.dims), ("P", "Q"), {}) == {"P": 1, "Q": 4}
    assert address_strides(outputs, mapping.tile_extents(2, wl.dims), ("P", "Q"), {}) == {"P": 4, "Q": 1}
    runs = regs_runs(wl, mapping)
    assert (runs.run_dims, runs.run_length, runs.computes_per_residency) == (("P",), 4, 4)
    # the input alone would have merged: drop the output from the stream by holding it at the Registers
    held = Arch("held", ARCH.levels[:3] + (Level("Registers", 64, frozenset({"weight", "output"}), compute_rows=DIM),))
    assert compute_runs(wl, held, mapping)[3].run_dims == ("P", "Q")


def test_address_strides_of_a_dilated_window_and_of_an_unrelated_loop():
    dilated = W.conv2d("d", C=1, K=1, P=4, Q=1, R=3, dilation=2)
    inputs = dilated.tensors[1]
    # column index P + 2R over P in 0..3, R in 0..2: gcd(1, 2) = 1, 3 + 4 + 1 = 8 stored columns
    assert address_strides(inputs, {"P": 4, "R": 3}, ("P", "R"), {}) == {"P": 1, "R": 2}
    # only R in the tile: the lattice of step 2 stores 3 columns one apart
    assert address_strides(inputs, {"R": 3}, ("R",), {}) == {"R": 1}
    # a loop the tensor does not depend on steps by 0; a loop's own stride scales its step
    assert address_strides(inputs, {"P": 4, "K": 2}, ("P", "K"), {"P": 2}) == {"P": 2, "K": 0}


def test_no_registers_loop_is_one_compute_per_residency():
    mm = W.matmul(M=8, N=4, K=4)
    mapping = Mapping((LM(temporal={"M": 8}), LM(), LM(spatial={"K": 4, "N": 4}), LM()))
    runs = regs_runs(mm, mapping)
    assert (runs.run_dims, runs.run_length, runs.computes) == ((), 1, 8)
    assert evaluate(mm, ARCH, mapping).compute_cycles == 8 * (1 + 3)


def test_compute_fields_validate_and_round_trip():
    for kw in ({"compute_rows": 0}, {"compute_rows": 2.0}, {"compute_overhead_cycles": -1, "compute_rows": 4},
               {"compute_overhead_cycles": 3}, {"compute_rows": 4, "compute_quantum": 4}):
        with pytest.raises(ArchError, match="compute_"):
            Arch("bad", (Level("DRAM"), Level("Buffer", 10, **kw)))
    doc = arch_to_dict(ARCH)
    assert doc["levels"][3]["compute_rows"] == DIM and doc["levels"][3]["compute_overhead_cycles"] == 3
    assert arch_from_dict(doc) == ARCH
    doc["levels"][3]["compute_rows"] = "many"
    with pytest.raises(ArchError, match="compute_rows"):
        arch_from_dict(doc)


def rows_arch(rows: int | None, overhead: int, fanout: int = 1) -> Arch:
    """DRAM holding everything, a buffer for inputs and outputs, a register level holding the weight."""
    return Arch("runs", (Level("DRAM"), Level("Buffer", None, frozenset({"input", "output"}), fanout=fanout),
                         Level("Regs", None, frozenset({"weight"}), compute_rows=rows,
                               compute_overhead_cycles=overhead)))


def factor_splits(bound: int):
    """Strategy: (outer, middle, inner) with product ``bound``."""
    ds = divisors(bound)
    return st.sampled_from(ds).flatmap(
        lambda a: st.sampled_from([d for d in ds if (bound // a) % d == 0]).map(
            lambda b: (a, b, bound // a // b)))


CONV = W.conv2d("law", N=2, C=2, K=2, P=6, Q=4, R=3, S=1, stride=1)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(n=factor_splits(2), p=factor_splits(6), q=factor_splits(4), r=factor_splits(3),
       order=st.permutations(("N", "P", "Q", "R")), rows=st.integers(1, 8), overhead=st.integers(0, 4))
def test_compute_count_laws(n, p, q, r, order, rows, overhead):
    """At least ceil(iterations / R) computes per residency, at most one per iteration; compute cycles add
    exactly the overhead per compute; with compute_rows None they are today's iteration count."""
    levels = []
    for i in range(3):
        temporal = {d: f[i] for d, f in zip(("N", "P", "Q", "R"), (n, p, q, r))}
        levels.append(LM(temporal=temporal, order=order if i == 2 else ()))
    mapping = Mapping((LM(temporal={**levels[0].temporal, "C": 2, "K": 2}), levels[1], levels[2]))
    arch = rows_arch(rows, overhead)
    runs = compute_runs(CONV, arch, mapping)[2]
    level_iterations = math.prod(mapping.levels[2].temporal.values())
    assert runs.residencies * level_iterations == math.prod(math.prod(m.temporal.values()) for m in mapping.levels)
    assert level_iterations % runs.run_length == 0
    assert math.ceil(level_iterations / rows) <= runs.computes_per_residency <= level_iterations
    assert runs.computes_per_residency == math.ceil(runs.run_length / rows) * level_iterations // runs.run_length
    cost = evaluate(CONV, arch, mapping)
    plain = evaluate(CONV, rows_arch(None, 0), mapping)
    assert cost.computes == runs.computes
    assert cost.compute_cycles == plain.compute_cycles + overhead * runs.computes
    assert plain.compute_cycles == quantized_iterations(arch, mapping) == CONV.macs
    assert plain.computes == 0
    assert cost.accesses == plain.accesses == trace(CONV, arch, mapping)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(inner=st.integers(1, 12), outer=st.integers(1, 4), rows=st.integers(1, 6), overhead=st.integers(0, 3))
def test_a_single_streamed_loop_is_one_run(inner, outer, rows, overhead):
    mm = W.matmul(M=inner, N=outer, K=1)
    mapping = Mapping((LM(temporal={"N": outer}), LM(), LM(temporal={"M": inner})))
    arch = rows_arch(rows, overhead)
    assert compute_work(arch, mapping, compute_runs(mm, arch, mapping)) == outer * (
        inner + overhead * math.ceil(inner / rows))


def test_unspecified_registers_order_takes_the_fewest_computes():
    """The innermost level's order changes no traffic: left unspecified, the loops run in the order with the
    fewest computes (the code generator streams rows or, transposed, columns, whichever is longer)."""
    conv = W.conv2d("free", C=4, K=4, P=2, Q=8)
    free = Mapping((LM(temporal={"Q": 4}), LM(), LM(spatial={"C": 4, "K": 4}), LM(temporal={"P": 2, "Q": 2})))
    runs = regs_runs(conv, free)
    assert (runs.run_dims, runs.run_length, runs.computes_per_residency) == (("P", "Q"), 4, 1)
    given_order = Mapping(free.levels[:3] + (LM(temporal={"P": 2, "Q": 2}, order=("P", "Q")),))
    assert regs_runs(conv, given_order).computes_per_residency == 2  # Q innermost: two runs of 2
    assert evaluate(conv, ARCH, free).computes == 4 == generated_computes(conv, free)
    # a tall patch under a kernel halo: two columns of 4 rows beat four rows of 2
    tall = W.conv2d("tall", C=4, K=4, P=4, Q=4, R=3, S=3, padding=1)
    patch = Mapping((LM(temporal={"P": 2}), LM(), LM(spatial={"C": 4, "K": 4}, temporal={"R": 3, "S": 3}),
                     LM(temporal={"P": 2, "Q": 4})))
    runs = regs_runs(tall, patch)
    assert (runs.run_dims, runs.computes_per_residency) == (("Q",), 2)
    assert evaluate(tall, ARCH, patch).computes == 2 * 9 * 2 == generated_computes(tall, patch)


def fill_arch(overhead: int, double_buffered: bool = True) -> Arch:
    """Weights held at a register level filled at 1 byte per 8 cycles."""
    return Arch("fill", (Level("DRAM"), Level("Buffer", None, frozenset({"input", "output"})),
                         Level("Regs", None, frozenset({"weight"}), write_bandwidth=1 / 8, compute_rows=4,
                               compute_overhead_cycles=overhead, double_buffered=double_buffered)))


def test_a_double_buffered_fill_overlaps_only_the_last_compute_before_the_change():
    mm = W.matmul(M=6, N=3, K=1)
    mapping = Mapping((LM(temporal={"N": 3}), LM(), LM(temporal={"M": 6})))
    runs = compute_runs(mm, fill_arch(0), mapping)[2]
    # runs of 2 + 4 rows: the short compute goes first, so the fill overlaps a full one
    assert (runs.changes, runs.last_rows, runs.fill_cycles, runs.computes) == (3, 4, 8.0, 6)
    # per weight: max(6 rows + overhead, 6 - 4 + 8 (the fill after the last compute), 6 / 2 + 8 (drain + fill))
    assert evaluate(mm, fill_arch(0), mapping).compute_cycles == 3 * 11
    assert evaluate(mm, fill_arch(5), mapping).compute_cycles == 3 * (6 + 5 * 2)
    # single-buffered: fills stall the array instead (the level's transfer cycles add to the total)
    serial = evaluate(mm, fill_arch(0, double_buffered=False), mapping)
    assert serial.compute_cycles == 18 and serial.cycles == 18 + 3 * 8
    # weights reused across an irrelevant outer loop change only when N advances
    reuse = Mapping((LM(temporal={"N": 3, "M": 2}, order=("N", "M")), LM(), LM(temporal={"M": 3})))
    wide = W.matmul(M=6, N=3, K=1)
    runs = compute_runs(wide, fill_arch(0), reuse)[2]
    assert (runs.changes, runs.last_rows, runs.residencies) == (3, 3, 6)
    assert evaluate(wide, fill_arch(0), reuse).compute_cycles == 3 * max(6, 6 - 3 + 8, 3 + 8)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(m=factor_splits(12), n=factor_splits(4), overhead=st.integers(0, 4))
def test_fill_overlap_bounds(m, n, overhead):
    """The fill overlap never makes computes cheaper than their rows, nor the whole faster than its fills."""
    wl = W.matmul(M=12, N=4, K=1)
    mapping = Mapping(tuple(LM(temporal={"M": m[i], "N": n[i]}, order=("N", "M")) for i in range(3)))
    runs = compute_runs(wl, fill_arch(overhead), mapping)[2]
    cycles = evaluate(wl, fill_arch(overhead), mapping).compute_cycles
    plain = wl.macs + overhead * runs.computes
    assert cycles >= plain and cycles >= runs.changes * runs.fill_cycles
    assert cycles <= plain + runs.changes * runs.fill_cycles
    assert evaluate(wl, fill_arch(overhead, double_buffered=False), mapping).compute_cycles == plain
