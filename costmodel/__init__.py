"""Architectures and the analytical cost model."""

from .arch import Arch, ArchError, Level, SpatialAxis

__all__ = ["Arch", "ArchError", "Level", "SpatialAxis"]
