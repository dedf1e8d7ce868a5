"""GPU target: a mapping on a ``gpu`` arch becomes one kernel description, printed as CUDA C (built with nvcc,
run through the driver API where an NVIDIA GPU exists) and as OpenCL C (run with pyopencl, on PoCL's CPU
device where there is no GPU), and verified against NumPy."""

from .api import LANGUAGES, GpuRun, call, emit, run, run_many
from .errors import GpuError
from .kernel import KernelDesc, build_kernel
from .printers import print_kernel

__all__ = ["GpuError", "GpuRun", "call",
           "KernelDesc", "LANGUAGES", "build_kernel", "emit", "print_kernel", "run", "run_many"]
