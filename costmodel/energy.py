"""Per-access energy estimates shared by the presets and the CoSA/Timeloop file reader.

Source: M. Horowitz, "Computing's energy problem (and what we can do about
it)", ISSCC 2014, 45 nm figures: 64-bit SRAM reads of 10 pJ (8 KB), 20 pJ
(32 KB) and 100 pJ (1 MB); DRAM 1.3-2.6 nJ per 64 bits; 8-bit integer
multiply 0.2 pJ, 32-bit add 0.1 pJ; 32-bit float multiply 3.7 pJ, add 0.9 pJ.
SRAM energy between those points is interpolated log-linearly in capacity
(and extrapolated with the nearest segment's slope outside them).
"""

from __future__ import annotations

import math

_SRAM_POINTS = ((8 * 1024, 10.0), (32 * 1024, 20.0), (1024 * 1024, 100.0))  # (bytes, pJ per 64-bit access)

DRAM_PJ_PER_BYTE = 1300.0 / 8
"""The low end of Horowitz's 1.3-2.6 nJ per 64-bit DRAM access."""

INT8_MAC_PJ = 0.2 + 0.1
"""8-bit multiply plus 32-bit accumulate."""

FP32_MAC_PJ = 3.7 + 0.9
"""32-bit float multiply plus add (an FMA counted as both)."""

REGISTER_PJ_PER_BYTE = 0.03
"""A flip-flop register access: of the order of an 8-bit add (0.03 pJ), far below any SRAM."""


def sram_pj_per_byte(capacity_bytes: float) -> float:
    """Energy per byte of one SRAM access for an array of ``capacity_bytes``."""
    cap = max(float(capacity_bytes), 1.0)
    pts = _SRAM_POINTS
    if cap <= pts[1][0]:
        (c0, e0), (c1, e1) = pts[0], pts[1]
    else:
        (c0, e0), (c1, e1) = pts[1], pts[2]
    slope = (math.log(e1) - math.log(e0)) / (math.log(c1) - math.log(c0))
    pj_per_access = math.exp(math.log(e0) + slope * (math.log(cap) - math.log(c0)))
    return max(pj_per_access / 8, REGISTER_PJ_PER_BYTE)


# --- per-access energy tables (Timeloop/Accelergy's ERT) ---------------------------------------

ACTIONS = ("read", "write", "update")
"""Storage actions of a table: a read, a fill (write of a word moved in), an output update."""


def _table_error(reason: str, source: str, field: str):
    from .arch import ArchError

    return ArchError(reason, source=source, field=field)


def _pj(value, source: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise _table_error(f"expected a non-negative number of pJ, got {value!r}", source, field)
    return float(value)


def parse_energy_table(doc, source: str = "energy table") -> dict[str, dict[str, float]]:
    """``{level or "MAC": {action: pJ per access}}`` from one of two forms.

    Ours: ``energy_table: {DRAM: {read: 512, write: 512}, GlobalBuffer: {read: 10, write: 11,
    update: 11}, MAC: {compute: 0.56}}`` (pJ per access of one word of the level's word
    size; ``update`` defaults to ``write``).  Accelergy's ERT as Timeloop reads it:
    ``ERT: {tables: [{name: system.chip.GlobalBuffer, actions: [{name: read, energy: 10}, ...]}]}``;
    the last dotted part of a table name (without an ``[0..N]`` suffix) is the level, a
    ``mac_*``/``compute`` action makes it the MAC entry, and per-argument rows are averaged.
    """
    if isinstance(doc, dict) and "energy_table" in doc:
        doc = doc["energy_table"]
    elif isinstance(doc, dict) and "ERT" in doc:
        return _from_ert(doc["ERT"], source)
    if not isinstance(doc, dict) or not doc:
        raise _table_error("expected 'energy_table: {level: {read, write, update}}' or Accelergy's 'ERT:'", source,
                           "energy_table")
    table = {}
    for level, actions in doc.items():
        where = f"energy_table.{level}"
        if not isinstance(actions, dict):
            raise _table_error("expected {action: pJ}", source, where)
        allowed = ("compute",) if level == "MAC" else ACTIONS
        for key in actions:
            if key not in allowed:
                raise _table_error(f"unknown action '{key}'; known: {list(allowed)}", source, f"{where}.{key}")
        row = {k: _pj(v, source, f"{where}.{k}") for k, v in actions.items()}
        if level != "MAC":
            if "read" not in row or "write" not in row:
                raise _table_error("needs 'read' and 'write'", source, where)
            row.setdefault("update", row["write"])
        table[str(level)] = row
    return table


def _from_ert(ert, source: str) -> dict[str, dict[str, float]]:
    import re

    tables = ert.get("tables") if isinstance(ert, dict) else None
    if not isinstance(tables, list):
        raise _table_error("expected 'ERT: {tables: [...]}'", source, "ERT.tables")
    table: dict[str, dict[str, float]] = {}
    for k, entry in enumerate(tables):
        where = f"ERT.tables[{k}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("actions"), list) or "name" not in entry:
            raise _table_error("each table needs 'name' and a list of 'actions'", source, where)
        level = re.sub(r"\[[^\]]*\]$", "", str(entry["name"]).split(".")[-1])
        sums: dict[str, list[float]] = {}
        for j, action in enumerate(entry["actions"]):
            if not isinstance(action, dict) or "name" not in action or "energy" not in action:
                raise _table_error("each action needs 'name' and 'energy'", source, f"{where}.actions[{j}]")
            name = str(action["name"])
            key = "compute" if name in ("compute", "mac_random", "mac_reused") or name.startswith("mac") else name
            sums.setdefault(key, []).append(_pj(action["energy"], source, f"{where}.actions[{j}].energy"))
        row = {key: sum(v) / len(v) for key, v in sums.items()}
        if "compute" in row:
            table["MAC"] = {"compute": row["compute"]}
        elif "read" in row:
            row.setdefault("write", row["read"])
            row.setdefault("update", row["write"])
            table[level] = {a: row[a] for a in ACTIONS}
    return table


def load_energy_table(path) -> dict[str, dict[str, float]]:
    """``parse_energy_table`` of a YAML file; ArchError naming the file on bad input."""
    from pathlib import Path

    from workloads.yamlio import read_text_file, read_yaml

    from .arch import ArchError

    return parse_energy_table(read_yaml(read_text_file(Path(path), str(path), ArchError), str(path), ArchError),
                              source=str(path))


def table_energy(table: dict, accesses: dict, macs: int, level_names, source: str = "energy table") -> dict:
    """Energy in pJ per level name (and "MAC") of access counts priced per access by ``table``.

    ``accesses[level name][tensor] -> Access``: reads cost ``read``, fills ``write``, the other
    writes (output updates) ``update``.  Every level must have a row; MAC needs ``compute``.
    """
    missing = [n for n in level_names if n not in table]
    if missing:
        raise _table_error(f"no per-access energies for level(s) {missing}; the table has {sorted(table)}", source,
                           f"energy_table.{missing[0]}")
    if "MAC" not in table:
        raise _table_error("no MAC compute energy", source, "energy_table.MAC")
    out = {}
    for name in level_names:
        row = table[name]
        out[name] = sum(a.reads * row["read"] + a.fills * row["write"] + (a.writes - a.fills) * row["update"]
                        for a in accesses[name].values())
    out["MAC"] = macs * table["MAC"]["compute"]
    return out
