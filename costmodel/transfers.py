"""What moves between a level and its parent beyond the words: partial-sum and bias bytes, and per-row DMA cycles.

Part of the cost model of ``costmodel.evaluate``, whose docstring defines both terms: a level that sets
``partial_sum_bits`` or ``init_fill_bits`` moves partial sums at that word size and reads an initial value per
output tile from its parent (``calibration_bytes``); a parent that sets row cycles (``read_row_*`` /
``write_row_*``: Gemmini's mvin and mvout) charges a tensor's words per row of the inner tile's line
(``transfer_row_words``, ``transfer_rows``).  ``holders``: the levels that keep a tensor, which every
count walks.
"""

from __future__ import annotations

import math

from mappings.validate import assign_to_axes

from .cost import PartialSums


def holders(workload, arch, mapping, tensor) -> list[int]:
    """Levels that keep ``tensor``, outer to inner (level 0 always does)."""
    return [0] + [i for i in range(1, len(arch.levels)) if mapping.stores(i, tensor, arch)]


def calibration_bytes(workload, arch, mapping, psums) -> tuple[dict, dict]:
    """Bytes per level index added by ``partial_sum_bits`` and ``init_fill_bits`` (read, write).

    For an output held at parent ``p`` and next inner holder ``c``: partial sums
    spilled to ``p`` and read back are charged ``c.partial_sum_bits`` per word at
    ``p`` instead of ``p``'s word size; with ``c.init_fill_bits`` every tile's
    first residency in ``c`` reads an initial value (a bias) of that many bits
    per final word from ``p``.
    """
    extra_read = {i: 0.0 for i in range(len(arch.levels))}
    extra_write = {i: 0.0 for i in range(len(arch.levels))}
    for t in workload.tensors:
        if not t.is_output:
            continue
        chain = holders(workload, arch, mapping, t)
        for p, c in zip(chain, chain[1:]):
            inner, ps = arch.levels[c], psums.get(p, {}).get(t.name)
            if ps is None:
                continue
            if inner.partial_sum_bits:
                more = inner.partial_sum_bits / 8 - arch.levels[p].bytes_per_word(t)
                extra_read[p] += ps.reads * more
                extra_write[p] += ps.writes * more
            if inner.init_fill_bits:
                extra_read[p] += ps.final_writes * inner.init_fill_bits / 8
    return extra_read, extra_write


def _row_dims(mapping, workload, arch, level: int, tensor) -> tuple[str, tuple[str, ...], int] | None:
    """(axis name, dims indexing ``tensor`` unrolled on it, axis size) of ``tensor``'s row axis at
    ``level`` (None: its role has none)."""
    axis_name = arch.levels[level].row_axis(tensor.role)
    if axis_name is None:
        return None
    at = arch.axis_level(level, axis_name)
    size = next(a.size for a in arch.levels[at].spatial_axes if a.name == axis_name)
    spatial = {d: f for d, f in mapping.levels[at].spatial.items() if f > 1 and d in workload.dims}
    assignment, _ = assign_to_axes(spatial, arch.levels[at].spatial_axes, workload)
    dims = tuple(d for d in spatial if assignment and assignment[d] == axis_name and d in tensor.dims)
    return axis_name, dims, size


def transfer_row_words(mapping, workload, arch, child: int, tensor) -> tuple[int, int] | None:
    """(line words, row words) of ``tensor`` moved between ``child`` and its parent; None without a row axis.

    line: the child tile's extent along the dims unrolled on the tensor's row
    axis (contiguous words).  row: the words one transferred row carries: the
    block alone when it is narrower than the axis, else the line cut at
    ``max_transfer_row_bytes`` of the child's words (a whole number of blocks).
    """
    found = _row_dims(mapping, workload, arch, child, tensor)
    if found is None:
        return None
    _, dims, size = found
    lv = arch.levels[child]
    block = math.prod(mapping.levels[arch.axis_level(child, found[0])].spatial_factor(d) for d in dims)
    extents = mapping.tile_extents(child, workload.dims)
    line = math.prod(extents[d] for d in dims)
    if block < size:
        return block, block
    row = line
    if lv.max_transfer_row_bytes is not None:
        cap_words = int(lv.max_transfer_row_bytes // lv.bytes_per_word(tensor))
        row = min(line, max(block, cap_words // block * block))
    return line, row


def transfer_rows(workload, arch, mapping, accesses, psums) -> tuple[dict, dict]:
    """Per-row transfer cost at parents that set row cycles (``costmodel.evaluate``'s docstring: per-row transfers).

    Returns (extra cycles per level index, summed over instances: the row
    cycles minus the bytes / bandwidth already charged; rows[level index]
    [tensor name] -> rows moved).
    """
    extra = {i: 0.0 for i in range(len(arch.levels))}
    rows: dict = {}
    tensors = {t.name: t for t in workload.tensors}
    for t in tensors.values():
        chain = holders(workload, arch, mapping, t)
        for p, c in zip(chain, chain[1:]):
            parent = arch.levels[p]
            if not parent.row_transfer_costed:
                continue
            shape = transfer_row_words(mapping, workload, arch, c, t)
            if shape is None:
                continue
            line, row = shape
            bpw = parent.bytes_per_word(t)
            if t.is_output:
                ps = psums.get(p, {}).get(t.name) or PartialSums()
                psum_bpw = (arch.levels[c].partial_sum_bits or 8 * bpw) / 8
                init_bpw = (arch.levels[c].init_fill_bits or 0) / 8  # a tile's initial value (bias) moves in
                moves = ((ps.reads, psum_bpw, False), (ps.writes, psum_bpw, True), (ps.final_writes, bpw, True),
                         (ps.final_writes if init_bpw else 0, init_bpw, False))
            else:
                moves = ((accesses[p][t.name].reads, bpw, False),)
            for words, word_bytes, write in moves:
                if not words:
                    continue
                full, rest = divmod(line, row)
                per_line = full * parent.row_transfer_cycles(row * word_bytes, write)
                if rest:
                    per_line += parent.row_transfer_cycles(rest * word_bytes, write)
                lines = words / line
                bandwidth = parent.write_bandwidth if write else parent.read_bandwidth
                charged = words * word_bytes / bandwidth if bandwidth else 0.0
                extra[p] += lines * per_line - charged
                rows.setdefault(p, {}).setdefault(t.name, 0.0)
                rows[p][t.name] += lines * (full + (1 if rest else 0))
    return extra, rows
