"""Divisors and prime factors of loop bounds: the one place every scheduler, baseline and code generator asks.

Loop bounds are positive integers of at most ``loaders_values.MAX_INT``
(2**24) when they come from a file, so trial division up to the square root
(at most 4,096 steps) is all these need.  For ``n < 1`` every function
answers as for an empty product: no divisors, no prime factors.
"""

from __future__ import annotations

import math


def prime_factors(n: int) -> list[int]:
    """Prime factors of ``n`` with multiplicity, ascending (``prime_factors(12) == [2, 2, 3]``)."""
    out: list[int] = []
    p = 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1 if p == 2 else 2
    if n > 1:
        out.append(n)
    return out


def prime_factor_counts(n: int) -> dict[int, int]:
    """Prime -> multiplicity, ascending primes (``prime_factor_counts(56) == {2: 3, 7: 1}``)."""
    out: dict[int, int] = {}
    for p in prime_factors(n):
        out[p] = out.get(p, 0) + 1
    return out


def divisors(n: int) -> list[int]:
    """Every divisor of ``n``, ascending (``divisors(12) == [1, 2, 3, 4, 6, 12]``)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0] if n >= 1 else []
    return small + [n // d for d in reversed(small) if d * d != n]


def largest_divisor_at_most(n: int, cap: int) -> int:
    """The largest divisor of ``n`` that is <= ``cap`` (1 when there is none, e.g. ``cap < 1``)."""
    best = 1
    for d in range(1, math.isqrt(n) + 1 if n >= 1 else 1):
        if n % d == 0:
            for cand in (d, n // d):
                if best < cand <= cap:
                    best = cand
    return best


def multiplicity(n: int, p: int) -> int:
    """How many times the prime ``p`` divides ``n`` (0 for ``n < 1``)."""
    e = 0
    while n >= 1 and n % p == 0:
        n //= p
        e += 1
    return e
