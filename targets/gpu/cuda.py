"""Compile a CUDA kernel with nvcc; run it through the CUDA driver API (ctypes) where an NVIDIA GPU exists.

nvcc is found through the ``NVCC`` environment variable or ``PATH``.  The
runner needs only the driver library (``libcuda.so.1``): no CuPy, no runtime
library.  It compiles a cubin for the device's own compute capability.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

from .errors import GpuError
from .kernel import KernelDesc
from targets.cpu.reference import NUMPY_DTYPES as NUMPY

DEFAULT_ARCH = "sm_90"


def nvcc() -> str:
    """Path of nvcc; GpuError naming the package that provides it when there is none."""
    path = os.environ.get("NVCC") or shutil.which("nvcc")
    if not path:
        raise GpuError("nvcc not found (set NVCC or PATH): install the CUDA toolkit (Debian: nvidia-cuda-toolkit)",
                       source="cuda", field="nvcc")
    return path


def cache_dir() -> Path:
    """``gpu`` under the framework's cache root (``workloads.cachedir``, as targets.cpu)."""
    from workloads.cachedir import cache_dir as _cache_dir

    return _cache_dir("gpu")


@functools.lru_cache(maxsize=None)
def _nvcc_id(path: str) -> str:
    return subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:][0]


def compile_cuda(source: str, output: str = "ptx", arch: str = DEFAULT_ARCH) -> Path:
    """Compile ``source`` to PTX or a cubin for ``arch`` (cached by the SHA-256 of the source, nvcc's version and
    the flags); GpuError (exit 1) naming the log on a compiler error."""
    if output not in ("ptx", "cubin"):
        raise GpuError(f"output must be 'ptx' or 'cubin', got {output!r}", source="cuda", field="output")
    compiler = nvcc()
    key = hashlib.sha256(f"{_nvcc_id(compiler)} {output} {arch}\n{source}".encode()).hexdigest()[:24]
    folder = cache_dir() / key
    result = folder / f"kernel.{output}"
    if result.exists():
        return result
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "kernel.cu"
    src.write_text(source)
    cmd = [compiler, f"--{output}", f"-arch={arch}", "-O3", "-o", str(result), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        log = folder / "nvcc.log"
        log.write_text(" ".join(cmd) + "\n" + proc.stdout + proc.stderr)
        result.unlink(missing_ok=True)
        raise GpuError(f"nvcc failed (exit {proc.returncode}); full log in {log}", source="cuda", field="build",
                       exit_code=1)
    return result


# --- the driver API ------------------------------------------------------------------------------------

class _Driver:
    """The few driver calls a run needs, each checked."""

    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError:
            raise GpuError("no NVIDIA driver (libcuda.so.1) on this machine", source="cuda", field="device") from None
        self.call("cuInit", 0)
        count = ctypes.c_int()
        self.call("cuDeviceGetCount", ctypes.byref(count))
        if count.value < 1:
            raise GpuError("the NVIDIA driver sees no GPU", source="cuda", field="device")
        self.device = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(self.device), 0)
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.call("cuDeviceGetAttribute", ctypes.byref(major), 75, self.device)  # COMPUTE_CAPABILITY_MAJOR
        self.call("cuDeviceGetAttribute", ctypes.byref(minor), 76, self.device)  # COMPUTE_CAPABILITY_MINOR
        self.arch = f"sm_{major.value}{minor.value}"
        name = ctypes.create_string_buffer(256)
        self.call("cuDeviceGetName", name, 256, self.device)
        self.name = name.value.decode(errors="replace")
        self.context = ctypes.c_void_p()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(self.context), self.device)
        self.call("cuCtxSetCurrent", self.context)

    def call(self, name: str, *args) -> None:
        fn = getattr(self.lib, name + "_v2", None) if name in _V2 else None
        fn = fn or getattr(self.lib, name)
        status = fn(*args)
        if status != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(status, ctypes.byref(text))
            raise GpuError(f"{name} failed: {(text.value or b'?').decode()} ({status})", source="cuda",
                           field="driver", exit_code=1)


_V2 = {"cuMemAlloc", "cuMemFree", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemsetD8"}


@functools.lru_cache(maxsize=1)
def driver() -> _Driver:
    return _Driver()


def available() -> str | None:
    """None when a GPU can run CUDA kernels here, else the reason."""
    try:
        driver()
    except GpuError as exc:
        return str(exc)
    return None


def device_name() -> str:
    d = driver()
    return f"{d.name} ({d.arch})"


def run(desc: KernelDesc, source: str, inputs: dict[str, np.ndarray], repeat: int = 1,
        optimize: bool = True, alpha: float = 1.0, beta: float = 0.0,
        c: np.ndarray | None = None) -> tuple[np.ndarray, list[float]]:
    """Compile for the device, run ``repeat`` times (output zeroed before each, not timed; an untimed first
    launch when ``repeat`` > 1); (output, seconds).  ``optimize`` is for the OpenCL runner's signature;
    ``alpha``, ``beta``, ``c``: as ``targets.gpu.opencl.run`` (the ``_ab`` epilogue kernel)."""
    drv = driver()
    image = compile_cuda(source, "cubin", drv.arch).read_bytes()
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    drv.call("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(image))
    pointers, hosts, out = [], [], None
    try:
        drv.call("cuModuleGetFunction", ctypes.byref(function), module, desc.name.encode())
        for t, p in zip(desc.workload.tensors, desc.params):
            host = (np.zeros(p.shape, dtype=NUMPY[p.dtype]) if p.output
                    else np.ascontiguousarray(inputs[t.name], dtype=NUMPY[p.dtype]))
            ptr = ctypes.c_uint64()
            drv.call("cuMemAlloc", ctypes.byref(ptr), ctypes.c_size_t(max(host.nbytes, 1)))
            pointers.append(ptr)
            hosts.append(host)
            if p.output:
                out = (ptr, host)
            else:
                drv.call("cuMemcpyHtoD", ptr, host.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(host.nbytes))
        args = (ctypes.c_void_p * len(pointers))(*[ctypes.cast(ctypes.byref(p), ctypes.c_void_p) for p in pointers])
        epilogue = None
        if not (alpha == 1 and beta == 0):
            from .printers import AB_BLOCK

            acc = NUMPY[desc.acc_dtype]
            scalar = {"float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int}[desc.acc_dtype]
            c_ptr = out[0]
            if beta != 0:
                host_c = np.ascontiguousarray(c, dtype=acc)
                c_ptr = ctypes.c_uint64()
                drv.call("cuMemAlloc", ctypes.byref(c_ptr), ctypes.c_size_t(max(host_c.nbytes, 1)))
                pointers.append(c_ptr)
                drv.call("cuMemcpyHtoD", c_ptr, host_c.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(host_c.nbytes))
            ab = ctypes.c_void_p()
            drv.call("cuModuleGetFunction", ctypes.byref(ab), module, f"{desc.name}_ab".encode())
            n = out[1].size
            vals = [out[0], c_ptr, scalar(alpha), scalar(beta), ctypes.c_int(n)]
            ab_args = (ctypes.c_void_p * 5)(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
            grid = -(-max(n, 1) // AB_BLOCK)
            epilogue = lambda: drv.call("cuLaunchKernel", ab, grid, 1, 1, AB_BLOCK, 1, 1, 0, None, ab_args, None)
        seconds = []
        for _ in range(repeat + 1 if repeat > 1 else 1):
            drv.call("cuMemsetD8", out[0], ctypes.c_ubyte(0), ctypes.c_size_t(out[1].nbytes))
            drv.call("cuCtxSynchronize")
            start = time.perf_counter()
            if alpha != 0:
                drv.call("cuLaunchKernel", function, desc.blocks, 1, 1, desc.threads, 1, 1, 0, None, args, None)
            if epilogue is not None:
                epilogue()
            drv.call("cuCtxSynchronize")
            seconds.append(time.perf_counter() - start)
        seconds = seconds[1:] if repeat > 1 else seconds
        drv.call("cuMemcpyDtoH", out[1].ctypes.data_as(ctypes.c_void_p), out[0], ctypes.c_size_t(out[1].nbytes))
        return out[1], seconds
    finally:
        for ptr in pointers:
            drv.call("cuMemFree", ptr)
        drv.call("cuModuleUnload", module)
