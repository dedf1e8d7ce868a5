"""The CoSA MIP scheduler, baselines, reports and the ``cosa`` command line."""

from .compare import compare
from .compare_rows import CompareResult, CompareRow
from .schedule import Schedule, SchedulingError, SolverStats
from .scheduler import SCHEDULERS, schedule

__all__ = ["CompareResult", "CompareRow", "SCHEDULERS", "Schedule", "SchedulingError", "SolverStats", "compare", "schedule"]
