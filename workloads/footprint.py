"""The footprint of a tile: which entries of each tensor axis, how many words and rows a tile touches.

This module is the one place that answers the question; ``Tensor.tile_words``, ``mappings.validate``
(capacity, ``tile_bytes``, ``tile_rows``), the MIP's tensor records (``cosa.mip.problem``), the Gemmini
code generator's tile layout (``gemmini.codegen.tiling``) and the GPU target's tile layout
(``targets.gpu.layout``) all call it.

A tile is a box of loop extents: ``extents[d]`` consecutive values of each loop dim ``d`` (a dim not
named has extent 1).  A tensor axis is indexed by ``sum c_d * d + offset`` (``terms``: the pairs
``(d, c_d)``, as in ``AffineExpr.terms``).  Per axis, in entries (values of the axis index):

* **span** (``span_entries``): the range of the index over the box, ``1 + sum |c_d| (e_d - 1)``: a
  sliding window's halo (``P + R - 1`` for a unit-stride convolution), strides and dilations with the
  gaps between the entries they reach counted.
* **clipped span** (``clipped_span_entries``): the span, at most the axis' stored extent
  (``Tensor.shape``; a padded convolution's halo beyond the image is not stored).  ``tile_words`` is the
  product over the axes: what a word-addressed buffer holds for the tile.
* **stored axis** (``stored_axis``, ``stored_span_entries``): what a row-addressed buffer (Gemmini's
  scratchpad and accumulator, a GPU tile in shared memory) lays out for the axis: the dims that index
  every tensor (``group_dims``: groups, a batch of GEMMs) as separate blocks, the other terms' range with
  the gaps of their common stride skipped (a stride-2 window over one kernel column keeps every other
  input), and not clipped (the padding is kept, as zeros).  ``stored_box_words`` is the product over
  the axes.
* **rows** (``box_rows``): the rows of a row-addressed buffer a box of words takes, packed or one
  block of the dims unrolled on the buffer's row axis per row (``mappings.validate.tile_rows`` says
  which block a mapping puts there).

The words a tile actually moves (the distinct elements, clipped at each position of the tile) are
counted exactly by ``costmodel.tiling``; they never exceed ``tile_words`` or ``stored_box_words``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

Terms = Iterable[tuple[str, int]]


def span_entries(terms: Terms, extents: Mapping[str, int]) -> int:
    """Entries the index ``sum c * dim`` spans over the box of loop ``extents``: ``1 + sum |c| (e - 1)``
    (halo included, stride and dilation gaps counted, not clipped)."""
    return 1 + sum(abs(c) * (extents.get(d, 1) - 1) for d, c in terms)


def clipped_span_entries(terms: Terms, extents: Mapping[str, int], stored_entries: int | None) -> int:
    """``span_entries`` at most ``stored_entries`` (the axis' stored extent; None: unbounded)."""
    span = span_entries(terms, extents)
    return span if stored_entries is None else min(span, stored_entries)


@dataclass(frozen=True)
class StoredAxis:
    """How a row-addressed buffer lays out one tensor axis of a tile.

    ``blocks``: (dim, coefficient, extent) of the group dims with extent > 1, outermost first, each
    value a separate block.  Inside a block ``rest`` entries of the other terms' values, ``step``
    (their common stride, in index units) apart; the smallest sits ``shift`` index units below the
    value at the tile's base (terms with negative coefficients).
    """

    blocks: tuple[tuple[str, int, int], ...]
    step: int
    rest: int
    shift: int

    @property
    def entries(self) -> int:
        """Entries the buffer keeps for the axis: the blocks times ``rest``."""
        return math.prod(e for _, _, e in self.blocks) * self.rest


def stored_axis(terms: Terms, extents: Mapping[str, int], groups: frozenset[str] = frozenset()) -> StoredAxis:
    """The layout a row-addressed buffer gives the axis indexed by ``terms`` over the box of loop
    ``extents``, ``groups`` (``group_dims``) as separate blocks (see the module docstring)."""
    blocks, moving = [], []
    for dim, coef in terms:
        extent = extents.get(dim, 1)
        if extent <= 1:
            continue
        if dim in groups:
            blocks.append((dim, coef, extent))
        else:
            moving.append((coef, extent))
    step = math.gcd(*(abs(c) for c, _ in moving)) if moving else 1
    rest = 1 + sum(abs(c) * (e - 1) for c, e in moving) // step
    shift = sum(-c * (e - 1) for c, e in moving if c < 0)
    return StoredAxis(tuple(blocks), step, rest, shift)


def stored_span_entries(terms: Terms, extents: Mapping[str, int], groups: frozenset[str] = frozenset()) -> int:
    """Entries a row-addressed buffer keeps for the axis indexed by ``terms``: ``stored_axis(...).entries``."""
    return stored_axis(terms, extents, groups).entries


def tile_words(tensor, extents: Mapping[str, int]) -> int:
    """Words of ``tensor`` a box of loop ``extents`` touches, as a word-addressed buffer holds them: the
    product over its axes of the span clipped to ``tensor.shape`` (when given)."""
    shape = tensor.shape if tensor.shape is not None else (None,) * len(tensor.indices)
    return math.prod(clipped_span_entries(expr.terms, extents, stored) for expr, stored in zip(tensor.indices, shape))


def stored_box_words(tensor, extents: Mapping[str, int], groups: frozenset[str] = frozenset()) -> int:
    """Words of the dense box a row-addressed buffer keeps for a tile of ``tensor`` with loop ``extents``:
    the product over its axes of ``stored_span_entries`` (group dims as blocks, a common stride's gaps
    skipped, the padding kept)."""
    return math.prod(stored_span_entries(expr.terms, extents, groups) for expr in tensor.indices)


def box_rows(box_words: int, word_bytes: float, row_bytes: int, block_words: int | None = None) -> int:
    """Rows of ``row_bytes`` that a box of ``box_words`` words of ``word_bytes`` takes.

    ``block_words`` None: packed densely, ``ceil(box bytes / row_bytes)``.  Otherwise in blocks of
    ``block_words`` words (the dims unrolled on the row axis), each starting a row: ``ceil(box /
    block) x ceil(block bytes / row_bytes)`` (a block narrower than a row still takes a whole row).
    """
    if block_words is None:
        return math.ceil(box_words * word_bytes / row_bytes)
    return -(-box_words // block_words) * math.ceil(block_words * word_bytes / row_bytes)


def group_dims(workload) -> frozenset[str]:
    """Dims that index every tensor of ``workload``: independent problems (groups, a batch of GEMMs)
    sharing no data, stored as separate blocks."""
    dims = set(workload.dims)
    for t in workload.tensors:
        dims &= t.dims
    return frozenset(dims)
