"""costmodel.packing: where a CPU mapping's inputs are packed, how many copies each core makes (against a
literal walk of the loops), what they cost, and which packed inputs stream under the FMAs."""

import itertools
import math
import random

import pytest

import costmodel
import workloads
from costmodel.microkernel import block, kernel_level, spec_of
from costmodel.packing import copies_per_core, pack_box, pack_cycles, pack_level, parallel_level, streamed_inputs
from mappings import LevelMapping as L
from mappings import Mapping


def _reg_arch(w, cores=8):
    from targets.cpu.plan import arch_for

    return arch_for(w, costmodel.preset("cpu", cores=cores), registers=(32, 64))


def _walked_copies(mapping, workload, tensor, level, kernel) -> int:
    """Copies thread 0 makes: walk every iteration of the loops above ``level`` in order (thread 0's share of
    the parallel loops) and count the moves of the tile's origin, as the generated code's check does."""
    dims = list(workload.dims)
    loops = [lp for lp in mapping.loops(dims) if lp.level < level]
    par = parallel_level(mapping, workload, kernel)
    step, remaining = [], {d: mapping.factor(d) for d in dims}
    for lp in loops:
        remaining[lp.dim] //= lp.factor
        step.append(remaining[lp.dim])
    ranges = [range(1) if lp.spatial and lp.level == par and lp.dim in workload.output.dims else range(lp.factor)
              for lp in loops]
    last, copies = None, 0
    for idx in itertools.product(*ranges):
        at = {d: 0 for d in dims}
        for lp, s, i in zip(loops, step, idx):
            at[lp.dim] += i * s
        origin = tuple(e.evaluate(at) for e in tensor.indices)
        if origin != last:
            copies, last = copies + 1, origin
    return copies


@pytest.mark.parametrize("name", ["gemm", "conv"])
def test_copies_per_core_match_a_walk_of_the_loops(name):
    from cosa.baselines.mapspace import MapSpace, random_mapping

    w = (workloads.matmul("g", M=32, N=32, K=32, bits=32) if name == "gemm" else
         workloads.conv2d("c", C=8, K=16, H=8, W=8, R=3, S=3, padding=1, bits=32))
    arch = _reg_arch(w, cores=2)
    kernel = kernel_level(arch)
    space, rng = MapSpace(w, arch), random.Random(0)
    checked = 0
    for _ in range(40):
        m = random_mapping(w, arch, rng, space=space)
        for t in w.inputs:
            level = pack_level(m, w, arch, t, kernel)
            if level is None:
                continue
            assert copies_per_core(m, w, t, level, kernel) == _walked_copies(m, w, t, level, kernel), (t.name, m)
            checked += 1
    assert checked >= 40


def test_a_tile_the_cache_keeps_is_copied_again_when_its_origin_moves():
    """K outside M at DRAM: B's L3 tile changes with every K step and A's with every (K, M) step; the L3
    (LRU) keeps all of A and B (one fill each), but the code copies each tile into its buffer again."""
    w = workloads.matmul("g", M=64, N=64, K=64, bits=32)
    arch = _reg_arch(w, cores=1)
    m = Mapping((L(temporal={"K": 4, "M": 2}, order=("K", "M")), L(), L(temporal={"M": 8, "K": 2}, order=("M", "K")),
                 L(temporal={"K": 8}), L(temporal={"M": 4}, spatial={"N": 64})))
    kernel = kernel_level(arch)
    cost = costmodel.evaluate(w, arch, m)
    assert cost.accesses["L3"]["A"].fills == 64 * 64 and cost.accesses["L3"]["B"].fills == 64 * 64
    a, b = w.tensor("A"), w.tensor("B")
    assert pack_level(m, w, arch, a, kernel) == 1
    assert copies_per_core(m, w, a, 1, kernel) == 8 and copies_per_core(m, w, b, 1, kernel) == 4
    words = 8 * math.prod(pack_box(m, w, a, 1)) + 4 * math.prod(pack_box(m, w, b, 1))
    assert words == 2 * 64 * 64
    assert pack_cycles(w, m, arch, kernel, 0.5) == pytest.approx(0.5 * words)


def test_streamed_panels_hide_their_fills_while_the_fmas_bound():
    """Two loop orders of one GEMM tile: the second refills the panels less, so its L2 and L1 transfer
    cycles are lower, but both panels (A as rows of the block, B as its vectors) stream under the FMAs:
    the same cycles."""
    w = workloads.matmul("g", M=64, N=64, K=64, bits=32)
    arch = _reg_arch(w)
    kernel = kernel_level(arch)
    spec = spec_of(arch)
    costs = []
    for order in (("M", "K"), ("K", "M")):
        m = Mapping((L(), L(), L(temporal={"M": 16, "K": 2}, order=order), L(temporal={"K": 32}),
                     L(temporal={"M": 4}, spatial={"N": 64})))
        blk = block(w, m.tile_extents(kernel, w.dims), spec.lanes, spec.registers)
        assert streamed_inputs(w, m, arch, kernel, blk) == {"A", "B"}
        costs.append(costmodel.evaluate(w, arch, m))
    assert costs[0].transfer_cycles["L2"] > costs[1].transfer_cycles["L2"]
    assert costs[0].transfer_cycles["L1"] > costs[1].transfer_cycles["L1"]
    assert costs[0].bound_by == "compute" and costs[0].cycles == costs[1].cycles


def test_a_sliding_window_is_not_a_stream():
    """A 3x3 convolution's input rows are read a row apart by the micro-kernel: not panels, so their
    fills stall; the weights, panelled along the block's rows, stream."""
    w = workloads.conv2d("c", C=16, K=64, H=14, W=14, R=3, S=3, padding=1, bits=32)
    arch = _reg_arch(w, cores=1)
    kernel = kernel_level(arch)
    spec = spec_of(arch)
    m = Mapping((L(temporal={"K": 4}), L(), L(temporal={"C": 4}), L(temporal={"K": 16, "C": 4, "R": 3, "S": 3, "Q": 14}),
                 L(spatial={"P": 14})))
    blk = block(w, m.tile_extents(kernel, w.dims), spec.lanes, spec.registers)
    assert streamed_inputs(w, m, arch, kernel, blk) == {"Weights"}


def test_the_copy_cost_round_trips_through_an_arch_file_and_a_negative_one_is_refused():
    from costmodel.archio import arch_from_dict, arch_to_dict
    from costmodel.arch import ArchError

    arch = costmodel.preset("cpu")
    doc = arch_to_dict(arch)
    assert arch_from_dict(doc).params["pack_cycles_per_word"] == arch.params["pack_cycles_per_word"] > 0
    doc["params"]["pack_cycles_per_word"] = -1
    with pytest.raises(ArchError, match="params.pack_cycles_per_word"):
        arch_from_dict(doc)


def test_a_copy_is_read_once_only_where_one_register_block_covers_every_other_dim():
    """7 x 7 1x1 convolution with pixel lanes: its weights' copy is read once (49 pixels in one 4 x 64
    block); its inputs' is reread by every block of output channels; a GEMM's B by every row block and its A
    by every column block of a 256-wide row; a padded 3x3 convolution's inputs are a window, never read in place."""
    from costmodel.packing import read_once
    from targets.cpu import kernel_nest

    conv = kernel_nest(workloads.conv2d("c", C=64, K=128, H=7, W=7, R=1, S=1, bits=32))
    arch = _reg_arch(conv, cores=1)
    m = Mapping((L(temporal={"C": 2}, order=("C",)), L(), L(), L(temporal={"K": 128, "C": 32}),
                 L(spatial={"QP": 49})))
    assert read_once(conv, arch, m, conv.tensor("Weights"))
    assert not read_once(conv, arch, m, conv.tensor("Inputs"))
    gemm = workloads.matmul("g", M=64, N=256, K=64, bits=32)
    garch = _reg_arch(gemm, cores=1)
    g = Mapping((L(), L(), L(), L(temporal={"M": 64, "N": 4, "K": 64}), L(spatial={"N": 64})))
    assert not read_once(gemm, garch, g, gemm.tensor("B")) and not read_once(gemm, garch, g, gemm.tensor("A"))
    c3 = workloads.conv2d("c3", C=8, K=16, H=7, W=7, R=3, S=3, padding=1, bits=32)
    assert not read_once(c3, _reg_arch(c3, cores=1), Mapping((L(), L(), L(), L(temporal={"K": 16, "C": 8, "Q": 7,
                                                                                          "R": 3, "S": 3}),
                                                               L(spatial={"P": 7}))), c3.tensor("Inputs"))


def test_a_packed_inputs_reads_from_dram_stall_in_its_copies():
    """The copies read a packed input's source between the FMAs: its DRAM reads (a level whose transfers
    otherwise overlap compute) are priced as stalls; an input read in place keeps overlapping."""
    from costmodel.evaluate import access_counts
    from costmodel.packing import copy_fill_cycles, read_once
    from targets.cpu import kernel_nest

    conv = kernel_nest(workloads.conv2d("c", C=64, K=128, H=7, W=7, R=1, S=1, bits=32))
    arch = _reg_arch(conv, cores=1)
    kernel = kernel_level(arch)
    packed = Mapping((L(temporal={"C": 2}, order=("C",)), L(), L(), L(temporal={"K": 128, "C": 32}),
                      L(spatial={"QP": 49})))
    accesses, _ = access_counts(conv, arch, packed, {})
    dram = arch.levels[0]
    assert dram.double_buffered
    names = {t.name for t in conv.inputs if pack_level(packed, conv, arch, t, kernel) is not None}
    assert names == {"Weights", "Inputs"}
    read = sum(accesses[0][n].reads * dram.bytes_per_word(conv.tensor(n)) for n in names)
    assert copy_fill_cycles(conv, arch, packed, accesses, kernel) == {"DRAM": pytest.approx(dram.transfer_cycles(read, 0))}
    # the weights read in place (bypassed at every cache, as the polish keeps a read-once copy out): only the
    # inputs' copies stall
    assert read_once(conv, arch, packed, conv.tensor("Weights"))
    in_place = Mapping(tuple(L(lm.temporal, lm.spatial, lm.order, frozenset({"Weights"}) if 0 < i < 4 else lm.bypass)
                             for i, lm in enumerate(packed.levels)))
    accesses, _ = access_counts(conv, arch, in_place, {})
    assert pack_level(in_place, conv, arch, conv.tensor("Weights"), kernel) is None
    inputs = accesses[0]["Inputs"].reads * dram.bytes_per_word(conv.tensor("Inputs"))
    assert copy_fill_cycles(conv, arch, in_place, accesses, kernel) == {"DRAM": pytest.approx(dram.transfer_cycles(inputs, 0))}
    # and evaluate adds them to the cycles: the stall is paid on top of the overlapped max
    cost = costmodel.evaluate(conv, arch, packed)
    assert cost.cycles >= cost.compute_cycles + dram.transfer_cycles(read, 0) - 1e-6


def test_lane_stride_is_the_words_between_neighbours_in_the_stored_array():
    from costmodel.microkernel import lane_stride

    c3 = workloads.conv2d("c3", C=8, K=16, H=7, W=7, R=3, S=3, padding=1, bits=32)
    weights, inputs = c3.tensor("Weights"), c3.tensor("Inputs")  # K x C x S x R; N x C x rows x columns
    assert [lane_stride(weights, d, c3.dims) for d in ("K", "C", "S", "R")] == [8 * 3 * 3, 3 * 3, 3, 1]
    assert lane_stride(inputs, "P", c3.dims) == 1 and lane_stride(inputs, "R", c3.dims) == 1
    assert lane_stride(inputs, "Q", c3.dims) == 7  # a row of the stored 7 x 7 input (its padding is not stored)
    g = workloads.matmul("g", M=8, N=32, K=16, bits=32)
    assert lane_stride(g.tensor("B"), "N", g.dims) == 1 and lane_stride(g.tensor("A"), "M", g.dims) == 16


def test_weights_read_in_place_along_the_lanes_are_gathered_and_priced_so():
    """A 3x3 convolution's block with lanes along K reads its weights, stored K x C x S x R, as vectors 72
    words a lane: kept out of every cache (no pack) the code gathers each vector lane by lane, a load per
    lane, and its DRAM lines are no stream; packed, they are panels of the block and nothing is gathered."""
    from costmodel.evaluate import access_counts
    from costmodel.microkernel import issue_cycles
    from costmodel.packing import copy_fill_cycles, gathered_inputs

    c3 = workloads.conv2d("c3", C=8, K=32, H=7, W=7, R=3, S=3, padding=1, bits=32)
    arch = _reg_arch(c3, cores=1)
    kernel, spec = kernel_level(arch), spec_of(arch)
    packed = Mapping((L(temporal={"C": 2}, order=("C",)), L(), L(), L(temporal={"K": 32, "C": 4, "Q": 7, "R": 3, "S": 3}),
                      L(spatial={"P": 7})))
    in_place = Mapping(tuple(L(lm.temporal, lm.spatial, lm.order, frozenset({"Weights"}) if 0 < i < 4 else lm.bypass)
                             for i, lm in enumerate(packed.levels)))
    blk = block(c3, packed.tile_extents(kernel, c3.dims), spec.lanes, spec.registers)
    assert blk.j == "K" and blk.lanes > 1
    assert gathered_inputs(c3, packed, arch, kernel, blk) == frozenset()
    assert gathered_inputs(c3, in_place, arch, kernel, blk) == {"Weights"}
    plain = issue_cycles(c3, in_place, kernel, spec)
    gathered = issue_cycles(c3, in_place, kernel, spec, frozenset({"Weights"}))
    assert gathered > plain
    cost = costmodel.evaluate(c3, arch, in_place)
    assert cost.compute_cycles == math.ceil(gathered + pack_cycles(c3, in_place, arch, kernel, spec.pack_cycles_per_word))
    accesses, _ = access_counts(c3, arch, in_place, {})
    stall = copy_fill_cycles(c3, arch, in_place, accesses, kernel, gathered=frozenset({"Weights"}))
    assert stall["DRAM"] > copy_fill_cycles(c3, arch, in_place, accesses, kernel).get("DRAM", 0.0)
    assert cost.cycles > costmodel.evaluate(c3, arch, packed).cycles


def test_weights_packed_without_panels_are_gathered_too_and_the_kernel_does_so():
    """A 7 x 7 1x1 convolution with lanes along K: blocks of 2 vectors (32 channels) do not tile the 80 of
    the tile, so the packed weights (80 x 16, C innermost) are no panel and the kernel reads each K vector
    16 words a lane (``ldg``): the model counts them gathered, as it does weights read in place; with 96
    channels (whole blocks) they are panels and nothing is gathered."""
    from costmodel.packing import gathered_inputs
    from targets.cpu import emit
    from targets.cpu.plan import make_plan

    def case(k):
        w = workloads.conv2d("c1", C=16, K=k, H=7, W=7, R=1, S=1, bits=32)
        arch = _reg_arch(w, cores=1)
        kernel, spec = kernel_level(arch), spec_of(arch)
        m = Mapping((L(), L(), L(), L(temporal={"K": k, "C": 16, "Q": 7}), L(spatial={"P": 7})))
        blk = block(w, m.tile_extents(kernel, w.dims), spec.lanes, spec.registers)
        plan = make_plan(w, m, arch, vector_bytes=64, registers=32)
        return w, arch, kernel, m, blk, plan

    w, arch, kernel, m, blk, plan = case(80)
    assert blk.j == "K" and 80 % (blk.nv * blk.lanes) and plan.packs["Weights"].panel is None
    assert gathered_inputs(w, m, arch, kernel, blk) == {"Weights"} and " = ldg_float32(" in emit(w, m, arch)
    w, arch, kernel, m, blk, plan = case(96)
    assert blk.j == "K" and plan.packs["Weights"].panel is not None
    assert gathered_inputs(w, m, arch, kernel, blk) == frozenset() and " = ldg_float32(" not in emit(w, m, arch)


@pytest.mark.parametrize("rows, factor", [(2, 8.0), (4, 1.0), (8, 2.0), (16, 1.0)])
def test_a_transposing_copy_costs_whole_register_columns(rows, factor):
    """A's panels (the block's rows, M innermost) transposed from A's rows: on an AVX-512 machine every column
    the copy writes costs 16 words however few rows hold data, so a 2-row panel costs 8 times its words and an
    8-row one twice; a 4-row panel's full blocks take the four-row path, at their words.  Without AVX-512 the
    copy goes word by word, at its words."""
    from dataclasses import replace

    from costmodel.packing import pack_cycles_by_tensor, transposed_copy_words

    w = workloads.matmul("g", M=64, N=64, K=64, bits=32)
    plain = _reg_arch(w, cores=1)
    avx512 = replace(plain, params={**plain.params, "isa": "avx512f"})
    kernel = kernel_level(plain)
    m = Mapping((L(), L(), L(temporal={"M": 64 // rows, "K": 2, "N": 4}, order=("N", "M", "K")), L(temporal={"K": 32}),
                 L(temporal={"M": rows}, spatial={"N": 16})))
    assert block(w, m.tile_extents(kernel, w.dims), 16, 32).mr == rows
    by_word = pack_cycles_by_tensor(w, m, plain, kernel, 0.5)
    by_square = pack_cycles_by_tensor(w, m, avx512, kernel, 0.5)
    assert by_square["A"] == pytest.approx(factor * by_word["A"])
    assert by_square["B"] == pytest.approx(by_word["B"])  # B's panels are read along its rows: no transpose
    # a run that is no whole number of squares: its last columns are still whole columns (4 rows: those
    # leave the four-row path)
    assert transposed_copy_words((4, 20), 0, 4, 1, 16) == 16 * 4 + 4 * 16
    assert transposed_copy_words((2, 20), 0, 2, 1, 16) == 20 * 16
