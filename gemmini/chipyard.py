"""Run bare-metal Gemmini programs on a Chipyard Verilator simulator of a Rocket + Gemmini SoC.

A Chipyard user has ``simulator-<project>-<config>``, built by Verilator from Gemmini's Chisel-generated RTL.
It loads an ELF straight into the SoC's memory (``+loadmem=``), boots hart 0 at 0x80000000 and talks HTIF
through fesvr, so the ELFs of ``gemmini.build`` (our runtime: tohost/fromhost, console through the syscall
proxy, other harts parked) run on it unchanged.  ``run_chipyard(elf)`` runs one with a cycle limit
(``+max-cycles``) and a wall-clock time-out and reads back what the program printed: its own check (PASS and
exit 0) and the cycles it measured with ``rdcycle`` around the accelerator work (``build.timed_source``), as
gemmini-rocc-tests measure theirs.  Simulated cycles per second: the core cycle the program ended its work
at over the simulator's wall time (start-up included).

The simulator: ``simulator=`` (``cosa run gemmini --sim chipyard --simulator PATH``) or ``CHIPYARD_SIM``.
A missing or failing simulator, a time-out or a program that runs past its cycle limit raises
``SimulationError`` with one line naming which and the path of the full log (exit 1 on the command line).

``vendor_elf(program)`` builds the faithful vendor stream (``gemmini.vendor``: what Gemmini's C library issues
for a layer, loop instructions included) into the same kind of self-checking, timed ELF, with its
LOOP_CONV_WS words in ``layout`` (default "180c468", gemmini.h's, as Spike + libgemmini decode them).  A
Chipyard simulator's Gemmini decodes ``loop_conv_layout()``: "f13847e", the square-image words of Chipyard
1.10.0's Gemmini (f13847e), unless ``CHIPYARD_LOOP_CONV_LAYOUT`` says "180c468" (a Gemmini of commit 16a9d3f
or later); pass that to ``vendor_elf`` for a program that runs on the simulator.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .build import build_source, check_line, parse_cycles, timed_source
from .errors import SimulationError

ENV = "CHIPYARD_SIM"
SOURCE = "chipyard"
#: The simulator's LOOP_CONV_WS encoding (``gemmini.config.LOOP_CONV_LAYOUTS``) and its default: Chipyard
#: 1.10.0 generates Gemmini f13847e.
LAYOUT_ENV = "CHIPYARD_LOOP_CONV_LAYOUT"
DEFAULT_LOOP_CONV_LAYOUT = "f13847e"
#: The simulator's cycle limit (harness clock cycles, start-up included) and wall time-out of one run.
DEFAULT_MAX_CYCLES = 3_000_000
DEFAULT_TIMEOUT_S = 3600.0
#: What the harness prints when +max-cycles runs out, and when the program exits non-zero.
_CYCLE_LIMIT = re.compile(r"\*\*\* FAILED \*\*\*\s*\(timeout\)")  # the reason comes padded with spaces
_EXIT_CODE = re.compile(r"\*\*\* FAILED \*\*\* \((?:exit code|tohost) =\s*(\d+)\)")


@dataclass(frozen=True)
class ChipyardRun:
    """One run of an ELF on a Chipyard simulator.

    verified: the program's own check passed (a PASS line and exit 0).  cycles: accelerator cycles the
    program measured (rdcycle, core clock); core_cycles: the core cycle at the end of that work (since
    reset).  wall_s: the simulator's wall time (s); cycles_per_s: core_cycles / wall_s.  exit_code: the
    program's exit status.  check: its PASS/FAIL line.  log: the full output of the run.
    """

    verified: bool
    cycles: int | None
    core_cycles: int | None
    wall_s: float
    cycles_per_s: float | None
    exit_code: int
    check: str
    output: str
    log: str
    simulator: str

    def to_dict(self) -> dict:
        return asdict(self)


def find_simulator(path: str | os.PathLike | None = None) -> str:
    """The user's Chipyard simulator: ``path`` or ``CHIPYARD_SIM`` (a path or a command name)."""
    named = str(path) if path else os.environ.get(ENV)
    if not named:
        raise SimulationError(f"no Chipyard simulator: pass --simulator PATH or set {ENV} to a Verilator "
                              "simulator-<config> of a Rocket + Gemmini SoC", source=SOURCE, field="simulator")
    found = shutil.which(named)
    if not found:
        raise SimulationError(f"Chipyard simulator {named} not found or not executable", source=SOURCE,
                              field="simulator")
    return found


def sim_command(simulator: str, elf, max_cycles: int) -> list[str]:
    """The simulator's command line, as Chipyard's ``run-binary`` with LOADMEM builds it."""
    return [simulator, "+permissive", f"+loadmem={elf}", f"+max-cycles={int(max_cycles)}", "+permissive-off",
            str(elf)]


def program_lines(text: str) -> str:
    """The program's own lines of a simulator's output (fesvr writes them to stdout as they come)."""
    keep = [ln for ln in text.splitlines() if ln.startswith("gemmini ")]
    return "\n".join(keep)


def parse_run(stdout: str, stderr: str, returncode: int) -> dict:
    """What a finished run says: verified, cycles, core_cycles, exit_code, check (and cycle_limit: the
    harness stopped it at +max-cycles)."""
    text = stdout + "\n" + stderr
    cycles, core = parse_cycles(stdout)
    check = check_line(program_lines(stdout))
    code_match = _EXIT_CODE.search(text)
    exit_code = int(next(g for g in code_match.groups() if g)) if code_match else (0 if returncode == 0 else -1)
    passed = ": PASS" in check and returncode == 0 and exit_code == 0
    return {"verified": passed, "cycles": cycles, "core_cycles": core, "exit_code": exit_code, "check": check,
            "cycle_limit": bool(_CYCLE_LIMIT.search(text))}


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:160] if lines else "no output"


def run_chipyard(elf, *, simulator: str | os.PathLike | None = None, max_cycles: int = DEFAULT_MAX_CYCLES,
                 timeout_s: float = DEFAULT_TIMEOUT_S, log: str | os.PathLike | None = None) -> ChipyardRun:
    """Run ``elf`` on the Chipyard simulator (``simulator`` or ``CHIPYARD_SIM``) within ``max_cycles`` and
    ``timeout_s``; the full output goes to ``log`` (default: beside the ELF, ``.chipyard.log``)."""
    sim = find_simulator(simulator)
    elf = Path(elf)
    if not elf.is_file():
        raise SimulationError(f"{elf}: no such ELF", source=SOURCE, field="elf")
    log = Path(log) if log else elf.with_suffix(".chipyard.log")
    cmd = sim_command(sim, elf.resolve(), max_cycles)
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", start_new_session=True, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise SimulationError(f"Chipyard simulator {sim} cannot start: {exc.strerror}", source=SOURCE,
                              field="simulator") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        log.write_text(" ".join(cmd) + "\n" + stdout + stderr)
        raise SimulationError(f"{elf.name} did not finish within the {timeout_s:.0f} s time-out; log: {log}",
                              source=SOURCE, field="timeout") from None
    except BaseException:  # the command's deadline or Ctrl-C: the simulator's process group goes too
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # it had ended
            pass
        proc.communicate()
        raise
    wall = time.perf_counter() - t0
    log.write_text(" ".join(cmd) + "\n" + stdout + stderr)
    d = parse_run(stdout, stderr, proc.returncode)
    if d["cycle_limit"]:
        raise SimulationError(f"{elf.name} did not finish within its cycle limit ({max_cycles:,} cycles); "
                              f"log: {log}", source=SOURCE, field="max_cycles")
    if not d["check"]:  # the program did not get to its check (a crash, a signal, a simulator error)
        raise SimulationError(f"the Chipyard simulator failed (exit {proc.returncode}: "
                              f"{_last_line(stderr or stdout)}); log: {log}", source=SOURCE, field="simulator")
    core = d["core_cycles"]
    return ChipyardRun(d["verified"], d["cycles"], core, wall, core / wall if core and wall > 0 else None,
                       d["exit_code"], d["check"], program_lines(stdout), str(log), sim)


# --- the vendor stream as a self-checking program --------------------------------------------------------
def loop_conv_layout() -> str:
    """The LOOP_CONV_WS encoding the Chipyard simulator's Gemmini decodes: ``CHIPYARD_LOOP_CONV_LAYOUT``, else
    ``DEFAULT_LOOP_CONV_LAYOUT`` (an unknown name raises ``SimulationError`` naming the variable)."""
    from .config import LOOP_CONV_LAYOUTS

    named = os.environ.get(LAYOUT_ENV) or DEFAULT_LOOP_CONV_LAYOUT
    if named not in LOOP_CONV_LAYOUTS:
        raise SimulationError(f"unknown LOOP_CONV_WS layout {named!r} (one of {', '.join(LOOP_CONV_LAYOUTS)})",
                              source=SOURCE, field=LAYOUT_ENV)
    return named


def vendor_stream(program, *, tiles: tuple | None = None, layout: str = "180c468") -> list:
    """``gemmini.vendor.stream(program, tiles=tiles)`` with its LOOP_CONV_WS words in ``layout``."""
    from dataclasses import replace

    from .vendor import stream
    from .vendor.params import DEFAULT_PARAMS

    return stream(program, replace(DEFAULT_PARAMS, loop_conv_layout=layout), tiles=tiles)


def vendor_c(program, *, seed: int = 0, name: str | None = None, tiles: tuple | None = None,
             layout: str = "180c468") -> str:
    """A self-checking, timed C program that issues ``program``'s vendor stream (``vendor_stream``; with
    ``tiles``, the library's calls run with those tile arguments; LOOP_CONV_WS words in ``layout``, the one
    the hardware decodes) on embedded example inputs (``vendor.run.example_inputs(program, seed)``) and
    compares the output with the NumPy reference (``vendor.run.reference``)."""
    from .codegen.c import _C_TYPES, _array, stream_c
    from .vendor.run import _output_name, example_inputs, reference

    fn = re.sub(r"[^A-Za-z0-9_]", "_", name or program.name) or "vendor"
    inputs = example_inputs(program, seed)
    out = program.buffer(_output_name(program))
    expected = np.asarray(reference(program, inputs)).reshape(out.shape)
    spans = [(program.base + b.offset, program.base + b.offset + b.nbytes, f"{fn}_test_{b.name}")
             for b in program.buffers]
    lines = [f"/* Gemmini's library stream for {program.name} (gemmini.vendor; LOOP_CONV_WS words as Gemmini "
             f"{layout} decodes them), self-checking. */",
             "#include <stdint.h>", "#include <stdio.h>", '#include "gemmini_cosa.h"',
             "typedef int8_t elem_t;", "typedef int32_t acc_t;", ""]
    for b in program.buffers:
        ctype = _C_TYPES[b.dtype]
        count = int(np.prod(b.shape))
        if b.name == out.name:
            lines.append(f"static {ctype} {fn}_test_{b.name}[{count}] __attribute__((aligned(64)));")
        else:
            data = _array(np.asarray(inputs[b.name], dtype=b.dtype)) if b.name in inputs else "{0}"
            lines.append(f"static {ctype} {fn}_test_{b.name}[{count}] __attribute__((aligned(64))) = {data};")
    size = int(np.prod(out.shape))
    lines.append(f"static const elem_t {fn}_expected[{size}] = {_array(expected)};")
    lines.append(stream_c(vendor_stream(program, tiles=tiles, layout=layout), name=fn, spans=spans))
    lines += ["int main(void) {",  # the call's arguments are the embedded arrays (build.timed_source finds it so)
              f"  {fn}({', '.join(buf for _, _, buf in sorted(spans))});",
              "  long mismatches = 0;",
              f"  for (long i = 0; i < {size}; i++) mismatches += {fn}_test_{out.name}[i] != {fn}_expected[i];",
              f'  printf("gemmini {fn}: %s (%ld of {size} mismatches)\\n", mismatches ? "FAIL" : "PASS", mismatches);',
              "  return mismatches ? 1 : 0;", "}"]
    return "\n".join(lines) + "\n"


def vendor_elf(program, output, *, seed: int = 0, keep_c: bool = True, tiles: tuple | None = None,
               layout: str = "180c468") -> Path:
    """Build ``vendor_c(program, tiles=tiles, layout=layout)`` (timed) into the bare-metal ELF ``output``."""
    return build_source(timed_source(vendor_c(program, seed=seed, tiles=tiles, layout=layout)), output,
                        keep_c=keep_c)


def run_program_chipyard(program, *, style: str = "isa", seed: int = 0, simulator=None,
                         max_cycles: int = DEFAULT_MAX_CYCLES, timeout_s: float = DEFAULT_TIMEOUT_S) -> ChipyardRun:
    """Build ``program`` (``build.build_elf``, ``style``) in a fresh temporary folder and run it on the
    Chipyard simulator; the folder (ELF, C, log) is removed after a verified run and kept otherwise."""
    import tempfile

    from .build import build_elf

    find_simulator(simulator)  # fail before building
    workdir = Path(tempfile.mkdtemp(prefix="cosa-chipyard-"))
    elf = build_elf(program, workdir / f"{re.sub(r'[^A-Za-z0-9_]', '_', program.name)}.elf", style=style, seed=seed)
    run = run_chipyard(elf, simulator=simulator, max_cycles=max_cycles, timeout_s=timeout_s)
    if run.verified:
        shutil.rmtree(workdir, ignore_errors=True)
    return run
