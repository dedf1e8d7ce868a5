"""Pixel-repeat mvins (Gemmini's first-layer optimisation) as Gemmini's PixelRepeater.scala writes them.

Row ``r`` of a scratchpad mvin under a config_ld with ``pixel_repeats`` P also lands in rows ``r - p``
(0 < p < P) at columns ``p*cols ...``, but never below a floor: row 0 for rows in the scratchpad's lower
half, its middle row for rows in the upper half.  LOOP_CONV_WS puts its second concurrent loop's input at
the middle row and the first loop's weights just below it, so without the floor the copies overwrote
weights (thin-channel layers with several row tiles came out wrong in output channels C .. P*C-1).
"""

import numpy as np
import pytest

import workloads
from gemmini import SimulationError, isa
from gemmini.config import DEFAULT_CONFIG as CFG
from gemmini.sim import Machine, timing
from gemmini.sim.functional import repeat_floor
from gemmini.vendor.calls import from_workload
from gemmini.vendor.run import run_vendor

HALF = CFG.sp_rows // 2


def _repeating_config_ld(stride_bytes: int, repeats: int) -> isa.Command:
    """config_ld id 0 with its pixel-repeat field (rs1 bits 8..15) set."""
    plain = isa.config_ld(stride_bytes, config=CFG)
    return isa.Command(plain.funct, plain.rs1 | (repeats << 8), plain.rs2)


def _run(first_row: int, rows: int, cols: int, repeats: int, seed: int):
    """Fill the scratchpad with a sentinel around ``first_row``, then one repeating mvin there."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(1, 100, size=(rows, cols), dtype=np.int8)
    sentinel = np.full((rows + 8, CFG.dim), -7, dtype=np.int8)
    memory = np.concatenate([pixels.ravel(), sentinel.ravel()]).view(np.uint8).copy()
    base = first_row - 4
    cmds = [isa.config_ld(CFG.dim, config=CFG),
            isa.mvin(pixels.nbytes, isa.sp(base), rows + 8, CFG.dim, config=CFG),
            _repeating_config_ld(cols, repeats),
            isa.mvin(0, isa.sp(first_row), rows, cols, config=CFG)]
    machine = Machine(CFG)
    machine.run(cmds, memory)
    return machine.scratchpad[base:base + rows + 8].copy(), pixels, base


def _expected(first_row: int, rows: int, cols: int, repeats: int, pixels, base):
    want = np.full((rows + 8, CFG.dim), -7, dtype=np.int8)
    for r in range(rows):
        row = first_row + r
        want[row - base, :cols] = pixels[r]
        for p in range(1, repeats):
            if row - p >= repeat_floor(row, CFG.sp_rows):
                want[row - p - base, p * cols:(p + 1) * cols] = pixels[r]
    return want


def test_repeat_floor_is_the_scratchpad_middle_for_upper_rows():
    assert repeat_floor(0, CFG.sp_rows) == 0
    assert repeat_floor(HALF - 1, CFG.sp_rows) == 0
    assert repeat_floor(HALF, CFG.sp_rows) == HALF
    assert repeat_floor(CFG.sp_rows - 1, CFG.sp_rows) == HALF


def test_copies_stop_at_the_middle_row():
    got, pixels, base = _run(HALF, rows=5, cols=3, repeats=3, seed=1)
    # the two rows below the middle keep the sentinel: no copy crosses into the lower half
    assert (got[HALF - 2 - base:HALF - base] == -7).all()
    # inside the upper half a row holds its pixel and its next two neighbours
    assert (got[HALF - base, 3:6] == pixels[1]).all() and (got[HALF - base, 6:9] == pixels[2]).all()
    assert (got == _expected(HALF, 5, 3, 3, pixels, base)).all()


def test_copies_cross_the_middle_from_below_and_stop_at_row_zero():
    got, pixels, base = _run(HALF - 1, rows=4, cols=4, repeats=4, seed=2)
    assert (got == _expected(HALF - 1, 4, 4, 4, pixels, base)).all()
    # the mvin's first row is in the lower half: its copies land below it as usual
    assert (got[HALF - 2 - base, 4:8] == pixels[0]).all()

    memory = np.arange(12, dtype=np.int8).view(np.uint8).copy()
    machine = Machine(CFG)
    machine.run([_repeating_config_ld(4, 3), isa.mvin(0, isa.sp(1), 3, 4, config=CFG)], memory)
    rows = machine.scratchpad[:3].astype(int)
    # rows 1..3 hold pixels 0-3, 4-7, 8-11; row 0 gets row 1's p=1 and row 2's p=2 copies, row 1's p=2 is dropped
    assert rows[0, :12].tolist() == [0] * 4 + list(range(0, 8))
    assert rows[1, :12].tolist() == list(range(0, 12))
    assert rows[2, :12].tolist() == list(range(4, 12)) + [0] * 4


def test_accumulator_mvins_are_not_repeated():
    memory = np.zeros(64, dtype=np.uint8)
    cmds = [_repeating_config_ld(16, 2), isa.mvin(0, isa.acc(0), 2, 4, config=CFG)]
    with pytest.raises(SimulationError, match="accumulator"):
        Machine(CFG).run(cmds, memory)
    with pytest.raises(SimulationError, match="accumulator"):
        timing(cmds, CFG)


# thin-channel first layers whose LOOP_CONV_WS loops alternate scratchpad halves (several row tiles)
THIN = [dict(C=3, K=16, H=32, W=32, R=3, S=3),
        dict(C=1, K=16, H=32, W=32, R=5, S=5),
        dict(C=4, K=16, H=32, W=32, R=3, S=3, padding=1),
        dict(C=3, K=16, H=64, W=64, R=3, S=3, stride=2),
        dict(C=2, K=16, H=64, W=64, R=5, S=5, stride=2, padding=2)]


@pytest.mark.parametrize("shape", THIN, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
def test_library_stream_for_thin_channels_is_exact(shape):
    run = run_vendor(from_workload(workloads.conv2d("thin", **shape)), seed=1)
    assert run.mismatches == 0 and run.verified


def test_library_stream_with_timing_is_exact():
    run = run_vendor(from_workload(workloads.conv2d("thin", **THIN[0])), seed=1, with_timing=True)
    assert run.verified and run.cycles > 0



def _read_then_repeat(a_row: int) -> list:
    """A compute streaming DIM A rows from ``a_row``, then a 3-times repeating mvin at the scratchpad's middle."""
    d = CFG.dim
    return [isa.config_ex("ws", 0, config=CFG), isa.config_ld(d, id=1, config=CFG), _repeating_config_ld(3, 3),
            isa.mvin(0, isa.sp(0), d, d, id=1, config=CFG),
            isa.preload(isa.sp(0), isa.acc(0), d, d, d, d, config=CFG),
            isa.compute_preloaded(isa.sp(a_row), isa.GARBAGE, d, d, d, d, config=CFG),
            isa.mvin(0, isa.sp(HALF), 8, 3, config=CFG)]


def test_timing_model_sees_no_hazard_below_the_middle_row():
    """The repeating mvin at the middle row writes nothing below it, so a compute still reading the rows just
    below does not hold it back (it starts as if the compute read rows far away)."""
    near, far = (timing(_read_then_repeat(row), CFG) for row in (HALF - CFG.dim, 2 * CFG.dim))
    assert near.starts[-1] == far.starts[-1]
    # the control: one row lower the mvin starts in the lower half, its copies overlap the A rows, and it waits
    shifted = _read_then_repeat(HALF - CFG.dim)
    shifted[-1] = isa.mvin(0, isa.sp(HALF - 1), 8, 3, config=CFG)
    assert timing(shifted, CFG).starts[-1] > near.starts[-1]
