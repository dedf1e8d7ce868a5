"""The MIP that chooses ``tiled_conv``'s tile arguments for Gemmini's loop instruction LOOP_CONV_WS.

The seven tile arguments form five *super-dimensions*, each a one-hot choice: batches; (output rows, kernel
rows) as pairs, since the input rows a tile moves in depend on both; (output columns, kernel columns)
likewise; output channels; input channels.  Any tile count is a candidate (the smallest tile for each count;
channels in whole DIM blocks or the whole extent), so ragged last tiles are in the space.

Every term of ``costmodel.gemmini_conv_loops.conv_cycles`` is a product of one factor per super-dimension:
its logarithm is linear in the one-hot variables and its value is bounded below by tangents of exp
(``cosa.mip.loop_tiles.TANGENT_STEP`` apart).  The library's reuse rules are binaries allowed where the
logarithm of the tile counts' product is at most log 2; each term that reuse shrinks has its two forms, the
larger one lifted by a big-M on the binary.  cycles = max(load, execute + head, input bank + head less the first
input, which the bank term already holds) + tail, as ``conv_cycles``.

A max-pool fused into the stores (``ConvLayer.pool_size`` ...) is in the model: the rows and columns candidates
count pooled outputs, and the convolution outputs each choice computes (overlapping windows) enter the bias,
execute, fit and floor terms as factors of those super-dimensions.

Two departures from the evaluator, both checked afterwards: the MIP counts every compute's rows without the
per-block floor (``weight_reload_cycles``), and instead requires each full output tile to stream at least that
many cycles per weight block (where the layer allows it); the scratchpad fit (a sum of two products) is
bounded by the same tangents, so a choice that does not fit exactly is cut off and the MIP solved again.
The ``alternatives`` best distinct choices are priced by ``conv_cycles`` itself and the cheapest returned.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import pyomo.environ as pe

from costmodel.gemmini_conv_loops import (ConvLayer, col_compute_cycles, cols_factors, conv_cycles, conv_fits,
                                          ich_factors, och_factors, rows_factors)
from costmodel.gemmini_loops import LoopCost, LoopMachine, bias_row_cycles, candidate_tiles, cdiv, preload_exposure

from ..schedule import SchedulingError
from .loop_tiles import _tangent_bound
from .solve import solve

TANGENT_STEP_CONV = 0.1
"""Spacing of the tangent points (log units): the bound is at most 0.125% low between them."""
MAX_CANDIDATES = 1500
"""The most candidates one super-dimension may have (an image of millions of pixels is refused, not solved)."""
EXPOSURE_FLOOR = 1e-3
"""Stands in for a zero preload exposure in its logarithm (adds at most a thousandth of a cycle per block)."""
MAX_CUTS = 30
"""Re-solves after cutting off choices that do not fit or repeat (beyond that: SchedulingError)."""


@dataclass(frozen=True)
class ConvTileChoice:
    """The MIP's tile arguments (batches, porows, pocols, pochs, krows, kcols, kchs), their modelled ``cost``,
    the MIP's ``solves``, ``seconds`` in all, and the candidate count per super-dimension."""

    tiles: tuple
    cost: LoopCost
    solves: int
    seconds: float
    candidates: tuple


def _channel_candidates(n: int, dim: int) -> list[int]:
    """Channel tiles: whole DIM blocks (the smallest for each tile count) and the whole extent."""
    return sorted({min(n, dim * cdiv(t, dim)) for t in candidate_tiles(n)} | {n})


def _space(layer: ConvLayer, m: LoopMachine) -> dict:
    """Candidates and per-candidate factors of each super-dimension."""
    kchs_values = _channel_candidates(layer.C, m.dim)
    # kernel-column packing depends on kchs only for a layer of at most DIM channels, whose only candidate is C
    thin = kchs_values[0]
    space = {
        "B": {b: {"n": cdiv(layer.N, b), "first": min(b, layer.N), "last": layer.N - (cdiv(layer.N, b) - 1) * b,
                  "full": b} for b in candidate_tiles(layer.N)},
        "R": {(pr, kr): rows_factors(layer, pr, kr) | {"porows": pr, "krows": kr}
              for pr in candidate_tiles(layer.PP) for kr in candidate_tiles(layer.R)},
        "C": {(pc, kc): cols_factors(layer, pc, kc, thin, m) | {"pocols": pc, "kcols": kc}
              for pc in candidate_tiles(layer.PQ) for kc in candidate_tiles(layer.R)},
        "O": {o: och_factors(layer, o, m) | {"pochs": o} for o in _channel_candidates(layer.K, m.dim)},
        "I": {k: ich_factors(layer, k, m) | {"kchs": k} for k in kchs_values},
    }
    for f in space["C"].values():   # over the convolution columns each tile computes (a pool's window)
        f["colsum"] = sum(count * col_compute_cycles(q, m) for q, count in f["col_classes"])
        f["full_col_cycles"] = col_compute_cycles(f["full_ocols"], m)
        # the preload exposure of every weight block, summed over the column tiles (> 0 for the logarithm)
        exposure = sum(count * preload_exposure(q, m, m.min_compute_cycles) for q, count in f["col_classes"])
        f["exposure"] = max(exposure, EXPOSURE_FLOOR)
    return space


def _tiles(choice: dict) -> tuple:
    (pr, kr), (pc, kc) = choice["R"], choice["C"]
    return (choice["B"], pr, pc, choice["O"], kr, kc, choice["I"])


def choose_conv_tiles(layer: ConvLayer, machine: LoopMachine | None = None, *, alternatives: int = 1,
                      time_limit_s: float = 30.0, step: float = TANGENT_STEP_CONV,
                      source: str = "conv loop tiles") -> ConvTileChoice:
    """The tile arguments of ``tiled_conv`` for ``layer`` with the fewest modelled cycles (module docstring)."""
    start = time.perf_counter()
    m = machine or LoopMachine()
    if min(layer.N, layer.H, layer.W, layer.C, layer.K, layer.R) < 1 or min(layer.P, layer.Q, layer.PP, layer.PQ) < 1:
        raise SchedulingError(f"not a convolution the library tiles: {layer}", source=source, field="layer")
    sp = _space(layer, m)
    if max(len(c) for c in sp.values()) > MAX_CANDIDATES:
        raise SchedulingError(f"{layer} has more tile candidates than the MIP takes ({MAX_CANDIDATES} per "
                              "super-dimension)", source=source, field="layer")
    md = pe.ConcreteModel()
    x = {}
    for d, cands in sp.items():
        keys = list(cands)
        var = pe.Var(range(len(keys)), domain=pe.Binary)
        setattr(md, f"x{d}", var)
        setattr(md, f"one{d}", pe.Constraint(expr=sum(var[i] for i in range(len(keys))) == 1))
        x[d] = (keys, var)

    def lin(d, f):
        keys, var = x[d]
        return sum(var[i] * f(sp[d][k]) for i, k in enumerate(keys))

    def logsum(factors: dict, const: float = 1.0):
        """(expression, lo, hi) of log(const * prod f_d(choice_d))."""
        expr, lo, hi = math.log(const), math.log(const), math.log(const)
        for d, f in factors.items():
            vals = [math.log(f(sp[d][k])) for k in x[d][0]]
            expr = expr + lin(d, lambda c, f=f: math.log(f(c)))
            lo, hi = lo + min(vals), hi + max(vals)
        return expr, lo, hi

    terms = {"n": 0}

    def product(factors: dict, const: float = 1.0, relax=None):
        """A variable >= const * prod f_d (tangent cuts; ``relax``: lifted by big-M when the binary is 1)."""
        y, lo, hi = logsum(factors, const)
        terms["n"] += 1
        z = pe.Var(domain=pe.NonNegativeReals)
        setattr(md, f"z{terms['n']}", z)
        _tangent_bound(md, f"tan{terms['n']}", z, y, lo, hi, relax, math.exp(hi), step)
        return z

    # reuse binaries: the product of the tile counts named at most 2 (log-sum <= log 2)
    md.ra, md.rb = pe.Var(domain=pe.Binary), pe.Var(domain=pe.Binary)
    for name, binary, counts in (("ra", md.ra, {"I": "n_kh", "R": ("n_kr", "n_pr"), "C": ("n_kc", "n_pc"), "B": "n"}),
                                 ("rb", md.rb, {"I": "n_kh", "O": "n_po", "R": ("n_kr",), "C": ("n_kc",)})):
        expr, hi = 0, 0.0
        for d, keys in counts.items():
            keys = (keys,) if isinstance(keys, str) else keys
            f = (lambda c, keys=keys: math.prod(c[k] for k in keys))
            expr = expr + lin(d, lambda c, f=f: math.log(f(c)))
            hi += max(math.log(f(sp[d][k])) for k in x[d][0])
        setattr(md, f"{name}_ok", pe.Constraint(expr=expr <= math.log(2) + 1e-9 + max(hi, 0) * (1 - binary)))

    R2C = layer.R * layer.R * layer.C
    # input loads: N * irows * icols * cycles per pixel (* output-channel tiles, unless the input stays)
    in_f = {"R": lambda c: c["irows"], "C": lambda c: c["icols"], "I": lambda c: c["in_pixel_cycles"]}
    z_in = product(in_f | {"O": lambda c: c["n_po"]}, layer.N, md.ra)
    md.in_reuse = pe.Constraint(expr=z_in >= product(in_f, layer.N))
    # weight loads and the preloads that contend with them (per output tile, unless the weights stay)
    per_tile = {"B": lambda c: c["n"], "R": lambda c: c["n_pr"], "C": lambda c: c["n_pc"]}
    w_f = {"O": lambda c: c["w_row_cycles"]}
    z_w = product(w_f | per_tile, R2C, md.rb)
    md.w_reuse = pe.Constraint(expr=z_w >= product(w_f, R2C))
    pre_f = {"O": lambda c: c["blocks"], "I": lambda c: c["blocks"], "C": lambda c: c["kcol_groups"]}
    per_tile_c = dict(per_tile, C=lambda c: c["n_pc"] * c["kcol_groups"])
    z_pre = product(pre_f | per_tile_c, m.dim * layer.R, md.rb)
    md.pre_reuse = pe.Constraint(expr=z_pre >= product(pre_f, m.dim * layer.R))
    bias_row = bias_row_cycles(1, m)
    # execute: weight blocks x the compute cycles each serves.  With a pool the convolution rows and columns
    # computed depend on the tiles (windows overlap): factors of the rows and columns super-dimensions
    ex_f = {"I": lambda c: c["blocks"], "C": lambda c: c["kcol_groups"] * c["colsum"]}
    if layer.pooled:
        bias = product({"R": lambda c: c["orows"], "C": lambda c: c["ocols"], "O": lambda c: c["blocks"]},
                       layer.N * bias_row)
        ex_f["R"], ex_const = (lambda c: c["orows"]), layer.N * layer.R
    else:
        bias = lin("O", lambda c: layer.N * layer.P * layer.Q * c["blocks"] * bias_row)
        ex_const = layer.N * layer.P * layer.R
    # the preloads' exposure: once per weight block and (batch, row, column) tile
    expo_f = {"B": lambda c: c["n"], "R": lambda c: c["n_pr"], "C": lambda c: c["kcol_groups"] * c["exposure"],
              "I": lambda c: c["blocks"]}
    z_ex = (product(ex_f | {"O": lambda c: c["blocks"]}, ex_const)
            + product(expo_f | {"O": lambda c: c["blocks"]}, layer.R))
    z_ex_first = (product(ex_f | {"O": lambda c: c["first_blocks"]}, ex_const)
                  + product(expo_f | {"O": lambda c: c["first_blocks"]}, layer.R))
    # before the first compute: the first tile's input, weights and bias; after the last load: its stores
    first_in = product({"B": lambda c: c["first"], "R": lambda c: c["first_irows"], "C": lambda c: c["first_icols"],
                        "I": lambda c: c["first_in_pixel_cycles"]})
    head_rest = (product({"O": lambda c: c["first_w_row_cycles"], "R": lambda c: c["krows"],
                          "C": lambda c: c["kcols"], "I": lambda c: min(c["kchs"], layer.C)})
                 + product({"B": lambda c: c["first"], "R": lambda c: c["first_orows"], "C": lambda c: c["first_ocols"],
                            "O": lambda c: c["first_blocks"]}, bias_row))
    tail = product({"B": lambda c: c["last"], "R": lambda c: c["last_orows"], "C": lambda c: c["last_ocols"],
                    "O": lambda c: c["last_blocks"]}, 1.5)
    md.T = pe.Var(domain=pe.NonNegativeReals)
    md.t_load = pe.Constraint(expr=md.T >= z_in + z_w + bias + m.contention * z_pre + tail)
    md.t_ex = pe.Constraint(expr=md.T >= z_ex + first_in + head_rest + tail)
    big = (math.exp(logsum(ex_f | {"O": lambda c: c["blocks"]}, ex_const)[2])
           + math.exp(logsum(expo_f | {"O": lambda c: c["blocks"]}, layer.R)[2]))
    md.t_bank = pe.Constraint(expr=md.T >= z_in + z_ex + head_rest + tail - big * md.ra)
    md.t_bank_reuse = pe.Constraint(expr=md.T >= z_in + z_ex_first + head_rest + tail)
    # the library's fit test: the accumulator exactly, the scratchpad through the tangents (checked below)
    acc, _, _ = logsum({"O": lambda c: cdiv(c["pochs"], m.dim), "B": lambda c: c["full"],
                        "R": lambda c: c["full_orows"], "C": lambda c: c["full_ocols"]})
    md.fit_acc = pe.Constraint(expr=acc <= math.log(m.acc_rows // 2) + 1e-9)
    z_a = product({"I": lambda c: cdiv(c["kchs"], m.dim), "B": lambda c: c["full"], "R": lambda c: c["full_irows"],
                   "C": lambda c: c["full_icols"]})
    z_b = product({"O": lambda c: cdiv(c["pochs"], m.dim), "R": lambda c: c["krows"], "C": lambda c: c["kcols"],
                   "I": lambda c: c["kchs"]})
    md.fit_sp = pe.Constraint(expr=z_a + z_b <= m.sp_rows // 2)
    # each full output tile streams at least weight_reload_cycles per weight block, where the layer can
    floor = math.log(m.weight_reload_cycles)
    stream, _, hi = logsum({"B": lambda c: c["full"], "R": lambda c: c["full_orows"],
                            "C": lambda c: c["full_col_cycles"]})
    if hi >= floor:
        md.stream_floor = pe.Constraint(expr=stream >= floor)
    md.obj = pe.Objective(expr=md.T, sense=pe.minimize)
    md.cuts = pe.ConstraintList()

    found, solves, timed_out = [], 0, False
    while len(found) < alternatives and solves < MAX_CUTS:
        result = solve(md, time_limit_s=time_limit_s, mip_gap=1e-4, source=source)
        solves += 1
        if not result.has_solution:
            timed_out = result.status == "time_limit"
            break
        picks = {d: max(range(len(keys)), key=lambda i, var=var: pe.value(var[i])) for d, (keys, var) in x.items()}
        md.cuts.add(sum(x[d][1][i] for d, i in picks.items()) <= len(picks) - 1)   # never this choice again
        tiles = _tiles({d: x[d][0][i] for d, i in picks.items()})
        if conv_fits(layer, tiles, m) is None:
            found.append((conv_cycles(layer, tiles, m), tiles))
    if not found and timed_out:   # the solver stopped before its first tile: not a proof that none fits
        raise SchedulingError(f"the MIP found no tile of {layer} within its time limit ({time_limit_s:g} s; a busy "
                              "machine solves slower): give it more time", source=source, field="time_limit")
    if not found:
        raise SchedulingError(f"no tile of {layer} fits the library's halves of the scratchpad "
                              f"({m.sp_rows // 2} rows) and accumulator ({m.acc_rows // 2} rows)", source=source,
                              field="tiles")
    cost, tiles = min(found, key=lambda ct: (ct[0].cycles, ct[1]))
    return ConvTileChoice(tiles, cost, solves, time.perf_counter() - start, tuple(len(c) for c in sp.values()))


def exhaustive_conv_tiles(layer: ConvLayer, machine: LoopMachine | None = None) -> tuple:
    """(tiles, cost) with the fewest modelled cycles over the MIP's candidate space, every choice priced by
    ``conv_cycles`` (the MIP's check)."""
    import itertools

    m = machine or LoopMachine()
    sp = _space(layer, m)
    best = None
    for choice in itertools.product(*(list(c) for c in sp.values())):
        tiles = _tiles(dict(zip(sp, choice)))
        if conv_fits(layer, tiles, m) is None:
            cost = conv_cycles(layer, tiles, m)
            if best is None or (cost.cycles, tiles) < (best[1].cycles, best[0]):
                best = (tiles, cost)
    return best
