"""The MIP that chooses ``tiled_matmul``'s tile arguments for Gemmini's loop instruction LOOP_WS.

Variables: for each of I, J, K a one-hot choice among ``costmodel.gemmini_loops.candidate_tiles`` (any tile
count, ragged last tiles included: a tile need not divide its dimension), and for each pair of dimensions
the product of their one-hot choices (exact for one-hot vectors: each pair's table has the two choices as
its margins).  The objective is ``costmodel.gemmini_loops.matmul_cycles``:

* terms of one or two dimensions (the bias loads, the execute rows, the fill) are linear in the one-hot
  and pair variables, exactly;
* the A and B load terms are products of three dimensions' factors: their logarithms are linear, and each
  term's value is bounded below by tangents of exp at points ``TANGENT_STEP`` apart in the logarithm
  (exp is convex, so the bound is exact at the points and at most ``TANGENT_STEP**2 / 8`` low between
  them); with ``a_reuse`` (I0 * K0 <= 2, read off the (I, K) pair table) the A term drops its J0 factor,
  likewise B with ``b_reuse``;
* the SoC's cold lines (``LoopMachine.line_fill_cycles``): the array's wait for B tiles read for the first
  time (``cold_b_stall``), linear in the (I, J) pair table, for A tiles (``cold_a_stall``), linear in the
  (K, J) one, and the memory bus's time (``memory_cycles``, a constant floor);
* the A bank term: the A loads plus the computes of every tile (``a_reuse``: of the first J tile's), a
  big-M pair on the reuse binary;
* cycles = max(load, execute + cold stalls, A bank, memory bus) + fill, as a variable above them.

Constraints: the library's fit test (A and B in half the scratchpad, C in half the accumulator), linear in
the pair tables.  The chosen tiles are priced again by ``matmul_cycles`` itself, so the reported cycles are
the model's, not the linearisation's.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import pyomo.environ as pe

from costmodel.gemmini_loops import (LoopCost, LoopMachine, candidate_tiles, cdiv, cold_a_stall, cold_b_stall, fits,
                                     i_factors, j_factors, k_factors, matmul_cycles, memory_cycles)

from ..schedule import SchedulingError
from .solve import solve

MAX_CANDIDATES = 600
"""The most candidates one dimension may have (the pair tables grow with the square)."""
TANGENT_STEP = 0.02
"""Spacing of the tangent points of exp, in natural-log units (relative error of the bound <= 5e-5)."""


@dataclass(frozen=True)
class TileChoice:
    """The MIP's tile arguments (tile_I, tile_J, tile_K) in DIM blocks, their modelled ``cost``, the
    solver's ``status`` and ``seconds`` (model build and solve), and the candidate counts per dimension."""

    tiles: tuple
    cost: LoopCost
    status: str
    seconds: float
    candidates: tuple


def _tangent_bound(model, name: str, z, y, lo: float, hi: float, relax=None, big: float = 0.0,
                   step: float = TANGENT_STEP) -> None:
    """z >= exp(y) for y in [lo, hi], as tangent cuts ``step`` apart; ``relax`` (a binary) lifts every cut by
    ``big``."""
    n = max(1, math.ceil((hi - lo) / step))
    points = [lo + (hi - lo) * p / n for p in range(n + 1)]
    cuts = pe.ConstraintList()
    setattr(model, name, cuts)
    for p in points:
        e = math.exp(p)
        rhs = e * (1 + y - p)
        cuts.add(z >= (rhs - big * relax) if relax is not None else z >= rhs)


def choose_matmul_tiles(shape: tuple, machine: LoopMachine | None = None, *, time_limit_s: float = 30.0,
                        source: str = "loop tiles") -> TileChoice:
    """The tile arguments of ``tiled_matmul`` (WS) for (M, N, K) = ``shape`` that minimise the modelled cycles.

    Raises SchedulingError when no tile fits (a machine too small for one DIM block of each operand)."""
    start = time.perf_counter()
    m = machine or LoopMachine()
    M, N, K = shape
    if min(shape) < 1:
        raise SchedulingError(f"dimensions must be positive, got {shape}", source=source, field="shape")
    ib, jb, kb = cdiv(M, m.dim), cdiv(N, m.dim), cdiv(K, m.dim)
    cand = {"I": candidate_tiles(ib, first_tile_counts=bool(m.line_fill_cycles)),
            "J": candidate_tiles(jb, m.block_len), "K": candidate_tiles(kb, m.block_len)}
    if max(len(c) for c in cand.values()) > MAX_CANDIDATES:
        raise SchedulingError(f"({M}, {N}, {K}) has more tile candidates than the MIP takes ({MAX_CANDIDATES} per "
                              "dimension)", source=source, field="shape")
    fi = {t: i_factors(M, t, m) for t in cand["I"]}
    fj = {t: j_factors(N, t, m) for t in cand["J"]}
    fk = {t: k_factors(K, t, m) for t in cand["K"]}
    half_sp, half_acc = m.sp_rows // 2, m.acc_rows // 2

    md = pe.ConcreteModel()
    md.x = {d: {} for d in "IJK"}
    for d in "IJK":
        var = pe.Var(cand[d], domain=pe.Binary)
        setattr(md, f"x{d}", var)
        md.x[d] = var
        setattr(md, f"one{d}", pe.Constraint(expr=sum(var[t] for t in cand[d]) == 1))
    pairs = {}
    for a, b in (("I", "K"), ("K", "J"), ("I", "J")):
        keys = [(u, v) for u in cand[a] for v in cand[b]]
        w = pe.Var(keys, domain=pe.NonNegativeReals, bounds=(0, 1))
        setattr(md, f"w{a}{b}", w)
        setattr(md, f"m{a}{b}a", pe.Constraint(cand[a], rule=lambda _, u, w=w, b=b: sum(w[u, v] for v in cand[b])
                                                == md.x[a][u]))
        setattr(md, f"m{a}{b}b", pe.Constraint(cand[b], rule=lambda _, v, w=w, a=a: sum(w[u, v] for u in cand[a])
                                                == md.x[b][v]))
        pairs[a + b] = w
    wIK, wKJ, wIJ = pairs["IK"], pairs["KJ"], pairs["IJ"]
    # the library's fit test
    md.fit_sp = pe.Constraint(expr=sum(wIK[u, v] * u * v for u, v in wIK) * m.dim
                              + sum(wKJ[u, v] * u * v for u, v in wKJ) * m.dim <= half_sp)
    md.fit_acc = pe.Constraint(expr=sum(wIJ[u, v] * u * v for u, v in wIJ) * m.dim <= half_acc)
    # reuse: allowed where the pair's tile counts multiply to at most 2
    md.ra = pe.Var(domain=pe.Binary)
    md.rb = pe.Var(domain=pe.Binary)
    md.ra_ok = pe.Constraint(expr=md.ra <= sum(wIK[u, v] for u, v in wIK
                                               if fi[u]["count_i"] * fk[v]["count_k"] <= 2))
    md.rb_ok = pe.Constraint(expr=md.rb <= sum(wKJ[u, v] for u, v in wKJ
                                               if fk[u]["count_k"] * fj[v]["count_j"] <= 2))
    xI, xJ, xK = md.x["I"], md.x["J"], md.x["K"]
    # A loads: M * a_row_cycles(K) * count_j (or without count_j under a_reuse)
    logs = {
        "A": (math.log(M), {"K": lambda t: math.log(fk[t]["a_row_cycles"]), "J": lambda t: math.log(fj[t]["count_j"])}),
        "B": (math.log(kb * m.dim), {"J": lambda t: math.log(fj[t]["b_row_cycles"]),
                                     "I": lambda t: math.log(fi[t]["count_i"])}),
    }
    reuse_terms = {"A": sum(xK[t] * M * fk[t]["a_row_cycles"] for t in cand["K"]),
                   "B": sum(xJ[t] * kb * m.dim * fj[t]["b_row_cycles"] for t in cand["J"])}
    relax = {"A": md.ra, "B": md.rb}
    z = {}
    for term, (const, factors) in logs.items():
        y_expr = const + sum(sum(md.x[d][t] * f(t) for t in cand[d]) for d, f in factors.items())
        lo = const + sum(min(f(t) for t in cand[d]) for d, f in factors.items())
        hi = const + sum(max(f(t) for t in cand[d]) for d, f in factors.items())
        zt = pe.Var(domain=pe.NonNegativeReals)
        setattr(md, f"z{term}", zt)
        big = math.exp(hi)  # >= every cut at every y in [lo, hi] (1 + x <= e^x)
        _tangent_bound(md, f"tan{term}", zt, y_expr, lo, hi, relax[term], big)
        setattr(md, f"reuse{term}", pe.Constraint(expr=zt >= reuse_terms[term]))
        z[term] = zt
    load = z["A"] + z["B"] + sum(xJ[t] * M * fj[t]["d_row_cycles"] for t in cand["J"])
    execute = sum(xI[t] * jb * kb * fi[t]["ex_rows"] for t in cand["I"])
    stalls = sum(wIJ[u, v] * cold_b_stall(K, fi[u]["first_ex_rows"], fj[v]["b_cold_rows"], m) for u, v in wIJ) \
        + sum(wKJ[u, v] * cold_a_stall(M, fj[v]["first_j_blocks"], fk[u]["a_cold_rows"], m) for u, v in wKJ)
    fill = (sum(wIK[u, v] * fi[u]["first_rows"] * fk[v]["first_a_row_cycles"] for u, v in wIK)
            + sum(wIJ[u, v] * (fi[u]["first_rows"] * fj[v]["first_d_row_cycles"]
                               + fi[u]["last_rows"] * fj[v]["last_c_row_cycles"]) for u, v in wIJ))
    # the A bank: A loads and the computes of the tiles that load A (all of them, or the first J tile's)
    ex_first_j = sum(wIJ[u, v] * fj[v]["first_j_blocks"] * kb * fi[u]["ex_rows"] for u, v in wIJ)
    big_ex = jb * kb * max(fi[t]["ex_rows"] for t in cand["I"])
    md.T = pe.Var(domain=pe.NonNegativeReals)
    md.t_load = pe.Constraint(expr=md.T >= load)
    md.t_ex = pe.Constraint(expr=md.T >= execute + stalls)
    md.t_memory = pe.Constraint(expr=md.T >= memory_cycles(shape, m))
    md.t_bank = pe.Constraint(expr=md.T >= z["A"] + execute - big_ex * md.ra)
    md.t_bank_reuse = pe.Constraint(expr=md.T >= z["A"] + ex_first_j)
    md.obj = pe.Objective(expr=md.T + fill, sense=pe.minimize)
    result = solve(md, time_limit_s=time_limit_s, mip_gap=1e-4, source=source)
    if not result.has_solution and result.status == "time_limit":
        raise SchedulingError(f"the MIP found no tile of ({M}, {N}, {K}) within its time limit ({time_limit_s:g} s; a "
                              "busy machine solves slower): give it more time", source=source, field="time_limit")
    if not result.has_solution:
        raise SchedulingError(f"no tile of ({M}, {N}, {K}) fits the library's halves of the scratchpad "
                              f"({half_sp} rows) and accumulator ({half_acc} rows)", source=source, field="tiles")
    tiles = tuple(max(cand[d], key=lambda t, d=d: pe.value(md.x[d][t])) for d in "IJK")
    if (why := fits(tiles, m)) is not None:  # cannot happen: the fit test is exact in the pair tables
        raise SchedulingError(f"the MIP returned tiles {tiles} that do not fit: {why}", source=source, field="tiles")
    return TileChoice(tiles, matmul_cycles(shape, tiles, m), result.status, time.perf_counter() - start,
                      tuple(len(cand[d]) for d in "IJK"))


def exhaustive_matmul_tiles(shape: tuple, machine: LoopMachine | None = None) -> tuple:
    """(tiles, cost) with the fewest modelled cycles over every tile triple the library accepts (the MIP's
    check; ties keep the smallest tiles)."""
    m = machine or LoopMachine()
    blocks = [cdiv(s, m.dim) for s in shape]
    best = None
    for ti in range(1, blocks[0] + 1):
        for tj in range(1, blocks[1] + 1):
            for tk in range(1, blocks[2] + 1):
                if fits((ti, tj, tk), m) is None:
                    c = matmul_cycles(shape, (ti, tj, tk), m)
                    if best is None or c.cycles < best[1].cycles:
                        best = ((ti, tj, tk), c)
    return best
