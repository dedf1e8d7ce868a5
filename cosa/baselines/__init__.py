"""Baseline schedulers: the vendor's Gemmini heuristic, random search and exhaustive search."""

from .exhaustive import exhaustive
from .gemmini_default import gemmini_default, gemmini_default_mapping
from .mapspace import MapSpace, random_mapping
from .objective import OBJECTIVES
from .random_search import random_search

__all__ = [
    "MapSpace", "OBJECTIVES", "exhaustive", "gemmini_default", "gemmini_default_mapping", "random_mapping",
    "random_search",
]
