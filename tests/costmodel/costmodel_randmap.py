"""Random small mappings for the fidelity tests (deterministic given a seed)."""

from __future__ import annotations

import random

from costmodel import Arch, Level
from mappings import LevelMapping, Mapping
from workloads.divisors import prime_factors as primes


def small_arch(levels: int = 4, fanout: int = 64, multicast: bool = True) -> Arch:
    """DRAM plus ``levels - 1`` unbounded buffers, each able to fan out (no capacity limits)."""
    lv = [Level("DRAM", fanout=fanout, multicast=multicast)]
    for i in range(1, levels):
        lv.append(Level(f"L{i}", fanout=fanout, multicast=multicast if i % 2 else True))
    return Arch("small", tuple(lv))


def random_mapping(workload, arch, seed: int, spatial: bool = True, bypass: bool = True) -> Mapping:
    rng = random.Random(seed)
    n = len(arch.levels)
    temporal = [dict() for _ in range(n)]
    spat = [dict() for _ in range(n)]
    used = [1] * n
    for d, bound in workload.dims.items():
        for f in primes(bound):
            lvl = rng.randrange(n)
            if spatial and rng.random() < 0.3 and used[lvl] * f <= arch.levels[lvl].fanout:
                spat[lvl][d] = spat[lvl].get(d, 1) * f
                used[lvl] *= f
            else:
                temporal[lvl][d] = temporal[lvl].get(d, 1) * f
    levels = []
    for i in range(n):
        order = list(workload.dims)
        rng.shuffle(order)
        byp = frozenset(t.name for t in workload.tensors if bypass and i > 0 and rng.random() < 0.3)
        levels.append(LevelMapping(temporal=temporal[i], spatial=spat[i], order=tuple(order), bypass=byp))
    return Mapping(tuple(levels))
