"""Communication lower bounds: HBL exponents, the Dinh-Demmel tile LP with loop bounds, strided
convolutions and mixed precision, matmul's tight constants, parallel bounds, and the bound over
memory sizes.

Memory sizes are in bytes unless a name says words; the bounds are on traffic (loads plus stores)
between one fast memory and slower memory, for one execution of a nest.
"""

from .hbl import HBLExponent, hbl_exponent
from .matmul import MatmulBound, matmul_bound
from .memory import onchip_bytes, parse_memory
from .parallel import ParallelBound, parallel_bound
from .report import BoundCurve, BoundReport
from .roofline import Roofline, roofline
from .sequential import bound, bound_curve, bound_for_arch, compulsory
from .sparse import SparseParallelBound, sparse_parallel_bound
from .tile_lp import TileLP, tile_lp

__all__ = [
    "BoundCurve", "BoundReport", "HBLExponent", "MatmulBound", "ParallelBound", "Roofline", "TileLP",
    "bound", "bound_curve", "bound_for_arch", "compulsory", "hbl_exponent", "matmul_bound", "onchip_bytes",
    "parallel_bound", "parse_memory", "roofline", "tile_lp", "SparseParallelBound", "sparse_parallel_bound",
]
