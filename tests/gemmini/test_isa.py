"""ISA encodings: field positions, encode/decode round trips, range checks, numerics."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemmini import GemminiConfig, IsaError, SimulationError, isa, numerics
from gemmini.config import SMALL_CONFIG

CFG = SMALL_CONFIG  # dim 4, 1024 scratchpad rows, 128 accumulator rows
SETTINGS = settings(max_examples=60, deadline=None)


def test_funct_numbers_match_gemmini():
    assert (isa.CONFIG, isa.MVIN2, isa.MVIN, isa.MVOUT) == (0, 1, 2, 3)
    assert (isa.COMPUTE_PRELOADED, isa.COMPUTE_ACCUMULATED, isa.PRELOAD, isa.FLUSH, isa.MVIN3) == (4, 5, 6, 7, 14)
    assert isa.FENCE > 127  # outside the funct7 space


def test_default_config_derived_sizes():
    cfg = GemminiConfig()
    assert (cfg.sp_rows, cfg.acc_rows, cfg.bank_rows) == (16384, 1024, 4096)
    assert (cfg.sp_addr_bits, cfg.acc_addr_bits) == (14, 10)
    assert (cfg.max_mvin_cols_sp, cfg.max_mvin_cols_acc) == (64, 16)


def test_known_encodings():
    # bit positions written out by hand from the field table
    cmd = isa.mvin(0x1234, isa.sp(7), rows=3, cols=9, config=CFG)
    assert (cmd.funct, cmd.rs1, cmd.rs2) == (2, 0x1234, (3 << 48) | (9 << 32) | 7)
    assert isa.mvin(0, isa.sp(0), 1, 1, id=1, config=CFG).funct == 1
    assert isa.mvin(0, isa.sp(0), 1, 1, id=2, config=CFG).funct == 14
    assert isa.acc(5) == 0x80000005
    assert isa.acc(5, accumulate=True) == 0xC0000005
    assert isa.acc(5, full=True) == 0xA0000005
    assert isa.GARBAGE == 0xFFFFFFFF
    ex = isa.config_ex("ws", "relu", a_stride=2, acc_scale=1.0, c_stride=3, os_shift=5, config=CFG)
    assert ex.rs1 == (0x3F800000 << 32) | (2 << 16) | (1 << 3) | (1 << 2) | 0
    assert ex.rs2 == (3 << 48) | 5
    ld = isa.config_ld(48, scale=2.0, shrunk=True, id=2, local_stride=8, config=CFG)
    assert ld.rs1 == (0x40000000 << 32) | (8 << 16) | (2 << 3) | (1 << 2) | 1
    assert ld.rs2 == 48
    st_ = isa.config_st(16, activation=1, acc_scale=0.5)
    assert (st_.rs1, st_.rs2) == ((1 << 2) | 2, (0x3F000000 << 32) | 16)
    pre = isa.preload(isa.GARBAGE, isa.acc(2, accumulate=True), 4, 4, 3, 2, config=CFG)
    assert pre.rs1 == (4 << 48) | (4 << 32) | 0xFFFFFFFF
    assert pre.rs2 == (3 << 48) | (2 << 32) | 0xC0000002
    assert isa.flush(True) == isa.Command(7, 1, 0)
    assert isa.config_ld(16, config=CFG).decode()["local_stride"] == CFG.dim  # Gemmini's default block stride


def test_instruction_word_is_custom3():
    word = isa.mvin(0, isa.sp(0), 1, 1, config=CFG).instruction_word(rs1_reg=10, rs2_reg=11)
    assert word & 0x7F == 0x7B
    assert (word >> 12) & 7 == 3
    assert (word >> 7) & 0x1F == 0  # rd = x0
    assert (word >> 25) == 2
    assert ((word >> 15) & 0x1F, (word >> 20) & 0x1F) == (10, 11)


local_sp = st.integers(0, CFG.sp_rows - CFG.dim).map(isa.sp)
local_acc = st.builds(isa.acc, st.integers(0, CFG.acc_rows - CFG.dim), st.booleans(), st.booleans())
local_any = st.one_of(local_sp, local_acc)
block_local = st.one_of(local_any, st.just(isa.GARBAGE))
dims = st.integers(1, CFG.dim)


@SETTINGS
@given(dram=st.integers(0, 2**64 - 1), local=local_sp, rows=dims, cols=st.integers(1, CFG.max_mvin_cols_sp),
       ident=st.integers(0, 2))
def test_mvin_round_trip(dram, local, rows, cols, ident):
    cmd = isa.mvin(dram, local, rows, cols, ident, config=CFG)
    fields = isa.decode(cmd.funct, cmd.rs1, cmd.rs2).decode()
    assert (fields["dram_addr"], fields["local_addr"], fields["rows"], fields["cols"], fields["id"]) == \
        (dram, local, rows, cols, ident)
    assert cmd.name == ("mvin", "mvin2", "mvin3")[ident]
    assert isa.validate(cmd, CFG) == fields


@SETTINGS
@given(bd=block_local, c=block_local, bd_rows=dims, bd_cols=dims, c_rows=dims, c_cols=dims,
       funct=st.sampled_from(["preload", "compute_preloaded", "compute_accumulated"]))
def test_block_commands_round_trip(bd, c, bd_rows, bd_cols, c_rows, c_cols, funct):
    cmd = getattr(isa, funct)(bd, c, bd_rows, bd_cols, c_rows, c_cols, config=CFG)
    fields = cmd.decode()
    first, second = ("bd", "c") if funct == "preload" else ("a", "bd")
    assert (fields[f"{first}_local"], fields[f"{first}_rows"], fields[f"{first}_cols"]) == (bd, bd_rows, bd_cols)
    assert (fields[f"{second}_local"], fields[f"{second}_rows"], fields[f"{second}_cols"]) == (c, c_rows, c_cols)
    assert isa.LocalAddr.decode(bd).encode() == bd
    assert cmd.name == funct


@SETTINGS
@given(flow=st.sampled_from(["ws", "os"]), act=st.integers(0, 1), a_stride=st.integers(0, 0xFFFF),
       c_stride=st.integers(0, 0xFFFF), shift=st.integers(0, 31),
       scale=st.floats(-1e6, 1e6, allow_nan=False, width=32))
def test_config_ex_round_trip(flow, act, a_stride, c_stride, shift, scale):
    cmd = isa.config_ex(flow, act, False, False, a_stride, scale, c_stride, shift, config=CFG)
    f = cmd.decode()
    assert (f["dataflow"], f["activation"], f["a_stride"], f["c_stride"], f["os_shift"]) == \
        (flow, act, a_stride, c_stride, shift)
    assert f["acc_scale"] == scale


@SETTINGS
@given(stride=st.integers(0, 2**64 - 1), scale=st.floats(0, 1e3, width=32), shrunk=st.booleans(),
       ident=st.integers(0, 2), local_stride=st.integers(0, 0xFFFF))
def test_config_ld_round_trip(stride, scale, shrunk, ident, local_stride):
    f = isa.config_ld(stride, scale, shrunk, ident, local_stride, config=CFG).decode()
    assert (f["stride_bytes"], f["scale"], f["shrunk"], f["id"], f["local_stride"]) == \
        (stride, scale, shrunk, ident, local_stride)


@SETTINGS
@given(funct=st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 14, isa.FENCE]), rs1=st.integers(0, 2**64 - 1),
       rs2=st.integers(0, 2**64 - 1))
def test_text_log_round_trip(funct, rs1, rs2):
    cmd = isa.fence() if funct == isa.FENCE else isa.Command(funct, rs1, rs2)
    assert isa.decode_stream(isa.encode_stream([cmd, cmd])) == (cmd, cmd)
    assert isinstance(isa.disassemble(cmd), str)


@pytest.mark.parametrize("make, field", [
    (lambda: isa.mvin(0, isa.sp(0), CFG.dim + 1, 4, config=CFG), "rows"),
    (lambda: isa.mvin(0, isa.sp(0), 0, 4, config=CFG), "rows"),
    (lambda: isa.mvin(0, isa.sp(0), 4, CFG.max_mvin_cols_sp + 1, config=CFG), "cols"),
    (lambda: isa.mvin(0, isa.acc(0), 4, CFG.max_mvin_cols_acc + 1, config=CFG), "cols"),
    (lambda: isa.mvin(0, isa.sp(CFG.sp_rows - 2), 4, 4, config=CFG), "local"),
    (lambda: isa.mvin(0, isa.acc(CFG.acc_rows), 1, 4, config=CFG), "local"),
    (lambda: isa.mvin(0, isa.GARBAGE, 1, 4, config=CFG), "local"),
    (lambda: isa.mvin(-1, isa.sp(0), 1, 4, config=CFG), "dram_addr"),
    (lambda: isa.mvin(0, isa.sp(0), 1, 4, id=3, config=CFG), "id"),
    (lambda: isa.mvout(0, isa.sp(0), 4, CFG.max_mvin_cols_sp + 1, config=CFG), "cols"),
    (lambda: isa.mvout(0, isa.acc(0, full=True), 4, CFG.max_mvin_cols_acc + 1, config=CFG), "cols"),
    (lambda: isa.preload(isa.sp(0), isa.acc(0), 5, 4, 4, 4, config=CFG), "bd_rows"),
    (lambda: isa.compute_preloaded(isa.sp(0), isa.GARBAGE, 4, 5, 4, 4, config=CFG), "a_cols"),
    (lambda: isa.compute_preloaded(isa.acc(CFG.acc_rows - 1), isa.GARBAGE, 4, 4, 4, 4, config=CFG), "a_local"),
    (lambda: isa.config_ex("xs", config=CFG), "dataflow"),
    (lambda: isa.config_ex("ws", a_transpose=True, b_transpose=True, config=CFG), "b_transpose"),
    (lambda: isa.config_ex("os", b_transpose=True, config=CFG), "b_transpose"),
    (lambda: isa.config_ex("ws", activation=2, config=CFG), "activation"),
    (lambda: isa.config_ex("ws", os_shift=32, config=CFG), "os_shift"),
    (lambda: isa.config_ld(16, scale=float("inf"), config=CFG), "scale"),
    (lambda: isa.config_st(2**32, config=CFG), "stride_bytes"),
    (lambda: isa.Command(200, 0, 0), "funct"),
    (lambda: isa.Command(2, 2**64, 0), "rs1"),
    (lambda: isa.sp(1 << 29), "row"),
])
def test_range_errors(make, field):
    with pytest.raises(IsaError) as info:
        make()
    assert info.value.field == field
    assert isinstance(info.value, SimulationError)
    assert field in str(info.value)


def test_validate_rejects_hand_made_out_of_range():
    bad = isa.Command(isa.MVIN, 0, (CFG.dim + 1) << 48 | 1 << 32)
    with pytest.raises(IsaError):
        isa.validate(bad, CFG)
    with pytest.raises(IsaError):
        isa.validate(isa.Command(22, 0, 0), CFG)  # 8-13 and 15-21 are loop instructions


def test_bad_log_lines():
    with pytest.raises(IsaError, match="line 2"):
        isa.decode_stream("2 0 0\n2 0\n")
    with pytest.raises(IsaError, match="line 1"):
        isa.decode_stream("mvin 1 2\n")


def test_bad_config():
    with pytest.raises(SimulationError, match="sp_banks"):
        GemminiConfig(dim=4, sp_kib=4, sp_banks=3)
    with pytest.raises(SimulationError, match="dim"):
        GemminiConfig(dim=0)


# --- numerics: one definition of rounding -------------------------------------------
def test_scale_round_is_half_to_even_of_float32_product():
    assert list(numerics.scale_round([1, 3, 5, 7, -1, -3, -5], 0.5)) == [0, 2, 2, 4, 0, -2, -2]
    assert list(numerics.scale_round([1000, -1000], 1.0)) == [127, -128]
    # the product is a float32: 16777217 is not representable and becomes 16777216
    assert numerics.scale_round([16777217], 1.0, out_bits=32)[0] == 16777216
    # 0.1 as float32 is slightly above 0.1: 5 * 0.1f = 0.50000001 in float64 but exactly 0.5 in float32
    assert numerics.scale_round([5], 0.1)[0] == 0
    assert numerics.scale_round([2**31 - 1], 1e30, out_bits=32)[0] == 2**31 - 1


@SETTINGS
@given(values=st.lists(st.integers(-2**31, 2**31 - 1), min_size=1, max_size=20), shift=st.integers(0, 31))
def test_rounding_shift_matches_exact_half_even(values, shift):
    from fractions import Fraction
    got = numerics.rounding_shift(values, shift)
    expected = [round(Fraction(v, 2**shift)) for v in values]  # Python rounds Fractions half to even
    assert list(got) == expected


@SETTINGS
@given(values=st.lists(st.integers(-2**31, 2**31 - 1), min_size=1, max_size=20),
       scale=st.floats(-100, 100, allow_nan=False, width=32), act=st.integers(0, 1))
def test_requantize_laws(values, scale, act):
    out = numerics.requantize(values, scale, act)
    assert out.dtype == np.int8
    product = np.float32(np.array(values, dtype=np.float32) * np.float32(scale))
    expected = np.clip(np.rint(product.astype(np.float64)), -128, 127)
    if act:
        expected = np.maximum(expected, 0)
    assert (out == expected).all()


@pytest.mark.parametrize("dataflow", ["ws", "os"])
def test_config_arch_round_trip(dataflow):
    cfg = GemminiConfig(dim=8, sp_kib=32, acc_kib=8, sp_banks=2, acc_banks=1)
    arch = cfg.arch(dataflow)
    assert arch.params["dataflow"] == dataflow
    assert GemminiConfig.from_arch(arch) == cfg
    with pytest.raises(SimulationError, match="dataflow"):
        cfg.arch("xs")
