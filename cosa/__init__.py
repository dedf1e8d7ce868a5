"""The CoSA MIP scheduler, baselines, reports and the ``cosa`` command line."""

from .schedule import Schedule, SchedulingError, SolverStats

__all__ = ["Schedule", "SchedulingError", "SolverStats"]
