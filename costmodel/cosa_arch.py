"""CoSA / Timeloop v0.2 architecture descriptions (``arch: {arithmetic, storage: [...]}``) to an ``Arch``.

The storage list runs from the innermost level (registers) to DRAM; we
reverse it.  Per entry: capacity = ``entries`` * ``word-bits`` / 8 bytes (no
``entries``: unbounded), ``word-bits`` becomes the level's word size,
``instances`` gives the fan-out (instances of the next inner level, or of the
MAC units, per instance of this one).  Capacity may also be given as ``sizeKB``
(KiB) or ``depth`` x ``width`` bits (Timeloop's alternatives to ``entries``).

Bandwidths keep Timeloop's meaning (words of ``word-bits`` per cycle, per
instance): ``read_bandwidth`` and ``write_bandwidth`` are separate channels
that work at once (``Level.separate_channels``: a level's transfer cycles are
the slower channel's); the deprecated ``bandwidth: B`` is B/2 words per cycle
each way (Timeloop v3 reads it so); ``shared_bandwidth`` is one port serving
reads and writes in turn.  A level without any of them is not a bottleneck.
Timeloop overlaps every level's transfers with compute (cycles = max(compute,
each level's channels)); here DRAM's do, and an on-chip level given a
bandwidth stalls compute (a known difference; CoSA's files give none).
Which tensors a level may
hold follows CoSA's Simba mapspace: Registers weights, AccumulationBuffer
outputs, WeightBuffer weights, InputBuffer inputs, GlobalBuffer inputs and
outputs, DRAM everything; a level with another name may hold everything.
``cluster-size``, ``num-ports``, ``num-banks``, ``block-size``,
``network-word-bits`` and ``technology`` only change Timeloop's energy and
area (its PAT or Accelergy tables), not its access counts or cycles; they are
kept in ``Arch.params["storage"]``.  ``meshX``/``meshY`` are kept there too,
but the fan-out has no per-dimension shape here (any dims may be unrolled up
to it; ``mappings.to_timeloop`` puts every spatial factor on X, which a
Timeloop arch without a mesh accepts).  ``multicast`` and network fields of
the v0.3+ format are not read (a v0.2 file has none: Timeloop multicasts).
Such an arch fetches sliding-window deltas and counts multicasts and output
accesses as Timeloop does (``params["delta_fetch"]``, ``params["timeloop_counts"]``, see
``costmodel.evaluate.access_counts``).

Energies are not in these files (Timeloop takes them from Accelergy); we use
the estimates of ``costmodel.energy`` (Horowitz, ISSCC 2014) by capacity.
"""

from __future__ import annotations

import math
from typing import Any

from workloads import ROLES

from .arch import Arch, ArchError, Level
from .energy import DRAM_PJ_PER_BYTE, INT8_MAC_PJ, REGISTER_PJ_PER_BYTE, sram_pj_per_byte

COSA_HOLDS = {
    "Registers": frozenset({"weight"}),
    "AccumulationBuffer": frozenset({"output"}),
    "WeightBuffer": frozenset({"weight"}),
    "InputBuffer": frozenset({"input"}),
    "GlobalBuffer": frozenset({"input", "output"}),
    "DRAM": frozenset(ROLES),
}

_STORAGE_KEYS = {"name", "entries", "instances", "word-bits", "cluster-size", "network-word-bits", "num-ports",
                 "num-banks", "block-size", "technology", "bandwidth", "meshX", "meshY", "read_bandwidth",
                 "write_bandwidth", "sizeKB", "width", "depth", "shared_bandwidth"}
_ARITH_KEYS = {"instances", "word-bits", "meshX", "meshY", "name"}


def _number(value: Any, source: str, field: str, integer: bool = True, positive: bool = True):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArchError(f"expected a number, got {value!r}", source=source, field=field)
    if not math.isfinite(value):
        raise ArchError(f"must be finite, got {value!r}", source=source, field=field)
    if integer and int(value) != value:
        raise ArchError(f"expected an integer, got {value!r}", source=source, field=field)
    if positive and value <= 0:
        raise ArchError(f"must be positive, got {value!r}", source=source, field=field)
    return int(value) if integer else float(value)


def _bandwidths(st: dict, bits: int, source: str, where: str) -> tuple[float | None, float | None, bool]:
    """(read bytes/cycle, write bytes/cycle, separate channels) of a storage entry, in Timeloop's meaning."""
    bw = {k: _number(st[k], source, f"{where}.{k}", integer=False) * bits / 8
          for k in ("bandwidth", "read_bandwidth", "write_bandwidth", "shared_bandwidth") if k in st}
    if "shared_bandwidth" in bw:
        if len(bw) > 1:
            other = sorted(set(bw) - {"shared_bandwidth"})[0]
            raise ArchError(f"shared_bandwidth with {other} (a shared port plus separate channels) is not "
                            "supported; give one of them", source=source, field=f"{where}.{other}")
        return bw["shared_bandwidth"], bw["shared_bandwidth"], False
    half = bw["bandwidth"] / 2 if "bandwidth" in bw else None  # Timeloop v3: bandwidth/2 each way
    read, write = bw.get("read_bandwidth", half), bw.get("write_bandwidth", half)
    return read, write, True


def from_cosa_v02(doc: dict, source: str = "arch", name: str = "cosa-arch") -> Arch:
    """An ``Arch`` from a parsed v0.2 document (the mapping under the top-level ``arch`` key)."""
    if not isinstance(doc, dict):
        raise ArchError("'arch' must be a mapping with 'arithmetic' and 'storage'", source=source, field="arch")
    for key in doc:
        if key not in ("arithmetic", "storage"):
            raise ArchError(f"unknown key '{key}' (expected 'arithmetic' and 'storage')", source=source,
                            field=f"arch.{key}")
    arith = doc.get("arithmetic")
    storage = doc.get("storage")
    if not isinstance(arith, dict):
        raise ArchError("missing or malformed 'arithmetic'", source=source, field="arch.arithmetic")
    if not isinstance(storage, list) or not storage:
        raise ArchError("missing or empty 'storage' list", source=source, field="arch.storage")
    for key in arith:
        if key not in _ARITH_KEYS:
            raise ArchError(f"unknown field '{key}'", source=source, field=f"arch.arithmetic.{key}")
    macs = _number(arith.get("instances"), source, "arch.arithmetic.instances")
    mac_bits = _number(arith.get("word-bits", 8), source, "arch.arithmetic.word-bits")

    entries = []
    for i, st in enumerate(storage):
        where = f"arch.storage[{i}]"
        if not isinstance(st, dict) or "name" not in st:
            raise ArchError("each storage entry must be a mapping with a 'name'", source=source, field=where)
        for key in st:
            if key not in _STORAGE_KEYS:
                raise ArchError(f"unknown field '{key}'", source=source, field=f"{where}.{key}")
        entries.append(st)
    outer_first = list(reversed(entries))
    levels, params = [], {}
    for i, st in enumerate(outer_first):
        lname = str(st["name"])
        where = f"arch.storage.{lname}"
        instances = _number(st.get("instances", 1), source, f"{where}.instances")
        bits = _number(st.get("word-bits", mac_bits), source, f"{where}.word-bits")
        next_instances = macs if i == len(outer_first) - 1 else _number(
            outer_first[i + 1].get("instances", 1), source, f"arch.storage.{outer_first[i + 1]['name']}.instances")
        if next_instances % instances:
            raise ArchError(f"{next_instances} instances below cannot be split evenly over {instances}",
                            source=source, field=f"{where}.instances")
        if "entries" in st:
            capacity = _number(st["entries"], source, f"{where}.entries") * bits // 8
        elif "sizeKB" in st:
            capacity = int(_number(st["sizeKB"], source, f"{where}.sizeKB", integer=False) * 1024)
        elif "depth" in st and "width" in st:
            capacity = _number(st["depth"], source, f"{where}.depth") * _number(
                st["width"], source, f"{where}.width") // 8
        elif i == 0:
            capacity = None
        else:
            raise ArchError("missing capacity: an on-chip level needs 'entries'", source=source,
                            field=f"{where}.entries")
        read_bw, write_bw, separate = _bandwidths(st, bits, source, where)
        holds = frozenset(ROLES) if i == 0 else COSA_HOLDS.get(lname, frozenset(ROLES))
        if capacity is None:
            energy = DRAM_PJ_PER_BYTE
        elif capacity <= 8:
            energy = REGISTER_PJ_PER_BYTE
        else:
            energy = sram_pj_per_byte(capacity)
        levels.append(Level(
            name=lname, capacity_bytes=capacity, holds=holds, word_bits=bits,
            read_bandwidth=read_bw, write_bandwidth=write_bw, separate_channels=separate,
            read_energy_pj_per_byte=energy, write_energy_pj_per_byte=energy,
            fanout=next_instances // instances,
            # DRAM transfers overlap compute (Timeloop's latency is the slowest level, not a sum); an
            # on-chip level with a bandwidth stalls compute here (double_buffered would halve its capacity)
            double_buffered=(i == 0),
        ))
        params[lname] = {k: st[k] for k in ("instances", "cluster-size", "meshX", "meshY", "num-banks",
                                            "num-ports", "block-size", "network-word-bits", "technology")
                         if k in st}
    return Arch(name=name, levels=tuple(levels), macs_per_cycle=1, mac_energy_pj=INT8_MAC_PJ,
                source=source, params={"storage": params, "format": "timeloop-v0.2", "delta_fetch": True,
                                                 "timeloop_counts": True})
