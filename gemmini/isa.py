"""Gemmini's command set: the one definition of funct numbers, bit fields and local addresses.

Every command is a RoCC instruction (custom-3 opcode 0x7B, funct3 = 3: two
source registers, no destination) whose ``funct7`` selects the command and
whose two 64-bit operands ``rs1`` and ``rs2`` carry the fields:

===================  =====  ==============================================  ==============================================
command              funct  rs1                                             rs2
===================  =====  ==============================================  ==============================================
config_ex            0      [1:0]=0; [2] dataflow (0 OS, 1 WS);              [31:0] OS right shift; [63:48] C stride
                            [4:3] activation; [8] transpose A;
                            [9] transpose B; [31:16] A stride (rows);
                            [63:32] acc scale (float32 bits)
config_ld            0      [1:0]=1; [2] shrunk; [4:3] id (mvin/2/3);        main-memory row stride (bytes)
                            [31:16] local block stride (rows);
                            [63:32] mvin scale (float32 bits)
config_st            0      [1:0]=2; [3:2] activation                       [31:0] main-memory row stride (bytes);
                                                                            [63:32] acc scale (float32 bits)
mvin2 / mvin / mvin3 1/2/14 main-memory address                             [31:0] local; [47:32] cols; [63:48] rows
mvout                3      main-memory address                             [31:0] local; [47:32] cols; [63:48] rows
compute_preloaded    4      [31:0] A local; [47:32] cols; [63:48] rows      [31:0] B (OS) / D (WS); cols; rows
compute_accumulated  5      as compute_preloaded                            as compute_preloaded
preload              6      [31:0] D (OS) / B (WS); [47:32] cols; [63:48]   [31:0] C local; [47:32] cols; [63:48] rows
flush                7      [0] skip                                        0
fence (pseudo)       128    0                                               0
loop_ws, configs     8-13   see ``gemmini/isa_loops.py`` (gemmini.h's layouts; unrolled by ``sim/loops.py``)
loop_conv_ws, cfgs   15-21  see ``gemmini/isa_loops.py``
===================  =====  ==============================================  ==============================================

``fence`` is not a Gemmini instruction: on RISC-V it is the plain ``fence``
(the core waits for the accelerator to drain).  In a Python command stream it
is the pseudo-command with funct ``FENCE = 128``, outside the 7-bit funct7
space, so it can never be confused with a real instruction.

Local addresses (32 bits): bit 31 = accumulator (1) or scratchpad (0); bit 30
= accumulate on accumulator writes; bit 29 = full 32-bit rows on accumulator
reads; bits [28:0] = the row.  All ones (``GARBAGE``) is the garbage address:
zeros when read as B or D, "do not write" as C.

The encoders check their arguments against a ``GemminiConfig`` (the default
config when none is given) and raise ``IsaError``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterable

from . import isa_loops
from .config import DEFAULT_CONFIG, LOCAL_ROW_BITS, GemminiConfig
from .errors import IsaError
from .numerics import activation_code, float32_bits, float32_from_bits

# --- funct numbers ---------------------------------------------------------------
CONFIG = 0
MVIN2 = 1
MVIN = 2
MVOUT = 3
COMPUTE_PRELOADED = 4
COMPUTE_ACCUMULATED = 5
PRELOAD = 6
FLUSH = 7
MVIN3 = 14
FENCE = 128  #: pseudo-command (outside funct7's 0..127): the core's ``fence``

#: config sub-commands, selected by rs1[1:0]
CONFIG_EX = 0
CONFIG_LD = 1
CONFIG_ST = 2
CONFIG_NORM = 3

#: RoCC encoding of every command
OPCODE_CUSTOM3 = 0x7B
ROCC_FUNCT3 = 3  #: xd=0, xs1=1, xs2=1

#: mvin id (0, 1, 2) -> funct, and back
MVIN_FUNCTS = (MVIN, MVIN2, MVIN3)
MVIN_ID = {MVIN: 0, MVIN2: 1, MVIN3: 2}

DATAFLOWS = {"os": 0, "ws": 1}

FUNCT_NAMES = {
    MVIN2: "mvin2", MVIN: "mvin", MVOUT: "mvout", COMPUTE_PRELOADED: "compute_preloaded",
    COMPUTE_ACCUMULATED: "compute_accumulated", PRELOAD: "preload", FLUSH: "flush", MVIN3: "mvin3",
    FENCE: "fence", **isa_loops.FUNCT_NAMES,
}
CONFIG_NAMES = {CONFIG_EX: "config_ex", CONFIG_LD: "config_ld", CONFIG_ST: "config_st", CONFIG_NORM: "config_norm"}

# --- local addresses -------------------------------------------------------------
ACC_BIT = 1 << 31
ACCUMULATE_BIT = 1 << 30
FULL_BIT = 1 << 29
ROW_MASK = (1 << LOCAL_ROW_BITS) - 1
GARBAGE = 0xFFFFFFFF

U64 = (1 << 64) - 1


@dataclass(frozen=True)
class LocalAddr:
    """A decoded 32-bit local address.

    is_acc: the accumulator (else the scratchpad).  accumulate: writes add to
    the accumulator row.  full: accumulator reads return full 32-bit rows.
    row: the row index.  is_garbage: the all-ones garbage address.
    """

    row: int
    is_acc: bool = False
    accumulate: bool = False
    full: bool = False
    is_garbage: bool = False

    @classmethod
    def decode(cls, addr: int) -> "LocalAddr":
        addr = int(addr) & 0xFFFFFFFF
        return _decode_local(cls, addr) if cls is LocalAddr else cls._decode(addr)

    @classmethod
    def _decode(cls, addr: int) -> "LocalAddr":
        if addr == GARBAGE:
            return cls(row=ROW_MASK, is_acc=True, accumulate=True, full=True, is_garbage=True)
        return cls(row=addr & ROW_MASK, is_acc=bool(addr & ACC_BIT), accumulate=bool(addr & ACCUMULATE_BIT),
                   full=bool(addr & FULL_BIT))

    def encode(self) -> int:
        if self.is_garbage:
            return GARBAGE
        return (ACC_BIT if self.is_acc else 0) | (ACCUMULATE_BIT if self.accumulate else 0) \
            | (FULL_BIT if self.full else 0) | (self.row & ROW_MASK)

    def __str__(self) -> str:
        if self.is_garbage:
            return "garbage"
        if not self.is_acc:
            return f"sp[{self.row}]"
        flags = ("+" if self.accumulate else "") + ("full" if self.full else "")
        return f"acc{flags and '(' + flags + ')'}[{self.row}]"


@functools.lru_cache(maxsize=1 << 16)
def _decode_local(cls, addr: int) -> LocalAddr:
    return cls._decode(addr)


def sp(row: int) -> int:
    """The local address of scratchpad row ``row``."""
    row = _int(row, "row", "isa.sp")
    if not 0 <= row <= ROW_MASK:
        raise IsaError(f"row {row} outside 0..{ROW_MASK}", source="isa.sp", field="row")
    return row


def acc(row: int, accumulate: bool = False, full: bool = False) -> int:
    """The local address of accumulator row ``row`` (``accumulate``: add on write; ``full``: 32-bit read)."""
    row = _int(row, "row", "isa.acc")
    if not 0 <= row <= ROW_MASK:
        raise IsaError(f"row {row} outside 0..{ROW_MASK}", source="isa.acc", field="row")
    return LocalAddr(row, is_acc=True, accumulate=bool(accumulate), full=bool(full)).encode()


def local_str(addr: int) -> str:
    return str(LocalAddr.decode(addr))


# --- the command -----------------------------------------------------------------
@dataclass(frozen=True)
class Command:
    """One Gemmini command: funct7 and the two 64-bit operands."""

    funct: int
    rs1: int = 0
    rs2: int = 0

    def __post_init__(self):
        for name in ("funct", "rs1", "rs2"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                try:
                    object.__setattr__(self, name, int(value))
                except (TypeError, ValueError):
                    raise IsaError(f"must be an integer, got {value!r}", source="Command", field=name) from None
        if not (0 <= self.funct <= 127 or self.funct == FENCE):
            raise IsaError(f"funct {self.funct} outside 0..127 (or {FENCE} for fence)", source="Command",
                           field="funct")
        for name in ("rs1", "rs2"):
            if not 0 <= getattr(self, name) <= U64:
                raise IsaError(f"{getattr(self, name)} is not an unsigned 64-bit value", source="Command",
                               field=name)

    @property
    def name(self) -> str:
        if self.funct == CONFIG:
            return CONFIG_NAMES[self.rs1 & 3]
        return FUNCT_NAMES.get(self.funct, f"funct{self.funct}")

    @property
    def is_mvin(self) -> bool:
        return self.funct in MVIN_ID

    @property
    def is_compute(self) -> bool:
        return self.funct in (COMPUTE_PRELOADED, COMPUTE_ACCUMULATED)

    def decode(self) -> dict:
        """The command's fields by name (addresses as ints, local addresses also as ``LocalAddr``)."""
        return decode_fields(self)

    def instruction_word(self, rs1_reg: int = 11, rs2_reg: int = 12) -> int:
        """The 32-bit RISC-V instruction word (custom-3, funct3 3, rd x0) reading rs1/rs2 from the given registers."""
        if self.funct == FENCE:
            return 0x0FF0000F  # fence iorw, iorw
        return (self.funct << 25) | (rs2_reg << 20) | (rs1_reg << 15) | (ROCC_FUNCT3 << 12) | OPCODE_CUSTOM3

    def __str__(self) -> str:
        return disassemble(self)


# --- field helpers ---------------------------------------------------------------
def _int(value, field: str, source: str) -> int:
    if isinstance(value, bool):
        return int(value)
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise IsaError(f"must be an integer, got {value!r}", source=source, field=field) from None
    if as_int != value:
        raise IsaError(f"must be an integer, got {value!r}", source=source, field=field)
    return as_int


def _check_range(value, lo: int, hi: int, field: str, source: str) -> int:
    value = _int(value, field, source)
    if not lo <= value <= hi:
        raise IsaError(f"{value} outside {lo}..{hi}", source=source, field=field)
    return value


def _scale_bits(scale, field: str, source: str) -> int:
    try:
        bits = float32_bits(float(scale))
    except (TypeError, ValueError):
        raise IsaError(f"must be a number, got {scale!r}", source=source, field=field) from None
    if (bits >> 23) & 0xFF == 0xFF:
        raise IsaError(f"{scale!r} is not a finite float32", source=source, field=field)
    return bits


def _bit(value, field: str, source: str) -> int:
    if value not in (0, 1, True, False):
        raise IsaError(f"must be 0/1 or a bool, got {value!r}", source=source, field=field)
    return int(bool(value))


def _activation(activation, source: str) -> int:
    try:
        return activation_code(activation)
    except (TypeError, ValueError) as exc:
        raise IsaError(str(exc), source=source, field="activation") from None


def check_local(addr: int, rows: int, config: GemminiConfig, *, field: str, source: str,
                allow_garbage: bool = False, row_stride: int = 1) -> LocalAddr:
    """Decode ``addr`` and check that ``rows`` rows (``row_stride`` apart) starting there are inside its memory."""
    addr = _check_range(addr, 0, 0xFFFFFFFF, field, source)
    local = LocalAddr.decode(addr)
    if local.is_garbage:
        if not allow_garbage:
            raise IsaError("the garbage address is not allowed here", source=source, field=field)
        return local
    limit = config.acc_rows if local.is_acc else config.sp_rows
    memory = "accumulator" if local.is_acc else "scratchpad"
    last = local.row + (rows - 1) * row_stride
    if local.row >= limit or last >= limit:
        raise IsaError(f"{local} with {rows} rows reaches row {last}, outside the {limit}-row {memory}",
                       source=source, field=field)
    if not local.is_acc and (local.accumulate or local.full):
        raise IsaError(f"scratchpad address 0x{addr:08x} has accumulator flag bits set", source=source, field=field)
    return local


def _pack_local(addr: int, cols: int, rows: int) -> int:
    return (rows << 48) | (cols << 32) | (addr & 0xFFFFFFFF)


def _unpack_local(word: int) -> tuple[int, int, int]:
    return word & 0xFFFFFFFF, (word >> 32) & 0xFFFF, (word >> 48) & 0xFFFF


# --- encoders --------------------------------------------------------------------
def config_ex(dataflow="ws", activation=0, a_transpose=False, b_transpose=False, a_stride: int = 1,
              acc_scale: float = 1.0, c_stride: int = 1, os_shift: int = 0, *,
              config: GemminiConfig | None = None) -> Command:
    """Configure the execute unit: dataflow ("ws"/"os" or 1/0), activation (0/1, "none"/"relu") for
    outputs written to the scratchpad, operand transposes, A stride and C stride (rows), the
    accumulator scale (float32) and the OS right shift (bits)."""
    src = "isa.config_ex"
    if isinstance(dataflow, str):
        if dataflow.lower() not in DATAFLOWS:
            raise IsaError(f"dataflow must be 'ws' or 'os', got {dataflow!r}", source=src, field="dataflow")
        flow = DATAFLOWS[dataflow.lower()]
    else:
        flow = _check_range(dataflow, 0, 1, "dataflow", src)
    act = _activation(activation, src)
    at = _bit(a_transpose, "a_transpose", src)
    bt = _bit(b_transpose, "b_transpose", src)
    if flow == 1 and at and bt:
        raise IsaError("weight-stationary cannot transpose both A and B", source=src, field="b_transpose")
    if flow == 0 and bt and not at:
        raise IsaError("output-stationary cannot transpose B without A", source=src, field="b_transpose")
    a_stride = _check_range(a_stride, 0, 0xFFFF, "a_stride", src)
    c_stride = _check_range(c_stride, 0, 0xFFFF, "c_stride", src)
    os_shift = _check_range(os_shift, 0, 31, "os_shift", src)
    rs1 = (_scale_bits(acc_scale, "acc_scale", src) << 32) | (a_stride << 16) | (bt << 9) | (at << 8) \
        | (act << 3) | (flow << 2) | CONFIG_EX
    rs2 = (c_stride << 48) | os_shift
    return Command(CONFIG, rs1, rs2)


def config_ld(stride_bytes: int, scale: float = 1.0, shrunk: bool = False, id: int = 0,
              local_stride: int | None = None, *, config: GemminiConfig | None = None) -> Command:
    """Configure mvin ``id`` (0, 1, 2 = mvin, mvin2, mvin3): main-memory row stride (bytes; 0 repeats
    one row), mvin scale (float32; applied to scratchpad mvins), ``shrunk`` (an accumulator mvin reads
    int8 instead of int32) and the local block stride: the DIM-column block ``b`` of a wide mvin lands
    at local row + b*local_stride (None: DIM, Gemmini's default)."""
    src = "isa.config_ld"
    cfg = config or DEFAULT_CONFIG
    stride_bytes = _check_range(stride_bytes, 0, U64, "stride_bytes", src)
    ident = _check_range(id, 0, 2, "id", src)
    local_stride = cfg.dim if local_stride is None else _check_range(local_stride, 0, 0xFFFF, "local_stride", src)
    rs1 = (_scale_bits(scale, "scale", src) << 32) | (local_stride << 16) | (ident << 3) \
        | (_bit(shrunk, "shrunk", src) << 2) | CONFIG_LD
    return Command(CONFIG, rs1, stride_bytes)


def config_st(stride_bytes: int, activation=0, acc_scale: float = 1.0, *,
              config: GemminiConfig | None = None) -> Command:
    """Configure mvout: main-memory row stride (bytes), activation and scale of accumulator read-outs."""
    src = "isa.config_st"
    stride_bytes = _check_range(stride_bytes, 0, 0xFFFFFFFF, "stride_bytes", src)
    act = _activation(activation, src)
    rs1 = (act << 2) | CONFIG_ST
    rs2 = (_scale_bits(acc_scale, "acc_scale", src) << 32) | stride_bytes
    return Command(CONFIG, rs1, rs2)


def mvin(dram_addr: int, local: int, rows: int, cols: int, id: int = 0, *,
         config: GemminiConfig | None = None) -> Command:
    """Move ``rows`` x ``cols`` elements from main memory into the scratchpad or accumulator.

    ``id`` 0/1/2 selects mvin/mvin2/mvin3 (funct 2/1/14) and with it the config_ld state.  Rows
    <= DIM; columns <= 64 B worth (64 int8, 16 int32 at DIM 16).
    """
    src = "isa.mvin"
    cfg = config or DEFAULT_CONFIG
    ident = _check_range(id, 0, 2, "id", src)
    dram_addr = _check_range(dram_addr, 0, U64, "dram_addr", src)
    rows = _check_range(rows, 1, cfg.dim, "rows", src)
    addr = _check_range(local, 0, 0xFFFFFFFF, "local", src)
    max_cols = cfg.max_mvin_cols_acc if LocalAddr.decode(addr).is_acc else cfg.max_mvin_cols_sp
    cols = _check_range(cols, 1, max_cols, "cols", src)
    check_local(addr, rows, cfg, field="local", source=src)
    return Command(MVIN_FUNCTS[ident], dram_addr, _pack_local(addr, cols, rows))


def mvout(dram_addr: int, local: int, rows: int, cols: int, *, config: GemminiConfig | None = None) -> Command:
    """Move ``rows`` (<= DIM) x ``cols`` from the scratchpad or accumulator to main memory; up to 64 B of
    output columns (a full-width accumulator read: one DIM block), DIM-column block ``b`` read from local
    row + b*DIM, as Gemmini's loop unroller and gemmini.h issue them."""
    src = "isa.mvout"
    cfg = config or DEFAULT_CONFIG
    dram_addr = _check_range(dram_addr, 0, U64, "dram_addr", src)
    rows = _check_range(rows, 1, cfg.dim, "rows", src)
    addr = _check_range(local, 0, 0xFFFFFFFF, "local", src)
    wide = LocalAddr.decode(addr)
    cols = _check_range(cols, 1, cfg.max_mvin_cols_acc if wide.is_acc and wide.full else cfg.max_mvin_cols_sp,
                        "cols", src)
    check_local(addr, (-(-cols // cfg.dim) - 1) * cfg.dim + rows, cfg, field="local", source=src)
    return Command(MVOUT, dram_addr, _pack_local(addr, cols, rows))


def _block_operand(addr, rows, cols, cfg, field, src, allow_garbage=True) -> int:
    rows = _check_range(rows, 1, cfg.dim, f"{field}_rows", src)
    cols = _check_range(cols, 1, cfg.dim, f"{field}_cols", src)
    addr = _check_range(addr, 0, 0xFFFFFFFF, f"{field}_local", src)
    check_local(addr, rows, cfg, field=f"{field}_local", source=src, allow_garbage=allow_garbage)
    return _pack_local(addr, cols, rows)


def preload(bd_local: int, c_local: int, bd_rows: int, bd_cols: int, c_rows: int, c_cols: int, *,
            config: GemminiConfig | None = None) -> Command:
    """Name the stationary operand (WS: B; OS: D, the bias) and where the next compute's C goes
    (``GARBAGE``: do not write).  Rows and columns <= DIM."""
    src = "isa.preload"
    cfg = config or DEFAULT_CONFIG
    return Command(PRELOAD, _block_operand(bd_local, bd_rows, bd_cols, cfg, "bd", src),
                   _block_operand(c_local, c_rows, c_cols, cfg, "c", src))


def _compute(funct, a_local, bd_local, a_rows, a_cols, bd_rows, bd_cols, config, src) -> Command:
    cfg = config or DEFAULT_CONFIG
    return Command(funct, _block_operand(a_local, a_rows, a_cols, cfg, "a", src),
                   _block_operand(bd_local, bd_rows, bd_cols, cfg, "bd", src))


def compute_preloaded(a_local: int, bd_local: int, a_rows: int, a_cols: int, bd_rows: int, bd_cols: int, *,
                      config: GemminiConfig | None = None) -> Command:
    """Compute with the operand just preloaded: stream A; the second operand is D (WS) or B (OS)."""
    return _compute(COMPUTE_PRELOADED, a_local, bd_local, a_rows, a_cols, bd_rows, bd_cols, config,
                    "isa.compute_preloaded")


def compute_accumulated(a_local: int, bd_local: int, a_rows: int, a_cols: int, bd_rows: int, bd_cols: int, *,
                        config: GemminiConfig | None = None) -> Command:
    """Compute reusing the array's state: WS keeps the weights, OS keeps adding into the PE accumulators."""
    return _compute(COMPUTE_ACCUMULATED, a_local, bd_local, a_rows, a_cols, bd_rows, bd_cols, config,
                    "isa.compute_accumulated")


def flush(skip: bool = False) -> Command:
    """Flush Gemmini's TLB (``skip``: skip the current translation)."""
    return Command(FLUSH, _bit(skip, "skip", "isa.flush"), 0)


def fence() -> Command:
    """The pseudo-command for the core's ``fence``: wait until every earlier command has finished."""
    return Command(FENCE, 0, 0)


# --- decoding --------------------------------------------------------------------
#: config_st's pooling fields (rs1): name, low bit, mask; pool_stride 0 means no pooling
_POOL_FIELDS = (("pool_stride", 4, 3), ("pool_size", 6, 3), ("pool_upad", 8, 3), ("pool_lpad", 10, 3),
                ("pool_out_dim", 24, 0xFF), ("pool_porows", 32, 0xFF), ("pool_pocols", 40, 0xFF),
                ("pool_orows", 48, 0xFF), ("pool_ocols", 56, 0xFF))
def decode_fields(cmd: Command) -> dict:
    """The named fields of ``cmd`` (see the module table)."""
    f, rs1, rs2 = cmd.funct, cmd.rs1, cmd.rs2
    out: dict = {"name": cmd.name, "funct": f}
    if f == CONFIG:
        kind = rs1 & 3
        if kind == CONFIG_EX:
            out.update(dataflow="ws" if (rs1 >> 2) & 1 else "os", activation=(rs1 >> 3) & 3,
                       a_transpose=bool((rs1 >> 8) & 1), b_transpose=bool((rs1 >> 9) & 1),
                       a_stride=(rs1 >> 16) & 0xFFFF, acc_scale=float32_from_bits(rs1 >> 32),
                       os_shift=rs2 & 0xFFFFFFFF, c_stride=(rs2 >> 48) & 0xFFFF)
        elif kind == CONFIG_LD:
            out.update(shrunk=bool((rs1 >> 2) & 1), id=(rs1 >> 3) & 3, local_stride=(rs1 >> 16) & 0xFFFF,
                       scale=float32_from_bits(rs1 >> 32), stride_bytes=rs2, pixel_repeats=(rs1 >> 8) & 0xFF)
        elif kind == CONFIG_ST:
            out.update(activation=(rs1 >> 2) & 3, stride_bytes=rs2 & 0xFFFFFFFF, acc_scale_bits=rs2 >> 32,
                       acc_scale=float32_from_bits(rs2 >> 32), pool_fields=rs1 >> 4)
            out.update({name: (rs1 >> lo) & mask for name, lo, mask in _POOL_FIELDS})
        else:
            out.update(raw_rs1=rs1, raw_rs2=rs2)
    elif f in MVIN_ID or f == MVOUT:
        addr, cols, rows = _unpack_local(rs2)
        out.update(dram_addr=rs1, local_addr=addr, local=LocalAddr.decode(addr), cols=cols, rows=rows)
        if f in MVIN_ID:
            out["id"] = MVIN_ID[f]
    elif f == PRELOAD:
        bd, bd_cols, bd_rows = _unpack_local(rs1)
        c, c_cols, c_rows = _unpack_local(rs2)
        out.update(bd_local=bd, bd=LocalAddr.decode(bd), bd_rows=bd_rows, bd_cols=bd_cols,
                   c_local=c, c=LocalAddr.decode(c), c_rows=c_rows, c_cols=c_cols)
    elif f in (COMPUTE_PRELOADED, COMPUTE_ACCUMULATED):
        a, a_cols, a_rows = _unpack_local(rs1)
        bd, bd_cols, bd_rows = _unpack_local(rs2)
        out.update(a_local=a, a=LocalAddr.decode(a), a_rows=a_rows, a_cols=a_cols,
                   bd_local=bd, bd=LocalAddr.decode(bd), bd_rows=bd_rows, bd_cols=bd_cols)
    elif f == FLUSH:
        out.update(skip=bool(rs1 & 1))
    elif f in isa_loops.LOOP_FUNCTS:
        out.update(isa_loops.decode_fields(f, rs1, rs2))
    elif f != FENCE:
        out.update(raw_rs1=rs1, raw_rs2=rs2)
    return out


def decode(funct: int, rs1: int, rs2: int) -> Command:
    """A ``Command`` from raw fields (checks that they fit the instruction)."""
    return Command(funct, rs1, rs2)


def validate(cmd: Command, config: GemminiConfig | None = None) -> dict:
    """Re-check a (possibly hand-made or decoded) command's fields against ``config``; returns its fields."""
    cfg = config or DEFAULT_CONFIG
    # a main-memory address only has to fit 64 bits (Command checks that), so it is left out of the key
    dram_free = cmd.funct in MVIN_ID or cmd.funct == MVOUT
    _check_command(cmd.funct, 0 if dram_free else cmd.rs1, cmd.rs2, cfg)
    return decode_fields(cmd)


@functools.lru_cache(maxsize=1 << 16)
def _check_command(funct: int, rs1: int, rs2: int, cfg: GemminiConfig) -> None:
    """Raise IsaError when (funct, rs1, rs2) is not a legal command on ``cfg`` (cached: streams repeat commands)."""
    cmd = Command(funct, rs1, rs2)
    fields = decode_fields(cmd)
    src = f"isa.validate({cmd.name})"
    if cmd.funct in MVIN_ID:
        mvin(fields["dram_addr"], fields["local_addr"], fields["rows"], fields["cols"], MVIN_ID[cmd.funct], config=cfg)
    elif cmd.funct == MVOUT:
        mvout(fields["dram_addr"], fields["local_addr"], fields["rows"], fields["cols"], config=cfg)
    elif cmd.funct == PRELOAD:
        preload(fields["bd_local"], fields["c_local"], fields["bd_rows"], fields["bd_cols"], fields["c_rows"],
                fields["c_cols"], config=cfg)
    elif cmd.is_compute:
        _compute(cmd.funct, fields["a_local"], fields["bd_local"], fields["a_rows"], fields["a_cols"],
                 fields["bd_rows"], fields["bd_cols"], cfg, src)
    elif cmd.funct == CONFIG:
        if cmd.rs1 & 3 == CONFIG_NORM:
            raise IsaError("config_norm is not supported", source=src, field="rs1")
        if cmd.rs1 & 3 == CONFIG_EX:
            config_ex(fields["dataflow"], fields["activation"], fields["a_transpose"], fields["b_transpose"],
                      fields["a_stride"], fields["acc_scale"], fields["c_stride"], fields["os_shift"], config=cfg)
        if cmd.rs1 & 3 == CONFIG_ST and fields["activation"] > 1:
            raise IsaError(f"activation {fields['activation']} is not supported", source=src, field="activation")
    elif cmd.funct in isa_loops.LOOP_FUNCTS:
        isa_loops.validate(cmd.funct, cmd.rs1, cmd.rs2, cfg, src)
    elif cmd.funct not in (FLUSH, FENCE):
        raise IsaError(f"funct {cmd.funct} is not a command this framework uses", source=src, field="funct")


def decode_stream(items) -> tuple[Command, ...]:
    """Commands from a text log or an iterable.

    Text: one command per line, ``funct rs1 rs2`` (decimal or 0x-hex integers), or ``fence``;
    blank lines and ``#`` comments are skipped.  Iterable: ``Command`` objects or
    ``(funct, rs1, rs2)`` triples.
    """
    if isinstance(items, str):
        commands = []
        for number, line in enumerate(items.splitlines(), start=1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            parts = text.replace(",", " ").split()
            if parts[0].lower() == "fence" and len(parts) == 1:
                commands.append(fence())
                continue
            if len(parts) != 3:
                raise IsaError(f"expected 'funct rs1 rs2' or 'fence', got {text!r}", source=f"command log line {number}")
            try:
                values = [int(p, 0) for p in parts]
            except ValueError:
                raise IsaError(f"not integers: {text!r}", source=f"command log line {number}") from None
            commands.append(Command(*values))
        return tuple(commands)
    out = []
    for item in items:
        out.append(item if isinstance(item, Command) else Command(*item))
    return tuple(out)


def encode_stream(commands: Iterable[Command]) -> str:
    """The text log form read by ``decode_stream`` (hex, one command a line)."""
    lines = []
    for cmd in commands:
        lines.append("fence" if cmd.funct == FENCE else f"{cmd.funct} 0x{cmd.rs1:016x} 0x{cmd.rs2:016x}")
    return "\n".join(lines) + ("\n" if lines else "")


def disassemble(cmd: Command) -> str:
    """One readable line, e.g. ``mvin dram=0x1000 local=sp[12] rows=4 cols=16``."""
    f = decode_fields(cmd)
    name = f["name"]
    if name == "config_ex":
        return (f"config_ex dataflow={f['dataflow']} act={f['activation']} a_t={int(f['a_transpose'])} "
                f"b_t={int(f['b_transpose'])} a_stride={f['a_stride']} c_stride={f['c_stride']} "
                f"acc_scale={f['acc_scale']:g} shift={f['os_shift']}")
    if name == "config_ld":
        return (f"config_ld id={f['id']} stride={f['stride_bytes']} scale={f['scale']:g} "
                f"shrunk={int(f['shrunk'])} local_stride={f['local_stride']}")
    if name == "config_st":
        return f"config_st stride={f['stride_bytes']} act={f['activation']} acc_scale={f['acc_scale']:g}"
    if cmd.funct in MVIN_ID or cmd.funct == MVOUT:
        return f"{name} dram=0x{f['dram_addr']:x} local={f['local']} rows={f['rows']} cols={f['cols']}"
    if name == "preload":
        return f"preload bd={f['bd']} {f['bd_rows']}x{f['bd_cols']} c={f['c']} {f['c_rows']}x{f['c_cols']}"
    if cmd.is_compute:
        return f"{name} a={f['a']} {f['a_rows']}x{f['a_cols']} bd={f['bd']} {f['bd_rows']}x{f['bd_cols']}"
    if name == "flush":
        return f"flush skip={int(f['skip'])}"
    if name == "fence":
        return "fence"
    if cmd.funct in isa_loops.LOOP_FUNCTS:
        return isa_loops.disassemble(cmd.funct, cmd.rs1, cmd.rs2)
    return f"{name} rs1=0x{cmd.rs1:x} rs2=0x{cmd.rs2:x}"
