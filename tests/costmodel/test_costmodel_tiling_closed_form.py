"""The closed forms of ``costmodel.tiling`` (tiles and tile moves that are arithmetic progressions) count
exactly what enumerating every element counts, and keep a dim of 2^24 as cheap as a small one."""

import random
import time

import numpy as np
import pytest

from costmodel import arch_from_dict, evaluate, preset, tiling
from cosa.baselines import random_mapping
from workloads import conv2d, matmul
from workloads.yamlio import load_yaml

TIMELOOP_ARCH = arch_from_dict(load_yaml("""\
arch:
  arithmetic: {name: MAC, instances: 4, word-bits: 8}
  storage:
    - {name: Registers, entries: 16, instances: 4, word-bits: 8}
    - {name: GlobalBuffer, entries: 2048, instances: 1, word-bits: 8, read_bandwidth: 16, write_bandwidth: 16}
    - {name: DRAM, instances: 1, word-bits: 8}
"""), source="timeloop-arch")

LAYERS = [
    conv2d("pad", C=4, K=8, H=9, W=7, R=3, S=3, padding=1),
    conv2d("stride2", C=3, K=4, H=12, W=10, R=3, S=1, stride=2, padding=1),
    conv2d("stride3", C=2, K=4, H=13, W=9, R=2, S=3, stride=3),
    conv2d("dilated", C=2, K=4, H=12, W=12, R=3, S=3, dilation=2, padding=2),
    matmul("mm", M=12, N=8, K=18),
    conv2d("all_padding", C=2, K=2, H=1, W=1, R=1, S=1, stride=2, padding=(0, 2)),  # tiles wholly outside
]


def _costs(nest, arch, mappings, closed: bool, monkeypatch):
    tiling._component.cache_clear()
    with monkeypatch.context() as m:
        if not closed:
            m.setattr(tiling, "_progression", lambda terms: None)
            m.setattr(tiling, "_distinct_progression", lambda terms: None)
        out = [evaluate(nest, arch, mp).to_dict() for mp in mappings]
    tiling._component.cache_clear()
    return out


@pytest.mark.parametrize("arch", [preset("gemmini", dim=4, scratchpad_kib=4, accumulator_kib=2), TIMELOOP_ARCH],
                         ids=["gemmini4", "timeloop-delta"])
@pytest.mark.parametrize("nest", LAYERS, ids=lambda n: n.name)
def test_closed_forms_equal_enumeration(nest, arch, monkeypatch):
    rng = random.Random(7)
    mappings = [random_mapping(nest, arch, rng) for _ in range(6)]
    closed = _costs(nest, arch, mappings, True, monkeypatch)
    enumerated = _costs(nest, arch, mappings, False, monkeypatch)
    for a, b in zip(closed, enumerated):
        assert a == b  # accesses, footprints, cycles, energy: everything


def test_progressions():
    assert tiling._progression([(1, 4), (4, 3)]) == (0, 1, 12)          # mixed radix
    assert tiling._progression([(2, 5), (1, 3)]) == (0, 1, 11)          # stride 2, window 3: no gaps
    assert tiling._progression([(3, 5), (1, 2)]) is None                # stride 3, window 2: gaps
    assert tiling._progression([(-2, 3)]) == (-4, 2, 3)
    assert tiling._distinct_progression([(2, 5), (1, 3)]) is None        # repeats: not one value each
    assert tiling._distinct_progression([(1, 4), (4, 3)]) == (0, 1, 12)
    first, count = tiling._clip_progression(0, 2, 5, np.array([-3, 0, 5, 20]), 8)
    assert count.tolist() == [3, 4, 2, 0] and first[:3].tolist() == [1, 0, 5]


@pytest.mark.parametrize("nest", [matmul("huge_mm", M=2**24, N=2**24, K=4),
                                  conv2d("huge_conv", C=4, K=2**24, H=2**24, W=1, R=1, S=1),
                                  conv2d("huge_padded", C=4, K=16, H=2**24, W=1, R=3, S=1, padding=1)],
                         ids=lambda n: n.name)
def test_a_dim_of_2_to_the_24_is_cheap(nest):
    """Before the closed forms these ran minutes and took a gigabyte (per-element sets of the tiles)."""
    from cosa.baselines import gemmini_default

    start = time.perf_counter()
    sched = gemmini_default(nest, preset("gemmini"))
    assert sched.cost.cycles > 0 and sched.cost.dram_bytes > 0
    assert time.perf_counter() - start < 20


def test_repeated_words_equal_brute_force():
    """``_repeated_words`` (borders only) against sets of elements, on random loops over a padded,
    strided window index (the tile's own loops, the loops moving it, the step's reset and bump)."""
    rng = random.Random(11)
    checked = repeats = 0
    for trial in range(400):
        stride, pad, window = rng.choice([1, 1, 2, 3]), rng.choice([0, 1, 2]), rng.choice([1, 2, 3])
        nest = conv2d("w", C=1, K=1, H=1, W=rng.randrange(8, 40), R=window, S=1, stride=stride, padding=(0, pad))
        tensor = next(t for t in nest.tensors if t.role == "input")

        def loops(k):
            return tuple(tiling.NestLoop(0, rng.choice("PR") if window > 1 else "P", rng.randrange(1, 6), False,
                                         rng.randrange(1, 7)) for _ in range(k))

        set_loops, grid = loops(rng.randrange(0, 3)), list(loops(rng.randrange(1, 3)))
        comp = next(c for c in tiling.components(tensor, set_loops) if "P" in c.dims)
        reset = np.array([rng.randrange(0, 6)], dtype=np.int64)
        bump = reset if rng.random() < 0.3 else np.array([rng.randrange(0, 6)], dtype=np.int64)
        got = tiling._repeated_words(comp, grid, reset, bump)
        if got is None:
            continue
        first, step, count = comp.progression
        hi = int(comp.hi[0])
        tile = lambda x: {first + x + k * step for k in range(count)} & set(range(hi))  # noqa: E731
        want = 0
        for g in comp.shifts(grid)[:, 0].tolist():
            old, new = tile(g + int(reset[0])), tile(g + int(bump[0]))
            want += len(new) if old == new else 0
        assert got == want, (trial, set_loops, grid, reset, bump)
        checked += 1
        repeats += want > 0
    assert checked > 100 and repeats > 20  # the borders and the interior (bump == reset) both count


def test_progression_sizes_equal_brute_force():
    """``_progression_sizes`` (sum and largest clipped tile over every move) against sets of elements."""
    rng = random.Random(5)
    checked = maxima = 0
    for trial in range(400):
        stride, pad, window = rng.choice([1, 2, 3]), rng.choice([0, 1, 2, 4]), rng.choice([1, 2, 3])
        nest = conv2d("w", C=1, K=1, H=1, W=rng.randrange(window, 30), R=window, S=1, stride=stride, padding=(0, pad))
        tensor = next(t for t in nest.tensors if t.role == "input")

        def loops(k):
            return [tiling.NestLoop(0, rng.choice("PR") if window > 1 else "P", rng.randrange(1, 6), False,
                                    rng.randrange(1, 7)) for _ in range(k)]

        set_loops, moves = tuple(loops(rng.randrange(0, 3))), loops(rng.randrange(1, 4))
        comp = next(c for c in tiling.components(tensor, set_loops) if "P" in c.dims)
        got = tiling._progression_sizes(comp, tuple(moves))
        if got is None:
            continue
        first, step, count = comp.progression
        hi = int(comp.hi[0])
        sizes = [len({first + x + k * step for k in range(count)} & set(range(hi)))
                 for x in comp.shifts(moves)[:, 0].tolist()]
        assert got[0] == sum(sizes), trial
        assert got[1] is None or got[1] == max(sizes), trial
        checked += 1
        maxima += got[1] is not None
    assert checked > 100 and maxima > 100
