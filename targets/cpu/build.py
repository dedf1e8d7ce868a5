"""Compile generated C with gcc into a shared object cached by content hash, and load it with ctypes.

The cache directory is ``cpu`` under the framework's cache root (``workloads.cachedir``:
``$COSA_CACHE_DIR``, else ``$XDG_CACHE_HOME/cosa`` or ``~/.cache/cosa``); a kernel is named after the
SHA-256 of its source (the emitted C, which spells out the mapping), the compiler's path and version and
the flags, so an unchanged kernel is built once by any process.  Processes that want the same kernel at
once (MPI ranks) take a lock on it: the first compiles, into a file of its own renamed into place, the
others wait for it and load the result.  ``COSA_CC`` overrides the compiler (default ``gcc``).
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workloads.cachedir import cache_dir as _cache_dir, temporary_path, write_atomic

from .. import TargetError

FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")
"""No -ffast-math / -ffinite-math-only: the kernels keep IEEE NaN/Inf semantics (``targets.exceptions``);
gcc's default -ffp-contract=fast for GNU C fuses multiply-adds, which propagate NaN/Inf like the pair."""
UNSAFE_FLAGS = ("-ffast-math", "-ffinite-math-only", "-Ofast", "-fno-honor-nans", "-fno-honor-infinities")
_PACKAGE = "gcc (Debian package 'gcc'; OpenMP comes with it as libgomp)"
COMPILE_TIMEOUT_S = 300.0
"""The most one gcc run may take (a kernel of a few hundred lines builds in about a second)."""


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
    """The SIMD registers of this machine, from gcc's predefined macros under ``-march=native`` (``scalar``:
    none; ``unknown``: the compiler gave no macros, and its builds fail with their own message)."""
    cc = compiler()
    got = subprocess.run([cc, "-march=native", "-dM", "-E", "-x", "c", os.devnull], capture_output=True, text=True)
    macros = {line.split()[1] for line in got.stdout.splitlines() if line.startswith("#define ")}
    if got.returncode != 0 or not macros:  # the compiler did not answer: its builds will say why
        return Isa(8, 16, "unknown")
    if "__AVX512F__" in macros:
        return Isa(64, 32, "avx512f")
    if "__AVX2__" in macros or "__AVX__" in macros:
        return Isa(32, 16, "avx2" if "__AVX2__" in macros else "avx")
    if "__ARM_NEON" in macros or "__ARM_NEON__" in macros:
        return Isa(16, 32, "neon")
    if "__SSE2__" in macros:
        return Isa(16, 16, "sse2")
    return Isa(8, 16, "scalar")


def portable_note() -> str | None:
    """One line saying the kernels run the portable code, where ``-march=native`` names no SIMD instruction
    set (``isa`` is ``scalar``): the emitted C then uses 8-byte GCC vectors and none of its AVX-512 paths
    (register transposes, masked loads), which compile only under ``__AVX512F__``; None elsewhere."""
    if isa().name != "scalar":
        return None
    return ("no SIMD instruction set (SSE2, AVX, AVX-512, NEON) under gcc -march=native here: the CPU kernel "
            "is the portable C code (8-byte GCC vectors, no intrinsics)")


def cache_dir() -> Path:
    """Where built kernels live (see the module docstring)."""
    return _cache_dir("cpu")


def kernel_key(source: str, cc: str, flags: tuple[str, ...]) -> str:
    """The cache key of a kernel: SHA-256 (24 hex digits) of its source, the compiler (path and the first
    line of ``--version``) and the flags."""
    return hashlib.sha256("\0".join((source, cc, _compiler_id(cc), *flags)).encode()).hexdigest()[:24]


def build(source: str, extra_flags: tuple[str, ...] = ()) -> Path:
    """Compile ``source`` into a shared object (cached) and return its path.

    A compiler failure raises TargetError (exit 1) naming the log with the full compiler output.
    """
    cc = compiler()
    flags = FLAGS + tuple(extra_flags)
    bad = [f for f in flags if f in UNSAFE_FLAGS]
    if bad:
        raise TargetError(f"{bad} would let gcc assume no NaN/Inf (see targets.exceptions)", field="flags")
    key = kernel_key(source, cc, flags)
    root = cache_dir()
    lib = root / f"k{key}.so"
    if lib.exists():
        return lib
    with open(root / f"k{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held for at most one compile (COMPILE_TIMEOUT_S)
        if lib.exists():  # another process built it while this one waited
            return lib
        src = write_atomic(root / f"k{key}.c", source)
        tmp = temporary_path(lib)
        cmd = [cc, *flags, str(src), "-o", str(tmp), "-lm"]
        log = root / f"k{key}.log"
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            tmp.unlink(missing_ok=True)
            raise TargetError(f"the compiler ran over {COMPILE_TIMEOUT_S:.0f} s", source=str(src), exit_code=1) from None
        write_atomic(log, f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            first = next((line for line in proc.stderr.splitlines() if "error" in line), "compiler failed")
            raise TargetError(f"{first.strip()} (full log: {log})", source=str(src), exit_code=1)
        os.replace(tmp, lib)
    return lib


WAIT_SPINS = 300_000
"""Spins of an OpenMP thread waiting for work before it sleeps (``GOMP_SPINCOUNT``; libgomp's documented
default), about 9 ms here.  Back-to-back calls then find the threads awake: GEMM 256 on 2 threads ran in
90 us, against 143-183 us with threads that sleep at once (NumPy's OpenBLAS, whose threads spin about 0.1 s:
92 us), and an idle process holds a core that long at most after a call."""


def openmp_waits() -> None:
    """How OpenMP threads wait, unless the user set ``OMP_WAIT_POLICY``: passive (they sleep rather than
    spin indefinitely: on a machine shared with other jobs spinning threads take the cores the others
    need) after ``WAIT_SPINS`` spins (``GOMP_SPINCOUNT``, unless the user set it).  libgomp reads both once,
    when it is first loaded: every library of ours that may load it opens through ``open_library``."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "passive"
        os.environ.setdefault("GOMP_SPINCOUNT", str(WAIT_SPINS))


def open_library(path) -> ctypes.CDLL:
    """The shared object at ``path``, loaded after ``openmp_waits``."""
    openmp_waits()
    return ctypes.CDLL(str(path))


@functools.lru_cache(maxsize=256)
def load(path: Path, symbol: str = "cosa_kernel", nargs: int = 3, scalars: int = 0):
    """The kernel function ``symbol`` of the shared object at ``path``: ``nargs`` pointers, ``scalars``
    doubles (``cosa_kernel_ab``'s alpha and beta) and an int."""
    fn = getattr(open_library(path), symbol)
    fn.argtypes = [ctypes.c_void_p] * nargs + [ctypes.c_double] * scalars + [ctypes.c_int]
    fn.restype = None
    return fn
