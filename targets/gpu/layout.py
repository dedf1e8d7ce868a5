"""Linear index expressions and the layout of a tile in shared memory or registers.

A tile of tensor T at level L holds the elements that the loops at levels
>= L touch for one position of the loops outside them.  Its layout per tensor
axis is ``workloads.footprint.stored_axis`` (the project's one answer to halos,
strides and groups): the range of the axis index over the tile with the gaps
of a common stride skipped, dims that index every tensor (groups) stored as
separate blocks.  When that span exceeds the stored extent of the axis (a
tile wider than the padded tensor), the tile keeps the whole axis instead,
indexed by the absolute position and read with a bounds guard; either way a
tile never holds more words per axis than ``Tensor.tile_words`` counts, so a
mapping that ``mappings.validate`` accepts fits the level's capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from workloads.footprint import stored_axis


@dataclass(frozen=True)
class Lin:
    """sum(coef * var) + const over named integer variables, printed as C."""

    terms: tuple[tuple[str, int], ...] = ()
    const: int = 0

    @staticmethod
    def of(var: str, coef: int = 1) -> "Lin":
        return Lin(((var, coef),)) if coef else Lin()

    def __add__(self, other: "Lin | int") -> "Lin":
        if isinstance(other, int):
            return Lin(self.terms, self.const + other)
        merged = dict(self.terms)
        for v, c in other.terms:
            merged[v] = merged.get(v, 0) + c
        return Lin(tuple((v, c) for v, c in merged.items() if c), self.const + other.const)

    def scale(self, k: int) -> "Lin":
        return Lin(tuple((v, c * k) for v, c in self.terms if c * k), self.const * k) if k else Lin()

    def c(self) -> str:
        parts = []
        for v, c in self.terms:
            term = v if abs(c) == 1 else f"{abs(c)}*{v}"
            parts.append(("- " if c < 0 else "+ ") + term)
        if self.const or not parts:
            parts.append(("- " if self.const < 0 else "+ ") + str(abs(self.const)))
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]


def lin_sum(items) -> Lin:
    out = Lin()
    for item in items:
        out = out + item
    return out


def array_shape(tensor, dims: dict[str, int]) -> tuple[int, ...]:
    """Stored extent of each axis: ``Tensor.shape``, else one past the largest index value."""
    if tensor.shape is not None:
        return tuple(tensor.shape)
    return tuple(max(1, e.value_range(dims)[1] + 1) for e in tensor.indices)


def axis_in_range(expr, dims: dict[str, int], extent: int) -> bool:
    """Whether every value of ``expr`` over the iteration space lies in [0, extent) (no guard needed)."""
    lo, hi = expr.value_range(dims)
    return lo >= 0 and hi < extent


@dataclass(frozen=True)
class AxisLayout:
    """How one tensor axis is laid out in a tile.

    whole: the tile keeps the whole axis (``span`` = stored extent), indexed
    by the absolute value.  Otherwise: group dims ``groups`` (dim, coefficient,
    extent) outermost, then ``rest`` entries of the other dims' values spaced
    ``step`` apart, the smallest at ``-shift`` from the tile base's value.
    """

    expr: object
    span: int
    whole: bool
    groups: tuple[tuple[str, int, int], ...] = ()
    rest: int = 1
    step: int = 1
    shift: int = 0

    def local(self, base: dict[str, Lin], loc: dict[str, Lin]) -> Lin:
        """Index into the tile of the element at positions base + loc (``loc`` local to the tile)."""
        if self.whole:
            return self.value(base, loc)
        out = Lin() + self.shift // self.step
        mult = self.rest
        for dim, _, extent in reversed(self.groups):
            out = out + loc[dim].scale(mult)
            mult *= extent
        gset = {g for g, _, _ in self.groups}
        for dim, coef in self.expr.terms:
            if dim not in gset:
                out = out + loc[dim].scale(coef // self.step)
        return out

    def value(self, base: dict[str, Lin], loc: dict[str, Lin]) -> Lin:
        """Absolute index value of the element at positions base + loc."""
        return lin_sum([base[d].scale(c) + loc[d].scale(c) for d, c in self.expr.terms]) + self.expr.offset

    def value_of_entry(self, entry: str, base: dict[str, Lin]) -> str:
        """C expression of the absolute value of tile entry ``entry`` (a C expression), the tile's base at
        positions ``base``: the inverse of ``local``."""
        if self.whole:
            return entry
        fixed = lin_sum([base[d].scale(c) for d, c in self.expr.terms]) + (self.expr.offset - self.shift)
        parts = [f"({fixed.c()})"] if fixed.terms or fixed.const else []
        radix = 1
        for dim, coef, extent in reversed(self.groups):  # entry = (g_0 * e_1 + g_1 ...) * rest + r
            parts.append(f"{coef} * (({entry}) / {self.rest * radix} % {extent})")
            radix *= extent
        if self.rest > 1:
            r = f"(({entry}) % {self.rest})" if self.groups else f"({entry})"
            parts.append(f"{self.step} * {r}" if self.step != 1 else r)
        return " + ".join(parts) or "0"


def axis_layout(expr, extents: dict[str, int], groups: frozenset[str], stored: int) -> AxisLayout:
    """The layout of axis ``expr`` in a tile of loop ``extents``: ``workloads.footprint.stored_axis``, or the
    whole axis when that keeps more than its ``stored`` extent."""
    box = stored_axis(expr.terms, extents, groups)
    if box.entries > stored:
        return AxisLayout(expr, stored, True)
    return AxisLayout(expr, box.entries, False, box.blocks, box.rest, box.step, box.shift)


@dataclass(frozen=True)
class TileLayout:
    """Row-major layout of a tensor's tile: one AxisLayout per tensor axis."""

    tensor: object
    axes: tuple[AxisLayout, ...]
    shape: tuple[int, ...]   # the tensor's stored extents

    @property
    def words(self) -> int:
        return math.prod(a.span for a in self.axes)

    @property
    def strides(self) -> tuple[int, ...]:
        out, acc = [], 1
        for a in reversed(self.axes):
            out.append(acc)
            acc *= a.span
        return tuple(reversed(out))

    def index(self, base: dict[str, Lin], loc: dict[str, Lin]) -> Lin:
        return lin_sum([a.local(base, loc).scale(s) for a, s in zip(self.axes, self.strides)])

    def guard(self, base: dict[str, Lin], loc: dict[str, Lin], dims: dict[str, int]) -> list[str]:
        """Bounds conditions of the whole-axis axes that may leave [0, extent) (empty: none)."""
        out = []
        for a, extent in zip(self.axes, self.shape):
            if a.whole and not axis_in_range(a.expr, dims, extent):
                v = a.value(base, loc).c()
                out.append(f"({v}) >= 0 && ({v}) < {extent}")
        return out


def tile_layout(tensor, extents: dict[str, int], groups: frozenset[str], dims: dict[str, int]) -> TileLayout:
    shape = array_shape(tensor, dims)
    return TileLayout(tensor, tuple(axis_layout(e, extents, groups, s) for e, s in zip(tensor.indices, shape)),
                      shape)


def global_index(tensor, values: list[str], dims: dict[str, int]) -> tuple[str, list[str]]:
    """Row-major flat index of the element with axis values ``values`` (C expressions) and the guard
    conditions of the axes that may fall outside the stored tensor (padding)."""
    shape = array_shape(tensor, dims)
    terms, guards = [], []
    stride = 1
    for k in reversed(range(len(shape))):
        if values[k] != "0":
            terms.append(f"({values[k]})" if stride == 1 else f"({values[k]}) * {stride}")
        if not axis_in_range(tensor.indices[k], dims, shape[k]):
            guards.append(f"({values[k]}) >= 0 && ({values[k]}) < {shape[k]}")
        stride *= shape[k]
    return " + ".join(reversed(terms)) or "0", guards
