"""The analytical cost model: ``evaluate(workload, arch, mapping) -> Cost``.

Definitions (all counts in words of the level's word size, summed over all
instances of the level; ``trace`` counts the same quantities literally):

* The tile of tensor ``t`` resident in one instance of level ``l`` is the set of
  its elements touched by the loops of levels ``l`` and deeper (temporal and
  spatial), clipped to the stored tensor (halo elements in the padding are
  never moved).  ``t`` is *held* at ``l`` when the level may hold its role and
  the mapping does not bypass it there; level 0 always holds everything.
  Between two consecutive holders ``p`` (outer, the parent) and ``c`` (inner):
* **Reuse and refill.**  As the temporal loops above ``c`` advance, the tile
  needed by an instance of ``c`` changes only when a loop the tensor depends
  on advances; loops it does not depend on inside the innermost such loop
  reuse it.  A changed tile is loaded whole (as Gemmini's code generator
  does), even where a sliding window overlaps the previous one; with
  ``delta_fetch`` (Timeloop's behaviour, set by Timeloop/CoSA arch files)
  inputs and weights load only the words the previous tile did not hold.  A tile equal
  as a set to the previous one (a window shift undone by a reset, or two
  windows clipped to the same border elements) is not reloaded.
* **Inputs and weights.**  fills[c] = writes[c] = words of all loaded tiles.
  reads[p] = words the parent sends: with multicast, the children of one
  parent instance that load at the same step receive one read per distinct
  word (the union of their tiles).  Spatial fan-out at a level whose
  ``multicast`` is False sends each child its own copy.
* **Outputs.**  Accumulators start at zero.  When an output tile is replaced,
  each child reads its partial sums out (reads[c]) and they are reduced on the
  way up (spatial reduction across the children of one parent instance sharing
  the same words, at fan-out levels that multicast; elsewhere each child's
  words arrive separately), so writes[p] counts the words written back.  When
  a group of children returns to a tile it has visited before, the partial
  sums are read back from the parent once per distinct word (reads[p] =
  fills[c] = those words, also counted in writes[c]); on the first visit
  nothing is loaded.  Every resident tile is written back at the end.
* **MAC side.**  At the innermost holder of ``t``, every temporal iteration
  (cycle) reads each operand word needed by the MAC units below one instance
  once (multicast across the units).  Outputs: each distinct output word
  updated in a cycle (after reduction across the units) is one write, and a
  read unless the word starts at zero in its residency (first update of a
  word that was not loaded).
* Footprint: the largest resident tile of one instance, in words and bytes;
  at a row-addressed level (``Level.row_bytes``) the bytes are the rows the
  stored box takes (``mappings.validate.tile_rows``) times the row bytes, and
  ``Cost.footprint_rows`` gives the rows.

Exactness: these counts equal the literal trace (``costmodel.trace``) for
any mapping, with strides, dilations, groups, bypass, multicast and spatial
reduction, with one approximation: when clipping at a padded border makes
some siblings of a multicast group keep their tiles while others move, the
parent is charged the union of all siblings' tiles (the trace: only the
moving ones').  Output tiles are assumed equal-or-disjoint (true for every
one-to-one output index).

Partial sums and final results.  For an output, the traffic between a parent
and its next inner holder splits into partial sums (every read-back, and every
write-back but the last of each word per group of siblings) and final results
(``Cost.partial_sums``; the trace counts the same split).  Bytes are words
times the level's word size, except: where the inner holder sets
``partial_sum_bits``, the partial sums are charged that word size at the parent
(an int32 accumulator spilling to DRAM moves 32-bit words, the final int8
results move 8-bit ones); where it sets ``init_fill_bits``, the parent also
sends one initial value of that size per final word (a bias).  These bytes
count in the parent's transfer cycles, energy and ``dram_bytes``.  A sparse
tensor (``Tensor.density`` < 1) moves its nonzeros only: its bytes are its
words times the word size times its density (the expected nonzeros of a tile
under uniform sparsity; values only, index metadata not counted), while its
accesses in words, its footprints (capacity) and the MACs stay those of the
dense box, as an array that does not skip zeros computes them.

Latency: compute_cycles = temporal iterations / macs_per_cycle of a unit
(MACs over the MAC units actually used), where a level's ``compute_quantum``
rounds the iterations of one of its residencies (its loops and all loops
below it) up to a multiple of the quantum (``quantized_iterations``), and a
level's ``compute_rows`` adds ``compute_overhead_cycles`` per compute command
(the rules of ``costmodel.run_rules``, evaluated by ``costmodel.compute_runs``):
at such a level ``h``, a residency's loops stream in runs of loops whose
addresses stay an arithmetic progression in every streamed tensor's source
tile; one command streams at most ``compute_rows`` iterations of a run, so
compute cycles = residencies(h) x
(iterations per residency + overhead x computes per residency) /
macs_per_cycle (Gemmini WS: a compute occupies the array for its rows plus
3 cycles), and where that level double-buffers a tile filled at a finite
write bandwidth, each fill overlaps only the last compute before it
(``ComputeRuns.work``).  ``Cost.computes`` counts those commands per instance.
Each level's transfer cycles = bytes read from one instance / read_bandwidth +
bytes written / write_bandwidth (a port serves both in turn; unlimited
bandwidth costs 0).  Per-row transfers (``transfers.transfer_rows``): where a parent
sets ``read_row_*``/``write_row_*`` cycles, the words of a tensor that it
exchanges with an inner holder whose ``row_axes`` name the tensor's role move
in rows, and those words cost per row instead of per byte: one row carries
the inner tile's extent along the dims unrolled on the row axis (a *line*),
cut into rows of at most ``max_transfer_row_bytes`` of the inner level's
words (whole blocks), and a block narrower than the axis moves alone; a line
of L words in rows of R costs floor(L / R) full rows + one row of the rest,
each ``Level.row_transfer_cycles`` of its bytes at the parent (partial sums
at ``partial_sum_bits``), and lines = words moved / L (Gemmini: an mvin row
costs its 16-byte beats + 1 cycle, an mvout row at least 1.5 cycles; input
rows carry up to 64 channels, weight rows up to 64 output channels, output
rows one DIM-column block).  ``Cost.transfer_rows`` counts the rows.  Levels with
``double_buffered`` overlap their transfers with compute, the others stall it:
cycles = max(compute, overlapped transfers) + sum(non-overlapped transfers).  Under
``params["refill_needs_room"]`` a double-buffered level's transfers with a level its tiles fill over
half stall too (``refills_without_room``: ZigZag's rule).  Under ``params["fill_before_compute"]`` the
first tiles' fill waits before the loops and the output's last tiles drain after them
(``costmodel.onload``: ZigZag's onloading and offloading), added as ``Cost.fill_cycles`` and
``Cost.drain_cycles``; a tile loaded once leaves the loops' transfers for them.  Without it ours
overlaps both.

Hardware-managed caches (levels named in ``params["lru_caches"]``, the ``cpu`` preset's): a cache
keeps what the loops touched last, so its tensors refill with the tile of the outermost level whose
tiles of all tensors fit in it (``cache_tile_level``), not with its own tile.

CPU micro-kernel (an arch with ``params["micro_kernel"]``: ``targets.cpu.plan.arch_for`` with the
register file as its innermost level): compute cycles are the cycles one core takes to issue the
micro-kernel's vector FMAs and operand loads (``costmodel.microkernel``: the register block the code
generator picks, bounded by the FMA pipes, the FMA latency and the load ports, partial vectors and
scalar tiles counted as whole instructions, with each block's accumulator loads and stores) plus its
copies of the inputs into packed tiles (``costmodel.packing``), and the operand reads at a tensor's
innermost holder (those loads) are not charged again at its bandwidth.  An input packed as micro-kernel
panels is one sequential stream the prefetchers fetch ahead: its transfers at every level overlap
compute (they enter the max above), the other tensors' stall; a packed input's reads from DRAM happen in its
copies and stall too (``packing.copy_fill_cycles``), as do those of an input the micro-kernel gathers lane by
lane where it is stored (``packing.gathered_inputs``).  The kernel level's transfers overlap: a line moving
in is priced (a stall) where it is read, at the next level, and arrives beside the FMAs.  The register level's outputs move once per run
of the kernel tile (the level above it, with the register level's loops inside), at every run
(``blocked_levels``): the code loads each output block, holds it across the tile's reduction loops and
stores it back.

Energy: sum over levels and tensors of (reads * read pJ/B + writes * write pJ/B)
* bytes per word, plus MACs * energy per MAC; where ``arch.params["energy_table"]``
gives per-access energies (an ERT, ``costmodel.energy.table_energy``): reads, fills
and updates priced per word access, plus MACs * its compute energy.  Utilization = ideal cycles
(MACs / peak MACs per cycle) / cycles.
"""

from __future__ import annotations

import math

from mappings import MappingError
from mappings.validate import tile_rows

from .compute_runs import compute_runs, compute_work
from .cost import Access, Cost, PartialSums
from .energy import table_energy
from .microkernel import block, issue_cycles, kernel_level, spec_of
from .onload import fill_and_drain, once_bytes, once_loaded
from .packing import copy_fill_cycles, gathered_inputs, pack_cycles, streamed_inputs
from .tiling import NestLoop, TileCounts, nest_loops, tile_counts
from .transfers import calibration_bytes, holders, transfer_rows


def _validate(workload, arch, mapping) -> None:
    """The shared validator when present, plus the checks the counting relies on."""
    try:
        from mappings.validate import validate
    except ImportError:  # the validator lands separately; the checks below still hold
        validate = None
    if validate is not None:
        validate(mapping, workload, arch)
    src = f"mapping of {workload.name} on {arch.name}"
    if len(mapping.levels) != len(arch.levels):
        raise MappingError(f"has {len(mapping.levels)} levels, the architecture has {len(arch.levels)}",
                           source=src, field="levels")
    for i, lm in enumerate(mapping.levels):
        for d in list(lm.temporal) + list(lm.spatial):
            if d not in workload.dims:
                raise MappingError(f"unknown dimension '{d}'; known: {list(workload.dims)}", source=src,
                                   field=f"levels[{i}]")
    for d, bound in workload.dims.items():
        if mapping.factor(d) != bound:
            raise MappingError(f"factors of '{d}' multiply to {mapping.factor(d)}, its bound is {bound}",
                               source=src, field=f"factors.{d}")


class LoopGroups:
    """The loop groups of the nest that each counting step needs."""

    def __init__(self, arch, loops: tuple[NestLoop, ...]):
        self.arch, self.loops = arch, loops
        self.temporal = [lp for lp in loops if not lp.spatial]

    def temporal_above(self, level: int) -> list[NestLoop]:
        return [lp for lp in self.temporal if lp.level < level]

    def spatial_between(self, lo: int, hi: int) -> list[NestLoop]:
        return [lp for lp in self.loops if lp.spatial and lo <= lp.level < hi]

    def at_or_below(self, level: int) -> list[NestLoop]:
        return [lp for lp in self.loops if lp.level >= level]

    def fan(self, lo: int, hi: int) -> tuple[list[NestLoop], list[NestLoop]]:
        """Spatial loops of levels lo..hi-1 split into (multicast, separate copies)."""
        loops = self.spatial_between(lo, hi)
        return ([lp for lp in loops if self.arch.levels[lp.level].multicast],
                [lp for lp in loops if not self.arch.levels[lp.level].multicast])


def cache_tile_level(workload, arch, groups: "LoopGroups", c: int) -> int:
    """The level whose tile a hardware-managed cache ``c`` keeps between reuses (a level named in
    ``Arch.params["lru_caches"]``): the outermost level ``k`` <= ``c`` whose tiles of all tensors
    together fit in one instance of ``c`` (bytes at ``c``'s word sizes), with no fan-out between ``k``
    and ``c`` (a tile spread over several instances is not one cache's); ``c`` itself when none fits.

    A cache holds what the loops touched last, not the tile a mapping assigns it: when the loops of
    level ``k`` < ``c`` touch no more than the cache holds, a tile of ``c`` that returns within one
    tile of ``k`` is still there (a hit), so ``c`` refills only when the tile of ``k`` changes."""
    lv = arch.levels[c]
    if lv.capacity_bytes is None:
        return c
    best = c
    for k in range(c - 1, -1, -1):
        if any(lp.spatial for lp in groups.loops if k <= lp.level < c):
            break
        inside = groups.at_or_below(k)
        words = sum(tile_counts(t, [], [], inside).max_words * lv.bytes_per_word(t) for t in workload.tensors)
        if words > lv.capacity_bytes:
            break
        best = k
    return best


def blocked_levels(arch, groups: "LoopGroups") -> dict[int, int]:
    """{level c: level k}: the register level of a CPU micro-kernel (an arch with ``params
    ["micro_kernel"]`` whose innermost level holds outputs only).  The generated micro-kernel runs the
    kernel tile (the tile of the level above, ``k`` = c - 1, with ``c``'s loops inside it) block by
    block, each output block loaded into registers, held across all the tile's reduction loops and
    stored back (``targets.cpu.plan``): so its outputs move in and out once per run of the kernel tile,
    whatever the mapping's split of those loops between the two levels, and again at every run (no
    block stays in registers from one run to the next, even when the tile repeats).  Empty otherwise."""
    c = len(arch.levels) - 1
    if not arch.params.get("micro_kernel") or kernel_level(arch) != c - 1:
        return {}
    if any(lp.spatial for lp in groups.loops if lp.level == c - 1):
        return {}
    return {c: c - 1}


def access_counts(workload, arch, mapping, psums: dict | None = None, delta: bool = False,
                  timeloop_counts: bool = False, mac_reads: dict | None = None):
    """(accesses[level index][tensor name] -> Access, footprint_words[level index][tensor name]).

    ``psums``, when given, is filled with ``{parent level index: {output name:
    PartialSums}}``: the output traffic between each parent and its next inner
    holder split into partial sums and final results.  ``delta``: inputs and
    weights fetch only the words a changed tile did not share with the previous
    one (Timeloop's sliding-window behaviour) instead of the whole tile.
    ``timeloop_counts``: Timeloop's accounting (checked against timeloop-model
    v3.0.3): a parent multicasts a word to the children of a fan-out only
    across spatial loops of dims the tensor does not depend on (identical
    tiles); children whose windows merely overlap (a sliding window unrolled
    over P or Q) are each sent their own words, and a tile whose inner window loop
    wraps around is loaded whole (deltas only between steps that reset no loop
    the tensor depends on); operand words for the MAC units
    merge where identical among the units of the lowest fan-out level only.
    Outputs: a child writing its
    tile back is not charged a read, and every child instance reloads its own
    partial sums on a revisit (fills = its revisited words, also where spatial
    reduction would let one start from the others' sum); the parent's reads
    stay one per distinct word of the group.
    """
    nlev = len(arch.levels)
    groups = LoopGroups(arch, nest_loops(mapping, list(workload.dims)))
    acc = {i: {t.name: [0, 0, 0] for t in workload.tensors} for i in range(nlev)}  # reads, writes, fills
    foot = {i: {t.name: 0 for t in workload.tensors} for i in range(nlev)}
    blocked = blocked_levels(arch, groups)
    lru = set(arch.params.get("lru_caches", ()))
    kept = {c: cache_tile_level(workload, arch, groups, c) for c in range(1, nlev) if arch.levels[c].name in lru}
    kept.update(blocked)
    for t in workload.tensors:
        chain = holders(workload, arch, mapping, t)
        whole = tile_counts(t, [], [], groups.loops)
        foot[0][t.name] = whole.max_words
        resident = {0: whole.changes}  # words of all residencies per level (F_inst)
        for p, c in zip(chain, chain[1:]):
            k = kept.get(c, c)  # a register level's outputs move with the kernel tile (blocked_levels)
            steps = groups.temporal_above(k)
            slide = delta and not t.is_output
            wrap = not timeloop_counts  # Timeloop reloads the whole tile when an inner window loop wraps
            inst = tile_counts(t, steps, groups.spatial_between(0, c), groups.at_or_below(k), delta=slide,
                               delta_across_resets=wrap, reuse=c not in blocked)
            mc, separate = groups.fan(p, c)
            if timeloop_counts and not t.is_output:  # multicast identical tiles only
                separate = separate + [lp for lp in mc if lp.dim in t.dims]
                mc = [lp for lp in mc if lp.dim not in t.dims]
            grp = tile_counts(t, steps, groups.spatial_between(0, p) + separate, groups.at_or_below(k) + mc,
                              member_loops=mc, delta=slide, delta_across_resets=wrap, reuse=c not in blocked)
            if k != c:  # the footprint stays the level's own tile
                inst = TileCounts(inst.changes, inst.distinct, tile_counts(
                    t, groups.temporal_above(c), groups.spatial_between(0, c), groups.at_or_below(c)).max_words)
            foot[c][t.name] = inst.max_words
            resident[c] = inst.changes
            if t.is_output:
                loads = grp.changes - grp.distinct
                child_loads = inst.changes - inst.distinct if timeloop_counts else loads
                acc[c][t.name][2] += child_loads
                acc[c][t.name][1] += child_loads
                acc[p][t.name][0] += loads
                if not timeloop_counts:
                    acc[c][t.name][0] += inst.changes  # partial sums read out for the write-back
                acc[p][t.name][1] += grp.changes  # after reduction across the children
                if psums is not None:  # every write-back but the last of each group's tile is partial
                    psums.setdefault(p, {})[t.name] = PartialSums(loads, grp.changes - grp.distinct, grp.distinct)
            else:
                acc[c][t.name][2] += inst.changes
                acc[c][t.name][1] += inst.changes
                acc[p][t.name][0] += grp.changes
        inner = chain[-1]
        mc, separate = groups.fan(inner, nlev + 1)
        if timeloop_counts and not t.is_output:  # identical words merge within one fan-out level only
            bottom = max((lp.level for lp in mc), default=None)
            keep = [lp for lp in mc if lp.dim not in t.dims or lp.level == bottom]
            separate = separate + [lp for lp in mc if lp not in keep]
            mc = keep
        mac = tile_counts(t, groups.temporal, groups.spatial_between(0, inner) + separate, mc, reuse=False).changes
        if t.is_output:
            zero_start = resident[inner] - acc[inner][t.name][2]
            acc[inner][t.name][1] += mac
            acc[inner][t.name][0] += mac - zero_start
        else:
            acc[inner][t.name][0] += mac
            if mac_reads is not None:
                mac_reads.setdefault(inner, {})[t.name] = mac
    accesses = {i: {name: Access(*v) for name, v in per.items()} for i, per in acc.items()}
    return accesses, foot


def quantized_iterations(arch, mapping) -> int:
    """Temporal iterations of the nest, each level's per-residency count rounded up to its compute_quantum.

    Innermost first: the iterations of the loops at and below level ``i`` in one
    residency are (level i's temporal factors) x (level i+1's rounded count),
    rounded up to a multiple of ``arch.levels[i].compute_quantum``.  With every
    quantum 1 this is the product of all temporal factors.  Ignores ``compute_rows``
    (``compute_runs.compute_work`` counts both).
    """
    work = 1
    for i in range(len(arch.levels) - 1, -1, -1):
        work *= math.prod(mapping.levels[i].temporal.values())
        quantum = arch.levels[i].compute_quantum
        if quantum > 1:
            work = -(-work // quantum) * quantum
    return work


def refills_without_room(workload, arch, mapping, accesses, foot) -> dict[str, float]:
    """{double-buffered level: cycles of its transfers that stall compute}, under
    ``arch.params["refill_needs_room"]`` only (else empty): a tensor's transfers between a double-buffered
    level and the next level that stores it overlap compute only while that level's tiles fill at most
    half of it (``Arch.refilled_by_double_buffer``); past half, the next tile cannot arrive beside the one
    in use, and those transfers are added to the cycles (ZigZag's rule).  Under ``params["fill_before_compute"]``
    a tile loaded once in the run is no refill: it is the first fill, priced by ``costmodel.onload``."""
    if not arch.params.get("refill_needs_room"):
        return {}
    tensors = {t.name: t for t in workload.tensors}
    once = once_loaded(workload, arch, mapping) if arch.params.get("fill_before_compute") else set()
    out = {}
    for i, lv in enumerate(arch.levels):
        if not lv.double_buffered:
            continue
        reads = writes = 0.0
        for n, a in accesses[i].items():
            t = tensors[n]
            k = next((k for k in range(i + 1, len(arch.levels)) if mapping.stores(k, t, arch)), None)
            inner = arch.levels[k] if k is not None else None
            if inner is None or inner.capacity_bytes is None or inner.row_bytes is not None or (n, k) in once:
                continue
            used = sum(w * inner.bytes_per_word(tensors[m]) for m, w in foot[k].items())
            if used > inner.capacity_bytes / 2:
                reads += a.reads * lv.bytes_per_word(t) * t.density
                writes += a.writes * lv.bytes_per_word(t) * t.density
        if reads or writes:
            per_instance = arch.instances(i)
            out[lv.name] = lv.transfer_cycles(reads / per_instance, writes / per_instance)
    return out


def evaluate(workload, arch, mapping, *, delta_fetch: bool | None = None) -> Cost:
    """Accesses, latency, energy and utilization of ``mapping`` (see the module docstring).

    ``delta_fetch``: sliding-window delta fetches for inputs and weights (``access_counts``);
    None = as the arch says (``arch.params["delta_fetch"]``: Timeloop/CoSA files set it).
    """
    _validate(workload, arch, mapping)
    psums: dict = {}
    if delta_fetch is None:
        delta_fetch = bool(arch.params.get("delta_fetch", False))
    operand_reads: dict = {}
    accesses, foot = access_counts(workload, arch, mapping, psums, delta=delta_fetch,
                                   timeloop_counts=bool(arch.params.get("timeloop_counts", False)),
                                   mac_reads=operand_reads)
    tensors = {t.name: t for t in workload.tensors}
    runs = compute_runs(workload, arch, mapping)
    spec = spec_of(arch)
    streamed = frozenset()
    if spec is not None:  # a CPU micro-kernel: the cycles its FMAs and loads take to issue on one core,
        kernel = kernel_level(arch)  # and its copies into packed tiles (costmodel.packing)
        blk = block(workload, mapping.tile_extents(kernel, workload.dims), spec.lanes, spec.registers)
        gathered = gathered_inputs(workload, mapping, arch, kernel, blk)
        compute_cycles = math.ceil(issue_cycles(workload, mapping, kernel, spec, gathered)
                                   + pack_cycles(workload, mapping, arch, kernel, spec.pack_cycles_per_word))
        streamed = streamed_inputs(workload, mapping, arch, kernel, blk)
    else:
        compute_cycles = math.ceil(compute_work(arch, mapping, runs) / arch.macs_per_cycle)
    extra_read, extra_write = calibration_bytes(workload, arch, mapping, psums)
    row_extra, rows_moved = transfer_rows(workload, arch, mapping, accesses, psums)

    once = once_bytes(workload, arch, mapping, foot)  # empty unless params["fill_before_compute"]
    transfer, overlapped, energy = {}, {}, {}
    level_bytes, streams = {}, {}
    for i, lv in enumerate(arch.levels):
        moved = lambda n: lv.bytes_per_word(tensors[n]) * tensors[n].density  # nonzeros of a sparse tensor
        read_bytes = sum(a.reads * moved(n) for n, a in accesses[i].items()) + extra_read[i]
        write_bytes = sum(a.writes * moved(n) for n, a in accesses[i].items()) + extra_write[i]
        level_bytes[i] = read_bytes + write_bytes
        per_instance = arch.instances(i)
        # a micro-kernel's operand loads are counted in its issue cycles (the load ports), not here
        issued = {n: w * moved(n) for n, w in operand_reads.get(i, {}).items()} if spec is not None else {}
        # panel streams' fills overlap the FMAs (costmodel.packing): priced apart, hidden below
        s_read = sum(a.reads * moved(n) - issued.get(n, 0.0) for n, a in accesses[i].items() if n in streamed)
        s_write = sum(a.writes * moved(n) for n, a in accesses[i].items() if n in streamed)
        streams[lv.name] = lv.transfer_cycles(s_read / per_instance, s_write / per_instance) if streamed else 0.0
        net = ((read_bytes - sum(issued.values()) - s_read) / per_instance, (write_bytes - s_write) / per_instance)
        if i in once:  # tiles loaded once: the first fill, priced apart (costmodel.onload)
            net = (max(0.0, net[0] - once[i][0]), max(0.0, net[1] - once[i][1]))
        cycles = lv.transfer_cycles(*net)
        cycles += row_extra[i] / per_instance + streams[lv.name]
        transfer[lv.name] = cycles
        # the micro-kernel's cache: a line moving in is priced where it is read; its arrival overlaps the FMAs
        overlapped[lv.name] = bool(lv.double_buffered) or (spec is not None and i == kernel)
        energy[lv.name] = read_bytes * lv.read_energy_pj_per_byte + write_bytes * lv.write_energy_pj_per_byte
    energy["MAC"] = workload.macs * arch.mac_energy_pj
    if arch.params.get("energy_table"):  # per-access energies (an ERT) replace the per-byte ones
        energy = table_energy(arch.params["energy_table"], {arch.levels[i].name: per for i, per in accesses.items()},
                              workload.macs, arch.level_names, source=f"arch {arch.name}")

    stalled = refills_without_room(workload, arch, mapping, accesses, foot)
    if spec is not None:  # a packed input's source is read inside its copies (costmodel.packing)
        for n, c in copy_fill_cycles(workload, arch, mapping, accesses, kernel, gathered=gathered).items():
            stalled[n] = stalled.get(n, 0.0) + c
    hidden = max([compute_cycles] + [c - stalled.get(n, 0.0) for n, c in transfer.items() if overlapped[n]]
                 + [streams[n] for n in transfer if not overlapped[n]])
    cycles = hidden + sum(c - streams[n] for n, c in transfer.items() if not overlapped[n]) + sum(stalled.values())
    edges = fill_and_drain(workload, arch, mapping, foot, cycles, transfer)  # zeros unless fill_before_compute
    cycles += edges.fill_cycles + edges.drain_cycles
    terms = {"compute": float(compute_cycles)}
    terms.update({f"{n} bandwidth": c for n, c in transfer.items()})
    bound_by = max(terms, key=lambda k: (terms[k], k == "compute"))

    ideal = workload.macs / arch.total_macs_per_cycle
    names = arch.level_names
    rows = {i: tile_rows(mapping, workload, arch, i) for i in range(len(arch.levels))}
    footprint_bytes = {}
    for i, per in foot.items():
        lv = arch.levels[i]
        if rows[i] is None:
            footprint_bytes[names[i]] = {n: w * lv.bytes_per_word(tensors[n]) for n, w in per.items()}
        else:
            footprint_bytes[names[i]] = {n: rows[i].get(n, 0) * lv.row_bytes for n in per}
    dram_bytes = level_bytes[0]
    return Cost(
        cycles=float(cycles),
        energy_pj=float(sum(energy.values())),
        utilization=float(ideal / cycles) if cycles else 0.0,
        accesses={names[i]: per for i, per in accesses.items()},
        footprint_words={names[i]: per for i, per in foot.items()},
        footprint_bytes=footprint_bytes,
        compute_cycles=int(compute_cycles),
        transfer_cycles=transfer,
        overlapped=overlapped,
        bound_by=bound_by,
        energy_breakdown_pj=energy,
        dram_bytes=float(dram_bytes),
        macs=workload.macs,
        ideal_cycles=float(ideal),
        partial_sums={names[i]: per for i, per in psums.items()},
        computes=sum(r.computes for r in runs.values()),
        footprint_rows={names[i]: {n: r.get(n, 0) for n in foot[i]} for i, r in rows.items() if r is not None},
        transfer_rows={names[i]: per for i, per in rows_moved.items()},
        fill_cycles=float(edges.fill_cycles),
        drain_cycles=float(edges.drain_cycles),
    )
