"""Lexicographic tie-breaking inside the MIP: among the model's solutions whose objective is within a
tolerance of the optimum, the one that moves the fewest DRAM bytes, and among those the least energy.

After the main solve, a second solve keeps every constraint, caps the main objective at
``(1 + tolerance)`` times the value found and minimises the model's DRAM bytes (the same traffic terms
the latency and energy objectives are built from: words moved between DRAM and the levels it feeds,
outputs counted as ``costmodel.evaluate`` counts them: partial sums out and back at their width, final
results once, initial fills once).  The solve starts from the main solution, which satisfies the cap, so
any incumbent it returns is no worse in the model.  Its mapping is then costed by the cost model, and
the driver chooses between it and the main solution with the shared rule (``cosa.baselines.objective``).
A third solve (``least_energy``, latency objective) keeps both caps, the DRAM bytes at the second solve's
value (plus the solver's relative gap: the second solve is proven only that close) and minimises the
model's energy (``energy.energy_expr``), where the model prices every level pair the energy needs.
"""

from __future__ import annotations

import math
import time

import pyomo.environ as pe

from .decode import decode
from .energy import energy_expr
from .linear import exp_tangents
from .solve import solve

TIE_SOLVE_S = 5.0
"""Seconds one tie-breaking solve may take at most (and never past the caller's deadline)."""

TIE_HIGHS_OPTIONS = {"mip_allow_restart": False}
"""HiGHS options of the tie-breaking solves.  No restarts: HiGHS restarts a MIP (presolve and root cuts
again) once enough integer columns are fixed at the root, which on these small, warm-started models repeats
most of the root's work (the fewest-DRAM-bytes solve of ResNet-50's res2a_branch2b on the Eyeriss and Simba
presets: 0.75 and 0.90 s with restarts, 0.35 and 0.49 s without, to the same optimum).  Which solution
within the solver's gap a solve returns changes with the option: on 38 ResNet-50, MobileNet-V2 and BERT
layer-arch pairs (Eyeriss, Simba) the chosen schedule's cycles and DRAM bytes stayed the same and its energy
moved by -1.3 % to +0.5 % (3 better, 2 worse)."""


def dram_bytes_terms(form, block):
    """(expression, scale) with the model's DRAM bytes = expression * 2**scale, built on ``block`` (new
    tangent epigraphs), or None when the model has no traffic term for some tensor DRAM feeds (a
    latency model of an arch whose DRAM has no bandwidth prices no DRAM traffic)."""
    problem = form.problem
    wl, arch = problem.workload, problem.arch
    dram = arch.levels[0]
    pairs = []
    for t in wl.tensors:
        chain = problem.holders[t.name]
        if len(chain) < 2 or chain[0] != 0:
            continue
        if (t.name, chain[1]) not in form.log_words:
            return None
        pairs.append((t, chain[1]))
    if not pairs or form.spatial_outside is None:
        return None
    scale = math.log2(max(1.0, sum(wl.size_words(t) for t, _ in pairs)))
    expr, const = 0, 0.0
    for n, (t, c) in enumerate(pairs):
        bpw = dram.bytes_per_word(t) * t.density
        x = form.log_words[t.name, c] + form.spatial_outside(t, 0, c, dram.multicast)
        y = exp_tangents(block, f"dram_{n}", x - scale, -10, 20)
        if t.is_output:
            child = arch.levels[c]
            size = wl.size_words(t) * t.density
            psum = (getattr(child, "partial_sum_bits", None) or 8 * dram.bytes_per_word(t)) / 8 * t.density
            init = (getattr(child, "init_fill_bits", None) or 0) / 8 * t.density
            # (W - S) partial sums out and back, S final results written, S initial fills read
            expr = expr + 2 * psum * y
            const += size * (bpw + init - 2 * psum)
        else:
            expr = expr + bpw * y
    return expr + const / 2.0 ** scale, scale


def _start_epigraphs(block) -> None:
    """Give every ``exp_tangents`` pair (x, y) of ``block`` the values of the model's current point
    (y on the tangents' envelope, as the solver sees it), so that the current point is a feasible MIP
    start and the block's expressions take the values the solver would give them there."""
    for con in list(block.component_objects(pe.Constraint, descend_into=False)):
        name = con.local_name
        if not name.endswith("_def"):
            continue
        value = pe.value(con.expr.args[1], exception=False)
        if value is None:
            continue
        x, y = block.component(f"{name[:-4]}_x"), block.component(f"{name[:-4]}_y")
        x.set_value(value, skip_validation=True)
        tangents = block.component(f"{name[:-4]}_tan")
        y.set_value(max([0.0] + [pe.value(c.expr.args[0]) for c in tangents.values()]), skip_validation=True)


def _all_pairs(form):
    """Every (tensor, parent, child) pair of holders, or None when the model lacks one's traffic."""
    problem = form.problem
    pairs = []
    for t in problem.workload.tensors:
        chain = problem.holders[t.name]
        for p, c in zip(chain, chain[1:]):
            if (t.name, c) not in form.log_words:
                return None
            pairs.append((t, p, c))
    return pairs


def least_energy(form, objective_value: float, tolerance: float, deadline: float, solver: str, seed: int,
                 mip_gap: float, src: str):
    """The mapping of least model energy among the solutions whose main objective is at most
    ``objective_value * (1 + tolerance)`` and whose model DRAM bytes are at most the current point's (plus
    ``mip_gap``); the current point (the fewest-DRAM-bytes solution) starts the solve.  None when the model
    lacks a term the energy needs, or the solve finds nothing; also the seconds spent and the status."""
    m = form.model
    if time.perf_counter() >= deadline - 0.05:
        return None, 0.0, "no time"
    pairs = _all_pairs(form)
    if pairs is None or form.log_s is None or form.all_temporal is None:
        return None, 0.0, "no energy terms"
    block = pe.Block()
    m.add_component("tiebreak", block)
    try:
        built = dram_bytes_terms(form, block)
        if built is None:
            return None, 0.0, "no DRAM terms"
        bytes_expr, _ = built
        energy = energy_expr(block, form.problem, pairs, form.log_words, form.spatial_outside, form.log_s,
                             form.all_temporal)
        _start_epigraphs(block)
        bytes_now = pe.value(bytes_expr, exception=False)
        if bytes_now is None:
            return None, 0.0, "no start"
        block.bytes_cap = pe.Constraint(expr=bytes_expr <= bytes_now * (1 + mip_gap) + 1e-9 * abs(bytes_now))
        return _capped_solve(form, block, energy, objective_value, tolerance, deadline, solver, seed, mip_gap, src)
    finally:
        m.del_component(block)
        m.obj.activate()


def least_energy_rebuilt(problem, start, deadline: float, solver: str, seed: int, mip_gap: float, src: str,
                         weights=None):
    """``least_energy`` where the latency model states no traffic for levels without a bandwidth (so no
    energy): a latency model of every level pair is built, loaded at ``start`` (the fewest-DRAM-bytes
    mapping) and its energy minimised with its cycles and DRAM bytes capped at that point's.  (mapping or
    None, seconds, status)."""
    from .formulation import build
    from .predict import load_start

    t0 = time.perf_counter()
    if start is None or time.perf_counter() >= deadline - 0.05:
        return None, 0.0, "no time" if start is not None else "no start"
    form = build(problem, "latency", weights, all_traffic=True)
    point, _ = load_start(form, start, "fewest DRAM bytes", min(TIE_SOLVE_S, max(deadline - t0, 0.05)), seed,
                          solve_fn=solve)
    if point is None:
        return None, time.perf_counter() - t0, "no start"
    got, _, status = least_energy(form, point.objective, 0.0, deadline, solver, seed, mip_gap, src)
    return got, time.perf_counter() - t0, status


def _capped_solve(form, block, objective, objective_value: float, tolerance: float, deadline: float, solver: str,
                  seed: int, mip_gap: float, src: str):
    """Minimise ``objective`` on ``block`` with the main objective capped at ``objective_value * (1 +
    tolerance)``, from the model's current point, for at most ``TIE_SOLVE_S`` and never past ``deadline``:
    (mapping or None, solve seconds, status).  The caller removes ``block`` and reactivates the main
    objective."""
    main = form.model.obj
    main.deactivate()
    block.cap = pe.Constraint(expr=main.expr <= objective_value * (1 + tolerance) + 1e-9 * abs(objective_value))
    block.obj = pe.Objective(expr=objective, sense=pe.minimize)
    limit = max(min(TIE_SOLVE_S, deadline - time.perf_counter()), 0.05)
    result = solve(form.model, solver, limit, mip_gap, seed, src, size=form.size(), warm_start=True,
                   highs_options=TIE_HIGHS_OPTIONS)
    return (decode(form) if result.has_solution else None), result.solve_s, result.status


def fewest_dram_bytes(form, objective_value: float, tolerance: float, deadline: float, solver: str, seed: int,
                      mip_gap: float, src: str):
    """The mapping of least model DRAM bytes among the solutions whose main objective is at most
    ``objective_value * (1 + tolerance)`` (the model's current point must be one of them: it starts the
    solve), or None when the model prices no DRAM traffic, the solve finds nothing or the time is up;
    also the seconds spent and the solve's status.  The model is left as it was."""
    m = form.model
    if time.perf_counter() >= deadline - 0.05:
        return None, 0.0, "no time"
    block = pe.Block()
    m.add_component("tiebreak", block)
    try:
        built = dram_bytes_terms(form, block)
        if built is None:
            return None, 0.0, "no DRAM terms"
        bytes_expr, _ = built
        _start_epigraphs(block)
        return _capped_solve(form, block, bytes_expr, objective_value, tolerance, deadline, solver, seed, mip_gap,
                             src)
    finally:
        m.del_component(block)
        m.obj.activate()


__all__ = ["TIE_HIGHS_OPTIONS", "TIE_SOLVE_S", "dram_bytes_terms", "fewest_dram_bytes", "least_energy", "least_energy_rebuilt"]
