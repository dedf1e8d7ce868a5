"""The law that makes the bound trustworthy: no valid mapping moves less DRAM traffic than the bound.

Random small matmul, MTTKRP and convolution nests (strides, dilations,
padding, mixed precision) on a three-level machine (DRAM, a buffer of a few
bytes with optional fan-out, registers), with random valid mappings whose
tiles are grown until the buffer is nearly full (the interesting, efficient
ones); the traffic is the cost model's ``dram_bytes`` and, on the smallest
cases, the literal trace counter's.  Exhaustive searches on a few nests check
the best mapping, where a wrong bound would show first.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costmodel import Arch, Level, evaluate, trace
from lowerbounds import bound_for_arch
from cosa.mip import prime_factors as prime_factor_counts
from mappings import LevelMapping, Mapping, fits, validate
from workloads import WorkloadError, conv2d, einsum, matmul

SLACK = 1e-9  # relative: float noise only


def primes(n: int) -> list[int]:
    """Prime factors of n with multiplicity, ascending."""
    return [p for p, k in sorted(prime_factor_counts(n).items()) for _ in range(k)]


def machine(buffer_bytes: int, register_bytes: int, fanout: int = 1) -> Arch:
    return Arch("law", (Level("DRAM"), Level("Buffer", capacity_bytes=buffer_bytes, fanout=fanout),
                        Level("Registers", capacity_bytes=register_bytes)))


def random_valid_mapping(nest, arch, rng: random.Random) -> Mapping:
    """Prime factors dealt to levels (inner levels favoured), then moved out to DRAM until it fits."""
    dims = list(nest.dims)
    fanout = arch.levels[1].fanout
    # (dim, prime, level, spatial)
    placed = []
    used_fanout = 1
    for d in dims:
        for p in primes(nest.dims[d]):
            roll = rng.random()
            if roll < 0.15:
                placed.append([d, p, 2, False])
            elif roll < 0.25 and used_fanout * p <= fanout:
                used_fanout *= p
                placed.append([d, p, 1, True])
            elif roll < 0.75:
                placed.append([d, p, 1, False])
            else:
                placed.append([d, p, 0, False])
    orders = [tuple(rng.sample(dims, len(dims))) for _ in range(3)]
    bypass = [frozenset()] + [frozenset({rng.choice(nest.tensors).name}) if rng.random() < 0.2 else frozenset()
                              for _ in range(2)]

    def build() -> Mapping:
        levels = []
        for i in range(3):
            temporal, spatial = {}, {}
            for d, p, lvl, sp in placed:
                if lvl == i:
                    target = spatial if sp else temporal
                    target[d] = target.get(d, 1) * p
            levels.append(LevelMapping(temporal=temporal, spatial=spatial, order=orders[i], bypass=bypass[i]))
        return Mapping(tuple(levels))

    mapping = build()
    while not fits(mapping, nest, arch):
        inner = [entry for entry in placed if entry[2] > 0]
        if not inner:
            break
        entry = rng.choice(inner)
        entry[2], entry[3] = 0, False
        mapping = build()
    validate(mapping, nest, arch)  # the law is about valid mappings only
    return mapping


SIZES = {
    # per size class: matmul M/N, matmul K, MTTKRP extents, conv channels, conv width P
    "medium": ([4, 8, 12, 16], [8, 16, 32], [4, 6, 8], [4, 8], (4, 8)),
    "trace": ([4, 8], [8, 16], [3, 4], [2, 4], (3, 4)),
}


@st.composite
def nests(draw, size: str = "medium"):
    """Nests whose bound, on the memories drawn below, is set by HBL about a third of the time
    (the rest by compulsory traffic); "trace" ones are small enough for the literal walk."""
    sides, depths, extents, channels, (lo, hi) = SIZES[size]
    kind = draw(st.sampled_from(["matmul", "mttkrp", "conv"]))
    if kind == "matmul":
        bits = draw(st.sampled_from([8, {"output": 32}, {"input": 16, "weight": 8, "output": 16}]))
        return matmul(M=draw(st.sampled_from(sides)), N=draw(st.sampled_from(sides)), K=draw(st.sampled_from(depths)),
                      bits=bits)
    if kind == "mttkrp":
        return einsum("ijk,jr,kr->ir", {c: draw(st.sampled_from(extents)) for c in "ijkr"},
                      bits=draw(st.sampled_from([8, [8, 8, 8, 32]])))
    while True:
        try:
            return conv2d(N=1, C=draw(st.sampled_from(channels)), K=draw(st.sampled_from(channels)),
                          P=draw(st.integers(lo, hi)), Q=draw(st.integers(2, 4)),
                          R=draw(st.integers(1, 3)), S=draw(st.integers(1, 3)),
                          stride=(draw(st.integers(1, 2)), draw(st.integers(1, 3))),
                          dilation=(1, draw(st.integers(1, 2))), padding=draw(st.integers(0, 1)),
                          bits=draw(st.sampled_from([8, {"weight": 8, "input": 8, "output": 32}])))
        except WorkloadError:
            continue


def one_of_each_bytes(nest) -> int:
    return math.ceil(sum(t.bytes_per_word for t in nest.tensors))


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(nests(), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]), st.sampled_from([1, 2]), st.integers(0, 2 ** 31))
def test_no_valid_mapping_moves_less_than_the_bound(nest, buffer_scale, register_scale, fanout, seed):
    unit = one_of_each_bytes(nest)
    arch = machine(buffer_scale * unit, register_scale * unit, fanout)
    rep = bound_for_arch(nest, arch)
    rng = random.Random(seed)
    for _ in range(3):
        mapping = random_valid_mapping(nest, arch, rng)
        traffic = evaluate(nest, arch, mapping).dram_bytes
        assert traffic >= rep.bound_bytes * (1 - SLACK), (nest.dims, nest.op, mapping, rep.to_dict())


def trace_dram_bytes(nest, arch, mapping) -> float:
    counts = trace(nest, arch, mapping)
    dram = counts[arch.levels[0].name]
    return sum((a.reads + a.writes) * nest.tensor(name).bytes_per_word for name, a in dram.items())


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(nests("trace"), st.sampled_from([1, 1, 2]), st.sampled_from([1, 2]), st.integers(0, 2 ** 31))
def test_trace_counter_never_beats_the_bound(nest, buffer_scale, fanout, seed):
    unit = one_of_each_bytes(nest)
    arch = machine(buffer_scale * unit, unit, fanout)
    rep = bound_for_arch(nest, arch)
    mapping = random_valid_mapping(nest, arch, random.Random(seed))
    assert trace_dram_bytes(nest, arch, mapping) >= rep.bound_bytes * (1 - SLACK)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def best_two_level_traffic(nest, arch, limit: int = 4000) -> float:
    """Least DRAM bytes over every buffer tile and every DRAM loop order (registers: one element)."""
    dims = list(nest.dims)
    best = math.inf
    count = 0
    for factors in itertools.product(*[divisors(nest.dims[d]) for d in dims]):
        inner = dict(zip(dims, factors))
        outer_dims = [d for d in dims if nest.dims[d] // inner[d] > 1]
        for order in itertools.permutations(outer_dims):
            mapping = Mapping((LevelMapping(temporal={d: nest.dims[d] // inner[d] for d in dims}, order=order),
                               LevelMapping(temporal=inner), LevelMapping()))
            if not fits(mapping, nest, arch):
                break  # capacity does not depend on the order
            best = min(best, evaluate(nest, arch, mapping).dram_bytes)
            count += 1
            if count >= limit:
                return best
    return best


@pytest.mark.parametrize("nest,buffer_bytes,limit", [
    (matmul(M=16, N=16, K=16), 16, 4000),
    (matmul(M=16, N=16, K=16), 32, 4000),
    (einsum("ijk,jr,kr->ir", {"i": 8, "j": 4, "k": 4, "r": 8}), 12, 4000),
    (conv2d(N=1, C=8, K=8, P=4, Q=2, R=2, S=1, stride=2), 12, 100),  # slow to evaluate: the first 100 tilings
])
def test_best_mapping_is_not_below_the_bound(nest, buffer_bytes, limit):
    arch = machine(buffer_bytes, one_of_each_bytes(nest))
    rep = bound_for_arch(nest, arch)
    assert rep.binding != "compulsory"  # the memory is small enough for the HBL/LP bounds to matter
    best = best_two_level_traffic(nest, arch, limit=limit)
    assert rep.bound_bytes * (1 - SLACK) <= best < math.inf
