"""MPI target: distributed kernels on mpi4py ranks, every message counted.

``ranks``: ``Ranks``, the counting communicator wrapper every distributed algorithm uses, and
``collective_cost``, how each collective is counted.  ``launch``: ``launch(entry, ranks, args,
timeout_s)`` runs a function on P ranks under mpiexec with a watchdog.  Sparse kernels (SpMM, SDDMM,
FusedMM; Bharadwaj, Buluç and Demmel, IPDPS 2022): ``shift15d`` (1.5D dense shift, 1.5D sparse
shift), ``rep25d`` (2.5D dense replicate, 2.5D sparse replicate), ``model`` (their exact words and
messages per rank and phase, alpha-beta-gamma seconds, memory), ``choose`` (the cheapest
configuration), ``run`` (launch, verify against SciPy, compare with the model), ``calibrate`` (alpha,
beta, gamma of this machine).
"""

from .launch import MpiError, launch, mpiexec_path, under_mpiexec
from .ranks import Ranks, Traffic, collective_cost

__all__ = ["MpiError", "Ranks", "Traffic", "collective_cost", "launch", "mpiexec_path", "under_mpiexec"]
