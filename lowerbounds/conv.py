"""Strided and dilated convolutions: split the strided index (Chen, Demmel, Dinh, Haberle, Holtz 2022).

An image axis ``sigma*p + r`` is a rank-1 map of (p, r), so plain HBL
credits it with sliding-window reuse even when sigma > R and no two
iterations share an input element.  Writing r = sigma*r1 + r2 with
0 <= r2 < min(sigma, R) makes the axis the pair (p + r1, r2) without
changing which element is read (a bijection), and the filter's axis r becomes
the pair (r1, r2).  The split nest has ceil(R/sigma) * min(sigma, R) >= R
values of (r1, r2), so one phantom map (r1, r2) -> sigma*r1 + r2 bounded by R
records that only R of them exist.  The product of the two splits' min(sigma, R)
is Chen et al.'s sigma'.

Dilation is the same with the roles swapped: ``p + d*r`` splits p = d*p1 + p2.
After dividing out gcd(stride, dilation) an axis whose two coefficients are
both above 1 is left as is (the rank-1 map is still a valid, weaker, bound).
"""

from __future__ import annotations

import math
from dataclasses import replace

from .maps import IndexMap, MapSystem


def _split_candidate(system: MapSystem) -> tuple[int, int, int] | None:
    """(position of the mixing dim x, position of the split dim y, factor) for the first splittable row."""
    for m in system.arrays:
        for row in m.rows:
            cols = [k for k, c in enumerate(row) if c != 0]
            if len(cols) != 2:
                continue
            a, b = abs(row[cols[0]]), abs(row[cols[1]])
            g = math.gcd(a, b)
            a, b = a // g, b // g
            if b == 1 and a > 1:
                x, y, factor = cols[0], cols[1], a
            elif a == 1 and b > 1:
                x, y, factor = cols[1], cols[0], b
            else:
                continue
            if system.bounds[y] <= 1:
                continue
            # y must appear alone in every other row, so (y1, y2) can replace it one-to-one.
            others_ok = all(
                sum(1 for c in r if c != 0) == 1
                for mm in system.arrays + system.phantoms for r in mm.rows
                if r[y] != 0 and r is not row)
            if others_ok:
                return x, y, factor
    return None


def _split_once(system: MapSystem, x: int, y: int, factor: int, phantom: bool) -> MapSystem:
    """Replace dim y by (y1, y2), y = factor*y1 + y2, in every map; add the phantom bounded by L_y."""
    bound_y = system.bounds[y]
    name = system.dims[y]
    dims = system.dims[:y] + (f"{name}/{factor}", f"{name}%{factor}") + system.dims[y + 1:]
    bounds = system.bounds[:y] + (-(-bound_y // factor), min(factor, bound_y)) + system.bounds[y + 1:]

    def widen(row: tuple[int, ...], c1: int, c2: int) -> tuple[int, ...]:
        return row[:y] + (c1, c2) + row[y + 1:]

    def convert(m: IndexMap) -> IndexMap:
        rows = []
        for row in m.rows:
            if row[y] == 0:
                rows.append(widen(row, 0, 0))
            elif sum(1 for c in row if c != 0) == 1:
                zero = tuple(0 for _ in row)
                rows.append(widen(zero, 1, 0))
                rows.append(widen(zero, 0, 1))
            else:
                # factor*x' + y with x' the other dim: -> (x + y1, y2)
                mixed = [0] * len(row)
                mixed[x] = 1
                rows.append(widen(tuple(mixed), 1, 0))
                rows.append(widen(tuple(0 for _ in row), 0, 1))
        return replace(m, rows=tuple(rows))

    extra = ()
    if phantom and bound_y < bounds[y] * bounds[y + 1]:
        phantom_row = widen(tuple(0 for _ in system.dims), factor, 1)
        extra = (IndexMap(f"split:{name}", (phantom_row,), bound=float(bound_y)),)
    return MapSystem(dims, bounds, tuple(convert(m) for m in system.arrays),
                     tuple(convert(m) for m in system.phantoms) + extra)


def split_strides(system: MapSystem, phantoms: bool = True, max_splits: int = 16) -> MapSystem:
    """Split every strided (or dilated) index that can be split; the input system when none can.

    ``phantoms``: add the map (y1, y2) -> factor*y1 + y2 bounded by L_y where
    the split box has more than L_y points (the factor does not divide L_y).
    It links y2 to the window, and the subspace lattice of that block can be
    infinite; callers then drop it, which only loosens the bound.
    """
    for _ in range(max_splits):
        cand = _split_candidate(system)
        if cand is None:
            break
        system = _split_once(system, *cand, phantoms)
    return system


def sigma_prime(stride: tuple[int, ...], filter_sizes: tuple[int, ...]) -> int:
    """Chen et al.'s sigma' = prod min(stride_a, filter_a) over the spatial axes."""
    return math.prod(min(s, f) for s, f in zip(stride, filter_sizes))
