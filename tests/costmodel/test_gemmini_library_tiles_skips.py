"""The vendor heuristic's shrink loop with its skips (one argument on top, several tied on top) gives the
tiles the step-by-step loop gives, and a 2**24 x 2**24 image no longer takes 2**25 steps."""

import random
import time

import pytest

import costmodel.gemmini_library_tiles as module
from costmodel.gemmini_library_tiles import GemminiTileConfig, tiled_conv_auto_tiles


def _step_by_step(monkeypatch, *args, **kwargs):
    with monkeypatch.context() as m:
        m.setattr(module, "skip_run", lambda *a: None)
        m.setattr(module, "_skip_rounds", lambda *a: None)
        return tiled_conv_auto_tiles(*args, **kwargs)


@pytest.mark.parametrize("seed", range(6))
def test_skips_give_the_step_by_step_tiles(seed, monkeypatch):
    rng = random.Random(seed)
    config = GemminiTileConfig(dim=rng.choice([4, 8, 16]), bank_num=4, bank_rows=rng.choice([64, 256, 1024]),
                               acc_rows=rng.choice([64, 256]))
    for _ in range(25):
        side = rng.randrange(1, 300)
        rows, cols = (side, side) if rng.random() < 0.6 else (side, rng.randrange(1, 300))
        chans = rng.choice([1, 3, 16, 64, 256, 320])
        args = (rng.randrange(1, 4), rows, cols, rng.choice([chans, rng.randrange(1, 600)]), chans,
                rng.choice([1, 3]))
        kwargs = dict(config=config, stride=rng.choice([1, 2]))
        try:
            want = _step_by_step(monkeypatch, *args, **kwargs)
        except module.LibraryTileError:
            with pytest.raises(module.LibraryTileError):
                tiled_conv_auto_tiles(*args, **kwargs)
            continue
        assert tiled_conv_auto_tiles(*args, **kwargs) == want, (args, config)


def test_a_huge_square_image_is_quick():
    start = time.perf_counter()
    tiles = tiled_conv_auto_tiles(1, 2**24, 2**24, 16, 8, 3)
    assert time.perf_counter() - start < 5
    assert tiles.porows >= 1 and tiles.pocols >= 1
