"""The loop-nest IR, its builders and loaders, and the bundled zoo."""

from .builders import conv2d, depthwise_conv2d, einsum, matmul
from .dtypes import DTYPE_BITS, resolve_dtype
from .errors import FrameworkError, WorkloadError
from .ir import ROLES, AffineExpr, LoopNest, Tensor, tensor
from . import zoo
from .loaders import dump_short
from .sources import load, load_one
from .onnx_loader import load_onnx
from .sparse import fusedmm, sddmm, sparse_matrix, spmm

__all__ = [
    "AffineExpr", "DTYPE_BITS", "FrameworkError", "LoopNest", "ROLES", "Tensor", "WorkloadError",
    "conv2d", "depthwise_conv2d", "einsum", "matmul", "tensor",
    "dump_short", "load", "load_one", "load_onnx", "resolve_dtype", "zoo",
    "fusedmm", "sddmm", "sparse_matrix", "spmm",
]
