"""Build and run an OpenCL kernel with pyopencl (PoCL runs it on the CPU where no GPU platform exists).

The device is pyopencl's first one, or the one ``PYOPENCL_CTX`` selects.
"""

from __future__ import annotations

import functools
import tempfile
import time
from pathlib import Path

import numpy as np

from .errors import GpuError
from .kernel import KernelDesc
from targets.cpu.reference import NUMPY_DTYPES as NUMPY

MISSING = ("no OpenCL platform found: install one (Debian: pocl-opencl-icd, which runs OpenCL on the CPU) "
           "and pyopencl (pip install pyopencl)")


def _cl():
    try:
        import pyopencl as cl
    except ImportError:
        raise GpuError("pyopencl is not installed: pip install pyopencl (and Debian's pocl-opencl-icd for a "
                       "platform)", source="opencl", field="pyopencl") from None
    return cl


@functools.lru_cache(maxsize=1)
def context():
    """(context, queue, device) of the OpenCL device used for every run; GpuError naming the package if none."""
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        platforms = []
    if not any(p.get_devices() for p in platforms):
        raise GpuError(MISSING, source="opencl", field="platform")
    ctx = cl.create_some_context(interactive=False)
    return ctx, cl.CommandQueue(ctx), ctx.devices[0]


def device_name() -> str:
    _, _, dev = context()
    return f"{dev.name.strip()} ({dev.platform.name.strip()})"


def available() -> str | None:
    """None when an OpenCL device is usable, else the reason."""
    try:
        context()
    except GpuError as exc:
        return str(exc)
    return None


@functools.lru_cache(maxsize=64)
def _program(source: str, optimize: bool = True):
    cl = _cl()
    ctx, _, _ = context()
    try:
        return cl.Program(ctx, source).build(options=[] if optimize else ["-cl-opt-disable"])
    except cl.Error as exc:
        log = Path(tempfile.mkdtemp(prefix="cosa-opencl-")) / "build.log"
        log.write_text(source + "\n/* build log:\n" + str(exc) + "\n*/\n")
        raise GpuError(f"the OpenCL compiler failed; full log in {log}", source="opencl", field="build",
                       exit_code=1) from None


def build(source: str, optimize: bool = True) -> None:
    """Compile ``source`` (cached by its text); GpuError (exit 1) with the path of the log on failure.
    ``optimize=False`` builds with -cl-opt-disable (PoCL then specialises kernels several times faster)."""
    _program(source, optimize)


def run(desc: KernelDesc, source: str, inputs: dict[str, np.ndarray], repeat: int = 1,
        optimize: bool = True, alpha: float = 1.0, beta: float = 0.0,
        c: np.ndarray | None = None) -> tuple[np.ndarray, list[float]]:
    """Run the kernel ``repeat`` times on ``inputs`` (tensor name -> array); (output, seconds per run).

    Each run zeroes the output first (not timed) and times the kernel from
    launch to completion; with ``repeat`` > 1 an untimed first launch takes
    the device's kernel specialisation (PoCL compiles per launch shape).
    ``alpha``, ``beta``, ``c``: output := alpha * nest + beta * c under ``targets.exceptions`` (alpha = 0
    launches no main kernel, so the inputs are not read; beta = 0 uploads and reads no ``c``), the
    ``_ab`` epilogue timed with the kernel.
    """
    cl = _cl()
    ctx, queue, dev = context()
    if desc.threads > dev.max_work_group_size:
        raise GpuError(f"{desc.threads} threads per block exceed the device's {dev.max_work_group_size}",
                       source=f"opencl device {dev.name.strip()}", field="threads")
    if desc.shared_bytes > dev.local_mem_size:
        raise GpuError(f"{desc.shared_bytes} B of shared memory exceed the device's {dev.local_mem_size}",
                       source=f"opencl device {dev.name.strip()}", field="shared")
    program = _program(source, optimize)
    kernel = cl.Kernel(program, desc.name)
    mf = cl.mem_flags
    buffers, out_host = [], None
    names = [t.name for t in desc.workload.tensors]
    for name, p in zip(names, desc.params):
        if p.output:
            out_host = np.zeros(p.shape, dtype=NUMPY[p.dtype])
            buffers.append(cl.Buffer(ctx, mf.READ_WRITE, max(out_host.nbytes, 1)))
        else:
            host = np.ascontiguousarray(inputs[name], dtype=NUMPY[p.dtype])
            buffers.append(cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host))
    out_buf = buffers[[p.output for p in desc.params].index(True)]
    epilogue = None
    if not (alpha == 1 and beta == 0):
        from .printers import AB_BLOCK

        acc = NUMPY[desc.acc_dtype]
        c_buf = out_buf
        if beta != 0:
            host_c = np.ascontiguousarray(c, dtype=acc).reshape(out_host.shape)
            c_buf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host_c)
        n = out_host.size
        ab = cl.Kernel(program, f"{desc.name}_ab")
        epilogue = lambda: ab(queue, (-(-max(n, 1) // AB_BLOCK) * AB_BLOCK,), (AB_BLOCK,), out_buf, c_buf,
                              acc(alpha), acc(beta), np.int32(n))
    seconds = []
    for _ in range(repeat + 1 if repeat > 1 else 1):
        cl.enqueue_copy(queue, out_buf, np.zeros_like(out_host))
        queue.finish()
        start = time.perf_counter()
        if alpha != 0:
            kernel(queue, (desc.blocks * desc.threads,), (desc.threads,), *buffers)
        if epilogue is not None:
            epilogue()
        queue.finish()
        seconds.append(time.perf_counter() - start)
    seconds = seconds[1:] if repeat > 1 else seconds
    cl.enqueue_copy(queue, out_host, out_buf)
    queue.finish()
    return out_host, seconds
