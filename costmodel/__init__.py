"""Architectures and the analytical cost model."""

from .arch import Arch, ArchError, Level, SpatialAxis
from .archio import arch_from_dict, arch_to_dict, describe_arch, dump_arch, load_arch
from .compute_runs import ComputeRuns, compute_runs
from .cost import Access, Cost, PartialSums
from .evaluate import evaluate
from .presets import list_presets, preset
from .trace import trace

__all__ = [
    "Access", "Arch", "ArchError", "ComputeRuns", "Cost", "Level", "PartialSums", "SpatialAxis", "arch_from_dict",
    "arch_to_dict", "compute_runs", "describe_arch", "dump_arch", "evaluate", "list_presets", "load_arch", "preset",
    "trace",
]
