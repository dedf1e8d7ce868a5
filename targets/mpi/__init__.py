"""MPI target: distributed kernels on mpi4py ranks, every message counted.

``targets.mpi.ranks``: ``Ranks``, the counting communicator wrapper every distributed algorithm uses,
and ``collective_cost``, how each collective is counted.  ``targets.mpi.launch``: ``launch(entry,
ranks, args, timeout_s)`` runs a function on P ranks under mpiexec with a watchdog.
"""

from .launch import MpiError, launch, mpiexec_path, under_mpiexec
from .ranks import Ranks, Traffic, collective_cost

__all__ = ["MpiError", "Ranks", "Traffic", "collective_cost", "launch", "mpiexec_path", "under_mpiexec"]
