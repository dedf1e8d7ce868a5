"""tiled_conv_auto's shrink phase: the bisection over runs of one argument gives the step-by-step rule's tiles."""

import time

from hypothesis import given, settings, strategies as st

from costmodel.gemmini_library_tiles import GemminiTileConfig, conv_rows, tiled_conv_auto_tiles

_POROWS, _POCOLS, _POCHS, _KCHS = 1, 2, 3, 6


def shrink_step_by_step(args, config, stride=1, dilation=1):
    """The vendor's loop as written: shrink the largest argument one step at a time until the tile fits."""
    dim = config.dim
    args = list(args)

    def fits(candidate):
        spad, acc = conv_rows(candidate, config, stride, dilation)
        return spad <= config.bank_num * config.bank_rows // 2 and acc <= config.acc_rows // 2

    while not fits(args):
        max_val, max_idx = -1, -1
        for i, value in enumerate(args):
            if not (i == _POCOLS and value <= dim and args[_POROWS] > 1) and value > max_val:
                max_val, max_idx = value, i
        if max_idx in (_POCHS, _KCHS):
            value = args[max_idx]
            args[max_idx] = max((value // dim) * dim if value % dim else value - dim, 1)
        else:
            args[max_idx] -= 1
    return args


def grow(args, max_args, config, stride=1, dilation=1):
    def fits(candidate):
        spad, acc = conv_rows(candidate, config, stride, dilation)
        return spad <= config.bank_num * config.bank_rows // 2 and acc <= config.acc_rows // 2

    while args[_POCOLS] + 1 <= max_args[_POCOLS]:
        candidate = list(args)
        candidate[_POCOLS] += 1
        if not fits(candidate):
            break
        args = candidate
    changed = True
    while changed:
        changed = False
        for i in range(len(args)):
            candidate = list(args)
            candidate[i] += 1
            if candidate[i] <= max_args[i] and fits(candidate):
                args, changed = candidate, True
    return args


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 4), p=st.integers(1, 300), q=st.integers(1, 300), k=st.integers(1, 3000),
       c=st.integers(1, 3000), r=st.integers(1, 7), stride=st.integers(1, 2), dim=st.sampled_from([4, 8, 16]))
def test_shrink_matches_step_by_step(n, p, q, k, c, r, stride, dim):
    config = GemminiTileConfig(dim=dim, bank_num=4, bank_rows=1024, acc_rows=256)
    start = [n, q, p, k, r, r, c]
    expected = grow(shrink_step_by_step(start, config, stride), start, config, stride)
    got = tiled_conv_auto_tiles(n, q, p, k, c, r, r, config, stride=stride)
    assert list(got.to_dict().values()) == expected


@settings(max_examples=150, deadline=None)
@given(which=st.integers(0, 6), big=st.integers(100, 20000), small=st.lists(st.integers(1, 6), min_size=7, max_size=7),
       dim=st.sampled_from([4, 8, 16]))
def test_one_large_argument_matches_step_by_step(which, big, small, dim):
    # one argument far above the others: the tile fits while it is still the largest (the bisection's case)
    config = GemminiTileConfig(dim=dim, bank_num=4, bank_rows=256, acc_rows=64)
    start = list(small)
    start[which] = big
    expected = grow(shrink_step_by_step(start, config), start, config)
    n, q, p, k, r, s, c = start
    got = tiled_conv_auto_tiles(n, q, p, k, c, r, s, config)
    assert list(got.to_dict().values()) == expected


def test_huge_channels_are_quick():
    t0 = time.perf_counter()
    tiles = tiled_conv_auto_tiles(1, 14, 14, 2**31 - 1, 256, 3)
    assert time.perf_counter() - t0 < 2.0
    assert tiles.pochs % 16 == 0 and conv_rows(list(tiles.to_dict().values()), GemminiTileConfig())[0] <= 8192
