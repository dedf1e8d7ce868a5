"""Gemmini hardware parameters and the matching cost-model preset.

One ``GemminiConfig`` describes a Gemmini instance: the DIM x DIM array, the
scratchpad (rows of DIM int8 = DIM bytes) and the accumulator (rows of DIM
int32 = 4*DIM bytes), the decoupled command queues and the DMA.  The defaults
are Gemmini's default configuration (DIM 16, 256 KiB scratchpad in 4 banks,
64 KiB accumulator in 2 banks, queues 8/8/2, a 16 B/cycle DMA bus) with the
main-memory latency of our RTL harness (16 cycles).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, replace

from .errors import SimulationError

#: Row addresses live in bits [28:0] of a local address; bits 29-31 are flags.
LOCAL_ROW_BITS = 29
#: LOOP_CONV_WS configuration-word encodings (field positions in ``gemmini.isa_loops``): "180c468", gemmini.h
#: of gemmini-rocc-tests 180c468 (rectangular images), and "f13847e", the older square-image words that
#: Gemmini f13847e (Chipyard 1.10.0's) decodes.
LOOP_CONV_LAYOUTS = ("180c468", "f13847e")
#: Whose load, execute and store units the timing model follows: "ours" (our RTL's) and "f13847e" (Gemmini
#: f13847e's, from its Scala).
UNIT_MODELS = ("ours", "f13847e")


@dataclass(frozen=True)
class GemminiConfig:
    """A Gemmini instance.

    dim: the array is dim x dim PEs.  sp_kib / acc_kib: scratchpad and
    accumulator capacity in KiB.  sp_banks / acc_banks: bank counts.
    ld_queue / ex_queue / st_queue: command queue depths (entries).
    dma_bytes_per_cycle: DMA bus width (bytes per cycle; one beat, the unit
    of a DMA request in our RTL).  dma_request_bytes: largest DMA request of
    Gemmini's own DMA (bytes; our RTL and timing model request one beat at a
    time).  max_mvin_bytes: most bytes of one row moved by one mvin (64 B: 4
    DIM-blocks of int8 or 1 block of int32 at DIM 16).  dma_latency_cycles:
    main-memory latency of one DMA read (cycles; 16, the RTL harness's
    default) and dma_max_inflight: DMA read beats in flight at once (the
    RTL's 64 credits); both used by the timing model only.
    compute_overhead_cycles: cycles each WS compute command adds to the rows
    it streams, on average, in the cost-model preset (``arch``): 0, as in our
    RTL, where back-to-back computes leave no bubble (the timing model, which
    follows the RTL, charges the rows only).  acc_bits / input_bits: accumulator and input/weight
    word sizes (bits).  issue_cycles: core cycles between two commands the core itself issues (timing model
    only; 1 as in our RTL's harness; a Rocket core running a program's C loops needs more; commands that
    Gemmini's loop unrollers issue are not affected).  loop_conv_layout: how the hardware decodes the
    LOOP_CONV_WS configuration words (``LOOP_CONV_LAYOUTS``; the models decode and encode them so).
    units: whose load, execute and store units the timing model follows (``UNIT_MODELS``): "ours", our RTL's
    (every mvin row fetched by the DMA and written at the assembler's pace, as many mvins in flight as the
    queue holds, as many computes in the array as its pipeline takes, an mvout row's beats sent while the
    next row is read), or "f13847e", Gemmini f13847e's (Chipyard 1.10.0's; ``gemmini.sim.timing_units``:
    ``LoadUnit.mvin_command``, ``ExecuteUnit.compute``, ``StoreUnit.mvout``).
    soc_line_fill_cycles / soc_line_bytes: the SoC's memory behind the DMA (timing model only): a
    ``soc_line_bytes`` line that no earlier mvin of the run read takes ``soc_line_fill_cycles`` on the memory
    bus before its bytes can come (0: no such cost, our RTL harness's fixed-latency memory; Chipyard 1.10.0's
    default SoC: 64-byte lines over an 8-byte memory bus, 8 cycles, the data cold in its L2 when a program
    starts).
    """

    dim: int = 16
    sp_kib: int = 256
    acc_kib: int = 64
    sp_banks: int = 4
    acc_banks: int = 2
    ld_queue: int = 8
    ex_queue: int = 8
    st_queue: int = 2
    dma_bytes_per_cycle: int = 16
    dma_request_bytes: int = 64
    max_mvin_bytes: int = 64
    dma_latency_cycles: int = 16
    dma_max_inflight: int = 64
    compute_overhead_cycles: int = 0
    acc_bits: int = 32
    input_bits: int = 8
    issue_cycles: int = 1
    loop_conv_layout: str = LOOP_CONV_LAYOUTS[0]
    units: str = "ours"
    soc_line_fill_cycles: int = 0
    soc_line_bytes: int = 64

    def __post_init__(self):
        src = "GemminiConfig"
        if self.loop_conv_layout not in LOOP_CONV_LAYOUTS:
            raise SimulationError(f"unknown layout {self.loop_conv_layout!r} (one of {', '.join(LOOP_CONV_LAYOUTS)})",
                                  source=src, field="loop_conv_layout")
        if self.units not in UNIT_MODELS:
            raise SimulationError(f"unknown units {self.units!r} (one of {', '.join(UNIT_MODELS)})",
                                  source=src, field="units")
        positive = ("dim", "sp_kib", "acc_kib", "sp_banks", "acc_banks", "ld_queue", "ex_queue",
                    "st_queue", "dma_bytes_per_cycle", "dma_request_bytes", "max_mvin_bytes", "dma_max_inflight",
                    "issue_cycles", "soc_line_bytes")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SimulationError(f"must be a positive integer, got {value!r}", source=src, field=name)
        for name in ("dma_latency_cycles", "compute_overhead_cycles", "soc_line_fill_cycles"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise SimulationError(f"must be a non-negative integer, got {value!r}", source=src, field=name)
        if self.input_bits != 8:
            raise SimulationError(f"only int8 inputs are supported, got {self.input_bits} bits",
                                  source=src, field="input_bits")
        if self.acc_bits != 32:
            raise SimulationError(f"only int32 accumulators are supported, got {self.acc_bits} bits",
                                  source=src, field="acc_bits")
        if self.dim > 0xFFFF:
            raise SimulationError("dim must fit the 16-bit rows/cols fields", source=src, field="dim")
        if (self.sp_kib * 1024) % self.sp_row_bytes:
            raise SimulationError(f"{self.sp_kib} KiB is not a whole number of {self.sp_row_bytes}-byte rows",
                                  source=src, field="sp_kib")
        if (self.acc_kib * 1024) % self.acc_row_bytes:
            raise SimulationError(f"{self.acc_kib} KiB is not a whole number of {self.acc_row_bytes}-byte rows",
                                  source=src, field="acc_kib")
        if self.sp_rows % self.sp_banks:
            raise SimulationError(f"{self.sp_rows} scratchpad rows do not split into {self.sp_banks} banks",
                                  source=src, field="sp_banks")
        if self.acc_rows % self.acc_banks:
            raise SimulationError(f"{self.acc_rows} accumulator rows do not split into {self.acc_banks} banks",
                                  source=src, field="acc_banks")
        if self.sp_rows >= 1 << LOCAL_ROW_BITS or self.acc_rows >= 1 << LOCAL_ROW_BITS:
            raise SimulationError(f"more than 2^{LOCAL_ROW_BITS} rows cannot be addressed",
                                  source=src, field="sp_kib")

    @property
    def gemmini_units(self) -> bool:
        """Whether the timing model follows Gemmini f13847e's own units (``units`` "f13847e"), not our RTL's."""
        return self.units == "f13847e"

    # --- derived sizes ---------------------------------------------------
    @property
    def input_bytes(self) -> int:
        """Bytes of one input/weight word."""
        return self.input_bits // 8

    @property
    def acc_bytes(self) -> int:
        """Bytes of one accumulator word."""
        return self.acc_bits // 8

    @property
    def sp_row_bytes(self) -> int:
        """Bytes of one scratchpad row (DIM int8)."""
        return self.dim * self.input_bytes

    @property
    def acc_row_bytes(self) -> int:
        """Bytes of one accumulator row (DIM int32)."""
        return self.dim * self.acc_bytes

    @property
    def sp_rows(self) -> int:
        """Scratchpad rows in all banks."""
        return self.sp_kib * 1024 // self.sp_row_bytes

    @property
    def acc_rows(self) -> int:
        """Accumulator rows in all banks."""
        return self.acc_kib * 1024 // self.acc_row_bytes

    @property
    def bank_rows(self) -> int:
        """Rows of one scratchpad bank."""
        return self.sp_rows // self.sp_banks

    @property
    def acc_bank_rows(self) -> int:
        """Rows of one accumulator bank."""
        return self.acc_rows // self.acc_banks

    @property
    def sp_addr_bits(self) -> int:
        """Bits of a scratchpad row address (14 for the default config)."""
        return max(1, math.ceil(math.log2(self.sp_rows)))

    @property
    def acc_addr_bits(self) -> int:
        """Bits of an accumulator row address (10 for the default config)."""
        return max(1, math.ceil(math.log2(self.acc_rows)))

    @property
    def max_mvin_cols_sp(self) -> int:
        """Most int8 columns one mvin moves into the scratchpad (64 at DIM 16)."""
        return max(self.max_mvin_bytes // self.input_bytes, self.dim)

    @property
    def max_mvin_cols_acc(self) -> int:
        """Most int32 columns one mvin moves into the accumulator (16 at DIM 16)."""
        return max(self.max_mvin_bytes // self.acc_bytes, self.dim)

    @property
    def peak_macs_per_cycle(self) -> int:
        """MACs per cycle of the whole array."""
        return self.dim * self.dim

    def ideal_cycles(self, macs: int) -> float:
        """Gemmini's own accounting: MACs / (DIM*DIM)."""
        return macs / self.peak_macs_per_cycle

    def to_dict(self) -> dict:
        return asdict(self)

    # --- the cost-model view ---------------------------------------------
    def arch(self, dataflow: str = "ws"):
        """The matching ``costmodel.presets.gemmini`` architecture for ``dataflow`` ("ws" or "os")."""
        if dataflow not in ("ws", "os"):
            raise SimulationError(f"dataflow must be 'ws' or 'os', got {dataflow!r}",
                                  source="GemminiConfig.arch", field="dataflow")
        from costmodel import presets  # the preset lives with the cost model

        return presets.gemmini(dim=self.dim, scratchpad_kib=self.sp_kib, accumulator_kib=self.acc_kib,
                               dataflow=dataflow, sp_banks=self.sp_banks, acc_banks=self.acc_banks,
                               compute_overhead_cycles=self.compute_overhead_cycles)

    @classmethod
    def from_arch(cls, arch, **overrides) -> "GemminiConfig":
        """The config of a ``costmodel.presets.gemmini`` architecture (read from ``arch.params``)."""
        params = getattr(arch, "params", None) or {}
        missing = [k for k in ("dim", "scratchpad_kib", "accumulator_kib") if k not in params]
        if missing:
            raise SimulationError(f"not a Gemmini preset: arch.params lacks {missing}",
                                  source=f"arch {getattr(arch, 'name', arch)!s}", field="params")
        fields = dict(dim=int(params["dim"]), sp_kib=int(params["scratchpad_kib"]),
                      acc_kib=int(params["accumulator_kib"]))
        if "sp_banks" in params:
            fields["sp_banks"] = int(params["sp_banks"])
        if "acc_banks" in params:
            fields["acc_banks"] = int(params["acc_banks"])
        if "compute_overhead_cycles" in params:
            fields["compute_overhead_cycles"] = int(params["compute_overhead_cycles"])
        fields.update(overrides)
        return cls(**fields)


#: Gemmini's default configuration.
DEFAULT_CONFIG = GemminiConfig()

#: Gemmini's default configuration in Chipyard 1.10.0's SoC (Gemmini f13847e, one Rocket core), as the timing
#: model describes it: Gemmini's own units (``units`` "f13847e": two mvins in flight, the zero writer, stride-0
#: rows fetched once, the pixel repeater, six mesh tags, mvout rows gathered before they are sent, the
#: scratchpad's writes before the array's reads; from its Scala) and the SoC's memory (64-byte lines over an
#: 8-byte memory bus: rocket-chip's default bus width, which Chipyard 1.10.0's AbstractConfig keeps; data cold
#: in the L2 when a program starts).  Main-memory latency as our RTL harness's (16 cycles).
CHIPYARD_SOC_CONFIG = GemminiConfig(units="f13847e", soc_line_fill_cycles=8, soc_line_bytes=64)

#: The machines a timing model of Gemmini can describe, by name (``soc_config``): our RTL in its harness, and
#: Gemmini f13847e in Chipyard 1.10.0's SoC.
SOCS = {"ours": DEFAULT_CONFIG, "chipyard-1.10": CHIPYARD_SOC_CONFIG}
#: What each machine of ``SOCS`` is, in words (the CLI names it beside the cycles its timing model gives).
SOC_DESCRIPTIONS = {"ours": "our RTL in its harness",
                    "chipyard-1.10": "Gemmini f13847e's units in Chipyard 1.10.0's SoC"}


def soc_config(name: str, dim: int | None = None) -> GemminiConfig:
    """The configuration of machine ``name`` (``SOCS``), with a ``dim`` x ``dim`` array when given."""
    if name not in SOCS:
        raise SimulationError(f"unknown machine {name!r} (one of {', '.join(SOCS)})", source="GemminiConfig",
                              field="soc")
    config = SOCS[name]
    return replace(config, dim=dim) if dim else config


#: A small configuration for tests: DIM 4, 4 KiB scratchpad (1024 rows of 4 B), 2 KiB accumulator (128 rows of 16 B).
SMALL_CONFIG = GemminiConfig(dim=4, sp_kib=4, acc_kib=2)


# --- a gemmini_params.h beside the user's simulator -------------------------------------------------------
class ParamsError(SimulationError):
    """A gemmini_params.h that cannot be read (bad input: exit 2)."""

    exit_code = 2


#: C types of gemmini_params.h's elem_t / acc_t and their widths (bits).
_C_INT_BITS = {"int8_t": 8, "uint8_t": 8, "int16_t": 16, "int32_t": 32, "int64_t": 64, "float": 32, "double": 64}


@dataclass(frozen=True)
class GemminiParams:
    """What a ``gemmini_params.h`` (the header Gemmini generates beside a build) says.

    config: the ``GemminiConfig`` (DIM, scratchpad banks x rows, accumulator rows, MAX_BYTES, data types;
    accumulator banks, queues and DMA keep their defaults: the header does not give them).  elem_t /
    acc_t: the C types.  defines: every ``#define NAME VALUE`` as text.  loop_ws / loop_conv: the loop
    unrollers; the header has no switch for them (Gemmini's default configuration has both), so they are
    True unless ``GEMMINI_NO_LOOP_WS`` / ``GEMMINI_NO_LOOP_CONV`` is defined there.
    """

    config: GemminiConfig
    elem_t: str
    acc_t: str
    defines: dict
    loop_ws: bool = True
    loop_conv: bool = True


_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)(?:\s+(.*?))?\s*(?://.*)?$")
_TYPEDEF = re.compile(r"^\s*typedef\s+([\w\s]+?)\s+(\w+)\s*;")


def read_params(path, **overrides) -> GemminiParams:
    """Read a ``gemmini_params.h``-style file: DIM, BANK_NUM, BANK_ROWS, ACC_ROWS, MAX_BYTES (optional) and
    the elem_t / acc_t typedefs.  ``overrides``: GemminiConfig fields the header does not give (acc_banks,
    queues, DMA, loop_conv_layout: Gemmini f13847e and its successors generate the same header).  A missing or malformed field raises ``ParamsError`` naming the file and the field."""
    from pathlib import Path

    path = Path(path)
    src = str(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise ParamsError(f"cannot read: {exc.strerror}", source=src, field="file") from None
    defines, types = {}, {}
    for line in text.splitlines():
        if m := _DEFINE.match(line):  # function-like macros do not match
            defines[m.group(1)] = (m.group(2) or "").strip()
        elif m := _TYPEDEF.match(line):
            types[m.group(2)] = " ".join(m.group(1).split())

    def integer(name: str, default: int | None = None) -> int:
        if name not in defines:
            if default is not None:
                return default
            raise ParamsError("missing #define", source=src, field=name)
        try:
            return int(defines[name].strip("()"), 0)
        except ValueError:
            raise ParamsError(f"not an integer: {defines[name]!r}", source=src, field=name) from None

    dim, banks, bank_rows, acc_rows = (integer(n) for n in ("DIM", "BANK_NUM", "BANK_ROWS", "ACC_ROWS"))
    for name in ("elem_t", "acc_t"):
        if name not in types:
            raise ParamsError("missing typedef", source=src, field=name)
        if types[name] not in _C_INT_BITS:
            raise ParamsError(f"unsupported type {types[name]!r}", source=src, field=name)
    in_bits, acc_bits = _C_INT_BITS[types["elem_t"]], _C_INT_BITS[types["acc_t"]]
    sp_bytes, acc_bytes = banks * bank_rows * dim * in_bits // 8, acc_rows * dim * acc_bits // 8
    for name, nbytes in (("BANK_ROWS", sp_bytes), ("ACC_ROWS", acc_bytes)):
        if nbytes % 1024:
            raise ParamsError(f"{nbytes} bytes is not a whole number of KiB", source=src, field=name)
    fields = dict(dim=dim, sp_banks=banks, sp_kib=sp_bytes // 1024, acc_kib=acc_bytes // 1024,
                  max_mvin_bytes=integer("MAX_BYTES", GemminiConfig.max_mvin_bytes), input_bits=in_bits,
                  acc_bits=acc_bits)
    fields.update(overrides)
    try:
        config = GemminiConfig(**fields)
    except SimulationError as exc:
        raise ParamsError(exc.reason, source=src, field=exc.field) from None
    return GemminiParams(config, types["elem_t"], types["acc_t"], defines,
                         "GEMMINI_NO_LOOP_WS" not in defines, "GEMMINI_NO_LOOP_CONV" not in defines)
