"""Baseline schedulers: the vendor's Gemmini heuristic, random search and exhaustive search."""

from .exhaustive import exhaustive
from .gemmini_default import (ConvTiles, GemminiTileConfig, MatmulTiles, gemmini_default, gemmini_default_mapping,
                              tiled_conv_auto_tiles, tiled_matmul_auto_tiles)
from .mapspace import MapSpace, random_mapping
from .objective import OBJECTIVES
from .random_search import random_search

__all__ = [
    "ConvTiles", "GemminiTileConfig", "MapSpace", "MatmulTiles", "OBJECTIVES", "exhaustive", "gemmini_default",
    "gemmini_default_mapping", "random_mapping", "random_search", "tiled_conv_auto_tiles", "tiled_matmul_auto_tiles",
]
