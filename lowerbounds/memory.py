"""Memory sizes: parsing "256KiB" and the on-chip capacity of an architecture."""

from __future__ import annotations

import math
import re

from costmodel import Arch, ArchError

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "k": 2**10, "m": 2**20, "g": 2**30}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:\^\s*(\d+))?\s*([a-zA-Z]*)\s*$")


def parse_memory(value) -> float:
    """Bytes from 65536, 65536.0, "65536", "64KiB", "64 KiB", "1MiB", "32KB" (10^3), "2^15";
    ``math.inf`` stands for an unbounded memory.

    Raises ArchError naming the text when it cannot be read or is not positive.
    """
    if isinstance(value, bool):
        raise ArchError(f"memory must be a size in bytes, got {value!r}", source="memory size", field="memory")
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        m = _SIZE.match(str(value))
        unit = m.group(3).lower() if m else None
        if not m or unit not in _UNITS:
            raise ArchError(f"cannot read memory size {value!r} (expected e.g. 65536, 256KiB, 1MiB, 2^15)",
                            source="memory size", field="memory")
        base = float(m.group(1))
        number = (base ** int(m.group(2)) if m.group(2) else base) * _UNITS[unit]
    if number == math.inf and not isinstance(value, str):
        return number
    if not math.isfinite(number) or number <= 0:
        raise ArchError(f"memory size must be positive and finite, got {value!r}", source="memory size",
                        field="memory")
    return number


def onchip_bytes(arch: Arch) -> float | None:
    """Total bytes of storage fed from the outermost level: sum over levels 1.. of capacity x instances.

    None when some on-chip level is unbounded (no finite fast memory: only
    compulsory traffic is a lower bound).  A single fast memory of this size
    can run any schedule of the real hierarchy with no more traffic to DRAM,
    so a bound for it holds for the whole hierarchy.
    """
    total = 0.0
    for index, level in enumerate(arch.levels[1:], start=1):
        if level.capacity_bytes is None:
            return None
        total += float(level.capacity_bytes) * arch.instances(index)
    return total
