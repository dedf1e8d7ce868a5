"""Gemmini's loop instructions: LOOP_WS and LOOP_CONV_WS with their configuration words.

The bit layouts are those of Gemmini's C header (``gemmini.h``: the
``gemmini_loop_ws`` and ``gemmini_loop_conv_ws`` macros, ucb-bar/gemmini-rocc-tests
180c468), which Gemmini's loop unrollers (``LoopMatmul``, ``LoopConv``) and
libgemmini decode.  A loop is a run of configuration words, held by the
accelerator, and the start word that fires it:

================================  =====  ===========================================  ===========================================
command                           funct  rs1                                          rs2
================================  =====  ===========================================  ===========================================
loop_ws_config_bounds             9      [15:0] pad_I [31:16] pad_J [47:32] pad_K     [15:0] I [31:16] J [47:32] K (DIM-blocks)
loop_ws_config_addrs_ab           10     A (main memory)                              B
loop_ws_config_addrs_dc           11     D                                            C
loop_ws_config_strides_ab         12     A row stride (elements)                      B row stride
loop_ws_config_strides_dc         13     D row stride                                 C row stride
loop_ws                           8      [0] ex_accumulate [1] full_C [2] low_D       [0] A_transpose [1] B_transpose
                                         [15:8] act [17:16] b_spad_id [19:18]         [2] is_resadd
                                         a_spad_id
loop_conv_ws_config_1             16     [15:0] batch_size [31:16] in_row_dim         [15:0] out_row_dim [31:16] pool_out_row_dim
                                         [47:32] in_channels [63:48] out_channels     [47:32] out_col_dim [55:48] stride
                                                                                      [63:56] padding
loop_conv_ws_config_2             17     [7:0] pool_padding [15:8] pool_stride        [15:0] pochs [31:16] pocols
                                         [31:16] pool_size [47:32] pool_out_col_dim   [47:32] porows [63:48] batches
                                         [63:48] kernel_dim
loop_conv_ws_config_3             18     [15:0] lpad [31:16] kchs [47:32] kcols       [15:0] in_col_dim [23:16] plpad
                                         [63:48] krows                                [31:24] dpad [47:32] upad [63:48] rpad
loop_conv_ws_config_4             19     [9:0] kernel_dilation [20:10] pdpad          [15:0] ocols [31:16] out_stride
                                         [31:21] pupad [47:32] prpad [63:48] orows    [47:32] weight_stride [63:48] in_stride
loop_conv_ws_config_5             20     weights (main memory)                        output
loop_conv_ws_config_6             21     bias                                         input
loop_conv_ws                      15     [0] no_bias [1] wrot180 [2] trans_output_1203  [0] no_pool [1] downsample
                                         [3] trans_weight_1203 [4] trans_weight_0132  [2] input_dilated [4:3] activation
                                         [5] trans_input_3120 [6] dw [15:8]
                                         max_pixels_per_row [17:16] b_spad_id
                                         [19:18] a_spad_id
================================  =====  ===========================================  ===========================================

LOOP_CONV_WS has two encodings (``GemminiConfig.loop_conv_layout``): the
table's ("180c468": rectangular images, decoded by Gemmini's LoopConv from
its commit 16a9d3f on) and "f13847e", the square-image words of Gemmini
f13847e (Chipyard 1.10.0) and of the gemmini.h it pins (gemmini-rocc-tests
ab748c5).  They differ in three words only, every field 16 bits wide:

================================  ===========================================  ===========================================
f13847e                           rs1                                          rs2
================================  ===========================================  ===========================================
loop_conv_ws_config_1             as 180c468 (in_row_dim is the hardware's     [15:0] out_dim [31:16] pool_out_dim
                                  in_dim, for rows and columns)                [47:32] stride [63:48] padding
loop_conv_ws_config_2             [15:0] pool_padding [31:16] pool_stride      as 180c468
                                  [47:32] pool_size [63:48] kernel_dim
loop_conv_ws_config_3             as 180c468                                   [15:0] plpad [31:16] dpad [47:32] upad
                                                                               [63:48] rpad
================================  ===========================================  ===========================================

So an f13847e stream has no in_col_dim, out_col_dim or pool_out_col_dim:
they are the row dims (``SQUARE_DIMS``); encoding a column dim that differs
from its row dim is refused (``IsaError`` naming it), and decoding gives
them the row dims.  Every bit an f13847e word uses lies inside a 180c468
field, so decoding one with the 180c468 layout and encoding the fields back
gives the same word.

Encoders check every field against its width (``IsaError`` naming the
field), and the rules the header and the unrollers assert: pads below DIM,
not both transposes, spad ids 0..2.  What the unrollers issue for a fired
loop is ``gemmini.sim.loops``.  The words as ``isa.Command`` objects, a
macro's worth at a time (``loop_ws``, ``loop_conv_ws``), are
``gemmini.loop_commands``: ``isa`` imports this module for the names and
fields of the loop functs, so this one never imports ``isa``.
"""

from __future__ import annotations

from .config import DEFAULT_CONFIG, LOOP_CONV_LAYOUTS, GemminiConfig
from .errors import IsaError

LOOP_WS = 8
LOOP_WS_CONFIG_BOUNDS = 9
LOOP_WS_CONFIG_ADDRS_AB = 10
LOOP_WS_CONFIG_ADDRS_DC = 11
LOOP_WS_CONFIG_STRIDES_AB = 12
LOOP_WS_CONFIG_STRIDES_DC = 13
LOOP_CONV_WS = 15
LOOP_CONV_WS_CONFIG_1 = 16
LOOP_CONV_WS_CONFIG_2 = 17
LOOP_CONV_WS_CONFIG_3 = 18
LOOP_CONV_WS_CONFIG_4 = 19
LOOP_CONV_WS_CONFIG_5 = 20
LOOP_CONV_WS_CONFIG_6 = 21

#: funct -> [(field, "rs1"/"rs2", low bit, width in bits)], in gemmini.h's order
LAYOUTS: dict[int, list[tuple[str, str, int, int]]] = {
    LOOP_WS_CONFIG_BOUNDS: [("pad_I", "rs1", 0, 16), ("pad_J", "rs1", 16, 16), ("pad_K", "rs1", 32, 16),
                            ("I", "rs2", 0, 16), ("J", "rs2", 16, 16), ("K", "rs2", 32, 16)],
    LOOP_WS_CONFIG_ADDRS_AB: [("A", "rs1", 0, 64), ("B", "rs2", 0, 64)],
    LOOP_WS_CONFIG_ADDRS_DC: [("D", "rs1", 0, 64), ("C", "rs2", 0, 64)],
    LOOP_WS_CONFIG_STRIDES_AB: [("A_stride", "rs1", 0, 64), ("B_stride", "rs2", 0, 64)],
    LOOP_WS_CONFIG_STRIDES_DC: [("D_stride", "rs1", 0, 64), ("C_stride", "rs2", 0, 64)],
    LOOP_WS: [("ex_accumulate", "rs1", 0, 1), ("full_C", "rs1", 1, 1), ("low_D", "rs1", 2, 1), ("act", "rs1", 8, 8),
              ("b_spad_id", "rs1", 16, 2), ("a_spad_id", "rs1", 18, 2),
              ("A_transpose", "rs2", 0, 1), ("B_transpose", "rs2", 1, 1), ("is_resadd", "rs2", 2, 1)],
    LOOP_CONV_WS_CONFIG_1: [("batch_size", "rs1", 0, 16), ("in_row_dim", "rs1", 16, 16), ("in_channels", "rs1", 32, 16),
                            ("out_channels", "rs1", 48, 16), ("out_row_dim", "rs2", 0, 16),
                            ("pool_out_row_dim", "rs2", 16, 16), ("out_col_dim", "rs2", 32, 16),
                            ("stride", "rs2", 48, 8), ("padding", "rs2", 56, 8)],
    LOOP_CONV_WS_CONFIG_2: [("pool_padding", "rs1", 0, 8), ("pool_stride", "rs1", 8, 8), ("pool_size", "rs1", 16, 16),
                            ("pool_out_col_dim", "rs1", 32, 16), ("kernel_dim", "rs1", 48, 16),
                            ("pochs", "rs2", 0, 16), ("pocols", "rs2", 16, 16), ("porows", "rs2", 32, 16),
                            ("batches", "rs2", 48, 16)],
    LOOP_CONV_WS_CONFIG_3: [("lpad", "rs1", 0, 16), ("kchs", "rs1", 16, 16), ("kcols", "rs1", 32, 16),
                            ("krows", "rs1", 48, 16), ("in_col_dim", "rs2", 0, 16), ("plpad", "rs2", 16, 8),
                            ("dpad", "rs2", 24, 8), ("upad", "rs2", 32, 16), ("rpad", "rs2", 48, 16)],
    LOOP_CONV_WS_CONFIG_4: [("kernel_dilation", "rs1", 0, 10), ("pdpad", "rs1", 10, 11), ("pupad", "rs1", 21, 11),
                            ("prpad", "rs1", 32, 16), ("orows", "rs1", 48, 16), ("ocols", "rs2", 0, 16),
                            ("out_stride", "rs2", 16, 16), ("weight_stride", "rs2", 32, 16),
                            ("in_stride", "rs2", 48, 16)],
    LOOP_CONV_WS_CONFIG_5: [("weights", "rs1", 0, 64), ("output", "rs2", 0, 64)],
    LOOP_CONV_WS_CONFIG_6: [("bias", "rs1", 0, 64), ("input", "rs2", 0, 64)],
    LOOP_CONV_WS: [("no_bias", "rs1", 0, 1), ("wrot180", "rs1", 1, 1), ("trans_output_1203", "rs1", 2, 1),
                   ("trans_weight_1203", "rs1", 3, 1), ("trans_weight_0132", "rs1", 4, 1),
                   ("trans_input_3120", "rs1", 5, 1), ("dw", "rs1", 6, 1), ("max_pixels_per_row", "rs1", 8, 8),
                   ("b_spad_id", "rs1", 16, 2), ("a_spad_id", "rs1", 18, 2),
                   ("no_pool", "rs2", 0, 1), ("downsample", "rs2", 1, 1), ("input_dilated", "rs2", 2, 1),
                   ("activation", "rs2", 3, 2)],
}

#: Gemmini f13847e's LoopConv decode of the words that differ (the rest are as in ``LAYOUTS``)
_F13847E = {
    LOOP_CONV_WS_CONFIG_1: [("batch_size", "rs1", 0, 16), ("in_row_dim", "rs1", 16, 16), ("in_channels", "rs1", 32, 16),
                            ("out_channels", "rs1", 48, 16), ("out_row_dim", "rs2", 0, 16),
                            ("pool_out_row_dim", "rs2", 16, 16), ("stride", "rs2", 32, 16), ("padding", "rs2", 48, 16)],
    LOOP_CONV_WS_CONFIG_2: [("pool_padding", "rs1", 0, 16), ("pool_stride", "rs1", 16, 16), ("pool_size", "rs1", 32, 16),
                            ("kernel_dim", "rs1", 48, 16), ("pochs", "rs2", 0, 16), ("pocols", "rs2", 16, 16),
                            ("porows", "rs2", 32, 16), ("batches", "rs2", 48, 16)],
    LOOP_CONV_WS_CONFIG_3: [("lpad", "rs1", 0, 16), ("kchs", "rs1", 16, 16), ("kcols", "rs1", 32, 16),
                            ("krows", "rs1", 48, 16), ("plpad", "rs2", 0, 16), ("dpad", "rs2", 16, 16),
                            ("upad", "rs2", 32, 16), ("rpad", "rs2", 48, 16)],
}
#: conv layout -> funct -> fields (``LAYOUTS`` is the "180c468" one)
CONV_LAYOUT_TABLES = {"180c468": LAYOUTS, "f13847e": {**LAYOUTS, **_F13847E}}
assert set(CONV_LAYOUT_TABLES) == set(LOOP_CONV_LAYOUTS)
DEFAULT_LAYOUT = LOOP_CONV_LAYOUTS[0]
#: the "f13847e" layout's square images: column dim -> the row dim it equals (both in its first word)
SQUARE_DIMS = {"in_col_dim": "in_row_dim", "out_col_dim": "out_row_dim", "pool_out_col_dim": "pool_out_row_dim"}

FUNCT_NAMES = {
    LOOP_WS: "loop_ws", LOOP_WS_CONFIG_BOUNDS: "loop_ws_config_bounds", LOOP_WS_CONFIG_ADDRS_AB: "loop_ws_config_addrs_ab",
    LOOP_WS_CONFIG_ADDRS_DC: "loop_ws_config_addrs_dc", LOOP_WS_CONFIG_STRIDES_AB: "loop_ws_config_strides_ab",
    LOOP_WS_CONFIG_STRIDES_DC: "loop_ws_config_strides_dc", LOOP_CONV_WS: "loop_conv_ws",
    **{LOOP_CONV_WS_CONFIG_1 + n: f"loop_conv_ws_config_{n + 1}" for n in range(6)},
}
LOOP_FUNCTS = frozenset(LAYOUTS)
WS_FUNCTS = (LOOP_WS_CONFIG_BOUNDS, LOOP_WS_CONFIG_ADDRS_AB, LOOP_WS_CONFIG_ADDRS_DC, LOOP_WS_CONFIG_STRIDES_AB,
             LOOP_WS_CONFIG_STRIDES_DC, LOOP_WS)
CONV_FUNCTS = tuple(range(LOOP_CONV_WS_CONFIG_1, LOOP_CONV_WS_CONFIG_6 + 1)) + (LOOP_CONV_WS,)
#: the field names of each loop, in the order of the gemmini.h macro's arguments
WS_ARGS = ("I", "J", "K", "pad_I", "pad_J", "pad_K", "A", "B", "D", "C", "A_stride", "B_stride", "D_stride",
           "C_stride", "A_transpose", "B_transpose", "full_C", "low_D", "ex_accumulate", "act", "a_spad_id",
           "b_spad_id", "is_resadd")
CONV_ARGS = ("batch_size", "in_row_dim", "in_col_dim", "in_channels", "out_channels", "out_row_dim", "out_col_dim",
             "pool_out_row_dim", "pool_out_col_dim", "stride", "padding", "kernel_dim", "kernel_dilation",
             "pool_size", "pool_stride", "pool_padding", "batches", "porows", "pocols", "pochs", "krows", "kcols",
             "kchs", "lpad", "rpad", "upad", "dpad", "plpad", "prpad", "pupad", "pdpad", "orows", "ocols", "weights",
             "output", "bias", "input", "no_bias", "no_pool", "downsample", "wrot180", "input_dilated", "activation",
             "trans_output_1203", "trans_weight_1203", "trans_weight_0132", "trans_input_3120",
             "max_pixels_per_row", "in_stride", "weight_stride", "out_stride", "dw", "a_spad_id", "b_spad_id")
_ADDRESS_FIELDS = {"A", "B", "C", "D", "weights", "output", "bias", "input"}


def _as_int(value, field: str, source: str) -> int:
    if isinstance(value, bool):
        return int(value)
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise IsaError(f"must be an integer, got {value!r}", source=source, field=field) from None
    if out != value:
        raise IsaError(f"must be an integer, got {value!r}", source=source, field=field)
    return out


def _table(layout: str, source: str) -> dict:
    try:
        return CONV_LAYOUT_TABLES[layout]
    except KeyError:
        raise IsaError(f"unknown layout {layout!r} (one of {', '.join(LOOP_CONV_LAYOUTS)})", source=source,
                       field="loop_conv_layout") from None


def layout_of(funct: int, layout: str = DEFAULT_LAYOUT) -> list:
    """[(field, "rs1"/"rs2", low bit, width)] of loop word ``funct`` in conv ``layout``."""
    return _table(layout, "isa_loops")[funct]


def word_fields(funct: int, layout: str = DEFAULT_LAYOUT) -> tuple:
    """The field names word ``funct`` takes: its layout's, and in "f13847e" the column dims its first word
    gives as the row dims."""
    names = tuple(name for name, *_ in layout_of(funct, layout))
    if layout == "f13847e" and funct == LOOP_CONV_WS_CONFIG_1:
        names += tuple(SQUARE_DIMS)
    return names


def encode_word(funct: int, fields: dict, source: str | None = None, layout: str = DEFAULT_LAYOUT) -> tuple[int, int]:
    """(rs1, rs2) of configuration or start word ``funct`` from its named fields (missing fields are 0) in conv
    ``layout``; a field that does not fit its bits, or (f13847e) a column dim other than its row dim, raises
    ``IsaError`` naming it."""
    src = source or f"isa.{FUNCT_NAMES[funct]}"
    regs = {"rs1": 0, "rs2": 0}
    for name, reg, lo, width in _table(layout, src)[funct]:
        value = _as_int(fields.get(name, 0), name, src)
        if not 0 <= value < (1 << width):
            raise IsaError(f"{value} does not fit the {width}-bit field (0..{(1 << width) - 1})", source=src,
                           field=name)
        regs[reg] |= value << lo
    known = word_fields(funct, layout)
    unknown = set(fields) - set(known)
    if unknown:
        raise IsaError(f"unknown field(s) {sorted(unknown)}", source=src, field=sorted(unknown)[0])
    for col, row in SQUARE_DIMS.items() if layout == "f13847e" else ():
        if col in fields and _as_int(fields[col], col, src) != _as_int(fields.get(row, 0), row, src):
            raise IsaError(f"{fields[col]} differs from {row} = {fields.get(row, 0)}: Gemmini f13847e's "
                           "LOOP_CONV_WS takes square images only (one in_dim / out_dim / pool_out_dim)",
                           source=src, field=col)
    return regs["rs1"], regs["rs2"]


def decode_word(funct: int, rs1: int, rs2: int, layout: str = DEFAULT_LAYOUT) -> dict:
    """The named fields of loop word ``funct`` in conv ``layout`` (bits outside every field are ignored, as the
    hardware does; "f13847e": the column dims are the row dims)."""
    regs = {"rs1": rs1, "rs2": rs2}
    out = {name: (regs[reg] >> lo) & ((1 << width) - 1) for name, reg, lo, width in layout_of(funct, layout)}
    if layout == "f13847e" and funct == LOOP_CONV_WS_CONFIG_1:
        out.update({col: out[row] for col, row in SQUARE_DIMS.items()})
    return out


def check_fields(funct: int, fields: dict, config: GemminiConfig | None = None, source: str | None = None) -> None:
    """The rules beyond field widths that gemmini.h and the unrollers assert, for one word's fields."""
    cfg = config or DEFAULT_CONFIG
    src = source or f"isa.{FUNCT_NAMES[funct]}"
    for pad in ("pad_I", "pad_J", "pad_K"):
        if pad in fields and fields[pad] >= cfg.dim:
            raise IsaError(f"{fields[pad]} is not below DIM = {cfg.dim}", source=src, field=pad)
    for spad_id in ("a_spad_id", "b_spad_id"):
        if fields.get(spad_id, 0) > 2:
            raise IsaError(f"{fields[spad_id]} is not 0, 1 or 2", source=src, field=spad_id)
    if fields.get("A_transpose") and fields.get("B_transpose"):
        raise IsaError("weight-stationary cannot transpose both A and B", source=src, field="B_transpose")


def decode_fields(funct: int, rs1: int, rs2: int) -> dict:
    """The named fields of a loop command (for ``isa.decode_fields``)."""
    return decode_word(funct, rs1, rs2)


def validate(funct: int, rs1: int, rs2: int, config: GemminiConfig, source: str) -> None:
    """Raise ``IsaError`` when a loop command breaks a rule of ``check_fields``."""
    check_fields(funct, decode_word(funct, rs1, rs2, config.loop_conv_layout), config, source)


def disassemble(funct: int, rs1: int, rs2: int, layout: str = DEFAULT_LAYOUT) -> str:
    """One readable line: the command's name and its nonzero fields in conv ``layout`` (addresses in hex)."""
    parts = [FUNCT_NAMES[funct]]
    for name, value in decode_word(funct, rs1, rs2, layout).items():
        if value:
            parts.append(f"{name}=0x{value:x}" if name in _ADDRESS_FIELDS else f"{name}={value}")
    return " ".join(parts)
