"""Mappings (schedules): per-level tiling factors, loop orders, spatial unrolling and bypass."""

from .mapping import Loop, LevelMapping, Mapping, MappingError

__all__ = ["LevelMapping", "Loop", "Mapping", "MappingError"]
