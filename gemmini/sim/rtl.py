"""Co-simulation of our Gemmini-compatible RTL (``gemmini/rtl/``) with Verilator.

The SystemVerilog design executes the command set of ``gemmini/isa.py``; its
decoder constants are generated from ``isa.py`` (``isa_package``), so there
is one definition of the encodings.  A C++ harness drives the Verilated
model: it pushes each command (funct, rs1, rs2) into the front end, serves
the DMA port from main memory with a fixed latency, runs the clock until the
accelerator is idle at every fence, and counts cycles and per-unit busy
cycles.  Every simulation has a cycle limit; an illegal command makes the RTL
raise its error flag and the harness stop with the command index and reason
(``SimulationError`` here).

Two ways to run:

* ``run_trace(commands, memory, config)``: a command stream and a main-memory
  image (numpy uint8, addressed like the functional model's); the image is
  updated in place.  Main-memory spans are bounds-checked by the RTL.  LOOP_WS
  runs through the RTL's unroller (``gemmini_loop_ws.sv``); a stream with
  LOOP_CONV_WS is unrolled on the host (``_unroll_on_host``), errors naming
  the loop's start word.
* ``run_c(c_source, config)``: an emitted C program (with its ``main``) is
  compiled natively against ``gemmini_cosa.h``'s host hooks and linked with
  the harness: its commands go into the model, the DMA reads and writes the
  program's own memory (host pointers).

``run_rtl(program_or_c, config, ...)`` is the entry the CLI uses; it returns
the same fields as the other simulators (``RtlRun``).

Builds are cached under ``$COSA_RTL_CACHE`` (default
``~/.cache/cosa-framework/rtl``) in a folder named by a hash of the RTL,
the harness, the generated package, the parameters and the Verilator version.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import isa, isa_loops
from ..config import DEFAULT_CONFIG, LOCAL_ROW_BITS, GemminiConfig
from ..errors import SimulationError
from .loops import Unroller

SOURCE = "gemmini RTL co-simulation"
RTL_DIR = Path(__file__).resolve().parents[1] / "rtl"
HARNESS_DIR = RTL_DIR / "harness"
INCLUDE_DIR = Path(__file__).resolve().parents[1] / "include"

#: RTL sources in compile order (packages first).
RTL_SOURCES = ("gemmini_dpi_pkg.sv", "gemmini_delay.sv", "gemmini_pe.sv", "gemmini_mesh.sv", "gemmini_sram.sv",
               "gemmini_loop_ws.sv", "gemmini_frontend.sv", "gemmini_load.sv", "gemmini_store.sv", "gemmini_execute.sv",
               "gemmini_top.sv")
HARNESS_SOURCES = ("cosim.h", "cosim.cpp", "trace_main.cpp", "host_hooks.cpp")

#: The RTL's error codes (status port ``error_code``) and what they mean.
ERROR_REASONS = {
    1: "unknown or unsupported funct",
    2: "rows outside 1..DIM",
    3: "columns outside the limit",
    4: "local address range outside the scratchpad/accumulator",
    5: "unit used before its config command",
    6: "unsupported configuration (transposes, activation, pooling, config_norm, shift)",
    7: "the garbage address is not allowed here",
    8: "scratchpad address with accumulator flag bits",
    9: "main-memory span outside the memory",
    10: "compute without a preceding preload",
    11: "two preloads without a compute in between",
    12: "compute_accumulated before the array was loaded (compute_preloaded) after config_ex",
    13: "a compute or preload operand (A, B, D) in the accumulator: Gemmini reads them only from the scratchpad",
}
_ERROR_NAMES = {1: "FUNCT", 2: "ROWS", 3: "COLS", 4: "ADDRESS", 5: "UNCONFIGURED", 6: "UNSUPPORTED_CONFIG",
                7: "GARBAGE", 8: "FLAGS", 9: "DRAM", 10: "NO_PRELOAD", 11: "PRELOAD_TWICE", 12: "ARRAY_EMPTY",
                13: "ACC_OPERAND"}

#: Default main-memory latency of one DMA read (cycles) and cycle limit.
DEFAULT_MEM_LATENCY = 16
DEFAULT_MAX_CYCLES = 200_000_000


def _bit_index(mask: int) -> int:
    if mask <= 0 or mask & (mask - 1):
        raise SimulationError(f"0x{mask:x} is not a single bit", source="gemmini.sim.rtl.isa_package")
    return mask.bit_length() - 1


def isa_package() -> str:
    """SystemVerilog package ``gemmini_isa_pkg``: funct numbers, config selectors and address bits from isa.py.

    Bit positions of config_ex fields are found by encoding with isa.py and
    comparing, so the decoder cannot drift from the encoder.
    """
    base = isa.config_ex(dataflow="os").rs1
    ws_bit = _bit_index(isa.config_ex(dataflow="ws").rs1 ^ base)
    at_bit = _bit_index(isa.config_ex(dataflow="os", a_transpose=True).rs1 ^ base)
    bt_bit = _bit_index(isa.config_ex(dataflow="os", a_transpose=True, b_transpose=True).rs1 ^ base ^ (1 << at_bit))
    consts = {
        "FUNCT_CONFIG": isa.CONFIG, "FUNCT_MVIN2": isa.MVIN2, "FUNCT_MVIN": isa.MVIN, "FUNCT_MVOUT": isa.MVOUT,
        "FUNCT_COMPUTE_PRELOADED": isa.COMPUTE_PRELOADED, "FUNCT_COMPUTE_ACCUMULATED": isa.COMPUTE_ACCUMULATED,
        "FUNCT_PRELOAD": isa.PRELOAD, "FUNCT_FLUSH": isa.FLUSH, "FUNCT_MVIN3": isa.MVIN3, "FUNCT_FENCE": isa.FENCE,
        "CONFIG_EX": isa.CONFIG_EX, "CONFIG_LD": isa.CONFIG_LD, "CONFIG_ST": isa.CONFIG_ST,
        "LOCAL_ACC_BIT": _bit_index(isa.ACC_BIT), "LOCAL_ACCUMULATE_BIT": _bit_index(isa.ACCUMULATE_BIT),
        "LOCAL_FULL_BIT": _bit_index(isa.FULL_BIT), "LOCAL_ROW_BITS": LOCAL_ROW_BITS,
        "CFG_EX_DATAFLOW_BIT": ws_bit, "CFG_EX_A_TRANSPOSE_BIT": at_bit, "CFG_EX_B_TRANSPOSE_BIT": bt_bit,
    }
    lines = ["// Generated by gemmini/sim/rtl.py from gemmini/isa.py: do not edit.",
             "package gemmini_isa_pkg;"]
    for name, value in consts.items():
        lines.append(f"  localparam int {name} = {value};")
    lines.append(f"  localparam logic [31:0] LOCAL_GARBAGE = 32'h{isa.GARBAGE:08x};")
    for code, name in _ERROR_NAMES.items():
        lines.append(f"  localparam logic [7:0] ERR_{name} = 8'd{code};")
    lines.append("endpackage")
    return "\n".join(lines) + "\n"


# --- building ------------------------------------------------------------------------
def rtl_parameters(config: GemminiConfig) -> dict[str, int]:
    """The top module's parameters for ``config``."""
    return {
        "DIM": config.dim, "SP_ROWS": config.sp_rows, "SP_BANKS": config.sp_banks, "ACC_ROWS": config.acc_rows,
        "ACC_BANKS": config.acc_banks, "LD_Q": config.ld_queue, "EX_Q": config.ex_queue, "ST_Q": config.st_queue,
        "MAX_MVIN_BYTES": config.max_mvin_bytes, "BEAT": config.dma_bytes_per_cycle, "DMA_CREDITS": 64,
    }


def verilator_version() -> str:
    """``verilator --version`` (raises SimulationError when Verilator is missing)."""
    exe = shutil.which("verilator")
    if exe is None:
        raise SimulationError("verilator is not installed (Debian: apt-get install verilator)", source=SOURCE,
                              field="verilator")
    return subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout.strip()


def cache_root() -> Path:
    """Where builds are cached: ``$COSA_RTL_CACHE`` or ``~/.cache/cosa-framework/rtl``."""
    env = os.environ.get("COSA_RTL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "cosa-framework" / "rtl"


def build_key(config: GemminiConfig) -> str:
    """Hash of everything a build depends on."""
    digest = hashlib.sha256()
    for name in RTL_SOURCES:
        digest.update(name.encode() + (RTL_DIR / name).read_bytes())
    for name in HARNESS_SOURCES:
        digest.update(name.encode() + (HARNESS_DIR / name).read_bytes())
    digest.update(isa_package().encode())
    digest.update(json.dumps(rtl_parameters(config), sort_keys=True).encode())
    digest.update(verilator_version().encode())
    digest.update((_BUILD_FLAGS_VERSION + _cxx_opt(config)).encode())
    return digest.hexdigest()[:20]


_BUILD_FLAGS_VERSION = "1"
_VERILATED_RUNTIME = ("verilated", "verilated_dpi", "verilated_threads")


def _cxx_opt(config: GemminiConfig) -> str:
    """C++ optimization of the model: small test arrays build fast at -O1; big arrays simulate faster at -O2."""
    return "-O2" if config.dim >= 8 else "-O1"


@dataclass(frozen=True)
class RtlBuild:
    """A built co-simulation: the trace simulator and the objects to link C programs with."""

    directory: Path
    trace_sim: Path
    link_objects: tuple[Path, ...]
    include_dirs: tuple[Path, ...]
    build_seconds: float


def _run(cmd, cwd, what):
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise SimulationError(f"{what} failed (exit {proc.returncode}):\n{tail}", source=SOURCE, field="build")
    return proc


def build(config: GemminiConfig | None = None, *, jobs: int = 2) -> RtlBuild:
    """Verilate and compile the RTL and the harness for ``config`` (cached by ``build_key``)."""
    cfg = config or DEFAULT_CONFIG
    key = build_key(cfg)
    directory = cache_root() / f"dim{cfg.dim}-{key}"
    marker = directory / "build.json"
    obj = directory / "obj"
    verilator_inc = Path(subprocess.run(["verilator", "--getenv", "VERILATOR_ROOT"], capture_output=True,
                                        text=True, check=True).stdout.strip()) / "include"
    include_dirs = (obj, verilator_inc, verilator_inc / "vltstd", HARNESS_DIR, INCLUDE_DIR)
    link_objects = (directory / "cosim.o", directory / "host_hooks.o", obj / "Vgemmini_top__ALL.a",
                    *(obj / f"{name}.o" for name in _VERILATED_RUNTIME))
    if marker.exists():
        info = json.loads(marker.read_text())
        return RtlBuild(directory, directory / "trace_sim", link_objects, include_dirs, info["build_seconds"])

    start = time.perf_counter()
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"dim{cfg.dim}-", dir=directory.parent))
    try:
        (staging / "gemmini_isa_pkg.sv").write_text(isa_package())
        sources = [str(staging / "gemmini_isa_pkg.sv")] + [str(RTL_DIR / n) for n in RTL_SOURCES]
        params = [f"-G{k}={v}" for k, v in rtl_parameters(cfg).items()]
        opt = _cxx_opt(cfg)
        cmd = ["verilator", "--cc", "--build", "-j", str(jobs), "--top-module", "gemmini_top", "--Mdir", "obj",
               "-Wno-fatal", "-Wno-WIDTH", "-Wno-LATCH", "-Wno-UNOPTFLAT", "--x-assign", "fast",
               "--x-initial", "0", "-O3", "-MAKEFLAGS", f"OPT_FAST={opt} OPT_SLOW=-O0 OPT_GLOBAL={opt}",
               *params, *sources]
        _run(cmd, staging, "verilator")
        _run(["make", "-f", "Vgemmini_top.mk", *(f"{name}.o" for name in _VERILATED_RUNTIME), f"OPT_FAST={opt}",
              "OPT_SLOW=-O0", f"OPT_GLOBAL={opt}"], staging / "obj", "compiling the Verilator runtime")
        incs = [f"-I{p}" if p != obj else f"-I{staging / 'obj'}" for p in include_dirs]
        for name in ("cosim", "host_hooks", "trace_main"):
            _run(["g++", "-std=c++17", "-O2", *incs, "-c", str(HARNESS_DIR / f"{name}.cpp"), "-o", f"{name}.o"],
                 staging, f"compiling {name}.cpp")
        _run(["g++", "-o", "trace_sim", "trace_main.o", "cosim.o", "obj/Vgemmini_top__ALL.a",
              *(f"obj/{name}.o" for name in _VERILATED_RUNTIME), "-pthread", "-latomic"], staging,
             "linking the trace simulator")
        seconds = time.perf_counter() - start
        (staging / "build.json").write_text(json.dumps({"build_seconds": seconds, "params": rtl_parameters(cfg),
                                                        "key": key}))
        if directory.exists():  # another process finished the same build first
            shutil.rmtree(staging, ignore_errors=True)
        else:
            staging.rename(directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return build(cfg)


# --- running -----------------------------------------------------------------------
@dataclass(frozen=True)
class RtlReport:
    """What one co-simulation measured.

    cycles: clock cycles from the first command until the accelerator was
    idle after the last.  busy: cycles each unit ("load", "execute",
    "store") had work.  instructions: commands pushed into the model (fences
    included).  dma_read_bytes / dma_write_bytes: main-memory traffic (bytes).
    sim_seconds: host time spent clocking the model; cycles_per_second: the
    simulation speed.  exit_code: 0, or the program's own non-zero status.
    """

    cycles: int
    busy: dict[str, int]
    instructions: int
    dma_read_bytes: int
    dma_write_bytes: int
    sim_seconds: float
    exit_code: int = 0
    stdout: str = ""

    @property
    def cycles_per_second(self) -> float:
        return self.cycles / self.sim_seconds if self.sim_seconds > 0 else float("inf")


def _report_from(path: Path, what: str, exit_code: int, stdout: str, stderr: str) -> RtlReport:
    if not path.exists():
        raise SimulationError(f"{what} wrote no report (exit {exit_code}): {(stdout + stderr)[-1500:]}",
                              source=SOURCE, field="report")
    data = json.loads(path.read_text())
    error = data.get("error")
    if error:
        if error["kind"] == "rtl":
            raise SimulationError(f"the RTL rejected the command: {error['reason']} (RTL error code {error['code']})",
                                  source=SOURCE, field="commands", index=int(error["index"]))
        raise SimulationError(f"cycle limit reached after {data['cycles']} cycles (at command {error['index']}; "
                              f"unit state 0x{error.get('debug_state', 0):08x})",
                              source=SOURCE, field="max_cycles", index=int(error["index"]))
    return RtlReport(cycles=int(data["cycles"]), busy={k: int(v) for k, v in data["busy"].items()},
                     instructions=int(data["commands"]), dma_read_bytes=int(data["dma_read_bytes"]),
                     dma_write_bytes=int(data["dma_write_bytes"]), sim_seconds=float(data["sim_seconds"]),
                     exit_code=exit_code, stdout=stdout)


def run_trace(commands, memory: np.ndarray, config: GemminiConfig | None = None, *,
              mem_latency: int = DEFAULT_MEM_LATENCY, max_cycles: int = DEFAULT_MAX_CYCLES) -> RtlReport:
    """Run a command stream on the RTL with ``memory`` (1-D uint8, updated in place) as main memory.

    Addresses in the commands are offsets into ``memory`` (as for the
    functional model).  A final fence drains the accelerator.  Raises
    ``SimulationError`` (with ``index``) when the RTL rejects a command or the
    cycle limit is reached.
    """
    cfg = config or DEFAULT_CONFIG
    if not isinstance(memory, np.ndarray) or memory.dtype != np.uint8 or memory.ndim != 1:
        raise SimulationError("main memory must be a 1-D numpy uint8 array", source=SOURCE, field="memory")
    for name, value in (("mem_latency", mem_latency), ("max_cycles", max_cycles)):
        if not isinstance(value, int) or value < (0 if name == "mem_latency" else 1):
            raise SimulationError(f"must be a {'non-negative' if name == 'mem_latency' else 'positive'} integer, "
                                  f"got {value!r}", source=SOURCE, field=name)
    stream = isa.decode_stream(commands)
    if any(c.funct in isa_loops.CONV_FUNCTS for c in stream):  # no LOOP_CONV_WS unroller in the RTL: on the host
        stream, origins, image = _unroll_on_host(stream, memory, cfg)
        try:
            report = run_trace(stream, image, cfg, mem_latency=mem_latency, max_cycles=max_cycles)
        except SimulationError as exc:
            if exc.index is None or exc.index >= len(origins):
                raise
            raise SimulationError(f"{exc.reason} (unrolled command {exc.index})", source=SOURCE, field=exc.field,
                                  index=origins[exc.index]) from None
        memory[:] = image[:memory.size]
        return report
    built = build(cfg)
    with tempfile.TemporaryDirectory(prefix="gemmini-rtl-") as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "commands.txt").write_text(
            "".join(f"{c.funct} 0x{c.rs1:x} 0x{c.rs2:x}\n" for c in stream))
        memory.tofile(tmp_path / "memory.bin")
        proc = subprocess.run([str(built.trace_sim), "commands.txt", "memory.bin", "memory_out.bin", "report.json",
                               str(mem_latency), str(max_cycles)], cwd=tmp_path, capture_output=True, text=True)
        if proc.returncode not in (0, 3, 4):
            raise SimulationError(f"the trace simulator failed (exit {proc.returncode}): {proc.stderr[-1500:]}",
                                  source=SOURCE, field="trace_sim")
        report = _report_from(tmp_path / "report.json", "the trace simulator", proc.returncode, proc.stdout,
                              proc.stderr)
        memory[:] = np.fromfile(tmp_path / "memory_out.bin", dtype=np.uint8)
    return report


def _unroll_on_host(stream, memory: np.ndarray, cfg: GemminiConfig) -> tuple[list, list, np.ndarray]:
    """(commands, origin of each, memory image) for a stream with LOOP_CONV_WS: what ``loops.Unroller``
    issues (queues never full), with mvins from main-memory address 0 (Gemmini's zero writer) reading a zero
    region appended to the image.  Pixel repeats and pooling, which the RTL does not implement, are refused."""
    flat, origins, strides, zero_bytes, zero_mvins = [], [], {}, 0, []
    for item in Unroller(cfg).run(stream):
        cmd, f = item.cmd, isa.decode_fields(item.cmd)
        if f["name"] == "config_ld":
            strides[f["id"]] = (f["stride_bytes"], f["shrunk"])
            if f["pixel_repeats"] > 1:
                raise SimulationError("config_ld pixel repeats are not implemented by the RTL", source=SOURCE,
                                      field="pixel_repeats", index=item.origin)
        elif f["name"] == "config_st" and f["pool_stride"]:
            raise SimulationError("pooling is not implemented by the RTL", source=SOURCE, field="pool_stride",
                                  index=item.origin)
        elif cmd.is_mvin and item.from_loop and f["dram_addr"] == 0:
            stride, shrunk = strides.get(f["id"], (0, False))
            elem = 4 if f["local"].is_acc and not shrunk else 1
            zero_bytes = max(zero_bytes, (f["rows"] - 1) * stride + f["cols"] * elem)
            zero_mvins.append(len(flat))
        flat.append(cmd)
        origins.append(item.origin)
    base = -(-memory.size // 64) * 64
    for n in zero_mvins:
        flat[n] = isa.Command(flat[n].funct, base, flat[n].rs2)
    image = np.zeros(base + zero_bytes, dtype=np.uint8) if zero_mvins else memory.copy()
    image[:memory.size] = memory
    return flat, origins, image


def _compile_c_program(built: RtlBuild, c_files: dict[str, str], workdir: Path) -> Path:
    """Compile C sources (name -> text) natively and link them with the harness; returns the executable."""
    objects = []
    for name, text in c_files.items():
        (workdir / name).write_text(text)
        obj = workdir / (Path(name).stem + ".o")
        _run(["gcc", "-std=c11", "-O1", f"-I{INCLUDE_DIR}", "-c", name, "-o", obj.name], workdir, f"compiling {name}")
        objects.append(obj.name)
    exe = workdir / "program"
    _run(["g++", "-o", exe.name, *objects, *[str(p) for p in built.link_objects], "-pthread", "-latomic"], workdir,
         "linking the program with the RTL harness")
    return exe


def run_c(c_source: str, config: GemminiConfig | None = None, *, mem_latency: int = DEFAULT_MEM_LATENCY,
          max_cycles: int = DEFAULT_MAX_CYCLES, extra_c: dict[str, str] | None = None,
          args: tuple[str, ...] = (), cwd: Path | None = None) -> RtlReport:
    """Compile a Gemmini C program (over ``gemmini_cosa.h``, with its own ``main``) natively, run it with
    every command going into the RTL, and return the measurements.

    The program's exit status is ``RtlReport.exit_code`` (a self-checking program returns non-zero on a
    mismatch); its stdout is ``RtlReport.stdout``.  ``extra_c``: more C files (name -> source) to link.
    Raises ``SimulationError`` when the RTL rejects a command or the cycle limit is reached.
    """
    cfg = config or DEFAULT_CONFIG
    built = build(cfg)
    with tempfile.TemporaryDirectory(prefix="gemmini-rtl-c-") as tmp:
        tmp_path = Path(tmp)
        files = {"program.c": c_source, **(extra_c or {})}
        exe = _compile_c_program(built, files, tmp_path)
        env = dict(os.environ, COSA_RTL_REPORT=str(tmp_path / "report.json"),
                   COSA_RTL_MEM_LATENCY=str(mem_latency), COSA_RTL_MAX_CYCLES=str(max_cycles))
        proc = subprocess.run([str(exe), *args], cwd=cwd or tmp_path, capture_output=True, text=True, env=env)
        if proc.returncode < 0:
            raise SimulationError(f"the program died with signal {-proc.returncode}: {proc.stderr[-1500:]}",
                                  source=SOURCE, field="program")
        return _report_from(tmp_path / "report.json", "the C program", proc.returncode, proc.stdout, proc.stderr)
