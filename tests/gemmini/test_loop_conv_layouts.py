"""LOOP_CONV_WS in both encodings: gemmini.h 180c468's (rectangular images) and Gemmini f13847e's square-image
words (``GemminiConfig.loop_conv_layout``): bit positions, round trips, refusals, and the same convolutions
bit-exact on the functional model and equally timed in either encoding."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_loops import CONV_CASES, conv_case, run_c

from gemmini import isa, isa_loops as L, loop_commands as LC
from gemmini.config import DEFAULT_CONFIG, GemminiConfig
from gemmini.errors import IsaError, SimulationError
from gemmini.sim import timing
from gemmini.sim.loops import expand

OLD = dataclasses.replace(DEFAULT_CONFIG, loop_conv_layout="f13847e")
SQUARE = ("3x3 padded, one loop", "3x3 stride 2, kernel split", "1x1", "depthwise channel, 3 pixels per row",
          "3x3 then 3x3/2 max-pool")
ARGS = dict(batch_size=2, in_row_dim=9, in_col_dim=9, in_channels=5, out_channels=6, out_row_dim=5, out_col_dim=5,
            pool_out_row_dim=3, pool_out_col_dim=3, stride=2, padding=1, kernel_dim=3, kernel_dilation=1, pool_size=3,
            pool_stride=2, pool_padding=1, batches=1, porows=3, pocols=3, pochs=6, krows=3, kcols=3, kchs=5, lpad=1,
            rpad=0, upad=1, dpad=2, plpad=1, prpad=0, pupad=1, pdpad=0, orows=5, ocols=5, weights=0x100,
            output=0x200, bias=0x300, input=0x400, activation=1, in_stride=5, weight_stride=6, out_stride=6,
            max_pixels_per_row=1, a_spad_id=1)


def test_f13847e_words_are_gemmini_f13847e_loopconv_decode():
    cmds = LC.loop_conv_ws(**ARGS, config=OLD)
    assert [c.funct for c in cmds] == [16, 17, 18, 19, 20, 21, 15]
    # config_1: rs1 as 180c468; rs2 out_dim [15:0] pool_out_dim [31:16] stride [47:32] padding [63:48]
    assert cmds[0].rs1 == (6 << 48) | (5 << 32) | (9 << 16) | 2
    assert cmds[0].rs2 == (1 << 48) | (2 << 32) | (3 << 16) | 5
    # config_2: rs1 pool_padding [15:0] pool_stride [31:16] pool_size [47:32] kernel_dim [63:48]
    assert cmds[1].rs1 == (3 << 48) | (3 << 32) | (2 << 16) | 1
    assert cmds[1].rs2 == (1 << 48) | (3 << 32) | (3 << 16) | 6
    # config_3: rs2 plpad [15:0] dpad [31:16] upad [47:32] rpad [63:48]
    assert cmds[2].rs1 == (3 << 48) | (3 << 32) | (5 << 16) | 1
    assert cmds[2].rs2 == (0 << 48) | (1 << 32) | (2 << 16) | 1
    # config_4..6 and the start word are the same in both encodings
    new = LC.loop_conv_ws(**ARGS)
    assert cmds[3:] == new[3:] and all(a != b for a, b in zip(cmds[:3], new[:3]))


@pytest.mark.parametrize("layout", ["180c468", "f13847e"])
def test_round_trip_both_layouts(layout):
    cfg = dataclasses.replace(DEFAULT_CONFIG, loop_conv_layout=layout)
    fields = {}
    for cmd in LC.loop_conv_ws(**ARGS, config=cfg):
        got = L.decode_word(cmd.funct, cmd.rs1, cmd.rs2, layout)
        assert L.encode_word(cmd.funct, got, layout=layout) == (cmd.rs1, cmd.rs2)
        assert set(got) == set(L.word_fields(cmd.funct, layout))
        fields.update(got)
    assert {k: fields.get(k, 0) for k in ARGS} == ARGS  # the column dims come back as the row dims in f13847e
    assert L.disassemble(16, *L.encode_word(16, {"stride": 2}, layout=layout), layout).endswith("stride=2")


def test_f13847e_bits_lie_inside_the_180c468_fields():
    """What lets a layout-blind decode and re-encode (isa.decode_fields, the header's named calls) keep an
    f13847e word bit for bit."""
    def used(table, funct, reg):
        return sum(((1 << w) - 1) << lo for _, r, lo, w in table[funct] if r == reg)

    for funct in L.CONV_FUNCTS:
        for reg in ("rs1", "rs2"):
            old, new = used(L.CONV_LAYOUT_TABLES["f13847e"], funct, reg), used(L.LAYOUTS, funct, reg)
            assert old & ~new == 0, (funct, reg)
    for cmd in LC.loop_conv_ws(**ARGS, config=OLD):
        assert L.encode_word(cmd.funct, L.decode_word(cmd.funct, cmd.rs1, cmd.rs2)) == (cmd.rs1, cmd.rs2)


@pytest.mark.parametrize("col, row", sorted(L.SQUARE_DIMS.items()))
def test_f13847e_refuses_rectangular_images(col, row):
    with pytest.raises(IsaError) as err:
        LC.loop_conv_ws(**dict(ARGS, **{col: ARGS[row] + 1}), config=OLD)
    assert err.value.field == col and "square" in str(err.value) and "\n" not in str(err.value)
    LC.loop_conv_ws(**dict(ARGS, **{col: ARGS[row] + 1}))  # 180c468 takes them


def test_f13847e_field_widths_and_unknown_layout():
    LC.loop_conv_ws(**dict(ARGS, stride=300, plpad=300), config=OLD)  # 16-bit there, 8-bit in 180c468
    with pytest.raises(IsaError) as err:
        LC.loop_conv_ws(**dict(ARGS, stride=300))
    assert err.value.field == "stride"
    with pytest.raises(IsaError) as err:
        LC.loop_conv_ws(**dict(ARGS, padding=1 << 16), config=OLD)
    assert err.value.field == "padding"
    with pytest.raises(SimulationError) as err:
        GemminiConfig(loop_conv_layout="8c3f992")
    assert err.value.field == "loop_conv_layout"
    with pytest.raises(IsaError) as err:
        L.encode_word(16, {}, layout="newest")
    assert err.value.field == "loop_conv_layout"


@pytest.mark.parametrize("name", SQUARE)
def test_f13847e_stream_is_bit_exact_and_timed_alike(name):
    cmds, mem, bufs, expected = conv_case(*CONV_CASES[name], cfg=OLD)
    new, *_ = conv_case(*CONV_CASES[name])
    assert [c.funct for c in cmds] == [c.funct for c in new] and cmds != new
    got = run_c(cmds, mem.copy(), bufs, expected.shape, OLD)
    np.testing.assert_array_equal(got, expected)
    # the same loops unrolled: same commands, same cycles as the 180c468 stream on its hardware
    assert [i.cmd for i in expand(cmds, OLD)] == [i.cmd for i in expand(new)]
    assert timing(cmds, OLD).cycles == timing(new).cycles
    # decoded in the other encoding the stream is another convolution (or an illegal one)
    try:
        wrong = run_c(cmds, mem.copy(), bufs, expected.shape)
    except SimulationError:
        return
    assert not np.array_equal(wrong, expected)


def test_validate_decodes_in_the_configs_layout():
    cmds = LC.loop_conv_ws(**ARGS, config=OLD)
    for cmd in cmds:
        isa.validate(cmd, OLD)
    assert isa.decode_stream(isa.encode_stream(cmds)) == tuple(cmds)


def test_f13847e_stream_prints_as_c_bit_for_bit(tmp_path):
    """The C of a vendor program (codegen.c.stream_c: the header's named loop calls) issues the f13847e words
    unchanged, so the Chipyard programs carry them as they are."""
    from test_loops import _run_c

    from gemmini.codegen.c import stream_c

    cmds, *_ = conv_case(*CONV_CASES["3x3 then 3x3/2 max-pool"], cfg=OLD)
    stream = tuple(cmds)
    assert _run_c(tmp_path, stream_c(stream, name="old") + "int main(void) { old(); return 0; }\n") == stream
