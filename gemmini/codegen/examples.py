"""The example data a self-checking program runs on, and the output scale that suits it.

``codegen.data.example_inputs`` draws the data; ``self_check_scale`` (what ``generate(..., scale="auto")``
uses) picks the float32 output scale from the problem's reduction length so that few example outputs
saturate.  Pure functions of a ``codegen.tiling.Problem``; the generator (``codegen.program``) and the
data module both import this one.
"""

from __future__ import annotations

import math

import numpy as np

#: Example data: int8 inputs and weights uniform in [-128, 128), int32 bias uniform in [-BIAS, BIAS).
EXAMPLE_BIAS = 1 << 12


def self_check_scale(problem, spread: float = 2.5) -> float:
    """The output scale (float32) that maps ``spread`` standard deviations of an example output to 127.

    With ``codegen.data.example_inputs`` a product of two int8 values has mean 0 and standard deviation
    (E[x^2] = 5461.5 for x uniform in [-128, 128)); a sum over the reduction (C/groups * R * S, or K)
    plus the bias then has sigma = sqrt(reduction * 5461.5^2 + BIAS^2 / 3).  At 2.5 sigma about 1% of
    the outputs saturate to 127/-128, so a self-checking program checks real arithmetic, not clipping.
    """
    b = problem.bounds
    reduction = max(1, b.get("c", 1) * b.get("kh", 1) * b.get("kw", 1))
    second_moment = (128 * 128 * 2 + 1) / 6  # E[x^2], x uniform on the integers in [-128, 127]
    sigma = math.sqrt(reduction * second_moment ** 2 + EXAMPLE_BIAS ** 2 / 3)
    return float(np.float32(127.0 / (spread * sigma)))
