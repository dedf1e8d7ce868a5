"""CP decomposition: tensors (dense, sparse COO, FROSTT reader, planted and power-law generators),
MTTKRP (a scheduled loop nest on the CPU target; sparse over nonzeros), the exact Khatri-Rao
leverage-score sampler, and CP-ALS / CP-ARLS-LEV / STS-CP (``algorithms.cp.als``)."""

from .tensors import CpError, SparseTensor, make_sparse, planted_sparse, powerlaw_sparse, read_tns, write_tns

__all__ = ["CpError", "SparseTensor", "make_sparse", "planted_sparse", "powerlaw_sparse", "read_tns", "write_tns"]
