"""Where our cost model and ZigZag's price one mapping differently: which access counts differ, by how much,
and the mechanism behind each difference.

``count_differences`` lines up our ``Cost.accesses`` (reads, writes, fills in words) with ZigZag's four data
directions per operand and memory (``ZigZagCost.accesses``, converted to our words): fills are ZigZag's
writes from above, reads its reads to below plus to above, writes its writes from above plus from below.
Each differing count carries its energy at our per-word price and a mechanism, named by rules on where it
differs (``MECHANISMS``).  ``cycle_mechanisms`` says why the latencies differ: ZigZag adds the first fill and
the last drain and counts stalls where it does not double-buffer; ours overlaps double-buffered levels and
DRAM and takes the slowest of compute and each level's transfers (with ``params["fill_before_compute"]`` ours
adds the first fill and last drain too, ``costmodel.onload``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .zigzag_io import OPERAND

MECHANISMS = {
    "stationary": "stationary reads: ZigZag counts a repeated read of the same word at a MAC's input once",
    "reduction": "spatial reduction: ZigZag moves every unit's partial sums, we add them up in the array",
    "multicast": "spatial multicast: one read feeds several units in one model, one per unit in the other",
    "halo": "halo: overlapping input windows of neighbouring tiles are counted differently",
    "bypass": "bypass: ZigZag streams through a memory that holds no loop of its own",
    "psum": "partial-sum read-back: the first read of an output tile that starts at zero",
    "rounding": "bandwidth: ZigZag counts whole port-width accesses",
    "other": "not classified",
}


@dataclass(frozen=True)
class CountDifference:
    """One access count that differs: ``level``, ``tensor``, ``kind`` (reads, writes or fills), ours and
    ZigZag's in words, ``energy_pj`` (ZigZag's minus ours at our per-word energy) and the ``mechanism`` key."""

    level: str
    tensor: str
    kind: str
    ours: float
    zigzag: float
    energy_pj: float
    mechanism: str

    def to_dict(self) -> dict:
        return {"level": self.level, "tensor": self.tensor, "kind": self.kind, "ours": self.ours,
                "zigzag": self.zigzag, "energy_pj": self.energy_pj, "mechanism": self.mechanism}


def _theirs(row: dict) -> dict[str, float]:
    return {"reads": row.get("rd_out_to_low", 0.0) + row.get("rd_out_to_high", 0.0),
            "writes": row.get("wr_in_by_high", 0.0) + row.get("wr_in_by_low", 0.0),
            "fills": row.get("wr_in_by_high", 0.0)}


def _mechanism(workload, mapping, index: int, inner: int, outer: int, tensor, kind: str, ours: float, zz: float,
               level_total: float, port_words: float) -> str:
    """The rule that names one differing count (first match).  ``index``: the level; ``inner`` / ``outer``: the
    next levels inside and outside it that hold the tensor (the levels between fan its tiles out and in)."""
    if level_total == 0 and ours > 0:
        return "bypass"
    if abs(zz - ours) <= port_words:
        return "rounding"
    between = {d for lm in mapping.levels[index:inner] for d, f in lm.spatial.items() if f > 1}
    if tensor.role == "output":
        around = between | {d for lm in mapping.levels[outer:index] for d, f in lm.spatial.items() if f > 1}
        return "reduction" if zz > ours and around - tensor.dims else "psum"
    if inner == len(mapping.levels) and kind == "reads" and zz < ours:
        return "stationary"
    window = workload.window_dims() & tensor.dims
    if kind == "reads" and between & (window | (set(workload.dims) - tensor.dims)):
        return "multicast"
    return "halo" if window else "other"


def count_differences(workload, arch, mapping, cost, zz, hw, threshold: float = 0.01) -> list[CountDifference]:
    """The access counts that differ by more than ``threshold`` (relative), largest energy first.

    ``cost``: our ``Cost`` of ``mapping``; ``zz``: ``ZigZagCost`` of the same mapping; ``hw``: its
    ``ZigZagArch``."""
    by_role = {t.role: t for t in workload.tensors}
    out = []
    for role, op in OPERAND.items():
        tensor = by_role[role]
        names = zz.memories[op]
        zz_levels = [arch.level_index(n) for n in names]
        for k, (name, row) in enumerate(zip(names, zz.accesses[op])):
            index = arch.level_index(name)
            lv = arch.levels[index]
            ours_access = cost.accesses[name][tensor.name]
            theirs = _theirs(row)
            total = sum(theirs.values())
            word_pj = lv.read_energy_pj_per_byte * lv.bytes_per_word(tensor)
            port = hw.entry["memories"][name]["ports"][0]["bandwidth_max"]
            port_words = port / tensor.bits  # ZigZag words per port-width access
            for kind in ("reads", "writes", "fills"):
                ours = float(getattr(ours_access, kind))
                value = theirs[kind]
                if abs(value - ours) <= threshold * max(ours, value, 1.0):
                    continue
                if kind == "fills":  # fills are part of the writes: priced there
                    energy = 0.0
                elif kind == "writes":
                    energy = (value - ours) * lv.write_energy_pj_per_byte * lv.bytes_per_word(tensor)
                else:
                    energy = (value - ours) * word_pj
                inner = zz_levels[k - 1] if k > 0 else len(arch.levels)
                outer = zz_levels[k + 1] if k + 1 < len(zz_levels) else index
                out.append(CountDifference(name, tensor.name, kind, ours, value, energy,
                                           _mechanism(workload, mapping, index, inner, outer, tensor, kind, ours,
                                                      value, total, port_words)))
    return sorted(out, key=lambda d: -abs(d.energy_pj))


def cycle_mechanisms(cost, zz, arch) -> list[str]:
    """Why the latencies differ, in words (ZigZag's terms over its temporal cycles, and ours)."""
    notes = []
    if zz.onload_cycles or zz.offload_cycles:
        ours = (f"ours, with fill_before_compute, {cost.fill_cycles:,.0f} and {cost.drain_cycles:,.0f}"
                if arch.params.get("fill_before_compute") else "double buffering: ours overlaps them")
        notes.append(f"ZigZag adds {zz.onload_cycles:,.0f} cycles to fill and {zz.offload_cycles:,.0f} to drain "
                     f"before and after the loops ({ours})")
    if zz.stall_cycles > 0 and zz.stalls:
        notes.append(f"ZigZag stalls {zz.stall_cycles:,.0f} cycles on transfers: "
                     + "; ".join(_stall_words(x, bool(arch.params.get("refill_needs_room"))) for x in zz.stalls[:2]))
    elif zz.stall_cycles > 0:
        single = sorted({name for op, flags in zz.double_buffered.items()
                         for name, flag in zip(zz.memories[op], flags) if not flag})
        notes.append(f"ZigZag stalls {zz.stall_cycles:,.0f} cycles on transfers"
                     + (f" (no double buffering at {', '.join(single)})" if single else " (bandwidth)"))
    if cost.bound_by != "compute":
        notes.append(f"ours is bound by {cost.bound_by}")
    return notes


_WORDS = {"O": "outputs", "W": "weights", "I": "inputs"}


def _stall_words(x, room: bool = False) -> str:
    """One stalled transfer in words, with its mechanism: a window shorter than the transfer because ZigZag
    does not double-buffer the end that sets it (double buffering), or a whole period too short (bandwidth).
    ``room``: our arch has ``params["refill_needs_room"]`` (ours then stalls such a refill for its whole
    transfer, ZigZag for the part outside its window)."""
    src, dst = (x.memory, x.other) if x.direction.startswith("rd") else (x.other, x.memory)
    what = f"{_WORDS.get(x.op, x.op)} {src} -> {dst} take {x.transfer:,.0f} cycles per period"
    if x.double_buffered:
        return (f"{what}, longer than the {x.allowed:,.0f}-cycle period ({x.cycles:,.0f} cycles; bandwidth: ours "
                "averages transfers over the whole run)")
    end = x.other if x.direction in ("rd_out_to_low", "wr_in_by_low") else x.memory
    return (f"{what} inside a {x.allowed:,.0f}-cycle window ({x.cycles:,.0f} cycles; double buffering: ZigZag does "
            f"not double-buffer {end}, whose tiles fill over half of it, so it is refilled between uses; "
            + ("ours, with refill_needs_room, stalls for the whole transfer)" if room else
               "ours, as Timeloop's, overlaps every transfer of a double-buffered level with compute)"))


def explain(workload, arch, mapping, cost, zz, hw, top: int = 3) -> str:
    """One line: the cycle mechanisms and the ``top`` energy-weighted count differences with their mechanism."""
    parts = []
    for d in count_differences(workload, arch, mapping, cost, zz, hw)[:top]:
        parts.append(f"{d.level} {d.tensor} {d.kind} {d.ours:,.0f} vs {d.zigzag:,.0f} ({d.mechanism})")
    return "; ".join(cycle_mechanisms(cost, zz, arch) + parts)
