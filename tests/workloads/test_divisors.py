"""workloads.divisors: divisors and prime factors, checked by their defining properties and by brute force."""

import math

from hypothesis import given, settings, strategies as st

from workloads.divisors import divisors, largest_divisor_at_most, multiplicity, prime_factor_counts, prime_factors

BOUNDS = st.integers(1, 1 << 24)


def is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))


@settings(max_examples=300, deadline=None)
@given(BOUNDS)
def test_prime_factors_multiply_back_and_are_prime_ascending(n):
    ps = prime_factors(n)
    assert math.prod(ps) == n
    assert ps == sorted(ps) and all(is_prime(p) for p in ps)
    counts = prime_factor_counts(n)
    assert list(counts) == sorted(set(ps)) and all(counts[p] == ps.count(p) for p in counts)
    assert all(multiplicity(n, p) == counts[p] for p in counts) and multiplicity(n, 2) == counts.get(2, 0)


@settings(max_examples=300, deadline=None)
@given(BOUNDS)
def test_divisors_sorted_complete_and_paired(n):
    ds = divisors(n)
    assert ds == sorted(set(ds)) and ds[0] == 1 and ds[-1] == n
    assert all(n % d == 0 for d in ds)
    assert all(d * e == n for d, e in zip(ds, reversed(ds)))  # d and n/d pair up from both ends
    # the count follows from the prime factorisation
    assert len(ds) == math.prod(e + 1 for e in prime_factor_counts(n).values())


@given(st.integers(1, 5000))
def test_divisors_match_brute_force(n):
    assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]


@given(st.integers(1, 5000), st.integers(-3, 6000))
def test_largest_divisor_at_most(n, cap):
    expected = max([d for d in range(1, n + 1) if n % d == 0 and d <= cap], default=1)
    assert largest_divisor_at_most(n, cap) == expected


def test_small_cases_and_empty_products():
    assert prime_factors(1) == [] and prime_factors(97) == [97] and prime_factors(360) == [2, 2, 2, 3, 3, 5]
    assert prime_factor_counts(56) == {2: 3, 7: 1}
    assert divisors(1) == [1] and divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36]
    assert largest_divisor_at_most(2304, 80) == 72 and largest_divisor_at_most(97, 96) == 1
    assert prime_factors(0) == [] and divisors(0) == [] and multiplicity(0, 2) == 0
    assert prime_factors((1 << 24) - 3) == [16777213]  # the largest prime a workload file may give, quickly
