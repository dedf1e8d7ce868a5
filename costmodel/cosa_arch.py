"""CoSA / Timeloop v0.2 architecture descriptions (``arch: {arithmetic, storage: [...]}``) to an ``Arch``.

The storage list runs from the innermost level (registers) to DRAM; we
reverse it.  Per entry: capacity = ``entries`` * ``word-bits`` / 8 bytes (no
``entries``: unbounded), ``word-bits`` becomes the level's word size,
``instances`` gives the fan-out (instances of the next inner level, or of the
MAC units, per instance of this one), ``bandwidth`` (words per cycle) becomes
the read and write bandwidth in bytes per cycle.  Which tensors a level may
hold follows CoSA's Simba mapspace: Registers weights, AccumulationBuffer
outputs, WeightBuffer weights, InputBuffer inputs, GlobalBuffer inputs and
outputs, DRAM everything; a level with another name may hold everything.
``cluster-size`` and the mesh fields are kept in ``Arch.params["storage"]``;
the fan-out has no per-dimension shape (any dims may be unrolled up to it).

Energies are not in these files (Timeloop takes them from Accelergy); we use
the estimates of ``costmodel.energy`` (Horowitz, ISSCC 2014) by capacity.
"""

from __future__ import annotations

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
                 "write_bandwidth", "sizeKB", "width", "depth"}
_ARITH_KEYS = {"instances", "word-bits", "meshX", "meshY", "name"}


def _number(value: Any, source: str, field: str, integer: bool = True, positive: bool = True):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArchError(f"expected a number, got {value!r}", source=source, field=field)
    if integer and int(value) != value:
        raise ArchError(f"expected an integer, got {value!r}", source=source, field=field)
    if positive and value <= 0:
        raise ArchError(f"must be positive, got {value!r}", source=source, field=field)
    return int(value) if integer else float(value)


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
        elif i == 0:
            capacity = None
        else:
            raise ArchError("missing capacity: an on-chip level needs 'entries'", source=source,
                            field=f"{where}.entries")
        bandwidth = None
        if "bandwidth" in st:
            bandwidth = _number(st["bandwidth"], source, f"{where}.bandwidth", integer=False) * bits / 8
        holds = frozenset(ROLES) if i == 0 else COSA_HOLDS.get(lname, frozenset(ROLES))
        if capacity is None:
            energy = DRAM_PJ_PER_BYTE
        elif capacity <= 8:
            energy = REGISTER_PJ_PER_BYTE
        else:
            energy = sram_pj_per_byte(capacity)
        levels.append(Level(
            name=lname, capacity_bytes=capacity, holds=holds, word_bits=bits,
            read_bandwidth=bandwidth, write_bandwidth=bandwidth,
            read_energy_pj_per_byte=energy, write_energy_pj_per_byte=energy,
            fanout=next_instances // instances,
            # DRAM transfers overlap compute (Timeloop's latency is the slowest level, not a sum)
            double_buffered=(i == 0),
        ))
        params[lname] = {k: st[k] for k in ("instances", "cluster-size", "meshX", "meshY", "num-banks",
                                            "num-ports", "block-size") if k in st}
    return Arch(name=name, levels=tuple(levels), macs_per_cycle=1, mac_energy_pj=INT8_MAC_PJ,
                source=source, params={"storage": params, "format": "timeloop-v0.2"})
