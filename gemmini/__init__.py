"""Gemmini back end: configuration, ISA encodings, numerics, references and simulators."""

from . import isa, numerics
from .config import DEFAULT_CONFIG, SMALL_CONFIG, GemminiConfig
from .errors import CodegenError, IsaError, SimulationError
from .reference import batched_matmul_ref, conv_ref, conv_weights_as_gemm, im2col, matmul_acc, matmul_ref
from .codegen import Program, generate
from .codegen.c import emit_c, emit_gemmini_h
from .run import example_inputs, run_program
from .run_result import RunResult

__all__ = [
    "CodegenError", "DEFAULT_CONFIG", "GemminiConfig", "IsaError", "SMALL_CONFIG", "SimulationError",
    "batched_matmul_ref", "conv_ref", "conv_weights_as_gemm", "im2col", "isa", "matmul_acc", "matmul_ref",
    "numerics",
    "Program", "RunResult", "emit_c", "emit_gemmini_h", "example_inputs", "generate", "run_program",
]
