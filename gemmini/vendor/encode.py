"""The command words of Gemmini's C library, packed as its macros pack them.

Each function returns one ``(funct, rs1, rs2)`` triple (64-bit unsigned
integers) built with exactly the shifts and ORs of the corresponding macro in
gemmini.h (ucb-bar/gemmini-rocc-tests 180c468): ``config_ex``,
``config_ld``, ``config_st``, ``mvin``/``mvout``, ``preload``,
``compute_*``, and the loop instructions ``gemmini_loop_ws`` (functs 9-13,
then 8) and ``gemmini_loop_conv_ws`` (functs 16-21, then 15; its field
layout is ``gemmini.isa_loops``', in either of its conv layouts).

The macros OR fields together without masking, so a value too wide for its
field would silently spill into the next one.  Here every field is checked
against its width (the width the hardware's loop unrollers decode: 16-bit
loop bounds and pads for LOOP_WS, the bit ranges of LoopConv's configuration
registers for LOOP_CONV_WS) and an out-of-range value is refused with a
``CodegenError`` naming the instruction and the field, as gemmini.h's own
assertions refuse tile factors above 65535.
"""

from __future__ import annotations

from ..errors import CodegenError
from ..numerics import float32_bits

U64 = (1 << 64) - 1
GARBAGE_ADDR = 0xFFFFFFFF
FENCE = 128  #: pseudo-command for the core's ``fence`` (gemmini.isa.FENCE)
ADDR_LEN = 32

# funct numbers of gemmini.h
CONFIG, MVIN2, MVIN, MVOUT, COMPUTE_PRELOADED, COMPUTE_ACCUMULATE, PRELOAD, FLUSH = range(8)
LOOP_WS, LOOP_WS_CONFIG_BOUNDS, LOOP_WS_CONFIG_ADDRS_AB, LOOP_WS_CONFIG_ADDRS_DC = 8, 9, 10, 11
LOOP_WS_CONFIG_STRIDES_AB, LOOP_WS_CONFIG_STRIDES_DC, MVIN3 = 12, 13, 14
LOOP_CONV_WS = 15
LOOP_CONV_WS_CONFIG = (16, 17, 18, 19, 20, 21)

NAMES = {CONFIG: "config", MVIN2: "mvin2", MVIN: "mvin", MVOUT: "mvout", COMPUTE_PRELOADED: "compute_preloaded",
         COMPUTE_ACCUMULATE: "compute_accumulated", PRELOAD: "preload", FLUSH: "flush", LOOP_WS: "loop_ws",
         LOOP_WS_CONFIG_BOUNDS: "loop_ws_config_bounds", LOOP_WS_CONFIG_ADDRS_AB: "loop_ws_config_addrs_ab",
         LOOP_WS_CONFIG_ADDRS_DC: "loop_ws_config_addrs_dc", LOOP_WS_CONFIG_STRIDES_AB: "loop_ws_config_strides_ab",
         LOOP_WS_CONFIG_STRIDES_DC: "loop_ws_config_strides_dc", MVIN3: "mvin3", LOOP_CONV_WS: "loop_conv_ws",
         FENCE: "fence"}
NAMES.update({f: f"loop_conv_ws_config_{n}" for n, f in enumerate(LOOP_CONV_WS_CONFIG, start=1)})
CONFIG_NAMES = ("config_ex", "config_ld", "config_st", "config_norm")


def word(instr: str, *fields) -> int:
    """OR ``(name, value, lsb, width)`` fields into one 64-bit word, refusing values outside their field."""
    out = 0
    for name, value, lsb, width in fields:
        value = int(value)
        if value < 0 or value >= (1 << width):
            raise CodegenError(f"{value} does not fit the {width}-bit field at bit {lsb}",
                               source=f"gemmini.h {instr}", field=name)
        out |= value << lsb
    return out


def refuse(source: str, field: str, reason: str):
    """Raise the CodegenError for a call the library itself refuses (its assertions)."""
    raise CodegenError(reason, source=f"gemmini.h {source}", field=field)


def ptr(value) -> int:
    """A pointer or size_t argument as the 64-bit register holds it."""
    return int(value) & U64


# --- plain commands ------------------------------------------------------------

def config_ex(dataflow: int, act: int, shift: int, acc_scale: float, c_stride: int, a_stride: int,
              a_transpose: int, b_transpose: int, set_only_strides: int = 0) -> tuple:
    """``gemmini_extended3_config_ex``."""
    i = "config_ex"
    rs1 = word(i, ("acc_scale", float32_bits(acc_scale), 32, 32), ("A_stride", a_stride, 16, 16),
               ("B_transpose", b_transpose, 9, 1), ("A_transpose", a_transpose, 8, 1),
               ("set_only_strides", set_only_strides, 7, 1), ("activation", act, 3, 4), ("dataflow", dataflow, 2, 1))
    rs2 = word(i, ("C_stride", c_stride, 48, 16), ("shift", shift, 0, 32))
    return (CONFIG, rs1, rs2)


def config_ld(stride: int, scale: float, shrunk: int, block_stride: int, pixel_repeats: int, ld_id: int) -> tuple:
    """``gemmini_extended5_config_ld`` (rs2 = the main-memory stride in bytes, as a 64-bit register)."""
    i = "config_ld"
    rs1 = word(i, ("scale", float32_bits(scale), 32, 32), ("block_mvin_stride", block_stride, 16, 16),
               ("pixel_repeats", pixel_repeats, 8, 8), ("id", ld_id, 3, 2), ("shrunk", shrunk, 2, 1), ("config", 1, 0, 2))
    return (CONFIG, rs1, ptr(stride))


def config_st(stride: int, act: int, acc_scale: float) -> tuple:
    """``gemmini_extended_config_st`` (no pooling): rs2 = acc scale bits << 32 | (uint32) stride."""
    rs1 = word("config_st", ("activation", act, 2, 2), ("config", 2, 0, 2))
    return (CONFIG, rs1, (float32_bits(acc_scale) << 32) | (int(stride) & 0xFFFFFFFF))


def _rows_cols_addr(instr: str, addr: int, cols: int, rows: int) -> int:
    return word(instr, ("rows", rows, ADDR_LEN + 16, 16), ("cols", cols, ADDR_LEN, 16), ("local_addr", addr, 0, 32))


def mvin(funct: int, dram_addr: int, local_addr: int, cols: int, rows: int) -> tuple:
    return (funct, ptr(dram_addr), _rows_cols_addr(NAMES[funct], local_addr, cols, rows))


def mvout(dram_addr: int, local_addr: int, cols: int, rows: int) -> tuple:
    return (MVOUT, ptr(dram_addr), _rows_cols_addr("mvout", local_addr, cols, rows))


def preload(bd: int, c: int, bd_cols: int, bd_rows: int, c_cols: int, c_rows: int) -> tuple:
    return (PRELOAD, _rows_cols_addr("preload", bd, bd_cols, bd_rows), _rows_cols_addr("preload", c, c_cols, c_rows))


def compute(preloaded: bool, a: int, bd: int, a_cols: int, a_rows: int, bd_cols: int, bd_rows: int) -> tuple:
    funct = COMPUTE_PRELOADED if preloaded else COMPUTE_ACCUMULATE
    return (funct, _rows_cols_addr(NAMES[funct], a, a_cols, a_rows),
            _rows_cols_addr(NAMES[funct], bd, bd_cols, bd_rows))


def fence() -> tuple:
    return (FENCE, 0, 0)


# --- loop instructions ------------------------------------------------------------

def loop_ws(I, J, K, pad_I, pad_J, pad_K, A, B, D, C, A_stride, B_stride, D_stride, C_stride, A_transpose,
            B_transpose, full_C, low_D, ex_accumulate, act, a_spad_id, b_spad_id, is_resadd) -> list:
    """``gemmini_loop_ws``: five configuration words and the start command."""
    i = "gemmini_loop_ws"
    bits16 = 16
    return [
        (LOOP_WS_CONFIG_BOUNDS,
         word(i, ("pad_K", pad_K, 32, bits16), ("pad_J", pad_J, 16, bits16), ("pad_I", pad_I, 0, bits16)),
         word(i, ("K", K, 32, bits16), ("J", J, 16, bits16), ("I", I, 0, bits16))),
        (LOOP_WS_CONFIG_ADDRS_AB, ptr(A), ptr(B)),
        (LOOP_WS_CONFIG_ADDRS_DC, ptr(D), ptr(C)),
        (LOOP_WS_CONFIG_STRIDES_AB, word(i, ("A_stride", A_stride, 0, 64)), word(i, ("B_stride", B_stride, 0, 64))),
        (LOOP_WS_CONFIG_STRIDES_DC, word(i, ("D_stride", D_stride, 0, 64)), word(i, ("C_stride", C_stride, 0, 64))),
        (LOOP_WS,
         word(i, ("a_spad_id", a_spad_id, 18, 2), ("b_spad_id", b_spad_id, 16, 2), ("act", act, 8, 8),
              ("low_D", low_D, 2, 1), ("full_C", full_C, 1, 1), ("ex_accumulate", ex_accumulate, 0, 1)),
         word(i, ("is_resadd", is_resadd, 2, 1), ("B_transpose", B_transpose, 1, 1),
              ("A_transpose", A_transpose, 0, 1))),
    ]


def loop_conv_ws(a: dict, layout: str = "180c468") -> list:
    """``gemmini_loop_conv_ws`` from its named arguments: six configuration words and the start command.

    Field positions and widths are ``gemmini.isa_loops``' for the conv ``layout`` ("180c468": this header's;
    "f13847e": the square-image words of gemmini-rocc-tests ab748c5, which Gemmini f13847e decodes; a
    rectangular image is refused there, naming the column dim)."""
    from .. import isa_loops as L
    from ..errors import IsaError

    out = []
    for funct in L.CONV_FUNCTS:
        fields = {name: ptr(a[name]) if name in _POINTERS else a[name] for name in L.word_fields(funct, layout)}
        try:
            out.append((funct, *L.encode_word(funct, fields, layout=layout)))
        except IsaError as exc:
            raise CodegenError(exc.reason, source="gemmini.h gemmini_loop_conv_ws", field=exc.field) from None
    return out


_POINTERS = ("weights", "output", "bias", "input")


def disassemble(cmd) -> str:
    """One line naming the command and its operands (for test failure messages)."""
    funct, rs1, rs2 = (int(x) for x in cmd)
    name = NAMES.get(funct, f"funct{funct}")
    if funct == CONFIG:
        name = CONFIG_NAMES[rs1 & 3]
    return f"{name:<26} rs1=0x{rs1:016x} rs2=0x{rs2:016x}"
