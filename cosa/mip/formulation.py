"""The CoSA mixed-integer program, generated from any loop nest and any architecture.

Variables (all small integers or binaries):

* ``nT[k, d, p]`` / ``nS[a, d, p]``: how many copies of prime ``p`` of dim ``d``
  sit temporally at level ``k`` / spatially on spatial axis ``a``.  Identical
  primes of a dim share one integer (CoSA's per-factor binaries, with the
  symmetry between equal factors removed).  Every copy is placed once.
* ``reuse[t, d]``: the outermost level's loop of ``d`` (irrelevant to ``t``) is
  reused for ``t`` (the default, one order level: nested reuse sets, ``reuse.py``);
  or, with several order levels, ``order[k, d, s]``: dim ``d``'s temporal loop
  at level ``k`` sits at slot ``s`` (0 = outermost); one dim per slot.
  ``nontrivial[k, d]``: that loop has a factor > 1.
* ``window[...]``: one-hot choice of the loop extents of a sliding-window axis,
  so that halo footprints ``stride*(p-1) + dilation*(r-1) + 1`` are exact; the
  same choice gives the box a row-addressed buffer keeps (padding included,
  a common stride's gaps skipped), which its capacity constraint counts.
* ``share[i, t, q]``: the fraction ``q`` of a shared buffer given to tensor ``t``
  (fractions sum to at most 1), which turns the sum of tile sizes into linear
  per-tensor constraints in the log domain.
* ``inside[t, c, k, s]``: some loop relevant to ``t`` with factor > 1 sits at
  position (k, s) or inside it, among the loops outside level ``c`` (CoSA's Y;
  order slots only).

Everything is linear in log2 of loop factors.  Traffic is
``log2(words) = log2(tile) + sum log2(relevant factors outside) + sum log2(irrelevant
factors outside the innermost relevant loop)``; the last sum is, with reuse
sets, each factor less its reused part (at most the factor, zero unless its
``reuse`` binary is set), and with order slots the product of an order
binary, an ``inside`` binary and a factor; both are linearized with big-M
bounds (exact in the direction the objective pushes).  Latency, energy and EDP
need sums of such exponentials; ``2**x`` is convex, so the epigraph
``y >= 2**x`` is represented exactly enough by tangent lines (at most 1.4 %
low with half-unit spacing) without binaries.

Latency follows ``costmodel.evaluate``: compute cycles (product of the
temporal factors) against each level's transfer cycles (bytes over all its
instances / instances / bandwidth, including the MAC-side reads and output
updates at a tensor's innermost holder); double-buffered levels overlap with
compute (an epigraph of the max), the others add.  Energy sums the same
traffic terms over all instances times the levels' pJ per byte.  Symmetry:
loops with factor 1 keep the workload's dim order among themselves.
A level's ``compute_quantum`` (iterations per residency rounded up) is
modelled as compute >= outer iterations * quantum (exact when the inner
iterations fit one quantum).  A level's ``compute_rows`` (Gemmini WS) adds
``compute_overhead_cycles`` per compute command to the compute term, the
commands counted from which loops merge into one run (``runs.py``: exact
merge conditions, the run chosen by the model and emitted innermost by the
decoder).  Where that level is double buffered with a write bandwidth, its
refills bound the compute term too, as in ``ComputeRuns.work``: >= half the
iterations + every fill, and (one-word held tile) >= iterations + changes x
(fill - rows of the last command).  ``partial_sum_bits`` / ``init_fill_bits``
of the level below DRAM change the output bytes at DRAM.  Per-row DMA cycles
(a parent's ``read_row_*``/``write_row_*`` cycles, ``costmodel.evaluate``):
log2(rows) = log2(words moved) - r with r <= log2(the child tile's extent
along the dims on the tensor's row axis), r <= log2(cap words) and r <=
log2(block) unless the block fills the axis (the objective pushes r up, so
the bounds' minimum is exact); rows times the cycles a full-width row costs
beyond its bytes enter the level's transfer time through one more tangent
epigraph (output finals, whose term is negative, at the widest rows); while
a block is narrower than its axis (a binary), each row costs at least a
one-word row (a max with a big-M epigraph; partial-sum reads bounded with a
chord of 2**-r).  Measured on fixed gemmini WS mappings: within 2 % of
evaluate() where the blocks fill the array, within 7 % with narrow blocks.
Measured: the latency objective predicts evaluate()'s cycles of random
mappings with median error < 1 % and Spearman rank correlation >= 0.997
(gemmini WS/OS, simba), and the compute commands of gemmini WS mappings
exactly (the fewest the model allows for a fixed mapping); single mappings
can be off by up to 60 % where the quantum rounding (gemmini OS) is not
exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pyomo.environ as pe

from costmodel.microkernel import kernel_level
from workloads.divisors import multiplicity
from workloads.footprint import group_dims

from .energy import energy_expr
from .latency import Terms, cycles_expr
from .linear import EPS, add as _add
from .problem import Problem, WindowAxis
from .reuse import build_order, reload_log
from .runs import build_runs, run_levels

SHARES = tuple(sorted({k / 32 for k in range(1, 33)} | {2.0 ** -m for m in range(6, 13)} | {1 / 3, 2 / 3, 1 / 6, 5 / 6}))
"""Fractions of a shared buffer one tensor may take (see ``share``)."""

OBJECTIVES = ("latency", "energy", "edp", "cosa")


@dataclass(frozen=True)
class CosaWeights:
    """CoSA's weighted objective ``w_util*Util + w_comp*Comp + w_traf*Traf`` (all log2 terms).

    Defaults are CoSA's: w_util = -1 (bigger tiles preferred), w_comp = 10
    (fewer sequential steps), w_traf = 1 (less traffic).
    """

    w_util: float = -1.0
    w_comp: float = 10.0
    w_traf: float = 1.0


@dataclass
class Formulation:
    """A built model and the handles the decoder and the cut loop need."""

    model: pe.ConcreteModel
    problem: Problem
    objective: str
    nT: dict
    nS: dict
    order: dict
    tile_log: dict = field(default_factory=dict)
    extent_log: dict = field(default_factory=dict)
    stored_log: dict = field(default_factory=dict)  # (tensor, level) -> log2 words a row-addressed level keeps
    terms: dict = field(default_factory=dict)
    cuts: int = 0
    runs: dict = field(default_factory=dict)
    reuse: dict = field(default_factory=dict)  # (tensor, dim) -> binary: reused at the outermost level
    cycles: object = None  # the latency objective's expression (cycles in ideal units)
    log_words: dict = field(default_factory=dict)  # (tensor, child level) -> log2 words moved into one child
    spatial_outside: object = None  # (tensor, lo, hi, relevant_only) -> log2 of the spatial factors at lo..hi-1
    log_s: object = None  # (level, dim) -> log2 of the dim's spatial factors at the level
    all_temporal: object = None  # log2 of every temporal factor

    # --- model size -----------------------------------------------------------
    def size(self) -> tuple[int, int, int]:
        """(variables, binaries + integers, constraints) of the model."""
        nvars = nint = 0
        for v in self.model.component_data_objects(pe.Var, active=True):
            nvars += 1
            if v.is_integer() or v.is_binary():
                nint += 1
        ncons = sum(1 for _ in self.model.component_data_objects(pe.Constraint, active=True))
        return nvars, nint, ncons


def build(problem: Problem, objective: str = "latency", weights: CosaWeights | None = None,
          reference: tuple[float, float] | None = None, symmetry_breaking: bool = True,
          reuse_sets: bool = True, all_traffic: bool = False) -> Formulation:
    """Build the Pyomo model for ``problem``.

    ``objective``: "latency" (cycles: max of compute and each level's transfer
    time), "energy" (pJ), "edp" (the linearization ``E/E0 + D/D0`` around
    ``reference = (E0 pJ, D0 cycles)``; the driver iterates it), or "cosa"
    (CoSA's log-domain weighted sum, ``weights``).  A latency model states the
    traffic of the level pairs whose bandwidth it prices only, unless
    ``all_traffic`` (every pair: what the least-energy tie-break needs).
    """
    wl, arch = problem.workload, problem.arch
    L = problem.levels
    dims = problem.dims
    bounds = problem.bounds
    m = pe.ConcreteModel(name=f"cosa_{wl.name}_{arch.name}")
    log2 = math.log2

    # --- factor placement ---------------------------------------------------
    t_index = [(k, d, p) for k in range(L) for d in dims for p in problem.primes[d]]
    m.nT = pe.Var(t_index, domain=pe.NonNegativeIntegers,
                  bounds=lambda _m, k, d, p: (0, problem.primes[d][p]))
    s_index = []
    s_ub = {}
    for a, slot in enumerate(problem.slots):
        for d in slot.dims:
            for p, mult in problem.primes[d].items():
                ub = min(mult, int(math.floor(log2(slot.size) / log2(p) + 1e-9)))
                if ub > 0:
                    s_index.append((a, d, p))
                    s_ub[(a, d, p)] = ub
    m.nS = pe.Var(s_index, domain=pe.NonNegativeIntegers, bounds=lambda _m, a, d, p: (0, s_ub[(a, d, p)]))
    m.place = pe.ConstraintList()
    for d in dims:
        for p, mult in problem.primes[d].items():
            _add(m.place, sum(m.nT[k, d, p] for k in range(L))
                        + sum(m.nS[a, d, p] for a in range(len(problem.slots)) if (a, d, p) in m.nS) == mult)

    def log_t(k, d):
        return sum(log2(p) * m.nT[k, d, p] for p in problem.primes[d])

    def log_s(k, d):
        return sum(log2(p) * m.nS[a, d, p] for a, slot in enumerate(problem.slots) if slot.level == k
                   for p in problem.primes[d] if (a, d, p) in m.nS)

    # --- spatial fan-out -----------------------------------------------------
    m.fan = pe.ConstraintList()
    for a, slot in enumerate(problem.slots):
        used = [log2(p) * m.nS[a, d, p] for d in slot.dims for p in problem.primes[d] if (a, d, p) in m.nS]
        if used:
            _add(m.fan, sum(used) <= log2(slot.size) + EPS)
    for k, lv in enumerate(arch.levels):
        level_slots = [a for a, s in enumerate(problem.slots) if s.level == k]
        if len(level_slots) > 1:
            used = [log2(p) * m.nS[a, d, p] for a in level_slots for d in problem.slots[a].dims
                    for p in problem.primes[d] if (a, d, p) in m.nS]
            if used:
                _add(m.fan, sum(used) <= log2(lv.fanout) + EPS)
            # each dim wholly on one axis of a level
            for d in dims:
                homes = [a for a in level_slots if d in problem.slots[a].dims
                         and any((a, d, p) in m.nS for p in problem.primes[d])]
                if len(homes) > 1:
                    for a in homes:
                        use = pe.Var(domain=pe.Binary)
                        m.add_component(f"axis_{a}_{d}", use)
                        for p in problem.primes[d]:
                            if (a, d, p) in m.nS:
                                _add(m.fan, m.nS[a, d, p] <= s_ub[(a, d, p)] * use)
                    _add(m.fan, sum(m.component(f"axis_{a}_{d}") for a in homes) <= 1)

    # --- cumulative extents and tiles ---------------------------------------
    extent_log = {}
    for i in range(L):
        for d in dims:
            extent_log[i, d] = sum(log_t(k, d) + log_s(k, d) for k in range(i, L))
    window_cache: dict = {}
    groups = group_dims(wl)
    m.link = pe.ConstraintList()

    def window_log(i: int, axis: WindowAxis, stored: bool = False):
        """log2 of the axis' extent in the tile at level ``i``; ``stored``: of the entries a row-addressed
        buffer keeps (padding included, stride gaps skipped: ``WindowAxis.stored_extent``)."""
        key = (i, axis)
        if key in window_cache:
            return window_cache[key][stored]
        combos = list(axis.combos(bounds))
        if len(combos) > 400:
            # conservative: 1 + sum c*(e-1) <= prod(c*e) for integers c, e >= 1
            expr = stored_expr = sum(log2(c) + extent_log[i, d] for d, c in axis.terms)
        else:
            u = pe.Var(range(len(combos)), domain=pe.Binary)
            m.add_component(f"window_{len(window_cache)}", u)
            _add(m.link, sum(u[n] for n in range(len(combos))) == 1)
            names = [d for d, _ in axis.terms]
            for pos, d in enumerate(names):
                for p in problem.primes[d]:
                    total = sum(m.nT[k, d, p] for k in range(i, L)) + sum(
                        m.nS[a, d, p] for a, slot in enumerate(problem.slots) if slot.level >= i and (a, d, p) in m.nS)
                    _add(m.link, sum(multiplicity(c[pos], p) * u[n] for n, c in enumerate(combos)) == total)
            expr = sum(log2(axis.extent(dict(zip(names, c)))) * u[n] for n, c in enumerate(combos))
            stored_expr = sum(log2(axis.stored_extent(dict(zip(names, c)), groups)) * u[n]
                              for n, c in enumerate(combos))
        window_cache[key] = (expr, stored_expr)
        return window_cache[key][stored]

    tile_log = {}
    stored_log = {}

    def tile(t: str, i: int):
        if (t, i) not in tile_log:
            ax = problem.axes[t]
            tile_log[t, i] = sum(extent_log[i, d] for d in ax.plain) + sum(window_log(i, w) for w in ax.windows)
        return tile_log[t, i]

    def stored_tile(t: str, i: int):
        """log2 of the words a row-addressed level keeps for the tile (``workloads.footprint.stored_box_words``)."""
        if (t, i) not in stored_log:
            ax = problem.axes[t]
            stored_log[t, i] = (sum(extent_log[i, d] for d in ax.plain)
                                + sum(window_log(i, w, stored=True) for w in ax.windows))
        return stored_log[t, i]

    # --- capacity -------------------------------------------------------------
    def unit_log(t, i, lv):
        # log2 bytes one tile word takes: its word size, or at a row-addressed level (Level.row_bytes) whose
        # rows hold one block of the dims unrolled on the tensor's row axis: row bytes - log2 block words
        # (exact while a block never exceeds a row)
        row_bytes = getattr(lv, "row_bytes", None)
        axis = lv.row_axis(t.role) if row_bytes else None
        if axis is None:
            return log2(lv.bytes_per_word(t)), lv.bytes_per_word(t)
        j = arch.axis_level(i, axis)
        size = next(a.size for a in arch.levels[j].spatial_axes if a.name == axis)
        if size * lv.bytes_per_word(t) > row_bytes:
            return log2(lv.bytes_per_word(t)), lv.bytes_per_word(t)
        block = sum(log2(p) * m.nS[a, d, p] for a, slot in enumerate(problem.slots)
                    if slot.level == j and slot.name == axis for d in slot.dims if d in t.dims
                    for p in problem.primes[d] if (a, d, p) in m.nS)
        return log2(row_bytes) - block, row_bytes

    for i, lv in enumerate(arch.levels):
        cap = problem.capacity[i]
        if cap is None:
            continue
        cap_cons = pe.ConstraintList()
        m.add_component(f"cap_{i}", cap_cons)
        stored = [t for t in wl.tensors if i in problem.holders[t.name]]
        # a row-addressed buffer keeps a tile's padding and skips a stride's gaps (the code generator's layout)
        footprint = stored_tile if getattr(lv, "row_bytes", None) else tile
        if len(stored) == 1:
            t = stored[0]
            _add(cap_cons, footprint(t.name, i) + unit_log(t, i, lv)[0] <= log2(cap) + EPS)
            continue
        share_sum = 0
        for t in stored:
            unit, least = unit_log(t, i, lv)
            qs = [q for q in SHARES if q * cap >= least]
            sh = pe.Var(range(len(qs)), domain=pe.Binary)
            m.add_component(f"share_{i}_{t.name}", sh)
            _add(cap_cons, sum(sh[n] for n in range(len(qs))) == 1)
            _add(cap_cons, footprint(t.name, i) + unit
                      <= sum(log2(q * cap) * sh[n] for n, q in enumerate(qs)) + EPS)
            share_sum = share_sum + sum(q * sh[n] for n, q in enumerate(qs))
        _add(cap_cons, share_sum <= 1 + EPS)

    form = Formulation(m, problem, objective, m.nT, m.nS, {}, tile_log, extent_log, stored_log)

    # --- traffic terms the objective needs ---------------------------------
    pairs = []  # (tensor, parent, child)
    for t in wl.tensors:
        chain = problem.holders[t.name]
        for p, c in zip(chain, chain[1:]):
            pairs.append((t, p, c))
    if objective == "latency" and not all_traffic:
        bw_levels = {k for k, lv in enumerate(arch.levels) if lv.read_bandwidth or lv.write_bandwidth}
        pairs = [(t, p, c) for (t, p, c) in pairs if p in bw_levels or c in bw_levels]
    needed_levels = {k for (_, _, c) in pairs for k in range(c)}
    order_levels = [k for k in problem.order_levels if k in needed_levels]

    # nontrivial-loop indicators and the order decisions (reuse.py)
    nontrivial, order, reuse = build_order(m, problem, needed_levels, order_levels, log_t, symmetry_breaking,
                                           reuse_sets)
    form.order, form.reuse = order, reuse

    log_words = {}
    blocked = micro_kernel_blocked(arch)
    for (t, p, c) in pairs:
        if t.is_output and c == blocked:
            # a CPU micro-kernel's output block: loaded, held across the kernel tile's loops, stored, at every
            # run of the kernel tile (costmodel.evaluate.blocked_levels): the tile of the level above, once
            # per temporal iteration outside it, with no reuse across any loop
            log_words[t.name, c] = sum(log_t(k, d) for k in range(c - 1) for d in dims) + tile(t.name, c - 1)
            continue
        log_words[t.name, c] = reload_log(m, problem, t, c, log_t, order, reuse, order_levels, nontrivial) + tile(
            t.name, c)

    def spatial_outside(t, lo, hi, relevant_only):
        """log2 of spatial factors at levels lo..hi-1 (relevant to t only, when asked)."""
        return sum(log_s(k, d) for k in range(lo, hi) for d in dims if (not relevant_only or d in t.dims))

    form.log_words, form.spatial_outside = log_words, spatial_outside

    # --- compute commands at levels with compute_rows (runs.py) -------------------
    if objective in ("latency", "edp"):
        def log_factor(k, d, kind):
            return log_t(k, d) if kind == "T" else log_s(k, d)

        for h in run_levels(arch):
            lv = arch.levels[h]
            if not getattr(lv, "compute_overhead_cycles", 0) and not (lv.double_buffered and lv.write_bandwidth):
                continue  # commands cost nothing extra and no refill waits on them: the count changes nothing
            form.runs[h] = build_runs(m, problem, h, log_t, log_factor, order, nontrivial)

    # --- objective -------------------------------------------------------------
    macs_log = sum(log2(bounds[d]) for d in dims)
    ideal_log = macs_log - log2(arch.total_macs_per_cycle)
    all_temporal = sum(log_t(k, d) for k in range(L) for d in dims)
    compute_log = all_temporal - log2(arch.macs_per_cycle)
    form.log_s, form.all_temporal = log_s, all_temporal
    if objective == "cosa":
        w = weights or CosaWeights()
        util = sum(tile(t.name, i) for t in wl.tensors for i in problem.holders[t.name] if i > 0)
        comp = sum(log_t(k, d) for k in range(L) for d in dims)
        traf = sum(log_words[t.name, c] + spatial_outside(t, 0, c, True) for (t, p, c) in pairs)
        m.obj = pe.Objective(expr=w.w_util * util + w.w_comp * comp + w.w_traf * traf, sense=pe.minimize)
        return form

    terms = Terms(m, problem, form, pairs, log_words, log_t, log_s, extent_log, ideal_log, all_temporal,
                  compute_log)
    if objective == "latency":
        form.cycles = cycles_expr(terms, "")
        m.obj = pe.Objective(expr=form.cycles, sense=pe.minimize)
        return form

    # energy (and EDP): totals over all instances, in units of one pJ per MAC (energy.py)
    e_ref = macs_log
    energy = energy_expr(m, problem, pairs, log_words, spatial_outside, log_s, all_temporal)
    if objective == "energy":
        m.obj = pe.Objective(expr=energy, sense=pe.minimize)
        return form
    # EDP: E/E0 + D/D0 majorizes log(E) + log(D) at (E0, D0); the driver iterates it.
    cyc = cycles_expr(terms, "edp_")
    e0, d0 = reference or (1.0, 1.0)
    # energy is in pJ / 2**e_ref, cycles in ideal cycles
    e0_units = max(e0 / 2.0 ** e_ref, 1e-9)
    d0_units = max(d0 / 2.0 ** ideal_log, 1e-9)
    m.obj = pe.Objective(expr=energy / e0_units + cyc / d0_units, sense=pe.minimize)
    return form


def micro_kernel_blocked(arch) -> int | None:
    """The register level whose outputs move once per run of the kernel tile (``costmodel.evaluate.
    blocked_levels``: a CPU arch with ``params["micro_kernel"]``, an outputs-only innermost level and no
    fan-out at the level above it), or None."""
    c = len(arch.levels) - 1
    if not arch.params.get("micro_kernel") or c < 1 or kernel_level(arch) != c - 1:
        return None
    return c if arch.levels[c - 1].fanout == 1 else None
