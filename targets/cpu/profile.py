"""Where a generated CPU kernel's time goes: its packing copies against the whole call, measured, beside
what the cost model says they take.

``profile_packs(workload, mapping, arch)`` builds the kernel with counters (``emit_c(..., profile=True)``:
the time-stamp counter on x86, the monotonic clock elsewhere, read around every call and around every
packing copy that runs), checks its output against NumPy, calls it ``repeat`` times and reports, over the
faster half of the calls, the share of the calls' time each packed input's copies took.  With more than
one thread the copies' ticks are summed over the threads, so a share is of threads x the calls' time.
Beside it, the model's share: the input's copy cycles (``costmodel.packing.pack_cycles_by_tensor``, at
the arch's measured ``pack_cycles_per_word``) and the copies' stalls on its DRAM reads
(``costmodel.packing.copy_fill_cycles``), over ``costmodel.evaluate``'s cycles of the mapping.  A
counter read costs some tens of cycles, once per copy and twice per call, so the profiled call runs
slightly slower than the plain one; the shares are its own.
"""

from __future__ import annotations

import ctypes
import math
import time
from dataclasses import dataclass

from .. import TargetError
from .build import open_library
from .reference import compare, random_inputs, reference
from .run import CpuKernel, compile_kernel


@dataclass(frozen=True)
class PackProfile:
    """Measured and modelled shares of a kernel's time in its packing copies.

    seconds: wall seconds of the fastest profiled call; threads: threads per call; measured: packed input
    -> share (0..1) of the faster half of the calls' time its copies took; model: packed input -> share
    of the model's cycles its copies take (empty where the arch has no micro-kernel facts)."""

    seconds: float
    threads: int
    measured: dict
    model: dict

    @property
    def measured_total(self) -> float:
        return sum(self.measured.values())

    @property
    def model_total(self) -> float:
        return sum(self.model.values())


def profiled_kernel(workload, mapping, arch) -> tuple[CpuKernel, object]:
    """The kernel of ``mapping`` built with counters, and its ``cosa_profile`` function."""
    kernel = compile_kernel(workload, mapping, arch, profile=True)
    read = getattr(open_library(kernel.library), "cosa_profile")
    read.argtypes = [ctypes.c_void_p]
    read.restype = None
    return kernel, read


def model_shares(workload, mapping, arch) -> dict:
    """{packed input: its copy cycles over the model's cycles of ``mapping``}; {} without micro-kernel facts.
    A ragged mapping (``cosa.mip.ragged``: a dim's factors multiply past its bound, the last tile cut) is
    priced on the nest padded to its factors, as the MIP chose it; both terms scale alike."""
    from costmodel import evaluate
    from costmodel.microkernel import kernel_level, spec_of
    from costmodel.evaluate import access_counts
    from costmodel.packing import copy_fill_cycles, pack_cycles_by_tensor

    spec = spec_of(arch)
    if spec is None:
        return {}
    padded = {d: f for d in workload.dims
              if (f := mapping.factor(d)) > workload.dims[d]}
    workload = workload.with_dims(**padded) if padded else workload
    cycles = evaluate(workload, arch, mapping).cycles
    kernel = kernel_level(arch)
    by = pack_cycles_by_tensor(workload, mapping, arch, kernel, spec.pack_cycles_per_word)
    accesses, _ = access_counts(workload, arch, mapping, {})
    for n in by:  # the copies' stalls on their sources' DRAM reads (copy_fill_cycles) are the copies' time too
        by[n] += sum(copy_fill_cycles(workload, arch, mapping, accesses, kernel, only={n}).values())
    return {n: c / cycles for n, c in by.items()} if cycles else {}


def profile_packs(workload, mapping, arch, *, threads: int = 1, repeat: int = 20, seed: int = 0) -> PackProfile:
    """Build ``mapping`` with counters, verify it against NumPy, call it ``repeat`` times on ``threads``
    threads and return its measured and modelled packing shares (see the module docstring)."""
    if threads < 1 or repeat < 1:
        raise TargetError(f"threads and repeat must be >= 1, got {threads} and {repeat}", field="threads")
    kernel, read = profiled_kernel(workload, mapping, arch)
    plan = kernel.plan
    arrays = random_inputs(workload, plan.dtypes, plan.input_shapes, seed)
    out = kernel(arrays, threads=threads)
    ok, err = compare(out, reference(workload, kernel.prepared(arrays), plan.shapes, plan.compute_dtype),
                      plan.compute_dtype)
    if not ok:
        raise TargetError(f"the profiled kernel's output differs from NumPy's (max abs error {err:.3g})",
                          source=workload.name, exit_code=1)
    slots = 1 + len(plan.packs)
    counts = (ctypes.c_ulonglong * slots)()
    read(counts)  # the checked call's counts are dropped
    calls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        kernel(arrays, out, threads)
        wall = time.perf_counter() - t0
        read(counts)
        calls.append((wall, list(counts)))
    calls.sort(key=lambda c: c[1][0])
    fast = calls[:math.ceil(len(calls) / 2)]
    ticks = sum(c[1][0] for c in fast) * threads
    measured = {name: float(sum(c[1][1 + n] for c in fast) / ticks) if ticks else 0.0
                for n, name in enumerate(plan.packs)}
    return PackProfile(seconds=float(min(c[0] for c in calls)), threads=threads, measured=measured,
                       model=model_shares(workload, mapping, arch))


__all__ = ["PackProfile", "model_shares", "profile_packs", "profiled_kernel"]
