"""Check a mapping against its workload and architecture, with precise errors.

``validate`` raises the first ``MappingError`` found; ``violations`` lists all
of them; ``fits`` answers yes or no.  The checks, in order:

1. one ``LevelMapping`` per architecture level;
2. every dim named in temporal, spatial and order is a loop dim of the
   workload, every factor is a positive integer, order names no dim twice;
3. for every dim the product of its factors over all levels equals its bound;
4. bypass names are tensors of the workload, and the outermost level
   (DRAM) bypasses nothing;
5. spatial fan-out: the product of a level's spatial factors is at most its
   ``fanout``; when the level has ``spatial_axes`` every unrolled dim must be
   admitted by an axis (``SpatialAxis.admits``) and the dims must be assignable
   to axes (each dim wholly on one axis) with the product per axis at most the
   axis size;
6. capacity: at every bounded level the tile of each stored tensor, in
   words (``workloads.footprint.tile_words`` of ``mapping.tile_extents(level)``,
   halos included) times the level's bytes per word, summed over the stored
   tensors, times 2 when the level is double buffered, fits
   ``capacity_bytes``.  Tiles are dense (density is not used: a
   compressed format's metadata is not modelled here).  At a row-addressed
   level (``row_bytes`` set) the tiles are counted in rows instead
   (``tile_rows``): rows of all stored tiles, times 2 when double buffered,
   fit ``capacity_bytes // row_bytes`` rows.

The architecture is duck-typed (``levels`` with ``name``, ``capacity_bytes``,
``holds``/``may_hold``, ``bytes_per_word``, ``fanout``, ``spatial_axes``,
``double_buffered``, optionally ``row_bytes``/``row_axis``) so that this
package does not import the cost model.
"""

from __future__ import annotations

import itertools
import math
from typing import Iterator

from workloads.footprint import box_rows, group_dims, stored_box_words, tile_words

from .mapping import Mapping, MappingError


def _source(workload, arch) -> str:
    return f"mapping of {getattr(workload, 'name', '?')} on {getattr(arch, 'name', '?')}"


def _level_label(index: int, arch) -> str:
    return f"level {index} ({arch.levels[index].name})"


def _check_shape(mapping: Mapping, workload, arch, src: str) -> Iterator[MappingError]:
    """Level count, dim names, factor values and loop orders."""
    dims = workload.dims
    for i, lm in enumerate(mapping.levels):
        label = _level_label(i, arch)
        for kind in ("temporal", "spatial"):
            for dim, factor in getattr(lm, kind).items():
                if dim not in dims:
                    yield MappingError(f"{label}: {kind} factor of unknown dimension '{dim}'; "
                                       f"the workload has {list(dims)}", source=src, field=f"{arch.levels[i].name}.{kind}.{dim}")
                elif not isinstance(factor, int) or factor < 1:
                    yield MappingError(f"{label}: {kind} factor of '{dim}' must be a positive integer, got {factor!r}",
                                       source=src, field=f"{arch.levels[i].name}.{kind}.{dim}")
        seen = set()
        for dim in lm.order:
            if dim not in dims:
                yield MappingError(f"{label}: loop order names unknown dimension '{dim}'; the workload has {list(dims)}",
                                   source=src, field=f"{arch.levels[i].name}.order")
            elif dim in seen:
                yield MappingError(f"{label}: loop order names '{dim}' twice", source=src, field=f"{arch.levels[i].name}.order")
            seen.add(dim)


def _check_factors(mapping: Mapping, workload, src: str) -> Iterator[MappingError]:
    for dim, bound in workload.dims.items():
        product = mapping.factor(dim)
        if product != bound:
            per_level = [lm.temporal_factor(dim) * lm.spatial_factor(dim) for lm in mapping.levels]
            yield MappingError(f"factors of '{dim}' multiply to {product} but its bound is {bound} "
                               f"(per level, temporal*spatial: {per_level})", source=src, field=f"factors.{dim}")


def _check_bypass(mapping: Mapping, workload, arch, src: str) -> Iterator[MappingError]:
    names = [t.name for t in workload.tensors]
    for i, lm in enumerate(mapping.levels):
        label = _level_label(i, arch)
        for tname in sorted(lm.bypass):
            if tname not in names:
                yield MappingError(f"{label}: bypass names unknown tensor '{tname}'; the workload has {names}",
                                   source=src, field=f"{arch.levels[i].name}.bypass")
            elif i == 0:
                yield MappingError(f"{label}: the outermost level keeps every tensor and cannot bypass '{tname}'",
                                   source=src, field=f"{arch.levels[i].name}.bypass")


def assign_to_axes(spatial: dict[str, int], axes, workload) -> tuple[dict[str, str] | None, list[str]]:
    """Find an assignment of unrolled dims to axes within the axis sizes.

    Returns (assignment dim -> axis name, or None when none exists; dims no axis admits).
    The number of unrolled dims and axes is small, so all assignments are tried.
    """
    dims = sorted(spatial)
    choices = []
    homeless = []
    for dim in dims:
        admitting = [k for k, axis in enumerate(axes) if axis.admits(dim, workload)]
        if not admitting:
            homeless.append(dim)
        choices.append(admitting)
    if homeless:
        return None, homeless
    for combo in itertools.product(*choices):
        load = [1] * len(axes)
        for dim, k in zip(dims, combo):
            load[k] *= spatial[dim]
        if all(load[k] <= axis.size for k, axis in enumerate(axes)):
            return {dim: axes[k].name for dim, k in zip(dims, combo)}, []
    return None, []


def _check_spatial(mapping: Mapping, workload, arch, src: str) -> Iterator[MappingError]:
    for i, (lm, level) in enumerate(zip(mapping.levels, arch.levels)):
        spatial = {d: f for d, f in lm.spatial.items() if f > 1 and d in workload.dims}
        if not spatial:
            continue
        label = _level_label(i, arch)
        used = math.prod(spatial.values())
        if used > level.fanout:
            yield MappingError(f"{label}: spatial factors {spatial} use {used} instances but the fanout is {level.fanout}",
                               source=src, field=f"{arch.levels[i].name}.spatial")
            continue
        axes = tuple(getattr(level, "spatial_axes", ()) or ())
        if not axes:
            continue
        assignment, homeless = assign_to_axes(spatial, axes, workload)
        if homeless:
            for dim in homeless:
                yield MappingError(f"{label}: dimension '{dim}' cannot be unrolled on any spatial axis "
                                   f"({', '.join(a.name for a in axes)}) of this level",
                                   source=src, field=f"{arch.levels[i].name}.spatial.{dim}")
        elif assignment is None:
            sizes = ", ".join(f"{a.name}={a.size}" for a in axes)
            yield MappingError(f"{label}: spatial factors {spatial} cannot be placed on the axes ({sizes}) "
                               f"without exceeding an axis size", source=src, field=f"{arch.levels[i].name}.spatial")


def row_block_words(mapping: Mapping, workload, arch, level: int, tensor) -> int:
    """Words of ``tensor`` one row of row-addressed ``level`` holds: the product of the spatial factors of
    the dims (indexing the tensor) that the mapping unrolls on the level's row axis for the tensor's role
    (``Level.row_axes``), 1 when the role has none or the spatial factors fit no axis."""
    lv = arch.levels[level]
    axis_name = lv.row_axis(tensor.role) if hasattr(lv, "row_axis") else None
    if axis_name is None:
        return 1
    at = arch.axis_level(level, axis_name)
    spatial = {d: f for d, f in mapping.levels[at].spatial.items() if f > 1 and d in workload.dims}
    assignment, _ = assign_to_axes(spatial, arch.levels[at].spatial_axes, workload)
    if not assignment:
        return 1
    return math.prod(f for d, f in spatial.items() if assignment[d] == axis_name and d in tensor.dims)


def tile_rows(mapping: Mapping, workload, arch, level: int) -> dict[str, int] | None:
    """Rows of the tile of each tensor stored at a row-addressed ``level`` (one instance, one buffer);
    None when the level is not row-addressed (``row_bytes`` unset).

    rows = ``workloads.footprint.box_rows`` of the stored box
    (``workloads.footprint.stored_box_words``): in blocks of
    ``row_block_words`` for a role with a row axis, packed for the others.
    """
    lv = arch.levels[level]
    row_bytes = getattr(lv, "row_bytes", None)
    if row_bytes is None:
        return None
    extents = mapping.tile_extents(level, workload.dims)
    groups = group_dims(workload)
    rows = {}
    for t in workload.tensors:
        if not mapping.stores(level, t, arch):
            continue
        block = None if lv.row_axis(t.role) is None else row_block_words(mapping, workload, arch, level, t)
        rows[t.name] = box_rows(stored_box_words(t, extents, groups), lv.bytes_per_word(t), row_bytes, block)
    return rows


def tile_bytes(mapping: Mapping, workload, arch, level: int) -> dict[str, float]:
    """Bytes of the tile of each tensor stored at ``level`` (one instance, one buffer): words (halos
    included) times bytes per word, or at a row-addressed level its rows times the row bytes."""
    rows = tile_rows(mapping, workload, arch, level)
    lv = arch.levels[level]
    if rows is not None:
        return {name: r * lv.row_bytes for name, r in rows.items()}
    extents = mapping.tile_extents(level, workload.dims)
    return {t.name: tile_words(t, extents) * lv.bytes_per_word(t)
            for t in workload.tensors if mapping.stores(level, t, arch)}


def _check_rows(mapping: Mapping, workload, arch, index: int, src: str) -> Iterator[MappingError]:
    level = arch.levels[index]
    rows = tile_rows(mapping, workload, arch, index)
    buffers = 2 if getattr(level, "double_buffered", False) else 1
    need = buffers * sum(rows.values())
    have = level.capacity_bytes // level.row_bytes
    if need <= have:
        return
    tensors = {t.name: t for t in workload.tensors}
    parts = []
    for name, r in rows.items():
        block = row_block_words(mapping, workload, arch, index, tensors[name])
        how = f"{block} word(s) per row" if level.row_axis(tensors[name].role) else "packed"
        parts.append(f"{name} {r} rows ({how})")
    extra = " x2 (double buffered)" if buffers == 2 else ""
    yield MappingError(f"{_level_label(index, arch)}: tiles need {need} rows of {level.row_bytes} bytes "
                       f"({', '.join(parts)}{extra}) but the level has {have} rows ({level.capacity_bytes} bytes); "
                       "a block narrower than a row takes a whole row",
                       source=src, field=f"{level.name}.capacity")


def _check_capacity(mapping: Mapping, workload, arch, src: str) -> Iterator[MappingError]:
    for i, level in enumerate(arch.levels):
        capacity = level.capacity_bytes
        if capacity is None:
            continue
        if getattr(level, "row_bytes", None) is not None:
            yield from _check_rows(mapping, workload, arch, i, src)
            continue
        per_tensor = tile_bytes(mapping, workload, arch, i)
        buffers = 2 if getattr(level, "double_buffered", False) else 1
        need = buffers * sum(per_tensor.values())
        if need > capacity:
            label = _level_label(i, arch)
            parts = ", ".join(f"{name} {b:g} B" for name, b in per_tensor.items())
            extra = " x2 (double buffered)" if buffers == 2 else ""
            yield MappingError(f"{label}: tiles need {need:g} bytes ({parts}{extra}) but the capacity is "
                               f"{capacity} bytes{_in_registers(arch, i, need, workload)}",
                               source=src, field=f"{arch.levels[i].name}.capacity")


def _in_registers(arch, index: int, need: float, workload) -> str:
    """Where level ``index`` is a CPU micro-kernel's register file (the innermost level of an arch with
    ``params["micro_kernel"]``, outputs only), the same count in vector registers of ``lanes`` output words;
    else ""."""
    core = arch.params.get("micro_kernel")
    level = arch.levels[index]
    if not core or index != len(arch.levels) - 1 or frozenset(level.holds) != {"output"}:
        return ""
    vector = int(core["lanes"]) * level.bytes_per_word(workload.output)
    return (f": {math.ceil(need / vector)} vector registers of {vector:g} bytes, where the register file has "
            f"{core['registers']} and {level.capacity_bytes // vector:g} of them hold accumulators")


def violations(mapping: Mapping, workload, arch) -> list[MappingError]:
    """Every problem of ``mapping`` for ``workload`` on ``arch`` (empty when it is valid)."""
    src = _source(workload, arch)
    if len(mapping.levels) != len(arch.levels):
        return [MappingError(f"the mapping has {len(mapping.levels)} levels but the architecture has "
                             f"{len(arch.levels)} ({', '.join(lv.name for lv in arch.levels)})",
                             source=src, field="levels")]
    shape = list(_check_shape(mapping, workload, arch, src))
    if shape:
        return shape  # the later checks assume well-formed factors
    found = list(_check_factors(mapping, workload, src))
    found += _check_bypass(mapping, workload, arch, src)
    found += _check_spatial(mapping, workload, arch, src)
    found += _check_capacity(mapping, workload, arch, src)
    return found


def validate(mapping: Mapping, workload, arch) -> None:
    """Raise the first MappingError of ``mapping`` (see the module docstring for the checks)."""
    found = violations(mapping, workload, arch)
    if found:
        raise found[0]


def fits(mapping: Mapping, workload, arch) -> bool:
    """True when ``validate`` would not raise."""
    return not violations(mapping, workload, arch)
