"""Emit, build, call on NumPy arrays (no copies, but a subsampled input's strided copy), verify against NumPy
and time a mapping on the CPU."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field

import numpy as np

from .. import TargetError
from . import build as _build
from .emit import emit_c
from .plan import Plan, make_plan
from .reference import NUMPY_DTYPES, compare, random_inputs, reference
from .result import RunResult, time_call
from .sparse import emit_sparse, run_sparse
from ..exceptions import UNCHECKED, check_mode, reads, scan


@dataclass
class CpuKernel:
    """A compiled kernel for one plan: ``source`` (C), ``library`` (the cached shared object)."""

    plan: Plan
    source: str
    library: object
    fn: object = field(repr=False)

    def check(self, arrays: dict, out: np.ndarray) -> list:
        """The arrays' addresses in tensor order, after checking dtype, shape and C-contiguity (no copy)."""
        ptrs = []
        for t in self.plan.workload.tensors:
            a = out if t.is_output else arrays.get(t.name)
            if a is None:
                raise TargetError(f"no array for tensor '{t.name}'", field=t.name)
            want = NUMPY_DTYPES[self.plan.dtypes[t.name]]
            if a.dtype != want or tuple(a.shape) != tuple(self.plan.shapes[t.name]) or not a.flags.c_contiguous:
                shape = tuple(self.plan.input_shapes[t.name])
                also = f" (or its strided copy, {tuple(self.plan.shapes[t.name])})" \
                    if shape != tuple(self.plan.shapes[t.name]) else ""
                raise TargetError(f"tensor '{t.name}' needs a C-contiguous {np.dtype(want).name} array of shape "
                                  f"{shape}{also}, got {a.dtype} {a.shape}", field=t.name)
            if t.is_output and not a.flags.writeable:
                raise TargetError(f"output '{t.name}' is read-only", field=t.name)
            ptrs.append(a.ctypes.data)
        return ptrs

    def __call__(self, arrays: dict, out: np.ndarray | None = None, threads: int | None = None, *,
                 alpha: float = 1.0, beta: float = 0.0, exceptions: str = "ieee"):
        """``out := alpha * nest(arrays) + beta * out`` (input name -> array); writes and returns ``out``
        (allocated, uninitialised, when None; beta != 0 needs it).  NaN/Inf rules: ``targets.exceptions``
        (beta = 0 does not read ``out``, alpha = 0 reads no input).  ``exceptions="check"``: returns
        ``(out, ExceptionStatus)`` naming the first argument (kernel order) with an Inf/NaN."""
        check_mode(exceptions)
        arrays = self.prepared(arrays)
        o = self.plan.workload.output
        if out is None:
            if beta != 0:
                raise TargetError("beta != 0 reads the output: pass out", field="out")
            out = np.empty(self.plan.shapes[o.name], dtype=NUMPY_DTYPES[self.plan.dtypes[o.name]])
        ptrs = self.check(arrays, out)
        nthreads = int(threads or os.cpu_count() or 1)
        read_inputs, read_out = reads(alpha, beta)
        status_in = self._inputs(arrays, out, read_inputs, read_out) if exceptions == "check" else None
        if alpha == 1 and beta == 0:
            self.fn(*ptrs, nthreads)
        else:
            self._fn_ab()(*ptrs, float(alpha), float(beta), nthreads)
        if exceptions == "ieee":
            return out
        pos = self._positions()
        return out, scan(status_in, [(pos[o.name], o.name, out)])

    def prepared(self, arrays: dict) -> dict:
        """``arrays`` with each subsampled input (``workloads.fusion.subsample``) given in its stored shape
        replaced by its strided copy in the kernel's shape (``Plan.input_shapes``); the rest as given."""
        sub = self.plan.workload.op.get("subsampled", {})
        out = dict(arrays)
        for name, how in sub.items():
            a = arrays.get(name)
            if a is not None and tuple(a.shape) == tuple(how["shape"]):
                view = a[tuple(slice(0, s * n, s) for s, n in zip(how["strides"], how["copy_shape"]))]
                out[name] = np.ascontiguousarray(view).reshape(self.plan.shapes[name])
        return out

    def _positions(self) -> dict:
        return {t.name: k + 1 for k, t in enumerate(self.plan.workload.tensors)}

    def _inputs(self, arrays, out, read_inputs: bool, read_out: bool) -> list:
        pos = self._positions()
        o = self.plan.workload.output.name
        args = [(pos[t.name], t.name, arrays[t.name]) for t in self.plan.workload.inputs] if read_inputs else []
        # the output is read only with beta != 0 (copied before the kernel runs)
        return sorted(args + ([(pos[o], o, out.copy())] if read_out else []))

    def _fn_ab(self):
        return _build.load(self.library, "cosa_kernel_ab", len(self.plan.workload.tensors), 2)


def emit(workload, mapping, arch, *, scalar: bool = False) -> str:
    """C + OpenMP source of ``mapping`` (validated; see ``targets.cpu.plan``; sparse nests:
    ``targets.cpu.sparse``)."""
    if any(t.density < 1.0 for t in workload.tensors):
        return emit_sparse(workload, mapping, arch)
    isa = _build.isa()
    plan = make_plan(workload, mapping, arch, vector_bytes=isa.vector_bytes, registers=isa.registers, scalar=scalar)
    return emit_c(plan, isa.vector_bytes)


def compile_kernel(workload, mapping, arch, *, scalar: bool = False, profile: bool = False) -> CpuKernel:
    """Plan, emit and build (cached) the kernel of ``mapping``; ``profile``: with the counters of
    ``targets.cpu.profile``."""
    isa = _build.isa()
    plan = make_plan(workload, mapping, arch, vector_bytes=isa.vector_bytes, registers=isa.registers, scalar=scalar)
    source = emit_c(plan, isa.vector_bytes, profile=profile)
    lib = _build.build(source)
    return CpuKernel(plan, source, lib, _build.load(lib, "cosa_kernel", len(workload.tensors)))


def run(workload, mapping, arch, *, threads: int | None = None, repeat: int = 3, seed: int = 0,
        scalar: bool = False, exceptions: str = "ieee") -> RunResult:
    """Build and run ``mapping``, verify against NumPy (or SciPy for a sparse nest), time ``repeat`` calls.
    ``exceptions="check"``: the verified call scans its inputs and output (``exception_status``)."""
    from mappings import mapping_to_dict

    check_mode(exceptions)
    if any(t.density < 1.0 for t in workload.tensors):
        return run_sparse(workload, mapping, arch, threads=threads, repeat=repeat, seed=seed, exceptions=exceptions)
    threads = int(threads or os.cpu_count() or 1)
    if threads < 1:
        raise TargetError(f"threads must be >= 1, got {threads}", field="--threads")
    kernel = compile_kernel(workload, mapping, arch, scalar=scalar)
    plan = kernel.plan
    arrays = random_inputs(workload, plan.dtypes, plan.input_shapes, seed)
    status = UNCHECKED
    if exceptions == "check":
        out, status = kernel(arrays, threads=threads, exceptions="check")
    else:
        out = kernel(arrays, threads=threads)
    ref = reference(workload, kernel.prepared(arrays), plan.shapes, plan.compute_dtype)
    ok, err = compare(out, ref, plan.compute_dtype)
    times = time_call(lambda: kernel(arrays, out, threads), repeat)
    seconds = statistics.median(times)
    return RunResult(ok, err, "numpy", seconds, 2 * workload.macs / seconds / 1e9, threads,
                     mapping_to_dict(mapping, arch), times, status.to_dict())
