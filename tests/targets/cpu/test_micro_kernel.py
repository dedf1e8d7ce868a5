"""targets.cpu micro-kernels: register blocks sized to the vector registers, A/B packed as the panels the
micro-kernel reads, and every such kernel built, run and compared with NumPy."""

import random

import re

import numpy as np
import pytest

import costmodel
import workloads
from cosa.baselines.mapspace import MapSpace, random_mapping
from mappings import LevelMapping, Mapping
from workloads import LoopNest

from targets.cpu import compile_kernel, emit, make_plan, run
from targets.cpu.plan import register_tile
from targets.cpu.reference import random_inputs, reference

ARCH = costmodel.preset("cpu")


@pytest.mark.parametrize("rows", [1, 3, 6, 8, 14, 16, 28, 48, 64, 100])
@pytest.mark.parametrize("cols", [1, 8, 16, 24, 32, 48, 64, 256])
@pytest.mark.parametrize("lanes,registers", [(16, 32), (8, 32), (8, 16), (4, 16), (1, 16)])
def test_register_block_fits_the_register_file(rows, cols, lanes, registers):
    mr, nv = register_tile(rows, cols, lanes, registers)
    assert 1 <= mr <= rows and 1 <= nv <= 4
    assert mr * nv + nv + 1 <= registers  # accumulators, the B vectors, one broadcast
    if lanes == 1:
        assert nv == 1


def test_register_block_is_the_one_the_hardware_wants():
    assert register_tile(48, 64, 16, 32) == (6, 4)     # AVX-512 fp32: 6 x 64
    assert register_tile(28, 32, 16, 32) == (14, 2)    # AVX-512 fp32 on a 32-wide tile: 14 x 32
    assert register_tile(6, 16, 8, 16) == (6, 2)       # AVX2 fp32: 6 x 16
    assert register_tile(12, 32, 8, 32) == (6, 4)      # AVX-512 fp64: 6 x 32
    assert register_tile(8, 64, 16, 32) == (4, 4)      # 6 rows would leave a ragged block of 2


def _gemm(dtype_bits, m=48, n=64, k=40):
    return workloads.matmul(f"gemm{dtype_bits}", M=m, N=n, K=k, bits=dtype_bits)


def _panel_mapping():
    """48x64x40: L2 packs A (48x20) and B (20x64); the L1 tile 24 x 64 x 20 runs 6 x 4-vector blocks."""
    return Mapping((LevelMapping(temporal={"K": 2}), LevelMapping(), LevelMapping(temporal={"M": 2}, order=("M",)),
                    LevelMapping(temporal={"M": 24, "N": 4, "K": 20}, spatial={"N": 16})))


@pytest.mark.parametrize("bits", [32, 64])
def test_panels_are_packed_in_the_order_the_kernel_reads(bits):
    w = _gemm(bits)
    m = _panel_mapping()
    plan = make_plan(w, m, ARCH, vector_bytes=64, registers=32)
    lanes = 64 // (bits // 8)
    assert plan.kernel.lanes == lanes
    a, b = plan.packs["A"], plan.packs["B"]
    assert b.panel == (1, plan.kernel.nv * lanes)  # B: nv vectors of N per K step, contiguous
    assert a.panel == (0, plan.kernel.mr)          # A: mr rows per K step, contiguous
    src = emit(w, m, ARCH)
    assert "__builtin_prefetch" in src and "#pragma GCC unroll" in src
    r = run(w, m, ARCH, threads=2, repeat=1)
    assert r.verified, r.max_abs_err


def test_random_mappings_with_panels_verify():
    """Random valid mappings of a GEMM and a convolution: the ones whose packs become panels verify too."""
    panels = 0
    for w in (_gemm(32, 32, 48, 24), workloads.conv2d("conv", C=8, K=16, H=9, W=11, R=3, S=3, padding=1, bits=32),
              workloads.conv2d("conv1x1", C=8, K=16, H=8, W=32, R=1, S=1, bits=32)):
        rng = random.Random(7)
        space = MapSpace(w, ARCH)
        for _ in range(6):
            m = random_mapping(w, ARCH, rng, space=space)
            panels += sum(pk.panel is not None for pk in make_plan(w, m, ARCH, vector_bytes=64, registers=32)
                          .packs.values())
            k = compile_kernel(w, m, ARCH)
            arrays = random_inputs(w, k.plan.dtypes, k.plan.shapes, 0)
            ref = reference(w, arrays, k.plan.shapes, k.plan.compute_dtype)
            np.testing.assert_allclose(k(arrays, threads=2), ref, rtol=1e-4, atol=1e-4)
    assert panels > 0


def test_guarded_panel_pack_zero_fills_outside_the_tensor():
    """y[i, j] = sum_k x[i - 1, k] w[k, j] with x stored as 16 x 12: row -1 reads as zero in the A panels."""
    x = workloads.tensor("x", ["i - 1", "k"], bits=32, shape=[16, 12])
    wt = workloads.tensor("w", ["k", "j"], "weight", bits=32)
    y = workloads.tensor("y", ["i", "j"], "output", bits=32)
    w = LoopNest("shifted", {"i": 16, "j": 32, "k": 12}, (x, wt, y))
    m = Mapping((LevelMapping(), LevelMapping(), LevelMapping(temporal={"i": 2}, order=("i",)),
                 LevelMapping(temporal={"i": 8, "j": 2, "k": 12}, spatial={"j": 16})))
    plan = make_plan(w, m, ARCH, vector_bytes=64, registers=32)
    assert plan.packs["x"].guard and plan.packs["x"].panel is not None
    assert run(w, m, ARCH, threads=1, repeat=1).verified


# --- the register file as a level -------------------------------------------------------------

def _reg_arch(w):
    from targets.cpu.plan import arch_for

    return arch_for(w, ARCH, registers=(32, 64))


def test_register_level_holds_the_accumulators_and_frees_the_innermost_cache():
    w = _gemm(32)
    arch = _reg_arch(w)
    regs, l1 = arch.levels[-1], arch.levels[-2]
    assert [lv.name for lv in arch.levels] == ["DRAM", "L3", "L2", "L1", "Registers"]
    assert regs.holds == {"output"} and regs.capacity_bytes == 29 * 64
    assert regs.fanout == 4 * ARCH.levels[-1].fanout and regs.spatial_axes[0].dims == {"N"}
    assert l1.holds == {"weight"} and l1.fanout == 1  # B's panel; A streams from L2 as a BLAS's A panel does
    assert l1.capacity_bytes == ARCH.levels[-1].capacity_bytes // 2  # room for A, the C rows, prefetches
    assert arch.macs_per_cycle * regs.fanout == ARCH.macs_per_cycle * ARCH.levels[-1].fanout  # the same peak
    conv = workloads.conv2d("conv", C=8, K=16, H=9, W=11, R=3, S=3, padding=1, bits=32)
    conv_arch = _reg_arch(conv)
    assert conv_arch.levels[-2].holds == {"input", "weight"}  # the input row is a window, not a panel: both stay
    assert conv_arch.levels[-2].capacity_bytes == ARCH.levels[-1].capacity_bytes
    assert conv_arch.levels[-1].fanout == ARCH.levels[-1].fanout  # an 11-wide row fills one vector, not four
    one = workloads.conv2d("conv1x1", C=8, K=16, H=9, W=11, R=1, S=1, bits=32)
    assert _reg_arch(one).levels[-2].holds == {"input"}  # a 1x1 conv's input row is a panel; Weights stream


def test_register_tile_over_the_register_file_is_refused_naming_the_level():
    from mappings import MappingError

    w = _gemm(32)
    m = Mapping((LevelMapping(), LevelMapping(), LevelMapping(temporal={"K": 40}), LevelMapping(temporal={"M": 2}),
                 LevelMapping(temporal={"M": 24}, spatial={"N": 64})))
    with pytest.raises(MappingError, match="Registers"):
        make_plan(w, m, _reg_arch(w))


@pytest.mark.parametrize("bits", [32, 64])
def test_scheduled_mapping_on_the_register_level_runs_a_long_k_panel(bits):
    """The MIP's mapping onto the register level: the micro-kernel is the L1 tile with the register
    level's loops inside (K in registers), built, run and compared with NumPy."""
    from cosa.scheduler import schedule

    w = workloads.matmul("gemm", M=64, N=128, K=256, bits=bits)
    arch = _reg_arch(w)
    m = schedule(w, arch, time_limit_s=10, bound=False, seed=0).mapping
    plan = make_plan(w, m, arch, vector_bytes=64, registers=32)
    assert plan.inner_level == 3 and all(lv.level < 3 for lv in plan.loops)
    assert plan.kernel.extents == m.tile_extents(3, list(w.dims))
    assert plan.kernel.mr * plan.kernel.nv + plan.kernel.nv + 1 <= 32
    r = run(w, m, arch, threads=2, repeat=1)
    assert r.verified, r.max_abs_err


def test_a_1x1_convolutions_input_rows_are_panels():
    """Inputs[n, c, q + s, p + r] with R = S = 1: the row moves with P alone, so it is packed as panels."""
    w = workloads.conv2d("conv1x1", C=8, K=16, H=4, W=32, R=1, S=1, bits=32)
    m = Mapping((LevelMapping(), LevelMapping(), LevelMapping(temporal={"Q": 4, "C": 2}, order=("Q", "C")),
                 LevelMapping(temporal={"K": 16, "C": 4, "P": 2}, spatial={"P": 16})))
    plan = make_plan(w, m, ARCH, vector_bytes=64, registers=32)
    assert plan.kernel.j == "P" and plan.packs["Inputs"].panel is not None
    assert run(w, m, ARCH, threads=2, repeat=1).verified


@pytest.mark.parametrize("k,bits,lane_dim", [(24, 32, "K"), (32, 32, "K"), (8, 32, "P"), (24, 64, "P")])
def test_small_images_put_the_lanes_on_the_output_channels(k, bits, lane_dim):
    """A 7-wide image row fills 7 of 16 fp32 lanes; 24 or 32 output channels fill 75-100 %, so the lanes go
    along K (accumulated in a scratch copy of the output with K innermost, whole vectors, a ragged last one
    of 8, copied into the output after the nest); 8 channels, or fp64's 8 lanes (7 of 8 filled), keep them
    along the row, accumulated in place.  Each kernel verifies against NumPy, on one thread and two."""
    w = workloads.conv2d("c7", C=8, K=k, H=7, W=7, R=3, S=3, padding=1, bits=bits)
    m = Mapping((LevelMapping(), LevelMapping(), LevelMapping(),
                 LevelMapping(temporal={"K": k, "C": 8, "R": 3, "S": 3, "P": 7, "Q": 7},
                              order=("K", "P", "Q", "C", "R", "S"))))
    plan = make_plan(w, m, ARCH, vector_bytes=64, registers=32)
    assert plan.kernel.j == lane_dim and plan.kernel.lanes == 64 // (bits // 8)
    assert plan.out_scratch == (1 if lane_dim == "K" else None)   # Outputs[N, K, Q, P]: K's axis innermost
    src = emit(w, m, ARCH)
    assert "ldgo(t" not in src and "stgo(t" not in src   # the calls, not the helpers: no lane-by-lane moves
    assert ("*acc = " in src and "] = acc[" in src) == (lane_dim == "K")
    assert run(w, m, ARCH, threads=1, repeat=1).verified
    m2 = Mapping((LevelMapping(), LevelMapping(spatial={"P": 7}), LevelMapping(),
                  LevelMapping(temporal={"K": k, "C": 8, "R": 3, "S": 3, "Q": 7}, order=("K", "Q", "C", "R", "S"))))
    assert run(w, m2, ARCH, threads=2, repeat=1).verified   # two threads fill disjoint parts of the scratch
    src2 = emit(w, m2, ARCH)
    if lane_dim == "K":  # ... and, after a barrier, copy disjoint parts of it into the output, in the region
        copy = src2.index("] = acc[")
        assert src2.rindex("#pragma omp barrier", 0, copy) < src2.rindex("#pragma omp for schedule(static)", 0, copy)
        assert src2.index("free(acc);") > copy and src2.count("#pragma omp parallel") == 1


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("outer", [{}, {"C": 2}])
@pytest.mark.parametrize("stage", [None, 2048, 0, "unaliased"])
def test_weights_packed_by_a_blocked_transpose_verify(bits, outer, stage, monkeypatch):
    """Output-channel lanes on a 7 x 7 image: the weights (K x C x R x S) go into panels of K innermost,
    copied as a transpose of K rows by C*R*S runs in register-sized squares (``trp_``), with a run that is
    not a whole number of squares (180 or 90 words) and, split by a DRAM loop, an origin inside the
    row; the rows staged whole (``emit_pack.STAGE_BYTES``: the default, one chunk of the run; 2048 bytes,
    chunks of 16 words, the next one prefetched; 0, transposed from the source), or, as the generator
    decides for rows 720 or 1440 bytes apart (``STAGE_ROWS_PER_OFFSET``), not staged; the kernel matches
    NumPy."""
    from targets.cpu import emit_pack
    from targets.cpu.plan import arch_for

    if stage != "unaliased":  # stage these rows as if they fell on few page offsets
        monkeypatch.setattr(emit_pack, "STAGE_ROWS_PER_OFFSET", 1)
    if stage not in (None, "unaliased"):
        monkeypatch.setattr(emit_pack, "STAGE_BYTES", stage)

    w = workloads.conv2d("conv", C=20, K=32, H=7, W=7, R=3, S=3, padding=1, bits=bits)
    arch = arch_for(w, ARCH, registers=(32, 64))
    c_l2 = 2 if not outer else 1
    m = Mapping((LevelMapping(temporal=outer, order=tuple(outer)), LevelMapping(),
                 LevelMapping(temporal={"C": c_l2}, order=("C",)),
                 LevelMapping(temporal={"K": 32, "C": 10, "Q": 7, "R": 3, "S": 3}), LevelMapping(spatial={"P": 7})))
    k = compile_kernel(w, m, arch)
    pack = k.plan.packs["Weights"]
    assert pack.panel == (0, 1024 // bits) and pack.box[1] == (10 if outer else 20)
    if stage in (0, "unaliased"):
        assert f"trp_float{bits}(t" in k.source and "stage" not in k.source
    else:
        assert f"trp_float{bits}(stage" in k.source and "memcpy(stage" in k.source and "__builtin_prefetch" in k.source
        chunk = int(re.search(r"x0 \+= (\d+)\)", k.source).group(1))
        assert chunk == (16 if stage else -(-pack.box[1] * 9 // (512 // bits)) * (512 // bits))
    arrays = random_inputs(w, k.plan.dtypes, k.plan.input_shapes, 0)
    ref = reference(w, k.prepared(arrays), k.plan.shapes, k.plan.compute_dtype)
    np.testing.assert_allclose(k(arrays, threads=1), ref, rtol=1e-4, atol=1e-4)


def test_aliased_rows_counts_the_rows_on_one_page_offset():
    """Rows 18 KB apart (512 x 3 x 3 float32 weights rows) fall on two 4 KiB offsets, 8 of a 16-row square on
    each; rows 4 KB apart all on one; 2304 bytes apart (64 x 3 x 3) every row on its own offset."""
    from targets.cpu.emit_pack import aliased_rows

    assert aliased_rows(18432, 16) == 8 and aliased_rows(4096, 16) == 16 and aliased_rows(2304, 16) == 1
    assert aliased_rows(9216, 16) == 4 and aliased_rows(36864, 8) == 8 and aliased_rows(512, 16) == 2


def test_a_register_tile_past_the_register_file_is_refused_naming_the_level_and_the_registers():
    """8 rows x 4 vectors of accumulators is 32 registers; the register level holds 29 (three for the
    operands): the refusal names the level and counts registers, not only bytes."""
    from cosa.cli_targets import cpu_schedule_arch
    from mappings import LevelMapping as L
    from mappings import Mapping, MappingError
    from mappings.validate import validate

    w = workloads.matmul("g", M=64, N=64, K=64, bits=32)
    arch = cpu_schedule_arch(w, costmodel.preset("cpu"))
    m = Mapping((L(), L(spatial={"M": 8}), L(temporal={"K": 64}), L(), L(temporal={"M": 8}, spatial={"N": 64})))
    with pytest.raises(MappingError) as err:
        validate(m, w, arch)
    text = str(err.value)
    assert "Registers" in text and "32 vector registers of 64 bytes" in text and "29 of them" in text
