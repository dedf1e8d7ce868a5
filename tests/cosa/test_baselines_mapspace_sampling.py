"""The random baseline's draws: valid, seeded, and spread over mappings that use the array (spatial
factors drawn first, and the capacity repair moving temporal factors out before it shrinks a spatial
one), while the exhaustive baseline's space stays the whole space."""

import random

import pytest
from hypothesis import given, settings, strategies as st

import workloads
from cosa.baselines import mapspace, random_mapping
from cosa.baselines.mapspace import MapSpace
from costmodel.presets import gemmini
from mappings import validate

GEMMINI = gemmini(dataflow="ws")
ARRAY = 2  # index of the level whose fan-out is the 16 x 16 array
PES = GEMMINI.levels[ARRAY].fanout
CONV = workloads.conv2d("c3", C=64, K=32, P=14, Q=14, R=3, S=3, padding=1)  # C and K fill 16 x 16
CONV_SPACE = MapSpace(CONV, GEMMINI)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_draws_are_valid_and_most_use_a_quarter_of_the_array(seed):
    """Measured over seeds 0-199 (20 draws each): at least 19 of 20 draws use >= 64 of the 256 PEs
    (0.9997 on average); the sampler before spatial-first drawing kept 1-2 % of draws there on 3x3
    layers."""
    rng = random.Random(seed)
    draws = [random_mapping(CONV, GEMMINI, rng, space=CONV_SPACE) for _ in range(20)]
    for m in draws:
        validate(m, CONV, GEMMINI)
    busy = sum(4 * m.levels[ARRAY].fanout_used >= PES for m in draws)
    assert busy >= 15, [m.levels[ARRAY].fanout_used for m in draws]


def test_the_repair_moves_temporal_factors_before_spatial_ones(monkeypatch):
    """With every fitting prime unrolled, a layer whose C and K are powers of two always gets the full
    array, and the capacity repair (which the draws need: the temporal factors land at random levels,
    including the one-weight registers) never takes it back."""
    monkeypatch.setattr(mapspace, "SPATIAL_KEEP", 1.0)
    layer = workloads.load_one("resnet50/res3a_branch1")  # 1x1 stride 2, C 256, K 512
    space = MapSpace(layer, GEMMINI)
    rng = random.Random(0)
    repaired = 0
    for _ in range(40):
        m = space.sample(rng)
        assert space.fits(m)
        assert m.levels[ARRAY].spatial == {"C": 16, "K": 16}
        repaired += any(m.levels[0].temporal_factor(d) > 1 for d in ("C", "K"))
    validate(m, layer, GEMMINI)
    assert repaired  # factors were moved out to DRAM's loops by the repair or the draw


def test_draws_are_deterministic_for_a_seed():
    a = [CONV_SPACE.sample(random.Random(7)) for _ in range(2)]
    rng1, rng2 = random.Random(3), random.Random(3)
    first = [random_mapping(CONV, GEMMINI, rng1, space=CONV_SPACE) for _ in range(10)]
    second = [random_mapping(CONV, GEMMINI, rng2, space=MapSpace(CONV, GEMMINI)) for _ in range(10)]
    assert a[0] == a[1]
    assert first == second
    assert len(set(map(repr, first))) > 1


@pytest.mark.parametrize("dims", [dict(M=2, N=4, K=4), dict(M=4, N=2, K=8)])
def test_draws_stay_inside_the_exhaustive_space_which_keeps_idle_array_mappings(dims):
    """The exhaustive baseline still enumerates every valid factor placement, the ones that leave the
    array idle included; the random draws are placements of that space (orders aside: the exhaustive
    space keeps one order per class of equivalent orders)."""
    arch = gemmini(dim=4, scratchpad_kib=1, accumulator_kib=1)
    nest = workloads.matmul("m", **dims)
    space = MapSpace(nest, arch)

    def placement(m):
        return tuple((tuple(sorted(lm.temporal.items())), tuple(sorted(lm.spatial.items()))) for lm in m.levels)

    enumerated = {placement(m) for m in space.enumerate()}
    assert len(list(space.enumerate(check=False))) == space.exhaustive_size()
    assert any(p[ARRAY][1] == () for p in enumerated)  # the array left idle is still in the space
    rng = random.Random(1)
    drawn = {placement(random_mapping(nest, arch, rng, space=space)) for _ in range(60)}
    assert drawn <= enumerated
    assert len(drawn) > 5
