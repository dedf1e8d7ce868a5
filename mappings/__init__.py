"""Mappings (schedules): per-level tiling factors, loop orders, spatial unrolling and bypass."""

from .io import dump_mapping, load_mapping, mapping_from_dict, mapping_to_dict
from .mapping import Loop, LevelMapping, Mapping, MappingError
from .pretty import format_loopnest
from .timeloop import dump_timeloop, from_timeloop, to_timeloop
from .validate import fits, tile_bytes, tile_rows, validate, violations

__all__ = [
    "LevelMapping", "Loop", "Mapping", "MappingError",
    "dump_mapping", "dump_timeloop", "fits", "format_loopnest", "from_timeloop", "load_mapping",
    "mapping_from_dict", "mapping_to_dict", "tile_bytes", "tile_rows", "to_timeloop", "validate", "violations",
]
