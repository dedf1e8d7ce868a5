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
