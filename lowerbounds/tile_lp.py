"""The Dinh-Demmel tile LP with loop bounds and per-tensor element sizes.

With a fast memory of M units, beta_i = log_M L_i and c_j = 1 - log_M p_j
(c_j = 1 in words), the primal is

    khat = max sum_i lambda_i   s.t.  sum_{i in S_j} lambda_i <= c_j  (each array j),
                                      0 <= lambda_i <= beta_i,

the tile has sides b_i = M^lambda_i (each array's tile then holds at most
M / p_j elements), and the leading-order traffic bound is
W = |Z| * M / M^khat (units moved between the memory and the next outer one).

For a non-projective axis (a sliding window ``P + R``) the tile's extent on
that axis is about max(b_P, b_R) (up to the constant 2), so each choice of one
dim per axis gives one constraint.  That relaxation is only used for the tile
sides; khat itself comes from the phantom-array dual (``dual.py``), which is a
proven upper bound on log_M of any segment's iterations for every affine nest
and equals the primal for projective ones.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from costmodel import ArchError
from workloads import LoopNest, WorkloadError

from .counts import working_iterations
from .dual import DualSolution, dual_khat
from .maps import live_dims

UNITS = ("words", "bytes")


@dataclass(frozen=True)
class TileLP:
    """Result of the tile LP for one memory size.

    memory: M in ``unit``.  khat: the exponent used by the bound (the dual's
    minimum).  primal_khat: the primal LP's maximum (equals khat for
    projective nests; may exceed it for sliding windows, whose box tiles the
    primal only approximates).  lambdas: dim -> lambda_i.  tile: dim -> b_i =
    M^lambda_i (real, between 1 and L_i).  iterations: |Z| (working iterations).
    bound: |Z| * M / M^khat in ``unit``.  exponents: s_j per tensor and t per
    phantom from the dual.
    """

    memory: float
    unit: str
    khat: float
    primal_khat: float
    lambdas: dict
    tile: dict
    iterations: int
    bound: float
    exponents: dict
    phantoms: dict

    def to_dict(self) -> dict:
        return {"memory": self.memory, "unit": self.unit, "khat": self.khat, "primal_khat": self.primal_khat,
                "lambdas": dict(self.lambdas), "tile": dict(self.tile), "iterations": self.iterations,
                "bound": self.bound, "exponents": dict(self.exponents), "phantoms": dict(self.phantoms)}


def element_sizes(nest: LoopNest, unit: str) -> dict | None:
    """tensor -> element size in ``unit`` (None for words: every element is one unit)."""
    if unit not in UNITS:
        raise WorkloadError(f"unit must be one of {UNITS}, got {unit!r}", source="lowerbounds", field="unit")
    if unit == "words":
        return None
    return {t.name: t.bytes_per_word for t in nest.tensors}


def check_memory(nest: LoopNest, memory: float, sizes: dict | None) -> float:
    """Validate M: a number above 1 unit that holds at least one element of every tensor."""
    try:
        value = float(memory)
    except (TypeError, ValueError):
        raise ArchError(f"memory must be a number, got {memory!r}", source=f"bound of {nest.name}",
                        field="memory") from None
    if not math.isfinite(value) or value <= 1.0:
        raise ArchError(f"memory must be finite and above 1, got {memory!r}", source=f"bound of {nest.name}",
                        field="memory")
    widest = max(sizes.values()) if sizes else 1.0
    if value < widest:
        raise ArchError(f"memory {value:g} is smaller than one element ({widest:g})", source=f"bound of {nest.name}",
                        field="memory")
    return value


def primal_tile(nest: LoopNest, memory: float, sizes: dict | None) -> tuple[float, dict]:
    """max sum lambda_i over the (window-relaxed) array constraints and the loop bounds (HiGHS)."""
    dims = live_dims(nest)
    if not dims:
        return 0.0, {}
    log_m = math.log(memory)
    rows, rhs = [], []
    for t in nest.tensors:
        p = 1.0 if sizes is None else sizes[t.name]
        cap = 1.0 - math.log(p) / log_m
        axes = [[d for d in e.dims if d in dims] for e in t.indices]
        axes = [a for a in axes if a]
        for choice in itertools.product(*axes):
            chosen = set(choice)
            row = [1.0 if d in chosen else 0.0 for d in dims]
            if row not in rows or rhs[rows.index(row)] != cap:
                rows.append(row)
                rhs.append(cap)
    bounds = [(0.0, math.log(nest.dims[d]) / log_m) for d in dims]
    res = linprog(-np.ones(len(dims)), A_ub=np.array(rows), b_ub=np.array(rhs), bounds=bounds, method="highs")
    if res.status != 0:
        raise WorkloadError(f"HiGHS failed on the tile LP: {res.message}", source=f"workload {nest.name}")
    return float(-res.fun), {d: float(x) for d, x in zip(dims, res.x)}


def tile_lp(nest: LoopNest, memory: float, unit: str = "words") -> TileLP:
    """The Dinh-Demmel LP of ``nest`` for a fast memory of ``memory`` words or bytes.

    ``unit="bytes"`` uses each tensor's element size (mixed precision:
    c_j = 1 - log_M p_j); ``"words"`` counts every element as one unit.
    The bound is on loads plus stores between that memory and slower memory,
    in the same unit, for one execution of the nest.
    """
    sizes = element_sizes(nest, unit)
    memory = check_memory(nest, memory, sizes)
    dual: DualSolution = dual_khat(nest, memory, sizes)
    primal_value, lambdas = primal_tile(nest, memory, sizes)
    iterations = working_iterations(nest)
    khat = dual.value
    bound = iterations * memory / memory ** khat
    # dims outside the LP (bound 1, or indexing no tensor: free to run whole) span their bound
    lambdas = {d: lambdas.get(d, math.log(nest.dims[d]) / math.log(memory)) for d in nest.dims}
    tile = {d: min(float(nest.dims[d]), max(1.0, memory ** lam)) for d, lam in lambdas.items()}
    return TileLP(memory, unit, khat, primal_value, lambdas, tile, iterations, bound, dual.arrays, dual.phantoms)
