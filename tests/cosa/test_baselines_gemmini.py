"""gemmini-default on the gemmini preset: the vendor's tiles become a valid Mapping in the vendor's loop order."""

import pytest

from costmodel import evaluate, preset
from cosa import SchedulingError
from cosa.baselines import gemmini_default, gemmini_default_mapping, tiled_conv_auto_tiles, tiled_matmul_auto_tiles
from cosa.baselines.gemmini_default import GemminiTileConfig, tile_extent
from mappings import validate
from workloads import conv2d, depthwise_conv2d, einsum, matmul

WS = preset("gemmini")
OS = preset("gemmini", dataflow="os")


def test_matmul_ws_mapping_follows_the_vendor_tiles():
    w = matmul("mm", M=512, N=512, K=512)
    s = gemmini_default(w, WS)
    assert s.scheduler == "gemmini-default" and s.stats.solver == "heuristic" and s.stats.evaluated == 1
    assert s.extra["tile_args"] == {"tile_I": 5, "tile_J": 6, "tile_K": 32}
    # 5 blocks = 80 rows -> the largest divisor of 512 <= 80 is 64; 6 blocks = 96 -> 64; 32 blocks = 512
    assert s.extra["tile_extents"] == {"M": 64, "N": 64, "K": 512}
    dram, spad, acc, regs = s.mapping.levels
    assert dram.temporal == {"M": 8, "N": 8} and dram.order[:3] == ("M", "N", "K")
    assert spad.temporal == {} and spad.spatial == {}
    assert acc.spatial == {"K": 16, "N": 16} and acc.temporal == {"K": 32, "N": 4} and acc.order == ("N", "K")
    assert regs.temporal == {"M": 64}
    validate(s.mapping, w, WS)
    assert s.cost == evaluate(w, WS, s.mapping)


def test_matmul_os_mapping_accumulates_k_in_the_pes():
    w = matmul("mm", M=512, N=512, K=512)
    s = gemmini_default(w, OS)
    assert s.extra["tile_args"] == {"tile_I": 8, "tile_J": 8, "tile_K": 32}
    assert s.extra["dataflow"] == "os"
    dram, spad, acc, regs = s.mapping.levels
    assert dram.temporal == {"M": 4, "N": 4}
    assert acc.spatial == {"M": 16, "N": 16} and acc.temporal == {"M": 8, "N": 8} and acc.order == ("M", "N")
    assert regs.temporal == {"K": 512}
    validate(s.mapping, w, OS)


def test_ragged_matmul_uses_exact_divisors():
    w = matmul("ragged", M=100, N=40, K=30)
    mapping, extra = gemmini_default_mapping(w, WS)
    assert extra["tile_args"] == tiled_matmul_auto_tiles(100, 40, 30).to_dict()
    # vendor: 7, 3, 2 blocks (112, 48, 32 padded) -> the whole 100, 40, 30 dims
    assert extra["tile_extents"] == {"M": 100, "N": 40, "K": 30}
    assert mapping.levels[2].spatial == {"K": 15, "N": 10}  # largest divisors <= DIM
    assert all(mapping.factor(d) == b for d, b in w.dims.items())


def test_tile_extent_keeps_whole_array_blocks():
    # a vendor tile of 5 blocks (80) over N = 2304: 72 divides 2304 but only 12 of its factors fit the
    # 16 columns; 64 keeps the array full, as the vendor's padded 16-wide blocks do
    assert tile_extent(2304, 80, 16, on_array=True) == 64
    assert tile_extent(2304, 80, 16, on_array=False) == 72
    assert tile_extent(100, 112, 16, on_array=True) == 100  # no multiple of 16 divides 100: 10 columns at best
    assert tile_extent(3136, 80, 16, on_array=False) == 64
    assert tile_extent(7, 16, 16, on_array=True) == 7


def test_bert_qkv_projection_fills_the_array():
    w = matmul("qkv", M=128, N=2304, K=768)
    s = gemmini_default(w, WS)
    assert s.extra["tile_args"] == {"tile_I": 5, "tile_J": 5, "tile_K": 48}
    assert s.extra["tile_extents"] == {"M": 64, "N": 64, "K": 768}
    assert s.mapping.levels[2].spatial == {"K": 16, "N": 16}


def test_matmul_is_recognised_structurally_with_batch_outermost():
    w = einsum("bik,bkj->bij", {"b": 3, "i": 32, "j": 48, "k": 64}, name="bmm")
    s = gemmini_default(w, WS)
    assert s.extra["kind"] == "matmul"
    assert s.mapping.levels[0].order[0] == "b" and s.mapping.levels[0].temporal["b"] == 3
    validate(s.mapping, w, WS)


def test_conv_mapping_walks_tiles_in_the_vendor_order():
    w = conv2d("res3x3", C=64, K=64, P=56, Q=56, R=3, S=3, padding=1)
    s = gemmini_default(w, WS)
    b = w.dims
    assert s.extra["tile_args"] == tiled_conv_auto_tiles(1, 56, 56, 64, 64, 3, 3).to_dict()
    args = s.extra["tile_args"]
    ext = s.extra["tile_extents"]
    for name, dim in (("batches", "N"), ("porows", "Q"), ("pocols", "P"), ("pochs", "K"), ("krows", "S"),
                      ("kcols", "R"), ("kchs", "C")):
        assert ext[dim] == tile_extent(b[dim], args[name], 16, dim in ("C", "K"))
    dram, spad, acc, regs = s.mapping.levels
    assert dram.loop_order(list(b)) == ("N", "Q", "P", "K", "S", "R", "C")
    assert acc.order == ("K", "S", "R", "C") and set(acc.spatial) <= {"C", "K"}
    assert set(regs.temporal) <= {"N", "Q", "P"}
    validate(s.mapping, w, WS)


def test_strided_conv_passes_its_stride_to_the_heuristic():
    w = conv2d("down", C=64, K=128, H=28, W=28, R=1, S=1, stride=2)
    s = gemmini_default(w, WS)
    config = GemminiTileConfig.from_arch(WS)
    expected = tiled_conv_auto_tiles(1, 14, 14, 128, 64, 1, 1, config, stride=2)
    assert s.extra["tile_args"] == expected.to_dict()


def test_small_preset_parameters_reach_the_heuristic():
    small = preset("gemmini", dim=4, scratchpad_kib=1, accumulator_kib=1)
    config = GemminiTileConfig.from_arch(small)
    assert (config.dim, config.bank_num, config.bank_rows, config.acc_rows) == (4, 4, 64, 64)
    w = matmul("m", M=32, N=32, K=32)
    s = gemmini_default(w, small)
    assert s.extra["tile_args"] == tiled_matmul_auto_tiles(32, 32, 32, config).to_dict()
    validate(s.mapping, w, small)


def test_unsupported_workloads_and_archs_raise_scheduling_errors():
    with pytest.raises(SchedulingError, match="weight-stationary only"):
        gemmini_default(conv2d("c", C=16, K=16, P=8, Q=8, R=3, S=3), OS)
    with pytest.raises(SchedulingError, match="matmuls"):
        gemmini_default(depthwise_conv2d("dw", C=16, P=8, Q=8, R=3, S=3), WS)
    with pytest.raises(SchedulingError, match="matmuls"):
        gemmini_default(einsum("ij,jk,kl->il", {"i": 4, "j": 4, "k": 4, "l": 4}), WS)
    with pytest.raises(SchedulingError, match="gemmini preset"):
        gemmini_default(matmul(M=16, N=16, K=16), preset("simba"))
