"""Gemmini back end: configuration, ISA encodings, numerics, references and simulators."""

from . import isa, numerics
from .config import DEFAULT_CONFIG, SMALL_CONFIG, GemminiConfig
from .errors import CodegenError, IsaError, SimulationError
from .reference import conv_ref, conv_weights_as_gemm, im2col, matmul_acc, matmul_ref

__all__ = [
    "CodegenError", "DEFAULT_CONFIG", "GemminiConfig", "IsaError", "SMALL_CONFIG", "SimulationError",
    "conv_ref", "conv_weights_as_gemm", "im2col", "isa", "matmul_acc", "matmul_ref", "numerics",
]
