"""Compile generated C with gcc into a shared object cached by content hash, and load it with ctypes.

The cache directory is ``$COSA_CACHE_DIR/cpu`` when that variable is set, else
``$XDG_CACHE_HOME/cosa/cpu`` or ``~/.cache/cosa/cpu``; a kernel is named after the SHA-256 of its
source, the compiler's version and the flags, so an unchanged kernel is built once.  ``COSA_CC``
overrides the compiler (default ``gcc``).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import TargetError

FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")
"""No -ffast-math / -ffinite-math-only: the kernels keep IEEE NaN/Inf semantics (``targets.exceptions``);
gcc's default -ffp-contract=fast for GNU C fuses multiply-adds, which propagate NaN/Inf like the pair."""
UNSAFE_FLAGS = ("-ffast-math", "-ffinite-math-only", "-Ofast", "-fno-honor-nans", "-fno-honor-infinities")
_PACKAGE = "gcc (Debian package 'gcc'; OpenMP comes with it as libgomp)"


@dataclass(frozen=True)
class Isa:
    """What ``-march=native`` gives: vector register bytes and count, and the macros that told us."""

    vector_bytes: int
    registers: int
    name: str


def compiler() -> str:
    """Path of the C compiler, or a TargetError (exit 1) naming the Debian package."""
    cc = os.environ.get("COSA_CC", "gcc")
    path = shutil.which(cc)
    if path is None:
        raise TargetError(f"C compiler '{cc}' not found on PATH; install {_PACKAGE}", field="compiler", exit_code=1)
    return path


@functools.lru_cache(maxsize=None)
def _compiler_id(cc: str) -> str:
    return subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]


@functools.lru_cache(maxsize=None)
def isa() -> Isa:
    """The SIMD registers of this machine, from gcc's predefined macros under ``-march=native``."""
    cc = compiler()
    out = subprocess.run([cc, "-march=native", "-dM", "-E", "-x", "c", os.devnull], capture_output=True,
                         text=True).stdout
    macros = {line.split()[1] for line in out.splitlines() if line.startswith("#define ")}
    if "__AVX512F__" in macros:
        return Isa(64, 32, "avx512f")
    if "__AVX2__" in macros or "__AVX__" in macros:
        return Isa(32, 16, "avx2" if "__AVX2__" in macros else "avx")
    if "__ARM_NEON" in macros or "__ARM_NEON__" in macros:
        return Isa(16, 32, "neon")
    if "__SSE2__" in macros:
        return Isa(16, 16, "sse2")
    return Isa(8, 16, "scalar")


def cache_dir() -> Path:
    root = os.environ.get("COSA_CACHE_DIR")
    if root:
        path = Path(root) / "cpu"
    else:
        path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cosa" / "cpu"
    path.mkdir(parents=True, exist_ok=True)
    return path


def build(source: str, extra_flags: tuple[str, ...] = ()) -> Path:
    """Compile ``source`` into a shared object (cached) and return its path.

    A compiler failure raises TargetError (exit 1) naming the log with the full compiler output.
    """
    cc = compiler()
    flags = FLAGS + tuple(extra_flags)
    bad = [f for f in flags if f in UNSAFE_FLAGS]
    if bad:
        raise TargetError(f"{bad} would let gcc assume no NaN/Inf (see targets.exceptions)", field="flags")
    key = hashlib.sha256("\0".join((source, _compiler_id(cc), *flags)).encode()).hexdigest()[:24]
    root = cache_dir()
    lib = root / f"k{key}.so"
    if lib.exists():
        return lib
    src = root / f"k{key}.c"
    src.write_text(source)
    log = root / f"k{key}.log"
    tmp = root / f"k{key}.{os.getpid()}.so"
    proc = subprocess.run([cc, *flags, str(src), "-o", str(tmp), "-lm"], capture_output=True, text=True)
    log.write_text(f"$ {cc} {' '.join(flags)} {src} -o {tmp} -lm\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        first = next((line for line in proc.stderr.splitlines() if "error" in line), "compiler failed")
        raise TargetError(f"{first.strip()} (full log: {log})", source=str(src), exit_code=1)
    os.replace(tmp, lib)
    return lib


@functools.lru_cache(maxsize=256)
def load(path: Path, symbol: str = "cosa_kernel", nargs: int = 3, scalars: int = 0):
    """The kernel function ``symbol`` of the shared object at ``path``: ``nargs`` pointers, ``scalars``
    doubles (``cosa_kernel_ab``'s alpha and beta) and an int."""
    # threads that wait at a barrier sleep instead of spinning unless the user chose otherwise: on a
    # machine shared with other jobs spinning threads steal the cores the others need (libgomp reads
    # this when it is first loaded)
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    fn = getattr(ctypes.CDLL(str(path)), symbol)
    fn.argtypes = [ctypes.c_void_p] * nargs + [ctypes.c_double] * scalars + [ctypes.c_int]
    fn.restype = None
    return fn
