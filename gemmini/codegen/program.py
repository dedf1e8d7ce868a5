"""Gemmini code generation: a mapping of a matmul or convolution -> a command program -> C.

``generate(workload, mapping, arch_or_config, dataflow=...)`` returns a
``Program``: the exact command stream (``gemmini.isa.Command`` objects) that
follows the mapping's tile sizes, array unrolling and loop orders, the
main-memory buffers it addresses, and the loop-form description from which
``emit_c`` prints C over ``gemmini_cosa.h`` (the same commands, issued by
loops, so the C stays small for big layers).  See ``codegen.tiling`` for the
scratchpad/accumulator layout and ``codegen.build`` for the command
structure.

Main memory (the functional model's byte array, and the C program's
buffers): ``input`` (matmul A [M, K]; conv NHWC int8), ``weights`` (B [K, N];
conv [R_rows, S_cols, C, K] int8 = the GEMM B [R*S*C, K]), ``bias`` (int32
[N or K]), ``output`` (C [M, N]; conv NHWC int8); a batched matmul's buffers
lead with the batch ([B, M, K], [B, K, N], bias [B, N], [B, M, N]) and a
grouped convolution's weights are [R, S, C/groups, K] (see
``codegen.tiling.problem_of``), plus ``partials`` (int32
partial sums, when the mapping leaves an output tile before its reduction
ends) and ``zeros`` (one zero row, the source of convolution padding).
"""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .. import isa
from .build import _Builder, build_program
from .examples import self_check_scale
from .ir import count_stmts, py_source
from .lowering import lowering_of, prologue
from .tiling import Plan, Problem, make_plan, problem_of, untransposed
from ..config import GemminiConfig
from ..errors import CodegenError

DRAM_ALIGN = 64
MAX_COMMANDS_LOWER_BOUND = 1 << 19
"""Programs are refused before they are expanded when they need more than this many computes (MACs over
DIM^3, what one compute does at most): the explicit command stream is several times longer (ResNet-50's
layers need at most about 29,000 and BERT-base (512 tokens) about 295,000; far more would expand for minutes
and gigabytes)."""
ZEROS_BYTES = 64


class Buffer(NamedTuple):
    """A main-memory buffer: byte ``offset`` from the memory base, ``shape`` and numpy ``dtype`` name."""

    offset: int
    shape: tuple
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Program:
    """A generated Gemmini program.

    commands: the expanded command stream.  buffers: name -> Buffer (main
    memory layout; addresses in ``commands`` are ``offset`` + position).
    memory_bytes: size of the main memory the stream addresses.
    statements: the loop-form program (``codegen.ir``) that ``emit_c`` prints.
    plan: tile sizes and scratchpad/accumulator layout.
    """

    name: str
    commands: tuple
    buffers: dict
    memory_bytes: int
    config: GemminiConfig
    dataflow: str
    workload: object = field(compare=False)
    mapping: object = field(compare=False)
    plan: Plan = field(compare=False)
    statements: tuple = field(compare=False)
    bias: bool = True
    scale: float = 1.0
    relu: bool = False

    @property
    def kind(self) -> str:
        return self.plan.problem.kind

    @property
    def macs(self) -> int:
        """MACs of the layer (of the original layer for a lowered workload, ``gemmini.codegen.lowering``)."""
        low = lowering_of(self.workload)
        return low.macs if low is not None else self.plan.problem.macs

    @property
    def problem(self) -> Problem:
        """The workload as a matmul/convolution (image rows as rows, whatever the plan's orientation)."""
        return untransposed(self.plan.problem)

    def counts(self) -> dict:
        """Commands by name."""
        out: dict = {}
        for cmd in self.commands:
            out[cmd.name] = out.get(cmd.name, 0) + 1
        return out

    def ir_size(self) -> int:
        """Statements of the loop-form program (what the emitted C grows with)."""
        return count_stmts(self.statements)

    def array_cycles(self) -> int:
        """DIM cycles per compute command: the array's occupancy when nothing else stalls it (cycles)."""
        return self.config.dim * sum(1 for cmd in self.commands if cmd.is_compute)

    def dram_bytes(self) -> int:
        """Main-memory bytes moved by the stream's mvin and mvout commands."""
        return dram_bytes(self.commands, self.config)

    def relative(self, commands=None) -> list:
        """``(funct, rs1, rs2)`` with main-memory addresses replaced by ``(buffer, offset)``: comparable with a
        log taken where buffers live elsewhere (the C program on the host)."""
        spans = sorted((b.offset, b.offset + max(b.nbytes, 1), name) for name, b in self.buffers.items())
        return relative_stream(self.commands if commands is None else commands, spans)


def relative_stream(commands, spans) -> list:
    """Replace mvin/mvout main-memory addresses with (buffer name, byte offset) using ``spans``:
    (start, end, name) triples."""
    out = []
    for cmd in commands:
        rs1 = cmd.rs1
        if cmd.funct in isa.MVIN_ID or cmd.funct == isa.MVOUT:
            for lo, hi, name in spans:
                if lo <= rs1 < hi:
                    rs1 = (name, rs1 - lo)
                    break
            else:
                rs1 = ("?", rs1)
        out.append((cmd.funct, rs1, cmd.rs2))
    return out


def dram_bytes(commands, config: GemminiConfig) -> int:
    """Bytes moved between main memory and the scratchpad/accumulator by mvin and mvout."""
    total = 0
    for cmd in commands:
        if cmd.funct in isa.MVIN_ID or cmd.funct == isa.MVOUT:
            local = isa.LocalAddr.decode(cmd.rs2 & 0xFFFFFFFF)
            cols = (cmd.rs2 >> 32) & 0xFFFF
            rows = (cmd.rs2 >> 48) & 0xFFFF
            wide = local.is_acc and (cmd.funct != isa.MVOUT or local.full)
            total += rows * cols * (4 if wide else 1)
    return total


def _config_of(arch_or_config, dataflow):
    """(GemminiConfig, Arch or None, dataflow) from a Gemmini preset Arch or a GemminiConfig."""
    if isinstance(arch_or_config, GemminiConfig):
        return arch_or_config, None, dataflow or "ws"
    arch = arch_or_config
    params = getattr(arch, "params", None) or {}
    name = getattr(arch, "name", "?")
    if not str(name).startswith("gemmini") or "dim" not in params:
        raise CodegenError(f"architecture '{name}' is not the Gemmini preset (costmodel.presets.gemmini); the "
                           "Gemmini generator needs its levels and parameters", source=f"arch {name}",
                           field="name")
    config = GemminiConfig.from_arch(arch)
    arch_flow = params.get("dataflow") or getattr(arch, "dataflow", None)
    if dataflow and arch_flow and dataflow != arch_flow:
        raise CodegenError(f"dataflow '{dataflow}' asked, but the architecture is the '{arch_flow}' preset",
                           source=f"arch {name}", field="dataflow")
    return config, arch, dataflow or arch_flow or "ws"


def _layout(problem: Problem, plan: Plan) -> tuple[dict, int]:
    shapes = problem.buffer_shapes()
    builder = _Builder(plan, True, 1.0, False)
    if builder.spills:
        shapes["partials"] = (shapes["output"][0], "int32")
    if builder.padded:
        shapes["zeros"] = ((ZEROS_BYTES,), "uint8")
    buffers, pos = {}, 0
    for name, (shape, dtype) in shapes.items():
        buf = Buffer(pos, tuple(int(s) for s in shape), dtype)
        buffers[name] = buf
        pos += -(-max(buf.nbytes, 1) // DRAM_ALIGN) * DRAM_ALIGN
    return buffers, pos


def _encoders(config: GemminiConfig):
    names = ("config_ex", "config_ld", "config_st", "mvin", "mvout", "preload", "compute_preloaded",
             "compute_accumulated", "flush")
    # commands repeat (the same scratchpad/accumulator blocks are revisited), so encoding is memoized;
    # the encoders still check every distinct command against the config
    enc = {n: functools.lru_cache(maxsize=1 << 16)(functools.partial(getattr(isa, n), config=config))
           for n in names}
    enc["fence"] = isa.fence
    return types.SimpleNamespace(**enc)


def _sp(row: int) -> int:
    return int(row)


def _acc(row: int, accumulate, full: bool) -> int:
    return isa.ACC_BIT | (isa.ACCUMULATE_BIT if accumulate else 0) | (isa.FULL_BIT if full else 0) | int(row)


def expand(statements, buffers: dict, config: GemminiConfig) -> tuple:
    """The command stream of loop-form ``statements`` (addresses from ``buffers``' offsets)."""
    namespace: dict = {}
    exec(compile(py_source(statements), "<gemmini program>", "exec"), namespace)  # our own generated code
    out: list = []
    try:
        namespace["_program"](out.append, _encoders(config), {n: b.offset for n, b in buffers.items()},
                              _sp, _acc, isa.GARBAGE)
    except isa.IsaError as exc:
        raise CodegenError(f"command {len(out)} cannot be encoded: {exc}", source="gemmini codegen") from None
    return tuple(out)


def choose_plan(problem: Problem, mapping, config, flow, *, source, double_buffer, acc_double_buffer,
                orientation: str = "auto") -> Plan:
    """The plan of ``problem`` or of its transpose (a convolution walked down image columns), whichever
    lets computes stream more rows (ties: whichever moves the accumulator in longer runs);
    ``orientation`` "rows" or "columns" forces one."""
    if orientation not in ("auto", "rows", "columns"):
        raise CodegenError(f"orientation must be auto, rows or columns, got {orientation!r}", source=source,
                           field="orientation")
    candidates = [problem]
    if problem.kind == "conv2d":
        candidates = {"auto": [problem, problem.transpose()], "rows": [problem],
                      "columns": [problem.transpose()]}[orientation]
    best, best_score, first_error = None, (-1.0, -1.0), None
    for cand in candidates:
        try:
            plan = make_plan(cand, mapping, config, flow, source=source, double_buffer=double_buffer,
                             acc_double_buffer=acc_double_buffer)
        except CodegenError as exc:
            first_error = first_error or exc
            continue
        builder = _Builder(plan, True, 1.0, False)
        score = (builder.rows_per_compute(), builder.rows_per_store())
        if score > best_score:
            best, best_score = plan, score
    if best is None:
        raise first_error
    return best


def generate(workload, mapping, arch_or_config, *, dataflow: str | None = None, bias: bool = True,
             scale: float | str = 1.0, relu: bool = False, double_buffer: bool | None = None,
             validate: bool = True, orientation: str = "auto", pipeline: bool | None = None) -> Program:
    """The Gemmini program of ``workload`` (matmul, batched matmul, conv2d, grouped or depthwise conv2d)
    under ``mapping``.

    arch_or_config: the Gemmini preset Arch the mapping was made for (its
    config and dataflow are read from it), or a GemminiConfig.  dataflow:
    "ws" or "os" (OS: matmuls, and convolutions that unroll output columns).
    A batch/group dim is never unrolled on the array (CodegenError); its
    Registers-level loop, if any, runs as the innermost Accumulator-level loop.
    bias: add the int32 bias (else start from zero).  scale: the float32
    output scale, or "auto" for ``codegen.examples.self_check_scale`` (few
    example outputs saturate); relu: ReLU before saturating to int8.
    double_buffer: None =
    as the architecture's levels say (the WS preset double-buffers the
    scratchpad and accumulator), or, given a config, wherever tiles fit
    twice; True/False to ask (one buffer where two do not fit).
    validate: check the mapping with ``mappings.validate`` against the
    architecture when one is given.  orientation: a convolution's scratchpad
    and accumulator tiles are laid out image row by image row ("rows") or
    column by column ("columns": computes then stream down columns); "auto"
    takes the one whose computes stream more rows (the mapping's loops and
    tiles are the same either way).  pipeline: issue the next tiles' mvins and
    the previous accumulator tile's mvouts among the current tile's computes
    (``codegen.pipeline``: the decoupled queues then overlap the transfers
    with compute); None = whenever the plan double-buffers a tile, False =
    each tile's moves as one burst where it changes.  Raises CodegenError (a SimulationError,
    hence a FrameworkError) for unsupported workloads and mappings.
    """
    config, arch, flow = _config_of(arch_or_config, dataflow)
    if flow not in ("ws", "os"):
        raise CodegenError(f"dataflow must be 'ws' or 'os', got {flow!r}", source="gemmini codegen",
                           field="dataflow")
    problem = problem_of(workload)
    source = f"mapping of {workload.name} on gemmini ({flow})"
    least = workload.macs // config.dim ** 3
    if least > MAX_COMMANDS_LOWER_BOUND:
        raise CodegenError(f"the program would issue at least {least:,} computes ({workload.macs:,} MACs over "
                           f"DIM^3 = {config.dim ** 3:,}), more than {MAX_COMMANDS_LOWER_BOUND:,}; use --style "
                           "loops (the loop-instruction program) or a smaller layer", source=source,
                           field="commands")
    if arch is not None and validate:
        from mappings.validate import validate as validate_mapping

        validate_mapping(mapping, workload, arch)
    sp_double = acc_double = double_buffer
    if double_buffer is None and arch is not None:  # as the architecture (and so the mapping) asks
        sp_double = bool(getattr(arch.levels[1], "double_buffered", False))
        acc_double = bool(getattr(arch.levels[2], "double_buffered", False))
    plan = choose_plan(problem, mapping, config, flow, source=source, double_buffer=sp_double,
                       acc_double_buffer=acc_double, orientation=orientation)
    if pipeline is None and arch is not None and arch.params.get("pipelined") is False:
        pipeline = False  # the preset (and so the cost model) asks for the serial stream
    if scale == "auto":
        scale = self_check_scale(problem)
    statements = tuple(build_program(plan, bias=bias, scale=scale, relu=relu, pipeline=pipeline))
    # a lowered workload's layout transform on the device, if any
    statements = tuple(prologue(workload, config)) + statements
    buffers, memory_bytes = _layout(problem, plan)
    commands = expand(statements, buffers, config)
    return Program(workload.name, commands, buffers, memory_bytes, config, flow, workload, mapping, plan,
                   statements, bool(bias), float(scale), bool(relu))
