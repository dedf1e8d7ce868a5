"""The vendor tile heuristics against cases worked by hand from the rules in reference/gemmini.md."""

import math

import pytest
from hypothesis import given, settings, strategies as st

from costmodel.gemmini_library_tiles import (GemminiTileConfig, LibraryTileError, conv_rows, matmul_acc_rows,
                                             matmul_spad_rows, tiled_conv_auto_tiles, tiled_matmul_auto_tiles)
from workloads.divisors import largest_divisor_at_most

DEFAULT = GemminiTileConfig()  # DIM 16, 4 banks x 4096 rows, 1024 accumulator rows


def test_config_from_preset_parameters():
    # 256 KiB / 16 B rows = 16384 rows over 4 banks; 64 KiB / (16 * 4 B) = 1024 accumulator rows
    assert GemminiTileConfig.from_params(16, 256, 64, 4, 2) == DEFAULT
    small = GemminiTileConfig.from_params(dim=4, scratchpad_kib=1, accumulator_kib=0.5, sp_banks=2)
    assert (small.dim, small.bank_num, small.bank_rows, small.acc_rows) == (4, 2, 128, 32)


def test_matmul_ws_512_cube():
    # WS: SP = 8192 rows, ACC = 512 rows; start tI = tJ = min(32, isqrt(512/16 = 32) = 5),
    # tK = min(32, (16384/4/16 = 256) // 5 = 51) = 32.  Pass 1: tJ 6 fits (acc 480, spad 5632);
    # tI 6 needs acc 576 > 512; tK 33 > Kp.  Pass 2: tJ 7 needs acc 560.  Done.
    assert tiled_matmul_auto_tiles(512, 512, 512, DEFAULT, "ws").to_dict() == {"tile_I": 5, "tile_J": 6, "tile_K": 32}


def test_matmul_os_512_cube():
    # OS: SP = 16384, ACC = 1024 rows; tI = tJ = isqrt(64) = 8; tK = min(32, 512 // 8 = 64) = 32;
    # tJ 9 or tI 9 needs acc 1152 > 1024; tK 33 > Kp.
    assert tiled_matmul_auto_tiles(512, 512, 512, DEFAULT, "os").to_dict() == {"tile_I": 8, "tile_J": 8, "tile_K": 32}


def test_matmul_os_start_k_uses_half_the_scratchpad():
    # OS, Kp = 256: tK starts at (16384/2/16 = 512) // 8 = 64, which exactly fills the scratchpad
    # ((8*64 + 64*8) * 16 = 16384 rows); tK 65 would need 16640.
    tiles = tiled_matmul_auto_tiles(4096, 4096, 4096, DEFAULT, "os")
    assert (tiles.tile_I, tiles.tile_J, tiles.tile_K) == (8, 8, 64)
    assert matmul_spad_rows(8, 8, 64, 16) == 16384


def test_matmul_ws_grows_k_one_block_per_pass():
    # I = J = 64 (4 blocks), K = 4096 (256 blocks): start (4, 4, 51); I and J are whole, tK grows
    # while (4*tK + tK*4) * 16 <= 8192, i.e. up to 64.
    assert tiled_matmul_auto_tiles(64, 64, 4096, DEFAULT, "ws").to_dict() == {"tile_I": 4, "tile_J": 4, "tile_K": 64}


def test_matmul_ws_ragged_sizes_pad_to_blocks():
    # Ip, Jp, Kp = 7, 3, 2; start (5, 3, 2); pass 1: tI 6 (acc 288); pass 2: tI 7 (acc 336); pass 3: none.
    assert tiled_matmul_auto_tiles(100, 40, 30, DEFAULT, "ws").to_dict() == {"tile_I": 7, "tile_J": 3, "tile_K": 2}


def test_matmul_tiny_config():
    # DIM 4, SP = 2*16/2 = 16 rows, ACC = 8 rows: max tile i/j = isqrt(8/4) = 1, max tile k = (16/2/4) // 1 = 2;
    # (1, 1, 2) uses 16 spad rows; every growth needs 24.
    config = GemminiTileConfig(dim=4, bank_num=2, bank_rows=16, acc_rows=16)
    assert tiled_matmul_auto_tiles(16, 16, 16, config, "ws").to_dict() == {"tile_I": 1, "tile_J": 1, "tile_K": 2}


def test_conv_tiny_config_hand_trace():
    # DIM 4, SP/2 = 32 rows, ACC/2 = 16 rows; layer: 1 image, 4x4 output, 8 out ch, 4 in ch, 3x3, stride 1.
    # args [b, porows, pocols, pochs, krows, kcols, kchs] = [1, 4, 4, 8, 3, 3, 4]: spad 36 + 72, acc 32.
    # shrink: pochs 8 -> 4 (pocols 4 <= DIM with porows > 1 is skipped); porows 4 -> 3; pochs 4 -> 1
    # (a multiple of DIM drops by DIM, floored at 1); kchs 4 -> 1; porows 3 -> 2; krows 3 -> 2:
    # [1, 2, 4, 1, 2, 3, 1] with spad 18 + 6 = 24, acc 8.  pocols cannot grow (4 is the layer).
    # passes: porows 3 (spad 30, acc 12), pochs 2; then pochs 3; then pochs 4; pochs 5 needs acc 24.
    config = GemminiTileConfig(dim=4, bank_num=1, bank_rows=64, acc_rows=32)
    tiles = tiled_conv_auto_tiles(1, 4, 4, 8, 4, 3, 3, config)
    assert tiles.to_dict() == {"batches": 1, "porows": 3, "pocols": 4, "pochs": 4, "krows": 2, "kcols": 3, "kchs": 1}
    assert conv_rows([1, 3, 4, 4, 2, 3, 1], config) == (24 + 6, 12)


def test_conv_footprint_rows_formula():
    # stride 2, dilation 2, DIM 16: orows = 5, irows = 5*2 + (3 + 1*2) - 1 = 14, icols = 6*2 + 5 - 1 = 16;
    # A = ceil(20/16) * 2 * 14 * 16 = 896; B = ceil(33/16) * 3 * 3 * 20 = 540; C = 3 * 2 * 5 * 6 = 180.
    assert conv_rows([2, 5, 6, 33, 3, 3, 20], DEFAULT, stride=2, kernel_dilation=2) == (896 + 540, 180)


def test_conv_whole_layer_when_it_fits():
    # 1x1 conv, 8x8 output, 16 -> 16 channels: spad 64 + 16, acc 64: nothing to shrink.
    tiles = tiled_conv_auto_tiles(1, 8, 8, 16, 16, 1, 1, DEFAULT)
    assert tiles.to_dict() == {"batches": 1, "porows": 8, "pocols": 8, "pochs": 16, "krows": 1, "kcols": 1, "kchs": 16}


@settings(max_examples=40, deadline=None)
@given(I=st.integers(1, 3000), J=st.integers(1, 3000), K=st.integers(1, 3000), dataflow=st.sampled_from(["ws", "os"]))
def test_matmul_tiles_fit_and_are_maximal(I, J, K, dataflow):
    dim = 16
    tiles = tiled_matmul_auto_tiles(I, J, K, DEFAULT, dataflow)
    sp = 16384 // (2 if dataflow == "ws" else 1)
    acc = 1024 // (2 if dataflow == "ws" else 1)
    ti, tj, tk = tiles.tile_I, tiles.tile_J, tiles.tile_K
    assert 1 <= ti <= math.ceil(I / dim) and 1 <= tj <= math.ceil(J / dim) and 1 <= tk <= math.ceil(K / dim)
    assert matmul_spad_rows(ti, tj, tk, dim) <= sp and matmul_acc_rows(ti, tj, dim) <= acc
    # the final pass changed nothing: no single block more fits
    assert tj == math.ceil(J / dim) or matmul_spad_rows(ti, tj + 1, tk, dim) > sp or matmul_acc_rows(ti, tj + 1, dim) > acc
    assert tk == math.ceil(K / dim) or matmul_spad_rows(ti, tj, tk + 1, dim) > sp


@settings(max_examples=30, deadline=None)
@given(b=st.integers(1, 4), out=st.integers(1, 60), och=st.integers(1, 600), ich=st.integers(1, 600),
       k=st.sampled_from([1, 3, 5, 7]), stride=st.sampled_from([1, 2]))
def test_conv_tiles_fit_and_stay_within_the_layer(b, out, och, ich, k, stride):
    tiles = tiled_conv_auto_tiles(b, out, out, och, ich, k, k, DEFAULT, stride=stride)
    args = [tiles.batches, tiles.porows, tiles.pocols, tiles.pochs, tiles.krows, tiles.kcols, tiles.kchs]
    assert all(1 <= a <= m for a, m in zip(args, [b, out, out, och, k, k, ich]))
    spad, acc = conv_rows(args, DEFAULT, stride=stride)
    assert spad <= 8192 and acc <= 512
    for i, m in enumerate([b, out, out, och, k, k, ich]):  # maximal: no argument can grow by one
        grown = list(args)
        grown[i] += 1
        if grown[i] <= m:
            s2, a2 = conv_rows(grown, DEFAULT, stride=stride)
            assert s2 > 8192 or a2 > 512


def test_largest_divisor_at_most():
    assert largest_divisor_at_most(3136, 80) == 64
    assert largest_divisor_at_most(100, 112) == 100
    assert largest_divisor_at_most(49, 16) == 7
    assert largest_divisor_at_most(13, 12) == 1


def test_bad_arguments_raise_library_tile_errors():
    with pytest.raises(LibraryTileError, match="dataflow"):
        tiled_matmul_auto_tiles(16, 16, 16, DEFAULT, "rs")
    with pytest.raises(LibraryTileError, match="positive integer"):
        tiled_matmul_auto_tiles(0, 16, 16)
    with pytest.raises(LibraryTileError, match="out_channels"):
        tiled_conv_auto_tiles(1, 4, 4, -1, 4, 3)
    with pytest.raises(LibraryTileError, match="overflows"):
        tiled_conv_auto_tiles(1, 4, 4, 4, 4, 3, 3, GemminiTileConfig(dim=4, bank_num=1, bank_rows=2, acc_rows=2))
    with pytest.raises(LibraryTileError, match="bank_rows"):
        GemminiTileConfig(bank_rows=0)
