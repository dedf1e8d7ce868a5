"""A NumPy functional model of the Gemmini commands we use.

State: the scratchpad (``sp_rows`` rows of DIM int8), the accumulator
(``acc_rows`` rows of DIM int32), the systolic array's stationary state (WS:
the DIM x DIM weights; OS: the DIM x DIM int32 PE accumulators), the pending
preload, and the config registers of the load (one per mvin id), execute and
store units.  Main memory is a flat little-endian byte array (``numpy.uint8``
or ``bytearray``) addressed by the commands' main-memory addresses; the model
reads and writes it in place.

Semantics (see also ``gemmini/isa.py`` and ``gemmini/numerics.py``):

* mvin (id 0/1/2 uses config_ld id 0/1/2): ``rows`` rows of ``cols``
  elements, row ``r`` read at ``dram + r*stride`` (stride 0 repeats one row).
  Column block ``b`` (DIM columns each) lands at local row
  ``row + b*local_stride + r``; columns beyond ``cols`` are left unchanged.
  Scratchpad mvins read int8 and apply the mvin scale (``scale_round`` to
  int8).  Accumulator mvins read int32 (int8 when ``shrunk``), unscaled (as
  in Gemmini's default configuration); with the accumulate bit they add
  (int32 wrap-around), else they overwrite.  With config_ld pixel repeats P
  a scratchpad row also lands in the P-1 rows above it, shifted by its
  columns, never below the scratchpad's middle row for rows in its upper
  half (Gemmini's PixelRepeater.scala; ``_repeat_pixels``).
* mvout (config_st): from the scratchpad, int8 rows; from the accumulator,
  full int32 rows when the full bit is set, else ``requantize`` (config_st
  scale, activation, saturate to int8).  Column block ``b`` of a wide mvout
  is read from local row ``row + b*DIM``.  With config_st's pooling fields
  an mvout max-pools an image instead (``_mvout_pooled``); config_st's
  scale bits 0xFFFFFFFF keep the previous scale (Gemmini's no-change value).
* preload + compute: operands are read as rows (A with the config_ex A
  stride) and padded with zeros to DIM x DIM, as the execute unit feeds the
  array.  An operand in the accumulator reads full int32 rows with the full
  bit, else rows requantized with config_ex's ``acc_scale``.  (Real Gemmini never does this: the
  model refuses an accumulator A, B or D, see ``check_operand_sources``.)
  WS: ``compute_preloaded`` loads the preloaded B (garbage: zeros) as the
  weights, ``compute_accumulated`` keeps the weights; C = A*W + D (D from
  rs2, garbage = zeros).  OS: ``compute_preloaded`` sets the PE
  accumulators to the preloaded D (garbage = zeros) and adds A*B;
  ``compute_accumulated`` adds A*B.  Each compute consumes the preceding
  preload and writes ``c_rows`` x ``c_cols`` of the result to its C address
  (rows ``c_stride`` apart); garbage C writes nothing.  OS results are first
  shifted right by ``os_shift`` (``rounding_shift``).  C in the scratchpad:
  config_ex activation, then saturate to int8; C in the accumulator: int32,
  added with the accumulate bit, else overwritten.
* WS transposes (config_ex): a transposed A is stored with row ``k`` holding
  column ``k`` of A (rows ``a_stride`` apart); a transposed B likewise for the
  weights, as libgemmini reads them.
* loop instructions (LOOP_WS, LOOP_CONV_WS and their configuration words):
  the words are held; the stream runs as ``loops.Unroller`` issues it (the
  order of Gemmini's LoopMatmul / LoopConv), errors naming the loop's start
  word.  An unrolled mvin from main-memory address 0 writes zeros, as
  Gemmini's zero writer does (only for unrolled commands: our flat test
  memories start at address 0).
* fence and flush change nothing here (the model runs commands in order).

Any out-of-range address, rows or columns over the limits, a unit used
before its config command, a compute without a preload, or a feature the
model does not implement (OS transposes, config_norm) raises
``SimulationError`` naming the command's index in the stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import isa, isa_loops
from ..config import DEFAULT_CONFIG, GemminiConfig
from ..errors import IsaError, SimulationError
from ..numerics import apply_activation, requantize, rounding_shift, saturate, scale_round
from .loops import Unroller, has_loops

SOURCE = "gemmini functional model"


def repeat_floor(row: int, sp_rows: int) -> int:
    """Lowest scratchpad row (rows) a pixel-repeat copy of scratchpad row ``row`` may land in: 0 for rows in
    the lower half of the ``sp_rows``-row scratchpad, ``sp_rows // 2`` for rows in the upper half (the floor
    Gemmini's PixelRepeater.scala subtracts against, so each LOOP_CONV_WS slot's input stays in its half)."""
    half = sp_rows // 2
    return half if row >= half else 0


@dataclass(frozen=True)
class LoadConfig:
    """config_ld state of one mvin id: main-memory stride (bytes), scale, shrunk, local block stride (rows),
    pixel repeats (Gemmini's first-layer optimisation: each row is also written into the ``pixel_repeats - 1``
    rows above it, shifted right by ``pixel * cols`` columns, never below ``repeat_floor``)."""

    stride_bytes: int
    scale: float
    shrunk: bool
    local_stride: int
    pixel_repeats: int = 1


@dataclass(frozen=True)
class ExecuteConfig:
    """config_ex state."""

    dataflow: str
    activation: int
    a_transpose: bool
    b_transpose: bool
    a_stride: int
    acc_scale: float
    c_stride: int
    os_shift: int


@dataclass(frozen=True)
class StoreConfig:
    """config_st state: main-memory stride (bytes), activation and scale of accumulator read-outs, and the
    max-pooling of mvouts (None, or isa's pool_* fields by name without the prefix)."""

    stride_bytes: int
    activation: int
    acc_scale: float
    pool: dict | None = None


@dataclass
class ExecResult:
    """What ``execute`` returns.

    memory: the main memory (the same object that was passed in, updated).
    scratchpad: int8 [sp_rows, DIM]; accumulator: int32 [acc_rows, DIM] (copies of the final state).
    instructions: commands executed (fences included).  counts: commands by name.
    array_macs: MACs the array performed on the (zero-padded) DIM x DIM blocks
    (DIM*DIM*DIM per compute); useful_macs: MACs on the commands' real rows and columns.
    """

    memory: object
    scratchpad: np.ndarray
    accumulator: np.ndarray
    instructions: int
    counts: dict[str, int] = field(default_factory=dict)
    array_macs: int = 0
    useful_macs: int = 0


class Machine:
    """One Gemmini instance's architectural state; ``step`` executes one command."""

    def __init__(self, config: GemminiConfig | None = None):
        self.config = config or DEFAULT_CONFIG
        dim = self.config.dim
        self.scratchpad = np.zeros((self.config.sp_rows, dim), dtype=np.int8)
        self.accumulator = np.zeros((self.config.acc_rows, dim), dtype=np.int32)
        self.load_configs: dict[int, LoadConfig] = {}
        self.execute_config: ExecuteConfig | None = None
        self.store_config: StoreConfig | None = None
        self.weights: np.ndarray | None = None  # WS: the stationary DIM x DIM block (int64)
        self.weight_cols = 0  # WS: columns of the stationary block that hold real weights
        self.pe_acc: np.ndarray | None = None  # OS: the DIM x DIM PE accumulators (int64, kept in int32 range)
        self.pending_preload: dict | None = None
        self.counts: dict[str, int] = {}
        self.instructions = 0
        self.array_macs = 0
        self.useful_macs = 0
        self._unrolled = False  # the command being executed came from a loop unroller
        self._unroller = None   # holds loop configuration words until their loop fires (step by step)

    # --- driving ---------------------------------------------------------------
    def run(self, commands, memory) -> ExecResult:
        """Execute a stream; loop instructions run as the sequence Gemmini's unrollers issue (``sim/loops``),
        an error in it naming the loop's start word."""
        mem = _as_bytes(memory)
        cmds = isa.decode_stream(commands)
        if has_loops(cmds):
            for item in Unroller(self.config).run(cmds):
                self._step_issued(item, mem)
        else:
            for index, cmd in enumerate(cmds):
                self.step(cmd, mem, index)
        return ExecResult(memory=memory, scratchpad=self.scratchpad.copy(), accumulator=self.accumulator.copy(),
                          instructions=self.instructions, counts=dict(self.counts), array_macs=self.array_macs,
                          useful_macs=self.useful_macs)

    def step(self, cmd: isa.Command, memory: np.ndarray, index: int = 0) -> None:
        """Execute one command on ``memory`` (a uint8 array); ``index`` names it in errors."""
        try:
            fields = isa.validate(cmd, self.config)
        except IsaError as exc:
            raise SimulationError(exc.reason, source=SOURCE, field=exc.field, index=index) from None
        name = fields["name"]
        handler = getattr(self, f"_do_{name}", None)
        if handler is None:
            raise SimulationError(f"{name} is not modelled", source=SOURCE, field="funct", index=index)
        handler(fields, memory, index)
        self.instructions += 1
        self.counts[name] = self.counts.get(name, 0) + 1

    # --- config ----------------------------------------------------------------
    def _do_config_ex(self, f, memory, index):
        previous = self.execute_config
        self.execute_config = ExecuteConfig(f["dataflow"], f["activation"], f["a_transpose"], f["b_transpose"],
                                            f["a_stride"], f["acc_scale"], f["c_stride"], f["os_shift"])
        if previous is not None and previous.dataflow != f["dataflow"]:
            # switching dataflow leaves no usable array state behind; changing strides or scales keeps it
            self.weights = None
            self.pe_acc = None
            self.pending_preload = None

    def _do_config_ld(self, f, memory, index):
        self.load_configs[f["id"]] = LoadConfig(f["stride_bytes"], f["scale"], f["shrunk"], f["local_stride"],
                                                max(1, f["pixel_repeats"]))

    def _do_config_st(self, f, memory, index):
        pool = None
        if f["pool_stride"]:
            pool = {k[5:]: f[k] for k in f if k.startswith("pool_") and k != "pool_fields"}
            if not (pool["size"] and pool["porows"] and pool["pocols"] and pool["orows"] and pool["ocols"]):
                raise SimulationError(f"pooling with an empty window or output ({pool})", source=SOURCE,
                                      field="rs1", index=index)
        if f["activation"] > 1:
            raise SimulationError(f"activation {f['activation']} is not modelled", source=SOURCE,
                                  field="activation", index=index)
        scale = f["acc_scale"]
        if f["acc_scale_bits"] == 0xFFFFFFFF:  # Gemmini's ACC_SCALE_NO_CHANGE (LoopConv's pooling configs)
            scale = self.store_config.acc_scale if self.store_config else 1.0
        self.store_config = StoreConfig(f["stride_bytes"], f["activation"], scale, pool)

    # --- data movement -----------------------------------------------------------
    def _do_mvin(self, f, memory, index):
        ld = self.load_configs.get(f["id"])
        if ld is None:
            raise SimulationError(f"{f['name']} before any config_ld with id {f['id']}", source=SOURCE,
                                  field="config_ld", index=index)
        local, rows, cols, dim = f["local"], f["rows"], f["cols"], self.config.dim
        elem_bytes = 4 if local.is_acc and not ld.shrunk else 1
        if self._unrolled and f["dram_addr"] == 0:  # Gemmini's zero writer (our test memories start at 0)
            data = np.zeros((rows, cols * elem_bytes), dtype=np.uint8)
        else:
            data = _read_rows(memory, f["dram_addr"], rows, cols * elem_bytes, ld.stride_bytes, index)
        values = data.view("<i4" if elem_bytes == 4 else np.int8).reshape(rows, cols)
        if not local.is_acc:
            values = scale_round(values, ld.scale, out_bits=8)
        blocks = -(-cols // dim)
        limit = self.config.acc_rows if local.is_acc else self.config.sp_rows
        last = local.row + (blocks - 1) * ld.local_stride + rows - 1
        if last >= limit:
            memory_name = "accumulator" if local.is_acc else "scratchpad"
            raise SimulationError(f"{cols} columns in {blocks} blocks {ld.local_stride} rows apart reach row {last}"
                                  f" of the {limit}-row {memory_name}", source=SOURCE, field="local", index=index)
        for block in range(blocks):
            lo, hi = block * dim, min(cols, (block + 1) * dim)
            first = local.row + block * ld.local_stride
            chunk = values[:, lo:hi]
            if local.is_acc:
                target = self.accumulator[first:first + rows, :hi - lo]
                if local.accumulate:
                    chunk = target.astype(np.int64) + chunk
                self.accumulator[first:first + rows, :hi - lo] = np.asarray(chunk, dtype=np.int64).astype(np.int32)
            else:
                self.scratchpad[first:first + rows, :hi - lo] = chunk
        if ld.pixel_repeats > 1:
            self._repeat_pixels(local, values, ld.pixel_repeats, index)

    def _repeat_pixels(self, local, values, repeats: int, index: int) -> None:
        """Row ``r`` of a scratchpad mvin also lands in row ``r - p`` at columns ``p*cols ...`` for 0 < p <
        ``repeats``, as Gemmini's PixelRepeater.scala does: a row then holds ``repeats`` neighbouring pixels.
        A copy that would fall below ``repeat_floor(r)`` (row 0, or the scratchpad's middle row for rows in
        its upper half) is dropped, so a LOOP_CONV_WS input in the upper half never reaches the weights at the
        top of the lower half.  Only the copied ``cols`` columns are written (the DMA's byte mask, shifted
        with the data); Gemmini asserts that accumulator mvins are never repeated."""
        rows, cols = values.shape
        if local.is_acc:
            raise SimulationError("pixel repeats into the accumulator (Gemmini only repeats scratchpad rows)",
                                  source=SOURCE, field="pixel_repeats", index=index)
        if cols * repeats > self.config.dim:
            raise SimulationError(f"{repeats} pixel repeats of {cols} columns exceed a {self.config.dim}-column row",
                                  source=SOURCE, field="pixel_repeats", index=index)
        for r in range(rows):
            row = local.row + r
            floor = repeat_floor(row, self.config.sp_rows)
            for p in range(1, repeats):
                if row - p >= floor:
                    self.scratchpad[row - p, p * cols:(p + 1) * cols] = values[r]

    _do_mvin2 = _do_mvin
    _do_mvin3 = _do_mvin

    def _do_mvout(self, f, memory, index):
        st = self.store_config
        if st is None:
            raise SimulationError("mvout before any config_st", source=SOURCE, field="config_st", index=index)
        local, rows, cols = f["local"], f["rows"], f["cols"]
        source, dim = (self.accumulator if local.is_acc else self.scratchpad), self.config.dim
        if st.pool is not None:
            return self._mvout_pooled(f, st, source, memory, index)
        # DIM-column block b of a wide mvout is read from local row + b*DIM
        block = np.concatenate([source[local.row + b:local.row + b + rows, :min(dim, cols - b)]
                                for b in range(0, cols, dim)], axis=1)
        if local.is_acc:
            out = block.astype("<i4") if local.full else requantize(block, st.acc_scale, st.activation)
        else:
            out = block
        _write_rows(memory, f["dram_addr"], np.ascontiguousarray(out).view(np.uint8).reshape(rows, -1),
                    st.stride_bytes, index)

    def _mvout_pooled(self, f, st: StoreConfig, source, memory, index) -> None:
        """Max-pooled mvout (libgemmini's semantics): ``cols`` channels of an orows x ocols image starting at the
        local row, read out (scaled, activated) pixel by pixel; each pool_size^2 window (positions outside the
        image count as 0) gives one int8 output at main memory + (porow*out_dim + pocol)*stride."""
        pl, local, cols = st.pool, f["local"], f["cols"]
        pixels = pl["orows"] * pl["ocols"]
        if local.row + pixels > source.shape[0]:
            raise SimulationError(f"the pooled image ({pixels} rows from {local}) leaves the memory", source=SOURCE,
                                  field="local", index=index)
        image = source[local.row:local.row + pixels, :cols]
        if local.is_acc:
            image = requantize(image, st.acc_scale, st.activation)
        size, stride = pl["size"], pl["stride"]
        rows_needed = (pl["porows"] - 1) * stride + size
        cols_needed = (pl["pocols"] - 1) * stride + size
        padded = np.zeros((max(rows_needed, pl["upad"] + pl["orows"]), max(cols_needed, pl["lpad"] + pl["ocols"]),
                           cols), dtype=np.int16)
        padded[pl["upad"]:pl["upad"] + pl["orows"], pl["lpad"]:pl["lpad"] + pl["ocols"]] = \
            np.asarray(image, dtype=np.int16).reshape(pl["orows"], pl["ocols"], cols)
        out = np.full((pl["porows"], pl["pocols"], cols), -128, dtype=np.int16)
        for wr in range(size):
            for wc in range(size):
                out = np.maximum(out, padded[wr:wr + (pl["porows"] - 1) * stride + 1:stride,
                                             wc:wc + (pl["pocols"] - 1) * stride + 1:stride])
        out = out.astype(np.int8)
        for porow in range(pl["porows"]):
            _write_rows(memory, f["dram_addr"] + porow * pl["out_dim"] * st.stride_bytes,
                        np.ascontiguousarray(out[porow]).view(np.uint8), st.stride_bytes, index)

    # --- the array -------------------------------------------------------------
    def _execute_config(self, name, index) -> ExecuteConfig:
        ex = self.execute_config
        if ex is None:
            raise SimulationError(f"{name} before any config_ex", source=SOURCE, field="config_ex", index=index)
        if ex.dataflow == "os" and (ex.a_transpose or ex.b_transpose):
            raise SimulationError("transposed operands are modelled in WS only", source=SOURCE,
                                  field="a_transpose", index=index)
        return ex

    def _do_preload(self, f, memory, index):
        self._execute_config("preload", index)
        check_operand_sources(f, index)
        if self.pending_preload is not None:
            raise SimulationError("two preloads without a compute in between", source=SOURCE, field="preload",
                                  index=index)
        self.pending_preload = f

    def _do_compute_preloaded(self, f, memory, index):
        self._compute(f, memory, index, preloaded=True)

    def _do_compute_accumulated(self, f, memory, index):
        self._compute(f, memory, index, preloaded=False)

    def _compute(self, f, memory, index, preloaded: bool):
        ex = self._execute_config(f["name"], index)
        pre = self.pending_preload
        if pre is None:
            raise SimulationError(f"{f['name']} without a preceding preload", source=SOURCE, field="preload",
                                  index=index)
        self.pending_preload = None
        check_operand_sources(f, index)
        dim = self.config.dim
        if ex.a_transpose:  # A is stored transposed: row k (a_stride apart) holds A[:, k]
            a = self._read_operand(f["a"], f["a_cols"], f["a_rows"], ex.a_stride, ex, index, "a_local").T
        else:
            a = self._read_operand(f["a"], f["a_rows"], f["a_cols"], ex.a_stride, ex, index, "a_local")
        second = self._read_operand(f["bd"], f["bd_rows"], f["bd_cols"], 1, ex, index, "bd_local")
        if ex.dataflow == "ws":
            if preloaded:
                if ex.b_transpose:  # B is stored transposed: row j holds B[:, j]
                    self.weights = self._read_operand(pre["bd"], pre["bd_cols"], pre["bd_rows"], 1, ex, index,
                                                      "bd_local").T
                else:
                    self.weights = self._read_operand(pre["bd"], pre["bd_rows"], pre["bd_cols"], 1, ex, index,
                                                      "bd_local")
                self.weight_cols = 0 if pre["bd"].is_garbage else pre["bd_cols"]
            elif self.weights is None:
                raise SimulationError("compute_accumulated before any weights were loaded", source=SOURCE,
                                      field="compute_accumulated", index=index)
            result = a @ self.weights + second
            self.useful_macs += f["a_rows"] * f["a_cols"] * self.weight_cols
        else:
            if preloaded:
                self.pe_acc = self._read_operand(pre["bd"], pre["bd_rows"], pre["bd_cols"], 1, ex, index, "bd_local")
            elif self.pe_acc is None:
                raise SimulationError("compute_accumulated before any compute_preloaded", source=SOURCE,
                                      field="compute_accumulated", index=index)
            self.pe_acc = _wrap(self.pe_acc + a @ second)
            result = rounding_shift(self.pe_acc, ex.os_shift)
            self.useful_macs += f["a_rows"] * f["a_cols"] * f["bd_cols"]
        self.array_macs += dim * dim * dim
        self._write_c(pre, _wrap(result), ex, index)

    def _read_operand(self, local: isa.LocalAddr, rows: int, cols: int, stride: int, ex: ExecuteConfig,
                      index: int, field: str) -> np.ndarray:
        """A DIM x DIM int64 block: ``rows`` x ``cols`` read from ``local`` (rows ``stride`` apart), zero padded."""
        dim = self.config.dim
        block = np.zeros((dim, dim), dtype=np.int64)
        if local.is_garbage:
            return block
        row_ids = local.row + stride * np.arange(rows)
        limit = self.config.acc_rows if local.is_acc else self.config.sp_rows
        if row_ids[-1] >= limit:
            raise SimulationError(f"{rows} rows {stride} apart from {local} reach row {row_ids[-1]}, outside "
                                  f"{limit} rows", source=SOURCE, field=field, index=index)
        if local.is_acc:
            values = self.accumulator[row_ids, :cols]
            if not local.full:
                values = requantize(values, ex.acc_scale, 0)
        else:
            values = self.scratchpad[row_ids, :cols]
        block[:rows, :cols] = values
        return block

    def _write_c(self, pre: dict, result: np.ndarray, ex: ExecuteConfig, index: int) -> None:
        c: isa.LocalAddr = pre["c"]
        if c.is_garbage:
            return
        rows, cols = pre["c_rows"], pre["c_cols"]
        row_ids = c.row + ex.c_stride * np.arange(rows)
        limit = self.config.acc_rows if c.is_acc else self.config.sp_rows
        if row_ids[-1] >= limit:
            raise SimulationError(f"{rows} C rows {ex.c_stride} apart from {c} reach row {row_ids[-1]}, outside "
                                  f"{limit} rows", source=SOURCE, field="c_local", index=index)
        values = result[:rows, :cols]
        if c.is_acc:
            if c.accumulate:
                values = self.accumulator[row_ids, :cols].astype(np.int64) + values
            self.accumulator[row_ids, :cols] = _wrap(values).astype(np.int32)
        else:
            self.scratchpad[row_ids, :cols] = saturate(apply_activation(values, ex.activation), 8)

    # --- loop instructions ---------------------------------------------------------
    def _step_issued(self, item, memory) -> None:
        self._unrolled = item.from_loop
        try:
            self.step(item.cmd, memory, item.origin)
        finally:
            self._unrolled = False

    def _do_loop_word(self, f, memory, index):
        """A loop configuration word is held; a start word runs the loop's unrolled commands now."""
        self._unroller = self._unroller or Unroller(self.config)
        cmd = isa.Command(f["funct"], *isa_loops.encode_word(f["funct"], {k: f[k] for k, *_ in
                                                                         isa_loops.LAYOUTS[f["funct"]]}))
        for item in self._unroller.run([cmd], start=index):
            self._step_issued(item, memory)

    # --- misc ------------------------------------------------------------------
    def _do_flush(self, f, memory, index):
        pass  # no TLB in the model

    def _do_fence(self, f, memory, index):
        pass  # commands already complete in order


#: Operands that Gemmini reads from the scratchpad only (at input width), by command.
_SCRATCHPAD_OPERANDS = {"preload": (("bd", "its D (OS) / B (WS) operand"),),
                        "compute_preloaded": (("a", "its A operand"), ("bd", "its B (OS) / D (WS) operand")),
                        "compute_accumulated": (("a", "its A operand"), ("bd", "its B (OS) / D (WS) operand"))}


def check_operand_sources(fields: dict, index: int, source: str = SOURCE) -> None:
    """Refuse a preload or compute operand in the accumulator (``SimulationError`` naming the command index).

    Gemmini's execute unit reads A, B and D only from the scratchpad (or the garbage address: zeros):
    libgemmini throws on an accumulator operand ("Preloads from accumulator not supported" for a
    preload), and the RTL reads one at input width after scaling, so a full-width int32 bias read as D is
    wrong on real hardware.  A 32-bit bias belongs in the output's accumulator rows before the first
    accumulating compute.  Only C (the preload's rs2) may name the accumulator."""
    for key, what in _SCRATCHPAD_OPERANDS.get(fields["name"], ()):
        local = fields[key]
        if not local.is_garbage and local.is_acc:
            raise SimulationError(f"{fields['name']} reads {what} from the accumulator ({local}); Gemmini reads "
                                  "compute and preload operands only from the scratchpad (move a 32-bit bias "
                                  "into the output's accumulator rows instead)", source=source,
                                  field=f"{fields['name']}.{key}", index=index)


for _name in isa_loops.FUNCT_NAMES.values():  # every loop word goes to the unroller
    setattr(Machine, f"_do_{_name}", Machine._do_loop_word)


def _wrap(values) -> np.ndarray:
    """int64 values wrapped to the int32 range (two's complement), kept as int64."""
    return np.asarray(values, dtype=np.int64).astype(np.int32).astype(np.int64)


def _as_bytes(memory) -> np.ndarray:
    if isinstance(memory, np.ndarray):
        if memory.dtype != np.uint8 or memory.ndim != 1:
            raise SimulationError(f"main memory must be a 1-D uint8 array, got {memory.dtype} {memory.shape}",
                                  source=SOURCE, field="memory")
        return memory
    if isinstance(memory, bytearray):
        return np.frombuffer(memory, dtype=np.uint8)
    raise SimulationError(f"main memory must be a numpy uint8 array or a bytearray, got {type(memory).__name__}",
                          source=SOURCE, field="memory")


def _check_span(memory: np.ndarray, addr: int, rows: int, row_bytes: int, stride: int, index: int) -> None:
    end = addr + (rows - 1) * stride + row_bytes
    if end > memory.size:
        raise SimulationError(f"main-memory bytes 0x{addr:x}..0x{end - 1:x} ({rows} rows of {row_bytes} B, stride "
                              f"{stride} B) are outside the {memory.size}-byte memory", source=SOURCE,
                              field="dram_addr", index=index)


def _read_rows(memory, addr, rows, row_bytes, stride, index) -> np.ndarray:
    _check_span(memory, addr, rows, row_bytes, stride, index)
    starts = addr + stride * np.arange(rows)
    return np.ascontiguousarray(memory[starts[:, None] + np.arange(row_bytes)[None, :]])


def _write_rows(memory, addr, data: np.ndarray, stride, index) -> None:
    rows, row_bytes = data.shape
    _check_span(memory, addr, rows, row_bytes, stride, index)
    starts = addr + stride * np.arange(rows)
    memory[starts[:, None] + np.arange(row_bytes)[None, :]] = data


def execute(commands, memory, config: GemminiConfig | None = None) -> ExecResult:
    """Run a command stream on a fresh machine; ``memory`` (uint8 array or bytearray) is updated in place."""
    return Machine(config).run(commands, memory)
