"""The latency objective of the MIP: cycles as ``costmodel.evaluate`` counts them, in ideal-cycle units.

Compute cycles (and compute commands, ``runs.py``) against each level's
transfer cycles: bytes over all instances / instances / bandwidth, the
MAC-side reads and output updates at a tensor's innermost holder, per-row DMA
cycles (``row_log``), and the refills of a double-buffered run level.
Double-buffered levels overlap compute (an epigraph of the max); the others
add.  See ``formulation.py`` for the model these terms are built on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pyomo.environ as pe

from costmodel.run_rules import last_compute_rows

from .linear import EPS, add as _add, exp_tangents as _exp_tangents
from .runs import quantum_rounding

log2 = math.log2


@dataclass
class Terms:
    """What the objectives are built from: the model, its formulation, the (tensor, parent, child) pairs
    whose traffic counts, ``log_words[t, c]`` (log2 words moved into one instance of ``c``), the log2
    factor expressions, and log2 of the ideal cycles, of all temporal iterations and of compute cycles."""

    m: object
    problem: object
    form: object
    pairs: list
    log_words: dict
    log_t: object
    log_s: object
    extent_log: dict
    ideal_log: float
    all_temporal: object
    compute_log: object
    row_cache: dict = field(default_factory=dict)
    rows_full: dict = field(default_factory=dict)

    def spatial_outside(self, t, lo, hi, relevant_only):
        """log2 of spatial factors at levels lo..hi-1 (relevant to t only, when asked)."""
        return sum(self.log_s(k, d) for k in range(lo, hi) for d in self.problem.dims
                   if (not relevant_only or d in t.dims))


def row_log(b: "Terms", t, p: int, c: int):
    """(r, cap words, axis size) for a tensor moved in rows between parent ``p`` and child ``c``
    (``costmodel.transfers.transfer_rows``), or None where the parent charges no per-row cycles or the
    child has no row axis for the tensor.  r: log2 of the words one row carries, r <= log2(the child
    tile's extent along the dims on the row axis), r <= log2(cap words), and r <= log2(block) unless
    the block fills the axis (a narrower block moves alone); rows = words moved / 2**r, and the
    objective pushes r up, so it takes the largest value the bounds allow."""
    m, problem, arch, extent_log = b.m, b.problem, b.problem.arch, b.extent_log
    row_cache, rows_full, bounds = b.row_cache, b.rows_full, b.problem.bounds
    key = (t.name, p, c)
    if key in row_cache:
        return row_cache[key]
    row_cache[key] = None
    parent, child = arch.levels[p], arch.levels[c]
    axis = child.row_axis(t.role) if getattr(parent, "row_transfer_costed", False) else None
    j = arch.axis_level(c, axis) if axis else None
    slots = [a for a, slot in enumerate(problem.slots) if slot.level == j and slot.name == axis]
    if not slots:
        return None
    size = problem.slots[slots[0]].size
    on_axis = [d for d in problem.slots[slots[0]].dims if d in t.dims]
    line = sum(extent_log[c, d] for d in on_axis)
    block = sum(log2(q) * m.nS[a, d, q] for a in slots for d in on_axis for q in problem.primes[d]
                if (a, d, q) in m.nS)
    cap = getattr(child, "max_transfer_row_bytes", None)
    most = sum(log2(bounds[d]) for d in on_axis)
    cap_words = None
    if cap is not None:
        cap_words = max(size, int(cap // child.bytes_per_word(t)) // size * size)
        most = min(most, log2(cap_words))
    r = pe.Var(bounds=(0, max(most, 0.0)))
    full = pe.Var(domain=pe.Binary)
    m.add_component(f"rowlog_{t.name}_{p}_{c}", r)
    m.add_component(f"rowfull_{t.name}_{p}_{c}", full)
    cons = pe.ConstraintList()
    m.add_component(f"rowcons_{t.name}_{p}_{c}", cons)
    _add(cons, r <= line + EPS)
    _add(cons, block >= log2(size) * full - EPS)  # full only when the block fills the axis
    _add(cons, r <= block + most * full + EPS)
    rows_full[key] = full
    row_cache[key] = (r, cap_words or 2.0 ** most, size)
    return row_cache[key]


def row_adder(lv, row_bytes: float, write: bool) -> float:
    """Cycles one row of ``row_bytes`` costs at ``lv`` beyond its bytes over the bandwidth."""
    bandwidth = lv.write_bandwidth if write else lv.read_bandwidth
    return lv.row_transfer_cycles(row_bytes, write) - (row_bytes / bandwidth if bandwidth else 0.0)


def cycles_expr(b: "Terms", tag: str):
    """Cycles in units of ideal cycles: max(compute, overlapped transfers) + stalled transfers.

    A level's transfer time is the bytes read from one instance (all
    instances' bytes over their number) over its read bandwidth plus the
    bytes written over its write bandwidth; levels
    that are double buffered overlap it with compute, others stall.
    """
    m, problem, form, pairs, log_words = b.m, b.problem, b.form, b.pairs, b.log_words
    arch, wl, dims, L = problem.arch, problem.workload, problem.dims, problem.levels
    log_t, log_s, spatial_outside = b.log_t, b.log_s, b.spatial_outside
    ideal_log, all_temporal, compute_log = b.ideal_log, b.all_temporal, b.compute_log
    lat = pe.ConstraintList()
    m.add_component(f"{tag}lat", lat)
    peak = pe.Var(bounds=(0, None))
    m.add_component(f"{tag}peak", peak)
    micro_kernel = bool(arch.params.get("micro_kernel"))
    comp_y = _exp_tangents(m, f"{tag}compute", compute_log - ideal_log, 0, log2(arch.total_macs_per_cycle) + 1)
    form.terms[f"{tag}compute"] = comp_y
    compute_terms = comp_y
    for h, runs in form.runs.items():
        if not runs.overhead:
            continue
        # every compute command adds its overhead cycles to the iterations it streams
        c_y = _exp_tangents(m, f"{tag}computes_{h}", runs.log_computes - log2(arch.macs_per_cycle) - ideal_log,
                            -log2(runs.rows) - 2, log2(arch.total_macs_per_cycle) + 1)
        form.terms[f"{tag}computes_{h}"] = c_y
        compute_terms = compute_terms + runs.overhead * c_y
    _add(lat, peak >= compute_terms)
    for h, lv in enumerate(arch.levels):
        quantum = getattr(lv, "compute_quantum", 1) or 1
        if quantum > 1 and h not in form.runs:
            # the iterations at and below level h, per residency, round up to the quantum:
            # compute >= (iterations outside h) * quantum * ceil(inner / quantum), the ceiling exact up to
            # CEIL_STEPS quanta (one binary per step some inner count can pass; above, at most 1/CEIL_STEPS low)
            outer = sum(log_t(k, d) for k in range(h) for d in dims)
            inner = sum(log_t(k, d) for k in range(h, L) for d in dims)
            rounding = quantum_rounding(m, problem, f"{tag}quantum_{h}", inner, quantum)
            q_y = _exp_tangents(m, f"{tag}quantum_{h}", outer + log2(quantum) + rounding - log2(arch.macs_per_cycle)
                                - ideal_log, 0, log2(arch.total_macs_per_cycle) + 1)
            _add(lat, peak >= q_y)
    stalls = []
    for lvl, lv in enumerate(arch.levels):
        rbw, wbw = lv.read_bandwidth, lv.write_bandwidth
        if not (rbw or wbw):
            continue
        parts = []
        # separate read and write channels (Level.separate_channels, Timeloop's rule): the level's time is the
        # slower channel's, so its reads and writes are also summed apart (levels with per-row costs keep the sum)
        split = bool(getattr(lv, "separate_channels", False)) and not lv.row_transfer_costed
        reads, writes = [], []
        for (t, p, c) in pairs:
            if lvl not in (p, c):
                continue
            bpw = lv.bytes_per_word(t)
            read_c = bpw / rbw if rbw else 0.0
            write_c = bpw / wbw if wbw else 0.0
            const = 0.0  # bytes-over-bandwidth not proportional to the traffic (first visits)
            if t.is_output:
                coef = read_c + write_c  # loads of partial sums and write-backs
                if lvl == p == 0:
                    # the first visit of each output word loads nothing; partial sums may move
                    # wider than final results (partial_sum_bits) and tiles may start from a
                    # bias fill (init_fill_bits)
                    child = arch.levels[c]
                    psum_bytes = (getattr(child, "partial_sum_bits", None) or 8 * bpw) / 8
                    init_bytes = (getattr(child, "init_fill_bits", None) or 0) / 8
                    rr = 1 / rbw if rbw else 0.0
                    ww = 1 / wbw if wbw else 0.0
                    size = wl.size_words(t)
                    coef = psum_bytes * (rr + ww)
                    const = -size * psum_bytes * (rr + ww) + size * bpw * ww + size * init_bytes * rr
            else:
                coef = read_c if lvl == p else write_c
            if coef == 0:
                continue
            # the cost model charges a level the bytes moved over all its instances divided
            # by the number of instances (idle instances included)
            if lvl == p:
                x = (log_words[t.name, c] + spatial_outside(t, 0, p, False)
                     + spatial_outside(t, p, c, arch.levels[p].multicast))
            else:
                x = log_words[t.name, c] + spatial_outside(t, 0, c, False)
            x = x - log2(arch.instances(lvl))
            y = _exp_tangents(m, f"{tag}traffic_{lvl}_{t.name}_{c}", x - ideal_log, -10, 20)
            form.terms[f"{tag}{lv.name}:{t.name}:{c}"] = y
            pair = [coef * y + const / 2.0 ** ideal_log]
            if split:
                if t.is_output and lvl == p == 0:
                    reads.append(psum_bytes * rr * y + (-size * psum_bytes * rr + size * init_bytes * rr)
                                 / 2.0 ** ideal_log)
                    writes.append(psum_bytes * ww * y + (-size * psum_bytes * ww + size * bpw * ww) / 2.0 ** ideal_log)
                elif t.is_output:
                    reads.append(read_c * y)
                    writes.append(write_c * y)
                else:
                    (reads if lvl == p else writes).append(coef * y)
            rows = row_log(b, t, p, c) if lvl == p else None
            if rows is not None:
                # per-row DMA cycles: rows = words moved / 2**r, each costing a fixed number of cycles
                # beyond its bytes (taken at the full row width, as the cost model charges a full row)
                r, row_words, size = rows
                bpw_p = lv.bytes_per_word(t)
                if t.is_output and lvl == 0:
                    child = arch.levels[c]
                    psum_b = (getattr(child, "partial_sum_bits", None) or 8 * bpw_p) / 8

                    def spill(w, psum_b=psum_b):
                        return row_adder(lv, w * psum_b, False) + row_adder(lv, w * psum_b, True)

                    init_b = (getattr(child, "init_fill_bits", None) or 0) / 8

                    def final(w, bpw_p=bpw_p, spill=spill, init_b=init_b):
                        fill = row_adder(lv, w * init_b, False) if init_b else 0.0
                        return row_adder(lv, w * bpw_p, True) + fill - spill(w)
                    # reads (W - S) / R and spills (W - S) / R at the partial-sum width, finals S / R (with
                    # the tiles' initial fill S / R at init_fill_bits)
                    terms = [(spill, x), (final, math.log2(wl.size_words(t)))]
                elif t.is_output:
                    terms = [(lambda w, b=bpw_p: row_adder(lv, w * b, False) + row_adder(lv, w * b, True), x)]
                else:
                    terms = [(lambda w, b=bpw_p: row_adder(lv, w * b, False), x)]
                for n, (adder_at, x_words) in enumerate(terms):
                    adder = adder_at(row_words)
                    if adder > 0:
                        y_rows = _exp_tangents(m, f"{tag}rows_{lvl}_{t.name}_{c}_{n}", x_words - r - ideal_log,
                                               -14, 20)
                        pair.append(adder * y_rows)
                    elif adder < 0:
                        # a negative term cannot use an epigraph: charge it at the widest rows (S / R_max
                        # <= S / R, so the total stays an upper bound of the cost model's)
                        pair.append(adder * 2.0 ** (x_words - math.log2(row_words)) / 2.0 ** ideal_log)
                # a block narrower than the axis moves alone, each row costing at least what a one-word row
                # costs, bytes included (a lower bound of the cost model's): the pair costs at least reads
                # (outputs: writes, plus the partial-sum reads W - S) times that, which
                # binds only while the block does not fill the axis
                if t.is_output:
                    least = lv.row_transfer_cycles(bpw_p, True)
                    psum_b = (getattr(arch.levels[c], "partial_sum_bits", None) or 8 * bpw_p) / 8
                    least_reads = lv.row_transfer_cycles(psum_b, False) if lvl == 0 else 0.0
                else:
                    least, least_reads = lv.row_transfer_cycles(bpw_p, False), 0.0
                if least > 0:
                    y_narrow = _exp_tangents(m, f"{tag}narrowrows_{lvl}_{t.name}_{c}",
                                             x - r - ideal_log - 64.0 * b.rows_full[t.name, p, c], -14, 20)
                    more = pe.Var(bounds=(0, None))
                    m.add_component(f"{tag}narrowmore_{lvl}_{t.name}_{c}", more)
                    floor = (least + least_reads) * y_narrow
                    if least_reads:
                        # S / R <= S times the chord of 2**-r over r in [0, log2(axis size)] (2**-r is convex)
                        top = math.log2(size)
                        chord = 1 - r * (1 - 2.0 ** -top) / top if top > 0 else 1
                        floor = floor - least_reads * wl.size_words(t) / 2.0 ** ideal_log * chord
                    _add(lat, more >= floor - sum(pair))
                    pair.append(more)
            parts.extend(pair)
        for t in wl.tensors:
            if problem.holders[t.name][-1] != lvl:
                continue
            if micro_kernel and not t.is_output:
                continue  # a CPU micro-kernel's operand loads count in its issue cycles (costmodel.evaluate)
            # MAC side: every temporal iteration reads the operand words the units below need
            # (and updates the output words)
            bpw = lv.bytes_per_word(t)
            coef = (bpw / rbw if rbw else 0.0) + (bpw / wbw if (wbw and t.is_output) else 0.0)
            if coef == 0:
                continue
            x = (all_temporal + spatial_outside(t, 0, lvl, False) - log2(arch.instances(lvl))
                 + sum(log_s(k, d) for k in range(lvl, L) for d in dims if d in t.dims))
            y = _exp_tangents(m, f"{tag}mac_{lvl}_{t.name}", x - ideal_log, -10, 20)
            parts.append(coef * y)
            if split:
                reads.append(bpw / rbw * y if rbw else 0.0)
                writes.append(bpw / wbw * y if (wbw and t.is_output) else 0.0)
        if not parts:
            continue
        level_time = sum(parts)
        if split:
            level_time = pe.Var(bounds=(0, None))
            m.add_component(f"{tag}channels_{lvl}", level_time)
            _add(lat, level_time >= sum(reads))
            _add(lat, level_time >= sum(writes))
        if lv.double_buffered:
            _add(lat, peak >= level_time)
        else:
            stalls.append(level_time)
    for h in form.runs:
        # a double-buffered run level refills its held tiles while the computes of the previous
        # tile drain: the computes cannot run faster than half the iterations plus every fill
        # (costmodel.compute_runs, ComputeRuns.work)
        lv = arch.levels[h]
        if not (lv.double_buffered and lv.write_bandwidth):
            continue
        fills, most = [], 0.0
        for t in wl.tensors:
            if h > 0 and h in problem.holders[t.name] and (t.name, h) in log_words:
                y = _exp_tangents(m, f"{tag}fill_{h}_{t.name}", log_words[t.name, h] - ideal_log, -10, 20)
                coef = lv.bytes_per_word(t) / lv.write_bandwidth / arch.macs_per_cycle
                fills.append(coef * y)
                # words loaded per instance are at most the MACs: bounds the term in ideal units
                most += coef * 2.0 * arch.total_macs_per_cycle
        if fills:
            # ... except where the level has no loop of its own (the cost model charges none there)
            _add(lat, peak >= 0.5 * comp_y + sum(fills) - most * (1 - form.runs[h].busy))
        for t, gap_y in _fill_after_last_command(m, problem, form.runs[h], log_words, tag, ideal_log):
            # the next fill overlaps only the last command before a change: iterations + changes *
            # (fill - rows of that command), for the one held tile whose fill time is fixed
            _add(lat, peak >= comp_y + gap_y)
    return peak + sum(stalls)


def _fill_after_last_command(m, problem, runs, log_words, tag: str, ideal_log: float):
    """Per tensor held at a run level whose held tile is one word (Gemmini WS: the weight register): the
    term ``changes * (fill - last rows) / macs_per_cycle`` in ideal units, one tangent epigraph per
    last-command row count (only the run length's own is active).  Empty where the fill time is not fixed
    or the run lengths are not enumerated."""
    arch = problem.arch
    h, lv = runs.level, arch.levels[runs.level]
    held = [t for t in problem.workload.tensors if h in problem.holders[t.name]]
    if (not runs.values or h != len(arch.levels) - 1 or lv.fanout != 1 or len(held) != 1
            or any(d in runs.candidates for d in held[0].dims) or (held[0].name, h) not in log_words):
        return []
    t = held[0]
    fill = lv.bytes_per_word(t) / lv.write_bandwidth  # cycles to load the one-word tile
    groups: dict = {}
    for v, u in runs.values.items():
        rest = fill - last_compute_rows(v, runs.rows)
        if rest > 0:
            groups.setdefault(rest, []).append(u)
    big = 64.0
    terms = 0
    for n, (rest, members) in enumerate(sorted(groups.items())):
        # changes = loads of the one-word tile; inactive (another run length, or no loop at h): -big
        x = (log_words[t.name, h] + math.log2(rest / arch.macs_per_cycle) - ideal_log
             - big * (1 - sum(members)) - big * (1 - runs.busy))
        terms = terms + _exp_tangents(m, f"{tag}lastfill_{h}_{n}", x, -10, 20)
    return [(t, terms)] if groups else []
