"""The CoSA mixed-integer program: formulation, solver back ends, decoding, the cut loop."""

from .driver import mip_schedule
from .formulation import OBJECTIVES, CosaWeights, Formulation, build
from workloads.divisors import divisors, prime_factor_counts as prime_factors  # re-exported: prime -> multiplicity

from .problem import Problem, build_problem
from .solve import SOLVERS, SolveResult, gurobi_available, solve

__all__ = [
    "CosaWeights", "Formulation", "OBJECTIVES", "Problem", "SOLVERS", "SolveResult", "build", "build_problem",
    "divisors", "gurobi_available", "mip_schedule", "prime_factors", "solve",
]
