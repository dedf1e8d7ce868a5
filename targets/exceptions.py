"""The exception policy of every kernel the targets generate (NaN and Inf), and its checks.

After Demmel et al., "Proposed consistent exception handling for the BLAS and LAPACK" (2022).  One rule:
if an input holds an Inf or a NaN, or the kernel creates one (overflow, Inf - Inf, 0 * Inf), the output
holds an Inf or a NaN, or a status says so; a kernel never returns a silently finite result.

**Products** (every dense nest ``targets.cpu`` and ``targets.gpu`` emit: GEMM, GEMV, batched GEMM,
convolutions, einsums; and CSR SpMM / SDDMM) compute ``C := alpha * op(inputs) + beta * C``; the plain
kernel call (``cosa_kernel``, the GPU kernel) is alpha = 1, beta = 0, the general one is the CPU's
``cosa_kernel_ab`` (``targets.cpu.entry.ab_entry``) and the GPU's ``<kernel>_ab`` epilogue
(``targets.gpu.printers.ab_kernel``; with alpha = 0 the host launches no main kernel):

* beta = 0: C is not read (a NaN in C does not propagate; C may be uninitialised); the kernel writes C.
* alpha = 0: A and B are not read (a NaN in them does not propagate); C := beta * C, and with beta = 0 too
  C := exact (+0) zeros.
* otherwise full IEEE-754 propagation: no operand is skipped because it is zero (0 * Inf = NaN and
  0 * NaN = NaN reach the output), alpha and beta are applied as IEEE products.
* sizes: an empty reduction (K = 0) gives alpha * 0 = 0, so C := beta * C; an empty output is returned as is.
* zero padding of a convolution is part of the nest (explicit zeros multiplied like any operand, as in the
  NumPy reference); sparse kernels multiply the stored entries only (structural zeros are not operands,
  as in SciPy and the Sparse BLAS), stored zeros are multiplied like any value.
* compilers: no ``-ffast-math``, ``-ffinite-math-only``, ``-cl-fast-relaxed-math``, ``-cl-finite-math-only``
  or ``--use_fast_math`` (they let the compiler assume no NaN/Inf); fused multiply-adds are allowed (they
  round once and propagate NaN/Inf like the unfused pair).
* integers (int8/int32 CPU and GPU kernels, the Gemmini functional model and RTL, int8 inputs into int32
  accumulators) have no NaN or Inf: the policy is vacuous there and ``check`` reports nothing for them;
  integer overflow wraps (two's complement), as on Gemmini.

**Reductions** (``iamax``, ``nrm2`` below; the drivers use them for norms and pivots): IxAMAX returns the
first NaN if there is one (NaN beats Inf), else the first largest |x_i| (Inf counts as the largest);
NRM2 is NaN when any entry is NaN, else Inf when any entry is Inf, else computed with scaling, so values
whose squares overflow or underflow give the right norm (no spurious overflow).

**Modes** (``exceptions=`` on the kernels' run APIs, the drivers and ``cosa run --exceptions``):

* ``"ieee"`` (default): propagate as above, scan nothing.
* ``"check"``: also scan the arguments the call reads and the output it writes; the ``ExceptionStatus``
  names the first argument holding an Inf/NaN and whether it was in the input (``code = -k``, k its
  1-based position in the kernel's argument list, like LAPACK's INFO for a bad argument) or created by
  the kernel from finite inputs (``code = +k``, k the output's position).  ``code = 0``: all finite.

**Drivers** check every iterate in either mode (``require_finite``) and stop at the first non-finite one
instead of iterating on NaNs: LSQR in ``algorithms.randnla.sketch_and_precondition`` (x = NaN, istop -1),
CP-ALS sweeps (``algorithms.cp.als.cp``), the pencil solver's repeated squaring and deflation
(``algorithms.pencil.diagonalize``) return their result with ``exception_status`` code +1 (``where =
"created"``, ``argument`` the iterate); the range finder's power iterations (rsvd, qb) raise a failed-run
error with the status's message.  A non-finite input is bad input for them under ``ieee`` (one line, exit
2) and a status with code -k under ``check``.  Each driver's result and every ``cosa run`` JSON has
``exception_status`` (``ExceptionStatus.to_dict``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import TargetError

MODES = ("ieee", "check")


def check_mode(mode: str, field: str = "exceptions") -> str:
    """``mode`` if it is one of ``MODES``, else a TargetError (exit 2) naming ``field``."""
    if mode not in MODES:
        raise TargetError(f"unknown exceptions mode {mode!r}; choose one of {', '.join(MODES)}", field=field)
    return mode


@dataclass(frozen=True)
class ExceptionStatus:
    """What a ``check`` found.  ``code``: 0 all finite, -k input argument k held Inf/NaN, +k output argument
    k holds Inf/NaN created from finite inputs, None not checked (``ieee``); ``argument``: its name;
    ``where``: ``input`` or ``created``; ``kind``: ``nan`` (any NaN) or ``inf``; ``index``: flat index of
    the first such entry (C order)."""

    mode: str = "ieee"
    code: int | None = None
    argument: str | None = None
    where: str | None = None
    kind: str | None = None
    index: int | None = None

    @property
    def ok(self) -> bool:
        """True unless the check found an Inf or a NaN (an unchecked status is ok)."""
        return not self.code

    def message(self) -> str:
        if self.code is None:
            return "not checked (exceptions=ieee)"
        if self.code == 0:
            return "all finite"
        what = "held" if self.where == "input" else "holds a created"
        return f"argument {abs(self.code)} ({self.argument}) {what} {'NaN' if self.kind == 'nan' else 'Inf'} " \
               f"at flat index {self.index}"

    def to_dict(self) -> dict:
        return {"mode": self.mode, "code": self.code, "argument": self.argument, "where": self.where,
                "kind": self.kind, "index": self.index, "message": self.message()}


UNCHECKED = ExceptionStatus()


def first_nonfinite(array) -> tuple[str, int] | None:
    """(``nan`` or ``inf``, flat index of the first such entry) or None when ``array`` is all finite (or of an
    integer type, which has neither).  NaN beats Inf: an array with both reports its first NaN."""
    a = np.asarray(array)
    if a.size == 0 or not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.complexfloating)):
        return None
    flat = a.reshape(-1)
    if np.all(np.isfinite(flat)):
        return None
    nan = np.isnan(flat)
    if nan.any():
        return "nan", int(np.argmax(nan))
    return "inf", int(np.argmax(~np.isfinite(flat)))


def scan(inputs, outputs, mode: str = "check") -> ExceptionStatus:
    """The status of one call: ``inputs`` and ``outputs`` are (position, name, array) with 1-based
    argument positions; the inputs are those the call read (``reads``).  The first input holding
    Inf/NaN gives code -position; else the first output holding one gives +position (created)."""
    if check_mode(mode) == "ieee":
        return UNCHECKED
    for where, group, sign in (("input", inputs, -1), ("created", outputs, 1)):
        for pos, name, arr in group:
            hit = first_nonfinite(arr)
            if hit is not None:
                return ExceptionStatus(mode, sign * int(pos), name, where, hit[0], hit[1])
    return ExceptionStatus(mode, 0)


def reads(alpha, beta) -> tuple[bool, bool]:
    """(reads the operands A, B...; reads C) of ``C := alpha * op(...) + beta * C`` under the policy."""
    return alpha != 0, beta != 0


def iterate_status(name: str, array, mode: str = "check") -> ExceptionStatus | None:
    """For drivers: None while ``array`` (an iterate) is finite, else the status that stops the driver
    (``where = created``: the drivers refuse non-finite inputs up front)."""
    hit = first_nonfinite(array)
    if hit is None:
        return None
    return ExceptionStatus(mode if mode in MODES else "ieee", 1, name, "created", hit[0], hit[1])


def empty_product(alpha, beta, c, *, exceptions: str = "ieee", position: int = 3):
    """``C := alpha * (an empty product) + beta * C`` for a nest with a zero bound (the nest builders refuse
    one, so no kernel exists for it): an empty output is returned as is, an empty reduction (K = 0) gives
    beta * C, and with beta = 0 exact zeros without reading C; no operand is read.  ``position``: C's
    argument position for the status (3 in GEMM's A, B, C).  ``check``: returns ``(C, status)``."""
    check_mode(exceptions)
    c = np.asarray(c)
    read_c = reads(alpha, beta)[1]
    args = [(position, "C", c.copy())] if read_c else []
    if read_c:
        with np.errstate(all="ignore"):
            c[...] = c.dtype.type(beta) * c
    else:
        c[...] = 0
    if exceptions == "ieee":
        return c
    return c, scan(args, [(position, "C", c)], exceptions)


class NonFiniteIterate(Exception):
    """Raised by ``require_finite`` inside a driver's iteration at its first non-finite iterate; the driver
    catches it and returns (or reports) ``status``."""

    def __init__(self, status: ExceptionStatus):
        super().__init__(status.message())
        self.status = status


def require_finite(name: str, array, mode: str = "ieee"):
    """``array`` unchanged, or NonFiniteIterate when it holds an Inf or a NaN (the drivers' stop rule)."""
    status = iterate_status(name, array, mode)
    if status is not None:
        raise NonFiniteIterate(status)
    return array


# --- reductions ------------------------------------------------------------------------------------

def iamax(x) -> int:
    """0-based index of the first NaN of ``x`` if any, else of the first largest |x_i| (|Re| + |Im| for
    complex, as BLAS IxAMAX); -1 for an empty ``x``."""
    a = np.asarray(x).reshape(-1)
    if a.size == 0:
        return -1
    mag = np.abs(a.real) + np.abs(a.imag) if np.iscomplexobj(a) else np.abs(a)
    nan = np.isnan(mag)
    if nan.any():
        return int(np.argmax(nan))
    return int(np.argmax(mag))       # first occurrence of the maximum; Inf is the maximum when present


def nrm2(x) -> float:
    """||x||_2: NaN if any entry is NaN, else Inf if any is Inf, else scale * sqrt(sum((x / scale)^2)) with
    scale = max |x_i| (no spurious overflow or underflow); 0.0 for an empty or zero ``x``."""
    a = np.abs(np.asarray(x).reshape(-1))
    if a.size == 0:
        return 0.0
    a = a.astype(np.result_type(a.dtype, np.float64))
    if np.isnan(a).any():
        return float("nan")
    scale = float(a.max())
    if scale == float("inf"):
        return scale
    if scale == 0.0:
        return 0.0
    y = a / scale
    return float(scale * np.sqrt(np.dot(y, y)))
