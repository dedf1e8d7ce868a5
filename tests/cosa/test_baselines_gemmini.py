"""gemmini-default on the gemmini preset: the vendor's tiles become a valid Mapping in the vendor's loop order."""

import pytest

from cosa import SchedulingError
from cosa.baselines import gemmini_default, gemmini_default_mapping
from cosa.baselines.gemmini_mapping import tile_extent
from costmodel import evaluate, preset
from costmodel.gemmini_library_tiles import GemminiTileConfig, tiled_conv_auto_tiles, tiled_matmul_auto_tiles
from mappings import validate, violations
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
    # a 1x1 stride-2 layer on an even image takes the library's downsample path (half the input rows/cols)
    expected = tiled_conv_auto_tiles(1, 14, 14, 128, 64, 1, 1, config, stride=2, downsample=True)
    assert s.extra["tile_args"] == expected.to_dict() and s.extra["library_call"] == "tiled_conv_auto"
    s3 = gemmini_default(conv2d("s2", C=64, K=64, H=28, W=28, R=3, S=3, stride=2, padding=1), WS)
    assert s3.extra["tile_args"] == tiled_conv_auto_tiles(1, 14, 14, 64, 64, 3, 3, config, stride=2).to_dict()


def test_downsample_footprint_changes_the_tiles_as_in_the_library():
    # res4a_branch1: 28x28x512 -> 14x14x1024, stride 2: with the halved input footprint all 512 input
    # channels fit (the recorded gemmini.h stream of res5a_branch1 uses the same rule)
    w = conv2d("res4a_branch1", C=512, K=1024, H=28, W=28, R=1, S=1, stride=2)
    s = gemmini_default(w, WS)
    assert s.extra["tile_args"]["kchs"] == 512
    assert tiled_conv_auto_tiles(1, 14, 14, 1024, 512, 1, 1, stride=2).kchs == 160
    odd = gemmini_default(conv2d("odd", C=512, K=1024, H=27, W=27, R=1, S=1, stride=2), WS)
    assert odd.extra["tile_args"]["kchs"] == 160  # an odd image has no downsample path


@pytest.mark.parametrize("arch", [WS, OS], ids=["ws", "os"])
def test_pointwise_conv_runs_as_the_library_matmul(arch):
    # resnet50.c: 1x1 stride-1 convolutions go through tiled_matmul_nn_auto on the [N*H*W, C] image
    w = conv2d("res3a_branch2a", C=256, K=128, P=56, Q=56, R=1, S=1)
    s = gemmini_default(w, arch)
    dataflow = "ws" if arch is WS else "os"
    tiles = tiled_matmul_auto_tiles(56 * 56, 128, 256, GemminiTileConfig.from_arch(arch), dataflow)
    assert s.extra["kind"] == "conv-as-matmul" and s.extra["library_call"] == "tiled_matmul_nn_auto"
    assert s.extra["tile_args"] == tiles.to_dict()
    ext = s.extra["tile_extents"]
    rows = ext["N"] * ext["Q"] * ext["P"]
    assert rows <= tiles.tile_I * 16 and ext["K"] <= tiles.tile_J * 16 and ext["C"] <= tiles.tile_K * 16
    dram, spad, acc, regs = s.mapping.levels
    assert dram.loop_order(list(w.dims))[:5] == ("N", "Q", "P", "K", "C")
    if arch is WS:
        assert set(acc.spatial) == {"C", "K"} and set(regs.temporal) <= {"N", "Q", "P"}
    else:
        assert set(acc.spatial) == {"P", "K"} and set(regs.temporal) == {"C"}
    validate(s.mapping, w, arch)
    # a padded 1x1 layer is not a matmul for the library
    assert gemmini_default(conv2d("p", C=16, K=16, P=8, Q=8, R=1, S=1, padding=1), WS).extra["kind"] == "conv"


def test_pointwise_tiles_equal_the_recorded_library_stream():
    # the same tiles as gemmini.vendor's stream for this layer (checked there against the real gemmini.h)
    import gemmini.vendor as V
    from gemmini.vendor import calls

    s = gemmini_default(conv2d("pw", C=32, K=192, P=28, Q=28, R=1, S=1), WS)
    first_bounds = next(c for c in V.stream(calls.conv("pw", 1, 28, 28, 32, 192, 1)) if c[0] == 9)
    I, J, K = first_bounds[2] & 0xFFFF, (first_bounds[2] >> 16) & 0xFFFF, first_bounds[2] >> 32
    assert (I, J, K) == (s.extra["tile_args"]["tile_I"], s.extra["tile_args"]["tile_J"],
                         s.extra["tile_args"]["tile_K"])


def test_row_extents_fill_the_fastest_dims_first():
    from cosa.baselines.gemmini_mapping import row_extents

    assert row_extents({"N": 1, "Q": 56, "P": 56}, 80) == {"P": 56, "Q": 1, "N": 1}
    assert row_extents({"N": 2, "Q": 7, "P": 7}, 112) == {"P": 7, "Q": 7, "N": 2}
    assert row_extents({"N": 4, "Q": 14, "P": 14}, 400) == {"P": 14, "Q": 14, "N": 2}
    assert row_extents({"N": 1, "Q": 28, "P": 28}, 500) == {"P": 28, "Q": 14, "N": 1}


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
    # a grouped layer's channel index G*Cg + C is no window: the preset unrolls C and K, and the library's
    # per-group tiles map onto it
    grouped = conv2d("g", C=32, K=64, P=8, Q=8, R=3, S=3, padding=1, groups=4)
    g = gemmini_default(grouped, WS)
    assert g.extra["kind"] == "grouped" and not violations(g.mapping, grouped, WS)
    with pytest.raises(SchedulingError, match="weight-stationary only"):
        gemmini_default(depthwise_conv2d("dw", C=16, P=8, Q=8, R=3, S=3), OS)
    with pytest.raises(SchedulingError, match="matmuls"):
        gemmini_default(einsum("ij,jk,kl->il", {"i": 4, "j": 4, "k": 4, "l": 4}), WS)
    with pytest.raises(SchedulingError, match="gemmini preset"):
        gemmini_default(matmul(M=16, N=16, K=16), preset("simba"))


def test_depthwise_takes_the_library_dw_tiles_one_channel_at_a_time():
    import gemmini.vendor as V
    from gemmini.vendor import calls

    w = depthwise_conv2d("b4_dw", C=144, H=56, W=56, R=3, S=3, stride=2, padding=1)
    s = gemmini_default(w, WS)
    assert s.extra["kind"] == "depthwise" and s.extra["library_call"] == "tiled_conv_dw_auto"
    assert s.extra["tile_args"] == tiled_conv_auto_tiles(1, 28, 28, 1, 1, 3, 3, stride=2).to_dict()
    dram = s.mapping.levels[0]
    assert dram.loop_order(list(w.dims))[:4] == ("N", "Q", "P", "G") and dram.temporal["G"] == 144
    assert s.mapping.levels[2].spatial == {} or set(s.mapping.levels[2].spatial.values()) == {1}
    validate(s.mapping, w, WS)
    # the library's stream for this layer starts its first tile with the same batches, porows, pocols
    cfg2 = next(c for c in V.stream(calls.depthwise("dw", 1, 56, 56, 144, 3, stride=2, padding=1)) if c[0] == 17)
    args = s.extra["tile_args"]
    assert ((cfg2[2] >> 48) & 0xFFFF, (cfg2[2] >> 32) & 0xFFFF, (cfg2[2] >> 16) & 0xFFFF) == (
        args["batches"], args["porows"], args["pocols"])


def test_grouped_pointwise_takes_one_library_conv_call_per_group():
    """A grouped 1x1 layer (ShuffleNet's) is not a matmul for the library: resnet50.c / mobilenet.c style,
    one tiled_conv_stride_auto per group on the group's channels, G walked outermost at DRAM."""
    w = conv2d("gconv1", C=240, K=60, H=14, W=14, groups=3)  # per group: 80 -> 20 channels
    s = gemmini_default(w, WS)
    validate(s.mapping, w, WS)
    assert s.extra["kind"] == "grouped" and s.extra["library_call"] == "tiled_conv_stride_auto per group"
    assert s.extra["tile_args"] == tiled_conv_auto_tiles(1, 14, 14, 20, 80, 1, 1).to_dict()
    dram = s.mapping.levels[0]
    assert dram.loop_order(list(w.dims))[0] == "G" and dram.temporal["G"] == 3


def test_large_fc_tiles_shrink_until_they_fit():
    """A 1000-way FC on a long input: 1000 = 8 x 125 columns fill DIM-wide blocks only 10 wide, so the
    vendor's padded tile overflows as exact divisor tiles; its reduction tile shrinks until it fits."""
    w = matmul("fc", M=1, N=1000, K=25088)
    s = gemmini_default(w, WS)
    assert not violations(s.mapping, w, WS)
    assert set(s.extra["shrunk"]) == {"K"}
    before, after = s.extra["shrunk"]["K"]
    assert after < before and 25088 % after == 0 and after == s.extra["tile_extents"]["K"]
    assert evaluate(w, WS, s.mapping).cycles > 0


def test_output_stationary_fc_shrinks_its_accumulator_tile():
    """OS on 1001 = 7 x 11 x 13 output columns: the C tile overflows the accumulator as exact divisors; an
    output dim shrinks (never the reduction, which the accumulator does not hold)."""
    w = matmul("fc_os", M=100, N=1001, K=960)
    s = gemmini_default(w, OS)
    assert not violations(s.mapping, w, OS)
    assert s.extra["shrunk"] and set(s.extra["shrunk"]) <= {"M", "N"}
