"""Our mapping YAML, with levels named after the architecture's levels.

Format (levels outer to inner; a level left out has no loops and bypasses nothing)::

    levels:
      - name: DRAM
        temporal: {K: 4, C: 2}
        order: [K, C]          # temporal loops, outer to inner
      - name: Scratchpad
        temporal: {P: 7}
        bypass: [Outputs]      # tensor names not kept at this level
      - name: Accumulator
        spatial: {C: 16, K: 16}

``load_mapping`` also reads Timeloop's mapping format (a top-level
``mapping:`` list), which needs the workload for its dimension names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from workloads.loaders_values import _short_repr
from workloads.yamlio import read_text_file, read_yaml

from .mapping import LevelMapping, Mapping, MappingError
from .timeloop import from_timeloop

_LEVEL_KEYS = {"name", "temporal", "spatial", "order", "bypass"}


def _level_names(arch) -> list[str]:
    return [lv.name for lv in arch.levels]


def mapping_to_dict(mapping: Mapping, arch=None) -> dict:
    """Plain dict of ``mapping`` (level names from ``arch``; ``level<i>`` without one)."""
    names = _level_names(arch) if arch is not None else [f"level{i}" for i in range(len(mapping.levels))]
    if len(names) != len(mapping.levels):
        raise MappingError(f"the mapping has {len(mapping.levels)} levels but the architecture has {len(names)}",
                           source=f"arch {getattr(arch, 'name', '?')}", field="levels")
    levels = []
    for name, lm in zip(names, mapping.levels):
        entry: dict[str, Any] = {"name": name}
        if lm.temporal:
            entry["temporal"] = dict(lm.temporal)
        if lm.spatial:
            entry["spatial"] = dict(lm.spatial)
        if lm.order:
            entry["order"] = list(lm.order)
        if lm.bypass:
            entry["bypass"] = sorted(lm.bypass)
        levels.append(entry)
    return {"levels": levels}


def _factors(value: Any, source: str, field: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MappingError(f"must be a mapping dim -> factor, got {_short_repr(value)}", source=source, field=field)
    out = {}
    for dim, factor in value.items():
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
            raise MappingError(f"factor of '{dim}' must be a positive integer, got {factor!r}", source=source,
                               field=f"{field}.{dim}")
        out[str(dim)] = factor
    return out


def _names(value: Any, source: str, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MappingError(f"must be a list of names, got {_short_repr(value)}", source=source, field=field)
    return list(value)


def mapping_from_dict(doc: Any, arch=None, source: str = "<mapping>") -> Mapping:
    """A Mapping from our dict form; levels are matched to ``arch`` by name (by position without an arch)."""
    if not isinstance(doc, dict) or "levels" not in doc:
        raise MappingError("expected a mapping with a 'levels' list", source=source, field="levels")
    unknown = sorted(str(k) for k in doc if k not in ("levels", "workload", "arch", "note"))
    if unknown:
        raise MappingError(f"unknown key(s) {unknown}", source=source)
    entries = doc["levels"]
    if not isinstance(entries, list):
        raise MappingError("must be a list of levels", source=source, field="levels")
    names = _level_names(arch) if arch is not None else None
    by_index: dict[int, LevelMapping] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise MappingError(f"must be a mapping, got {entry!r}", source=source, field=f"levels[{i}]")
        bad = sorted(str(k) for k in entry if k not in _LEVEL_KEYS)
        if bad:
            raise MappingError(f"unknown key(s) {bad}; allowed {sorted(_LEVEL_KEYS)}", source=source,
                               field=f"levels[{i}]")
        if names is not None:
            if "name" not in entry:
                raise MappingError(f"needs the name of an architecture level ({names})", source=source,
                                   field=f"levels[{i}].name")
            if entry["name"] not in names:
                raise MappingError(f"'{entry['name']}' is not a level of arch {arch.name}; levels are {names}",
                                   source=source, field=f"levels[{i}].name")
            index = names.index(entry["name"])
        else:
            index = i
        label = f"levels.{entry.get('name', i)}"
        if index in by_index:
            raise MappingError("level given twice", source=source, field=label)
        by_index[index] = LevelMapping(
            temporal=_factors(entry.get("temporal"), source, f"{label}.temporal"),
            spatial=_factors(entry.get("spatial"), source, f"{label}.spatial"),
            order=tuple(_names(entry.get("order"), source, f"{label}.order")),
            bypass=frozenset(_names(entry.get("bypass"), source, f"{label}.bypass")))
    count = len(names) if names is not None else len(entries)
    return Mapping(tuple(by_index.get(i, LevelMapping()) for i in range(count)))


def dump_mapping(mapping: Mapping, arch=None) -> str:
    """YAML text of our format; ``load_mapping`` reads it back."""
    return yaml.safe_dump(mapping_to_dict(mapping, arch), sort_keys=False, default_flow_style=None)


def read_mapping_yaml(text: str, source: str = "<string>") -> Any:
    """Parse mapping YAML; MappingError on malformed input, a repeated key, deep nesting or an alias bomb."""
    return read_yaml(text, source, MappingError)


def load_mapping(path: str | Path, arch, workload=None) -> Mapping:
    """A mapping file in our format, or in Timeloop's (``mapping:`` list; needs ``workload``)."""
    src = str(path)
    text = read_text_file(path, src, MappingError)
    doc = read_mapping_yaml(text, src)
    if isinstance(doc, dict) and "mapping" in doc and "levels" not in doc:
        if workload is None:
            raise MappingError("a Timeloop mapping needs the workload to resolve its dimension names", source=src)
        return from_timeloop(doc, workload, arch, source=src)
    return mapping_from_dict(doc, arch, src)
