"""Compute commands at a level with ``compute_rows``: the MIP's linearisation of ``costmodel.run_rules``.

At such a level ``h`` (Gemmini WS: the Registers level, R = DIM rows per
compute, 3 cycles of overhead each), the cost model charges
``residencies x (iterations + overhead x computes per residency)``, with
runs and commands as ``costmodel.run_rules`` states them.

Which loops may merge is a property of the tensors' index expressions and of
the loop factors, stated once in ``costmodel.run_rules`` (the rules, and
``merge_conditions``: the exact conditions on one streamed tensor, derived
from its row-major source tile).  ``merge_options(problem, h, d, prev)``
turns them into conditions on the factor variables for loop ``d`` directly
outside run member ``prev`` ("these factors are 1", "this source extent is
v"), any of which is sufficient for the merge and which together are
necessary in every case it certifies; an empty list means the merge is not
certified (the model then never claims it, which over-estimates the
computes).

The MIP encoding: binaries ``inrun[d]`` (the run contains loop ``d``; only a
nontrivial loop may), ``start[d]`` (the run's innermost loop, at most one)
and ``link[d, prev]`` (``d`` merges directly over ``prev``; one binary per
option when there are several); ``inrun[d] = start[d] + sum link[d, .]`` and
each member has at most one successor.  Links only go outwards in every
tensor's index positions, so chains have no cycles.  Where the level's loop
order is not a decision of the MIP, the decoder emits it from the chain (run
innermost, the rest outside); where it is, the run is the innermost
nontrivial loop alone.  ``log2 computes >= outer + sum log2 f(h) - run_log +
log2 ceil(run / R)``, with one binary per achievable run length (``values``;
the formulation also reads the rows of a residency's last command from it),
or, where there are more than ``MAX_RUN_VALUES`` lengths, ``+ log2(m + 1)``
when ``run > m R`` (a binary ``over[m]`` for each m up to ``CEIL_STEPS`` that
some achievable run falls just above); and ``>= outer + sum log2 f(h) -
log2 R`` (exact beyond).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pyomo.environ as pe

from costmodel import run_rules
from workloads.divisors import divisors

MAX_RUN_VALUES = 96
"""Up to this many achievable run lengths get one binary each (exact rounding and last-command rows);
more fall back to the ``over`` steps."""

CEIL_STEPS = 32
"""Runs up to this many times ``compute_rows`` round their compute count up exactly (above it the
count is at most 1 / CEIL_STEPS low)."""


@dataclass
class RunModel:
    """The run variables of one level (see the module docstring).

    level: the level index h.  rows: compute_rows.  overhead: cycles per
    compute command.  candidates: dims that may join the run.  order_decided:
    the level's loop order is a decision of the MIP (order slots); the run is
    then the innermost nontrivial loop alone.  log_computes: variable, log2
    of compute commands per instance.  busy: binary, 0 only when the level
    has no nontrivial loop.  values: run length -> binary (one of them is 1)
    where the achievable lengths are few (else ``over``: run > m R steps).
    """

    level: int
    rows: int
    overhead: int
    candidates: tuple[str, ...]
    order_decided: bool
    log_computes: object
    inrun: dict = field(default_factory=dict)
    start: dict = field(default_factory=dict)
    link: dict = field(default_factory=dict)
    over: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    busy: object = None

    def variables(self) -> list:
        """The binaries a fixed mapping determines (for fixing and unfixing)."""
        return list(self.inrun.values()) + list(self.start.values()) + list(self.link.values())


@dataclass(frozen=True)
class MergeOption:
    """One sufficient condition for a merge: ``facts`` (level, dim, "T" temporal | "S" spatial) are factors
    that must be 1; ``extents`` (level, dim, value) are source-tile extents that must equal ``value``."""

    facts: frozenset
    extents: frozenset = frozenset()

    def holds(self, mapping) -> bool:
        """Whether ``mapping`` meets this condition."""
        for (k, e, kind) in self.facts:
            lm = mapping.levels[k]
            if (lm.temporal_factor(e) if kind == "T" else lm.spatial_factor(e)) != 1:
                return False
        return all(mapping.tile_extents(k, (e,))[e] == value for (k, e, value) in self.extents)


def run_levels(arch) -> list[int]:
    """Levels that set ``compute_rows`` (the cost model charges their compute commands)."""
    return [h for h, lv in enumerate(arch.levels) if getattr(lv, "compute_rows", None)]


def streamed_tensors(problem, h: int) -> list:
    """Tensors with no holder at ``h`` or below (the MIP does not bypass): read from a source tile above ``h``."""
    return [t for t in problem.workload.tensors if run_rules.is_streamed(problem.holders[t.name], h)]


def source_level(problem, tensor, h: int) -> int:
    """The innermost holder of ``tensor`` above ``h``."""
    return run_rules.source_level(problem.holders[tensor.name], h)


def candidates(problem, h: int) -> tuple[str, ...]:
    """Dims whose loop may be nontrivial at ``h``: no holder at or above ``h`` is too small for even
    their smallest prime (Gemmini WS: the one-word weight register keeps K, C, R, S out)."""
    out = []
    for d in problem.dims:
        smallest = min(problem.primes[d])
        fits = True
        for t in problem.workload.tensors:
            if d not in t.dims:
                continue
            for i in problem.holders[t.name]:
                cap = problem.capacity[i]
                if i <= h and cap is not None and cap / problem.arch.levels[i].bytes_per_word(t) < smallest:
                    fits = False
        if fits:
            out.append(d)
    return tuple(out)


def run_values(problem, cands) -> list[int]:
    """Every run length the candidate dims' factors can form (products of divisors of their bounds)."""
    runs = {1}
    for d in cands:
        runs = {r * x for r in runs for x in divisors(problem.bounds[d])}
    return sorted(runs)


def ceil_steps(problem, cands, rows: int) -> list[int]:
    """The m (up to ``CEIL_STEPS``) for which some achievable run lies strictly between m R and (m + 1) R.

    There ``ceil(run / R) = m + 1`` exceeds ``run / R``: one binary per such m
    makes the rounding exact; runs that are multiples of R need none.
    """
    return sorted({r // rows for r in run_values(problem, cands)
                   if r > rows and r % rows and r // rows <= CEIL_STEPS})


def quantum_rounding(m, problem, name: str, inner_log, quantum: int):
    """log2 of ceil(inner / quantum) for ``inner_log`` = log2 of an iteration count that is a product of
    divisors of the loop bounds: one binary per step m (up to ``CEIL_STEPS``) that some such count lies
    strictly above (m quanta, not a multiple of them), set when the count passes it (the objective keeps
    the others 0); increments telescope to log2(m + 1) of the largest step passed."""
    log2 = math.log2
    dims = problem.dims
    longest = sum(log2(problem.bounds[d]) for d in dims)
    cons = pe.ConstraintList()
    m.add_component(f"{name}_ceil", cons)
    rounding, below = 0, 1
    for step in ceil_steps(problem, dims, quantum):
        over = pe.Var(domain=pe.Binary)
        m.add_component(f"{name}_over_{step}", over)
        cons.add(inner_log <= log2(step * quantum) + 1e-6 + (longest - log2(step * quantum)) * over)
        rounding = rounding + (log2(step + 1) - log2(below)) * over
        below = step + 1
    return rounding


def _whole(k_lo: int, k_hi: int, dim: str) -> set:
    """Facts: every factor of ``dim`` at levels k_lo..k_hi-1 is 1."""
    return {(k, dim, kind) for k in range(k_lo, k_hi) for kind in ("T", "S")}


def _facts(condition: run_rules.MergeCondition, s: int, h: int, levels: int) -> tuple[set, set]:
    """(facts, extents) of one tensor's merge condition with source level ``s`` at run level ``h``."""
    facts = set()
    for e in condition.unit_stride:
        facts |= {(h, e, "S")} | _whole(h + 1, levels, e)
    for e in condition.unsplit:
        facts |= _whole(s, h, e)
    for e in condition.unit_extent:
        facts |= _whole(s, levels, e)
    facts |= {(h, e, "T") for e in condition.no_loop}
    return facts, {(s, e, value) for e, value in condition.extents}


def merge_options(problem, h: int, d: str, prev: str) -> list[MergeOption]:
    """The conditions under which loop ``d`` extends a run whose next inner member is ``prev``.

    Any one option suffices; together they are necessary wherever an option
    is returned.  Empty: the merge is not certified (``run_rules.merge_conditions``
    per streamed tensor, combined: one alternative of each tensor).
    """
    dims = set(problem.dims)
    combined = [(frozenset(), frozenset())]
    for t in streamed_tensors(problem, h):
        conditions = run_rules.merge_conditions(t, d, prev, problem.bounds)
        if conditions is None:
            return []
        s = source_level(problem, t, h)
        alternatives = [_facts(c, s, h, problem.levels) for c in conditions]
        combined = [(f1 | f2, x1 | x2) for f1, x1 in combined for f2, x2 in alternatives]
    out = []
    for facts, extents in combined:
        values: dict = {}
        if any(values.setdefault((k, e), v) != v for (k, e, v) in extents):
            continue  # two tensors ask for different extents of one dim
        out.append(MergeOption(frozenset(f for f in facts if f[1] in dims), extents))
    return out


def _may_link(problem, h: int, d: str, prev: str) -> bool:
    """Pairs that no streamed tensor orders (both dims ignored by all) link only in dim order (no cycles)."""
    if any(d in t.dims or prev in t.dims for t in streamed_tensors(problem, h)):
        return True
    return problem.dims.index(d) > problem.dims.index(prev)


def _add_link(m, cons, problem, h: int, d: str, prev: str, options, log_factor):
    """The binary ``link[d, prev]`` and the conditions it implies (one binary per option when several)."""
    log2 = math.log2
    var = pe.Var(domain=pe.Binary)
    m.add_component(f"runs_{h}_link_{d}_{prev}", var)
    picks = [var]
    if len(options) > 1:
        picks = [pe.Var(domain=pe.Binary) for _ in options]
        for n, pick in enumerate(picks):
            m.add_component(f"runs_{h}_link_{d}_{prev}_{n}", pick)
        cons.add(var == sum(picks))
    for option, pick in zip(options, picks):
        for (k, e, kind) in sorted(option.facts):
            expr = log_factor(k, e, kind)
            if isinstance(expr, (int, float)):
                continue  # no variable: the factor is 1 already
            cons.add(expr <= log2(problem.bounds[e]) * (1 - pick))
        for (k, e, value) in sorted(option.extents):
            extent = sum(log_factor(kk, e, kind) for kk in range(k, problem.levels) for kind in ("T", "S"))
            room = log2(problem.bounds[e])
            cons.add(extent <= log2(value) + room * (1 - pick))
            cons.add(extent >= log2(value) - room * (1 - pick))
    return var


def build_runs(m, problem, h: int, log_t, log_factor, order: dict, nontrivial: dict) -> RunModel:
    """Add the run variables and constraints of level ``h`` to model ``m``.

    ``log_t(k, d)``: log2 of d's temporal factor at k; ``log_factor(k, d,
    kind)``: the same for kind "T" or the spatial factor for "S" (0 when no
    axis admits it); ``order``/``nontrivial``: the formulation's order slots
    and nontrivial-loop indicators (used where the order at ``h`` is a decision).
    """
    lv = problem.arch.levels[h]
    rows, overhead = int(lv.compute_rows), int(getattr(lv, "compute_overhead_cycles", 0) or 0)
    dims = problem.dims
    log2 = math.log2
    cands = candidates(problem, h)
    order_decided = any((h, d) in order for d in dims)
    log_c = pe.Var(bounds=(None, None))
    m.add_component(f"runs_{h}_logc", log_c)
    model = RunModel(h, rows, overhead, cands, order_decided, log_c)
    cons = pe.ConstraintList()
    m.add_component(f"runs_{h}_cons", cons)
    outer = sum(log_t(k, d) for k in range(h) for d in dims)
    at_h = sum(log_t(h, d) for d in dims)
    # the cost model charges refills whether or not the level has a loop of its own (an empty level streams
    # one row per compute), so the refill terms stay active: busy is fixed to 1
    model.busy = pe.Var(domain=pe.Binary)
    m.add_component(f"runs_{h}_busy", model.busy)
    model.busy.fix(1)
    if not cands:
        cons.add(log_c >= outer + at_h)
        return model
    for d in cands:
        model.inrun[d] = pe.Var(domain=pe.Binary)
        model.start[d] = pe.Var(domain=pe.Binary)
        m.add_component(f"runs_{h}_inrun_{d}", model.inrun[d])
        m.add_component(f"runs_{h}_start_{d}", model.start[d])
        # only a nontrivial loop joins the run
        cons.add(log_t(h, d) >= log2(min(problem.primes[d])) * model.inrun[d])
    cons.add(sum(model.start.values()) <= 1)
    if order_decided:
        # the run is the innermost nontrivial loop in the order slots
        nslots = len(order[h, dims[0]])
        pos = {d: sum(s * o for s, o in enumerate(order[h, d])) for d in dims}
        for d in cands:
            cons.add(model.inrun[d] == model.start[d])
            for e in dims:
                if e != d:
                    cons.add(pos[e] + 1 <= pos[d] + nslots * (2 - model.start[d] - nontrivial[h, e]))
    else:
        for d in cands:
            for prev in cands:
                if prev == d or not _may_link(problem, h, d, prev):
                    continue
                options = merge_options(problem, h, d, prev)
                if options:
                    model.link[d, prev] = _add_link(m, cons, problem, h, d, prev, options, log_factor)
        for d in cands:
            cons.add(model.inrun[d] == model.start[d] + sum(v for (a, _p), v in model.link.items() if a == d))
            successors = [v for (_a, p), v in model.link.items() if p == d]
            if successors:
                cons.add(sum(successors) <= model.inrun[d])
    # run_log is exactly the members' log factors (a shorter claimed run would dodge the rounding below)
    run_log = 0
    for d in cands:
        r = pe.Var(bounds=(0, log2(problem.bounds[d])))
        m.add_component(f"runs_{h}_runlog_{d}", r)
        cons.add(r <= log_t(h, d))
        cons.add(r <= log2(problem.bounds[d]) * model.inrun[d])
        cons.add(r >= log_t(h, d) - log2(problem.bounds[d]) * (1 - model.inrun[d]))
        run_log = run_log + r
    values = run_values(problem, cands)
    if len(values) <= MAX_RUN_VALUES:
        # one binary per achievable run length: ceil(run / R) and the last command's rows exactly
        for v in values:
            model.values[v] = pe.Var(domain=pe.Binary)
            m.add_component(f"runs_{h}_value_{v}", model.values[v])
        cons.add(sum(model.values.values()) == 1)
        cons.add(run_log == sum(log2(v) * u for v, u in model.values.items()))
        rounding = sum(log2(run_rules.commands_per_run(v, rows)) * u for v, u in model.values.items())
        cons.add(log_c >= outer + at_h - run_log + rounding)
        cons.add(log_c >= outer + at_h - log2(rows))
        return model
    rounding, below = 0, 1
    longest = sum(log2(problem.bounds[d]) for d in cands)
    for step in ceil_steps(problem, cands, rows):
        over = pe.Var(domain=pe.Binary)
        m.add_component(f"runs_{h}_over_{step}", over)
        model.over[step] = over
        cons.add(run_log <= log2(step * rows) + 1e-6 + (longest - log2(step * rows)) * over)
        # ceil(run / R) >= step + 1 once run > step * R (increments telescope to the largest step passed)
        rounding = rounding + (log2(step + 1) - log2(below)) * over
        below = step + 1
    cons.add(log_c >= outer + at_h - run_log + rounding)
    cons.add(log_c >= outer + at_h - log2(rows))
    return model


def run_chain(model: RunModel, value) -> list[str]:
    """The run's loops in the solution, innermost first (``value(var)`` reads a variable)."""
    def on(var) -> bool:
        return (value(var) or 0.0) > 0.5

    starts = [d for d, v in model.start.items() if on(v)]
    if not starts:
        return []
    chain = [starts[0]]
    while True:
        nxt = [d for (d, p), v in model.link.items() if p == chain[-1] and on(v) and d not in chain]
        if not nxt:
            return chain
        chain.append(nxt[0])


def level_order(model: RunModel, dims, temporal: dict, value) -> tuple[str, ...]:
    """Loop order (outer to inner) of the run level: loops outside the run in ``dims`` order, then the
    run from its outermost member to its start."""
    chain = [d for d in run_chain(model, value) if temporal.get(d, 1) > 1]
    rest = [d for d in dims if temporal.get(d, 1) > 1 and d not in chain]
    return tuple(rest + list(reversed(chain)))


def fix_runs(model: RunModel, mapping, workload_dims) -> None:
    """Pin the run to ``mapping``'s loop order at the level: the start is its innermost nontrivial loop,
    and links join consecutive nontrivial loops only (whether each holds is left to the conditions)."""
    if model.order_decided or run_rules.order_is_free(mapping, model.level):
        return  # an unspecified innermost order is the cheapest one (run_rules), as the model picks
    loops = run_rules.run_loops(mapping.levels[model.level], workload_dims)  # innermost first
    start = loops[0] if loops else None
    for d, var in model.start.items():
        var.fix(1 if d == start else 0)
    allowed = set(zip(loops[1:], loops[:-1]))
    for key, var in model.link.items():
        if key not in allowed:
            var.fix(0)


def unfix_runs(model: RunModel) -> None:
    for var in model.variables():
        var.unfix()
