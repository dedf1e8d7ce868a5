"""Bare-metal RISC-V ELFs of generated Gemmini programs, and running them on Gemmini's own model.

``build_elf(program, "prog.elf")`` writes the self-checking C program (``emit_c(with_main=True)``, or the
same layer as a call of Gemmini's own library with ``style="gemmini-h"``) and compiles it with our
bare-metal runtime (``gemmini/runtime/``: start-up code, HTIF console and exit, a linker script for RV64
at 0x80000000) into an ELF that runs on Spike with the libgemmini extension and on a Chipyard simulator
of a Rocket + Gemmini SoC.  The program exits 0 when its output equals the NumPy-computed expectation.

Toolchain: Debian's ``riscv64-unknown-elf-gcc`` with picolibc (packages ``gcc-riscv64-unknown-elf`` and
``picolibc-riscv64-unknown-elf``), or the compiler named by ``GEMMINI_RISCV_GCC``.

``run_spike(elf)`` runs an ELF on the user's Spike (``GEMMINI_SPIKE``, else ``spike`` on PATH) with
``--extension=gemmini``; the Gemmini extension library (libgemmini) must be where that Spike loads
extensions from, as a Chipyard installation arranges.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import SimulationError

RUNTIME_DIR = Path(__file__).parent / "runtime"
INCLUDE_DIR = Path(__file__).parent / "include"
RUNTIME_SOURCES = ("crt0.S", "htif.c")
SOURCE = "gemmini build"
#: Compiler flags of every build: RV64GC, code anywhere in the 64-bit space, picolibc, our start-up code; no
#: contracted multiply-adds (float32 requantization rounds each product, as ONNX Runtime does).
CFLAGS = ("-march=rv64gc", "-mabi=lp64d", "-mcmodel=medany", "-O2", "-static", "-nostartfiles",
          "--specs=picolibc.specs", "-Wl,--no-warn-rwx-segments",
          "-ffp-contract=off")
#: Spike's limit on one run (instructions); a hung program ends with a SimulationError instead.
DEFAULT_SPIKE_TIMEOUT_S = 600.0


class BuildError(SimulationError):
    """A program that cannot be built here (missing toolchain, bad input): exit 2."""

    exit_code = 2


def find_gcc() -> str:
    """The bare-metal RISC-V C compiler: ``GEMMINI_RISCV_GCC`` or ``riscv64-unknown-elf-gcc`` on PATH."""
    named = os.environ.get("GEMMINI_RISCV_GCC")
    found = shutil.which(named or "riscv64-unknown-elf-gcc")
    if not found:
        looked = f"GEMMINI_RISCV_GCC={named!r}" if named else "riscv64-unknown-elf-gcc on PATH"
        raise BuildError(f"no RISC-V compiler ({looked}); on Debian: apt-get install gcc-riscv64-unknown-elf "
                         "picolibc-riscv64-unknown-elf", source=SOURCE, field="toolchain")
    return found


def compile_elf(c_file: Path, output: Path, *, include_dirs=(), defines=()) -> Path:
    """Compile ``c_file`` with our runtime into the bare-metal ELF ``output``; a compiler failure raises
    BuildError with the path of the full log."""
    gcc = find_gcc()
    output = Path(output)
    cmd = [gcc, *CFLAGS, "-T", str(RUNTIME_DIR / "link.ld"), f"-I{INCLUDE_DIR}"]
    cmd += [f"-I{d}" for d in include_dirs] + [f"-D{d}" for d in defines]
    cmd += [str(RUNTIME_DIR / s) for s in RUNTIME_SOURCES] + [str(c_file), "-lm", "-o", str(output)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        log = output.with_suffix(".log")
        log.write_text(" ".join(cmd) + "\n" + proc.stdout + proc.stderr)
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:200])
        raise BuildError(f"the RISC-V compiler failed ({first.strip()}); full log: {log}", source=SOURCE,
                         field=str(c_file))
    return output


def rocc_tests_dir(path: str | os.PathLike | None = None) -> Path:
    """A checkout of Gemmini's software (ucb-bar/gemmini-rocc-tests): ``path`` or ``GEMMINI_ROCC_TESTS``."""
    given = path or os.environ.get("GEMMINI_ROCC_TESTS")
    if not given:
        raise BuildError("--style gemmini-h compiles against Gemmini's own library: set GEMMINI_ROCC_TESTS to a "
                         "checkout of ucb-bar/gemmini-rocc-tests", source=SOURCE, field="GEMMINI_ROCC_TESTS")
    root = Path(given)
    if not (root / "include" / "gemmini.h").is_file():
        raise BuildError(f"{root}/include/gemmini.h not found (GEMMINI_ROCC_TESTS must point to a checkout of "
                         "ucb-bar/gemmini-rocc-tests)", source=SOURCE, field="GEMMINI_ROCC_TESTS")
    return root


#: The layer's call in a self-checking main(): ``  fn(fn_test_input, ...);`` (its first argument is an embedded array).
_MAIN_CALL = re.compile(r"^  (\w+)\(\1_test_\w+(, \w+)*\);$", re.M)
#: What a timed program prints after its accelerator work; ``parse_cycles`` reads it back.
CYCLES_LINE = re.compile(r"^gemmini cycles: (\d+) \(core cycle (\d+) at the end\)", re.M)


def timed_source(source: str) -> str:
    """``source`` with its main's layer call timed as gemmini-rocc-tests time theirs: ``rdcycle`` before the
    call and after a ``fence`` (on Rocket the fence waits until the accelerator is idle), printed through
    HTIF as ``gemmini cycles: N (core cycle T at the end)``; T (cycles since reset) gives a simulator's speed."""
    match = _MAIN_CALL.search(source)
    if not match:
        raise BuildError("no layer call in main() to time", source=SOURCE, field="main")
    rdcycle = "static inline unsigned long gemmini_rdcycle(void) {\n" \
              "  unsigned long c;\n  __asm__ volatile(\"rdcycle %0\" : \"=r\"(c));\n  return c;\n}\n"
    timed = ("  unsigned long gemmini_t0 = gemmini_rdcycle();\n" + match.group(0) + "\n"
             "  __asm__ volatile(\"fence\" ::: \"memory\");\n"
             "  unsigned long gemmini_t1 = gemmini_rdcycle();\n"
             "  printf(\"gemmini cycles: %lu (core cycle %lu at the end)\\n\", gemmini_t1 - gemmini_t0, gemmini_t1);")
    head, tail = source[:match.start()], source[match.end():]
    main_at = head.rfind("int main(void)")
    if main_at < 0:
        raise BuildError("no main() to time", source=SOURCE, field="main")
    return head[:main_at] + rdcycle + head[main_at:] + timed + tail


def parse_cycles(output: str) -> tuple[int | None, int | None]:
    """(accelerator cycles, core cycle at the end) from a timed program's output; (None, None) without them."""
    match = CYCLES_LINE.search(output)
    return (int(match.group(1)), int(match.group(2))) if match else (None, None)


def build_elf(program, output, *, style: str = "isa", seed: int = 0, rocc_tests=None, keep_c: bool = True) -> Path:
    """Write ``program`` as self-checking C (``style`` "isa": our header's RoCC instructions; "gemmini-h":
    one call of Gemmini's library, compiled against the user's gemmini-rocc-tests checkout) and build it
    into the bare-metal ELF ``output``.  The C file is kept beside the ELF (``.c``) when ``keep_c``.  The program
    times its layer with ``rdcycle`` and prints the cycles (``timed_source``)."""
    from .codegen.c import emit_c, emit_gemmini_h

    output = Path(output)
    include_dirs = []
    if style == "isa":
        source = emit_c(program, with_main=True, seed=seed)
    elif style == "gemmini-h":
        root = rocc_tests_dir(rocc_tests)
        source = emit_gemmini_h(program, with_main=True, seed=seed)
        include_dirs.append(root)
        if not (root / "rocc-software" / "src" / "xcustom.h").is_file():  # a checkout without its submodule
            include_dirs.append(RUNTIME_DIR / "rocc")
    else:
        raise BuildError(f"unknown style {style!r} (isa or gemmini-h)", source=SOURCE, field="style")
    return build_source(timed_source(source), output, include_dirs=include_dirs, keep_c=keep_c)


def build_source(source: str, output, *, include_dirs=(), keep_c: bool = True) -> Path:
    """Compile the C ``source`` with our runtime into the ELF ``output`` (the C kept beside it when ``keep_c``)."""
    output = Path(output)
    if keep_c:
        c_file = output.with_suffix(".c")
        c_file.write_text(source)
        return compile_elf(c_file, output, include_dirs=include_dirs)
    with tempfile.TemporaryDirectory() as tmp:
        c_file = Path(tmp) / "program.c"
        c_file.write_text(source)
        return compile_elf(c_file, output, include_dirs=include_dirs)


@dataclass(frozen=True)
class SpikeResult:
    """One run of an ELF on Spike: its exit status, what it printed, and whether its own check passed."""

    exit_code: int
    output: str
    verified: bool
    spike: str

    def to_dict(self) -> dict:
        return {"exit_code": self.exit_code, "verified": self.verified, "output": self.output, "spike": self.spike}


def find_spike() -> str:
    """The user's Spike: ``GEMMINI_SPIKE`` (a path or a command name) or ``spike`` on PATH."""
    named = os.environ.get("GEMMINI_SPIKE")
    found = shutil.which(named) if named else shutil.which("spike")
    if not found:
        looked = f"GEMMINI_SPIKE={named!r} (not an executable)" if named else "GEMMINI_SPIKE unset and no spike on PATH"
        raise BuildError(f"no Spike with the Gemmini extension found ({looked}); Gemmini users have it from "
                         "Chipyard (riscv-isa-sim + libgemmini)", source="gemmini spike", field="GEMMINI_SPIKE")
    return found


def run_spike(elf, *, timeout_s: float = DEFAULT_SPIKE_TIMEOUT_S) -> SpikeResult:
    """Run ``elf`` on Spike with the Gemmini extension; ``verified`` is the program's own check (exit 0 and
    a PASS line)."""
    spike = find_spike()
    cmd = [spike, "--extension=gemmini", str(elf)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise SimulationError(f"{elf} did not finish on Spike within {timeout_s:.0f} s", source="gemmini spike",
                              field="timeout") from None
    # libgemmini announces its configuration on stdout ("Gemmini extension configured with: ..."); keep the
    # program's own lines first
    text = proc.stdout + proc.stderr
    if "extension" in text and "not found" in text.lower() and proc.returncode != 0:
        raise BuildError(f"{spike} cannot load the Gemmini extension: {text.strip().splitlines()[-1]}",
                         source="gemmini spike", field="GEMMINI_SPIKE")
    verified = proc.returncode == 0 and ": PASS" in proc.stdout
    return SpikeResult(proc.returncode, text, verified, spike)


def check_line(output: str) -> str:
    """The program's own PASS/FAIL line in a run's output (else its last line)."""
    lines = [ln for ln in output.splitlines() if ln.strip()]
    return next((ln for ln in lines if ": PASS" in ln or ": FAIL" in ln), lines[-1] if lines else "")
