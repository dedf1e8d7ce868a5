"""Timeloop's mapping YAML, so that timeloop-model can evaluate our mappings and we can read its mappings.

Format: ``mapping: [{target: <level name>, type: temporal|spatial|bypass, ...}]``.

* ``temporal``: ``factors: "K=4 C=2 ..."`` (every dim, 1 included) and
  ``permutation``: the dims listed INNER to OUTER (``"QPKC..."``; separated by
  spaces when a dim name has more than one letter).
* ``spatial`` (only for levels with fan-out > 1): factors, permutation and
  ``split``: the first ``split`` dims of the permutation go on the X axis
  (our level's first spatial axis), the rest on Y.
* ``bypass`` (Timeloop also says ``datatype``): ``keep`` and ``bypass`` lists of
  data-space (tensor) names, for every level but the outermost.

Level ``i`` of our mapping is the storage level ``arch.levels[i].name``; the
architecture given to Timeloop must name its storage levels the same way.
On import, factor 0 means the whole bound (Timeloop's convention); unknown
targets, dims or tensors raise MappingError.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .io import read_mapping_yaml
from .mapping import LevelMapping, Mapping, MappingError
from .validate import assign_to_axes

_FACTOR = re.compile(r"\s*([A-Za-z_][A-Za-z_0-9]*?)\s*=\s*(\d+)\s*|\s*([A-Za-z])(\d+)\s*")


def _permutation_text(dims: list[str]) -> str:
    return "".join(dims) if all(len(d) == 1 for d in dims) else " ".join(dims)


def _factors_text(factors: dict[str, int], dims) -> str:
    return " ".join(f"{d}={factors.get(d, 1)}" for d in dims)


def to_timeloop(mapping: Mapping, workload, arch) -> dict:
    """``{"mapping": [...]}`` for ``mapping`` of ``workload`` on ``arch`` (dump it with yaml)."""
    if len(mapping.levels) != len(arch.levels):
        raise MappingError(f"the mapping has {len(mapping.levels)} levels but arch {arch.name} has {len(arch.levels)}",
                           source=f"mapping of {workload.name}", field="levels")
    dims = list(workload.dims)
    directives = []
    for i, (lm, level) in enumerate(zip(mapping.levels, arch.levels)):
        outer_to_inner = list(lm.loop_order(dims))
        directives.append({"target": level.name, "type": "temporal",
                           "factors": _factors_text(lm.temporal, dims),
                           "permutation": _permutation_text(outer_to_inner[::-1])})
        if level.fanout > 1:
            on_x, on_y = _split_spatial(lm, level, workload)
            rest = [d for d in dims if d not in on_x and d not in on_y]
            directives.append({"target": level.name, "type": "spatial",
                               "factors": _factors_text(lm.spatial, dims),
                               "permutation": _permutation_text(on_x + on_y + rest),
                               "split": len(on_x) if on_y else len(dims)})
        if i > 0:
            keep = [t.name for t in workload.tensors if mapping.stores(i, t, arch)]
            skip = [t.name for t in workload.tensors if not mapping.stores(i, t, arch)]
            directives.append({"target": level.name, "type": "bypass", "keep": keep, "bypass": skip})
    return {"mapping": directives}


def _split_spatial(lm: LevelMapping, level, workload) -> tuple[list[str], list[str]]:
    """Spatial dims on the X axis (the level's first spatial axis) and on Y."""
    spatial = {d: f for d, f in lm.spatial.items() if f > 1}
    axes = tuple(getattr(level, "spatial_axes", ()) or ())
    if len(axes) < 2 or not spatial:
        return sorted(spatial, key=list(workload.dims).index), []
    assignment, _ = assign_to_axes(spatial, axes, workload)
    order = list(workload.dims)
    if assignment is None:  # not placeable; keep everything on X and let validation report it
        return sorted(spatial, key=order.index), []
    on_x = sorted((d for d, a in assignment.items() if a == axes[0].name), key=order.index)
    on_y = sorted((d for d, a in assignment.items() if a != axes[0].name), key=order.index)
    return on_x, on_y


def dump_timeloop(mapping: Mapping, workload, arch) -> str:
    """Timeloop mapping YAML text."""
    return yaml.safe_dump(to_timeloop(mapping, workload, arch), sort_keys=False, default_flow_style=False)


def _parse_factors(text: Any, dims: dict[str, int], source: str, field: str) -> dict[str, int]:
    if isinstance(text, dict):
        items = list(text.items())
    else:
        items, pos, text = [], 0, str(text)
        while pos < len(text):
            m = _FACTOR.match(text, pos)
            if not m or m.end() == pos:
                raise MappingError(f"cannot parse factors '{text}' at '{text[pos:]}' (expected e.g. 'K=4 C=2')",
                                   source=source, field=field)
            items.append((m.group(1) or m.group(3), int(m.group(2) or m.group(4))))
            pos = m.end()
    out = {}
    for dim, factor in items:
        if dim not in dims:
            raise MappingError(f"unknown dimension '{dim}'; the workload has {list(dims)}", source=source, field=field)
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 0:
            raise MappingError(f"factor of '{dim}' must be a non-negative integer, got {factor!r}", source=source,
                               field=field)
        out[dim] = dims[dim] if factor == 0 else factor
    return out


def _parse_permutation(value: Any, dims: dict[str, int], source: str, field: str) -> list[str]:
    if isinstance(value, list):
        tokens = [str(v) for v in value]
    else:
        text = str(value).strip()
        tokens = re.split(r"[\s,]+", text) if re.search(r"[\s,]", text) else list(text)
    unknown = [t for t in tokens if t not in dims]
    if unknown:
        raise MappingError(f"permutation names unknown dimension(s) {unknown}; the workload has {list(dims)}",
                           source=source, field=field)
    if len(set(tokens)) != len(tokens):
        raise MappingError(f"permutation repeats a dimension: {tokens}", source=source, field=field)
    return tokens


def from_timeloop(doc: dict | list | str | Path, workload, arch, source: str = "<timeloop mapping>") -> Mapping:
    """A Mapping from Timeloop's mapping format (a dict, its YAML text, or a file path)."""
    if isinstance(doc, Path) or (isinstance(doc, str) and "\n" not in doc and doc.endswith((".yaml", ".yml"))):
        source = str(doc)
        try:
            doc = read_mapping_yaml(Path(doc).read_text(), source)
        except OSError as exc:
            raise MappingError(f"cannot read: {exc.strerror or exc}", source=source) from None
    elif isinstance(doc, str):
        doc = read_mapping_yaml(doc, source)
    directives = doc.get("mapping") if isinstance(doc, dict) else doc
    if not isinstance(directives, list):
        raise MappingError("expected 'mapping:' with a list of directives", source=source, field="mapping")
    names = [lv.name for lv in arch.levels]
    dims = dict(workload.dims)
    tensor_names = [t.name for t in workload.tensors]
    temporal: dict[int, dict] = {}
    spatial: dict[int, dict] = {}
    order: dict[int, tuple] = {}
    bypass: dict[int, set] = {}
    seen = set()
    for k, directive in enumerate(directives):
        where = f"mapping[{k}]"
        if not isinstance(directive, dict):
            raise MappingError(f"must be a mapping, got {directive!r}", source=source, field=where)
        target, kind = directive.get("target"), directive.get("type")
        if isinstance(target, int) and not isinstance(target, bool):
            if not 0 <= target < len(names):
                raise MappingError(f"target index {target} is not a level (0..{len(names) - 1})", source=source,
                                   field=f"{where}.target")
            index = target
        elif target in names:
            index = names.index(target)
        else:
            raise MappingError(f"target {target!r} is not a level of arch {arch.name}; levels are {names}",
                               source=source, field=f"{where}.target")
        kind = {"datatype": "bypass", "bypassing": "bypass"}.get(kind, kind)
        if kind not in ("temporal", "spatial", "bypass"):
            raise MappingError(f"type {directive.get('type')!r} is not temporal, spatial or bypass", source=source,
                               field=f"{where}.type")
        where = f"mapping[{k}] ({names[index]} {kind})"
        if (index, kind) in seen:
            raise MappingError("directive given twice for this level", source=source, field=where)
        seen.add((index, kind))
        if kind in ("temporal", "spatial"):
            factors = _parse_factors(directive.get("factors", ""), dims, source, f"{where}.factors")
            (temporal if kind == "temporal" else spatial)[index] = factors
            if kind == "temporal" and "permutation" in directive:
                inner_to_outer = _parse_permutation(directive["permutation"], dims, source, f"{where}.permutation")
                order[index] = tuple(inner_to_outer[::-1])
        else:
            keep = directive.get("keep") or []
            skip = directive.get("bypass") or []
            for group, field in ((keep, "keep"), (skip, "bypass")):
                if not isinstance(group, list) or any(t not in tensor_names for t in group):
                    raise MappingError(f"must list data spaces of the workload {tensor_names}, got {group!r}",
                                       source=source, field=f"{where}.{field}")
            for tname in keep:
                if not arch.levels[index].may_hold(workload.tensor(tname)):
                    raise MappingError(f"keeps '{tname}', which this level cannot hold", source=source,
                                       field=f"{where}.keep")
            # a tensor the level cannot hold is bypassed anyway; record only real choices
            bypass[index] = {t for t in skip if arch.levels[index].may_hold(workload.tensor(t))}
    levels = []
    for i in range(len(names)):
        levels.append(LevelMapping(temporal=temporal.get(i, {}), spatial=spatial.get(i, {}),
                                   order=_trim_order(order.get(i, ()), list(dims)),
                                   bypass=frozenset(bypass.get(i, set()))))
    return Mapping(tuple(levels))


def _trim_order(order: tuple[str, ...], dims: list[str]) -> tuple[str, ...]:
    """The shortest prefix of ``order`` that LevelMapping completes to the same loop order."""
    full = list(order) + [d for d in dims if d not in order]
    for length in range(len(full) + 1):
        prefix = full[:length]
        if prefix + [d for d in dims if d not in prefix] == full:
            return tuple(prefix)
    return tuple(full)
