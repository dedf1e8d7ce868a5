"""The loop-nest IR, its builders and loaders, and the bundled zoo."""

from .builders import conv2d, depthwise_conv2d, einsum, matmul
from .errors import FrameworkError, WorkloadError
from .ir import ROLES, AffineExpr, LoopNest, Tensor, tensor

__all__ = [
    "AffineExpr", "FrameworkError", "LoopNest", "ROLES", "Tensor", "WorkloadError",
    "conv2d", "depthwise_conv2d", "einsum", "matmul", "tensor",
]
