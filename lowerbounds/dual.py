"""The dual of the tile LP: HBL with one phantom array per loop (Dinh and Demmel 2020).

A set E of iterations with |phi_j(E)| <= M / p_j elements of each array j
(a memory of M bytes) and |pi_i(E)| <= L_i (loop i has L_i values) satisfies,
for every (s, t) in [0, 1] meeting the HBL rank conditions of the arrays and
the phantoms together,

    |E| <= prod_j (M / p_j)^s_j * prod_i L_i^t_i,

so log_M |E| <= min over (s, t) of sum_j s_j (1 - log_M p_j) + sum_i t_i log_M L_i.

That minimum is khat.  It holds for any affine nest (the rank conditions are
checked on the exact subspace lattice, see ``hbl.py``), and strided
convolutions are split first (``conv.py``), which adds the phantom that bounds
the split filter index by R.  For projective nests LP duality makes it equal
to the primal tile LP in ``tile_lp.py``; the two are written independently so
that a test can hold one against the other.

The same conditions, with other costs, certify the explicit-constant
segment bound (``segments.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workloads import LoopNest

from .conv import split_strides
from .hbl import LatticeTooLarge, cached_constraints, solve_exponent_lp
from .maps import MapSystem, map_system


@dataclass(frozen=True)
class DualSolution:
    """value = min sum of costs; ``arrays``: s_j per tensor; ``phantoms``: t per phantom map."""

    value: float
    arrays: dict
    phantoms: dict


def bounded_systems(nest: LoopNest) -> list[MapSystem]:
    """Valid views of the nest with one phantom per loop: strided indices split
    with and without the split phantom, unsplit, and the projective relaxation
    (whose lattice is always small).  Each gives a valid exponent; the caller
    keeps the tightest."""
    plain = map_system(nest)
    out = []
    views = (split_strides(plain, phantoms=True), split_strides(plain, phantoms=False), plain,
             plain.projective_relaxation())
    for system in views:
        system = system.without_unit_dims().with_loop_phantoms()
        if system not in out:
            out.append(system)
    return out


def solve_dual(system: MapSystem, array_costs, phantom_costs, source: str = "") -> DualSolution:
    """min sum_j c_j s_j + sum_i d_i t_i over the HBL conditions of arrays and phantoms (HiGHS)."""
    costs = np.concatenate([np.asarray(array_costs, dtype=float), np.asarray(phantom_costs, dtype=float)])
    constraints = list(cached_constraints(system))
    value, x = solve_exponent_lp(constraints, costs, source)
    na = len(system.arrays)
    return DualSolution(value, {m.name: float(v) for m, v in zip(system.arrays, x[:na])},
                        {m.name: float(v) for m, v in zip(system.phantoms, x[na:])})


def _tightest(nest: LoopNest, costs) -> DualSolution:
    """Solve every bounded view with ``costs(system) -> (array_costs, phantom_costs)``; keep the minimum.

    A view whose subspace lattice is too large to enumerate is skipped (its
    conditions cannot be certified); the unsplit view of a convolution always
    has a small lattice.
    """
    source = f"workload {nest.name}"
    best, error = None, None
    for system in bounded_systems(nest):
        try:
            sol = solve_dual(system, *costs(system), source)
        except LatticeTooLarge as err:
            error = err
            continue
        if best is None or sol.value < best.value - 1e-12:
            best = sol
    if best is None:
        raise error
    return best


def dual_khat(nest: LoopNest, memory: float, bytes_per_word: dict | None = None) -> DualSolution:
    """khat by the phantom-array dual for a memory of ``memory`` units.

    ``bytes_per_word``: tensor name -> element size in the memory's unit
    (None: every element is one unit, i.e. words).
    """
    log_m = math.log(memory)

    def costs(system: MapSystem):
        sizes = [1.0 if bytes_per_word is None else bytes_per_word[m.name] for m in system.arrays]
        return [1.0 - math.log(p) / log_m for p in sizes], [math.log(m.bound) / log_m for m in system.phantoms]

    return _tightest(nest, costs)
