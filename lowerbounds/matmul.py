"""Matrix multiplication with tight constants: C[m, n] += A[m, k] B[k, n], in words.

* Sequential (COSMA, Kwasniewski et al. 2019): Q >= 2mnk / sqrt(S) + mn for a
  fast memory of S words.  Their derivation tiles with sqrt(S) x sqrt(S)
  outer products, so it is stated only where those fit the problem
  (min(m, n, k) >= sqrt(S)); elsewhere ``sequential_words`` is None and the
  general ``bound`` (tile LP with loop bounds) applies.
* Parallel, memory-dependent, with S >= (mn + mk + nk) / p words per
  processor: Q >= min{2mnk / (p sqrt(S)) + S, 3 (mnk / p)^(2/3)}.
* Parallel, memory-independent (Al Daas, Ballard, Grigori, Kumar, Rouse
  2022), dims sorted m >= n >= k: the busiest processor's footprint is
  D = (mn + mk)/P + nk if P <= m/n; 2 sqrt(mnk^2 / P) + mn/P if
  m/n <= P <= mn/k^2; 3 (mnk/P)^(2/3) otherwise; words moved
  W >= D - (mn + mk + nk) / P (what it owns in a balanced distribution).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from workloads import WorkloadError


@dataclass(frozen=True)
class MatmulBound:
    """The closed forms for one (m, n, k), memory S (words, per processor) and P processors.

    None where a form does not apply (no memory given, S too small to hold a
    1/P share of the data, or outside COSMA's regime).  ``regime``: which case
    of the memory-independent footprint applies (1, 2 or 3).
    """

    m: int
    n: int
    k: int
    memory_words: float | None
    processors: int
    sequential_words: float | None
    leading_words: float | None
    parallel_memory_dependent_words: float | None
    parallel_memory_independent_words: float
    footprint_words: float
    regime: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def memory_independent_footprint(m: int, n: int, k: int, processors: int) -> tuple[float, int]:
    """(D, regime): Al Daas et al.'s least footprint of a processor doing mnk/P multiply-adds."""
    a, b, c = sorted((m, n, k), reverse=True)
    p = processors
    if p <= a / b:
        return (a * b + a * c) / p + b * c, 1
    if p <= a * b / c ** 2:
        return 2.0 * math.sqrt(a * b * c ** 2 / p) + a * b / p, 2
    return 3.0 * (a * b * c / p) ** (2.0 / 3.0), 3


def matmul_bound(m: int, n: int, k: int, memory_words: float | None = None, processors: int = 1) -> MatmulBound:
    """Tight matmul bounds in words; see the module docstring for each form and its source."""
    for name, value in (("m", m), ("n", n), ("k", k), ("processors", processors)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise WorkloadError(f"{name} must be a positive integer, got {value!r}", source="matmul_bound",
                                field=name)
    if memory_words is not None and not (float(memory_words) >= 1.0):
        raise WorkloadError(f"memory_words must be >= 1, got {memory_words!r}", source="matmul_bound",
                            field="memory_words")
    p = processors
    data = m * n + m * k + n * k
    footprint, regime = memory_independent_footprint(m, n, k, p)
    independent = max(0.0, footprint - data / p)
    sequential = leading = dependent = None
    if memory_words is not None:
        s = float(memory_words)
        leading = m * n * k / math.sqrt(s)
        if min(m, n, k) >= math.sqrt(s):
            sequential = 2.0 * m * n * k / math.sqrt(s) + m * n
        if s >= data / p:
            dependent = min(2.0 * m * n * k / (p * math.sqrt(s)) + s, 3.0 * (m * n * k / p) ** (2.0 / 3.0))
    return MatmulBound(m, n, k, memory_words, p, sequential, leading, dependent, independent, footprint, regime)
