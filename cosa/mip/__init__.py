"""The CoSA mixed-integer program: formulation, solver back ends, decoding, the cut loop."""

from .driver import mip_schedule
from .formulation import OBJECTIVES, CosaWeights, Formulation, build
from workloads.divisors import divisors, prime_factor_counts as prime_factors  # re-exported: prime -> multiplicity

from .problem import Problem, build_problem
from .solve import SOLVERS, SolveResult, gurobi_available, solve


def choose_loop_tiles(problem, machine, *, time_limit_s: float = 30.0, source: str = "loop tiles") -> tuple:
    """The tile arguments of the library call ``problem`` describes: (M, N, K) for ``tiled_matmul``
    (``loop_tiles``), a ``costmodel.gemmini_conv_loops.ConvLayer`` for ``tiled_conv`` (``conv_tiles``)."""
    from costmodel.gemmini_conv_loops import ConvLayer

    if isinstance(problem, ConvLayer):
        from .conv_tiles import choose_conv_tiles

        return choose_conv_tiles(problem, machine, time_limit_s=time_limit_s, source=source).tiles
    from .loop_tiles import choose_matmul_tiles

    return choose_matmul_tiles(tuple(problem), machine, time_limit_s=time_limit_s, source=source).tiles

__all__ = [
    "CosaWeights", "Formulation", "OBJECTIVES", "Problem", "SOLVERS", "SolveResult", "build", "build_problem",
    "choose_loop_tiles",
    "divisors", "gurobi_available", "mip_schedule", "prime_factors", "solve",
]
