"""CPU target: a mapping on a CPU arch becomes C + OpenMP, built with gcc, called on NumPy arrays.

``emit(workload, mapping, arch)`` gives the C source; ``compile_kernel`` builds it (cached by content
hash, see ``targets.cpu.build``) and returns a callable ``CpuKernel``; ``run`` builds, runs, verifies
against NumPy (SciPy for CSR SpMM / SDDMM) and times it.  How a mapping is read: ``targets.cpu.plan``;
``kernel_nest`` is the nest a scheduler should map for this back end (dims fused where the memory allows).
"""

from .build import isa
from .plan import Plan, kernel_nest, make_plan
from .result import RunResult
from .run import CpuKernel, compile_kernel, emit, run

__all__ = ["CpuKernel", "Plan", "RunResult", "compile_kernel", "emit", "isa", "kernel_nest", "make_plan", "run"]
