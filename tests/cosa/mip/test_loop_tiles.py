"""The MIP over the library's LOOP_WS tile arguments (cosa.mip.loop_tiles)."""

from __future__ import annotations

import pytest

from cosa.mip.loop_tiles import choose_matmul_tiles, exhaustive_matmul_tiles
from costmodel.gemmini_loops import LoopMachine, fits

SHAPES = [(196, 64, 64), (100, 200, 300), (1, 512, 1024), (49, 512, 2048), (256, 256, 256), (30, 17, 45)]


@pytest.mark.parametrize("shape", SHAPES)
def test_the_mip_finds_the_models_optimum(shape):
    choice = choose_matmul_tiles(shape)
    tiles, best = exhaustive_matmul_tiles(shape)
    assert fits(choice.tiles, LoopMachine()) is None
    # the linearised objective is exact at its tangent points: the optimum up to 1e-4
    assert choice.cost.cycles <= best.cycles * (1 + 1e-4), (choice.tiles, tiles)
    assert choice.seconds < 5


def test_ragged_tiles_are_chosen_where_they_pay():
    # 100 x 200 x 300: 7 x 13 x 19 blocks, no divisor tile of 19 K blocks but 1 and 19
    choice = choose_matmul_tiles((100, 200, 300))
    blocks = (7, 13, 19)
    assert any(b % t for b, t in zip(blocks, choice.tiles))


def test_same_input_same_tiles():
    assert choose_matmul_tiles((128, 96, 160)).tiles == choose_matmul_tiles((128, 96, 160)).tiles


def test_a_small_machine_changes_the_choice_and_stays_within_its_halves():
    small = LoopMachine(sp_rows=1024, acc_rows=256)
    choice = choose_matmul_tiles((256, 256, 256), small)
    assert fits(choice.tiles, small) is None
    assert choice.cost.cycles <= exhaustive_matmul_tiles((256, 256, 256), small)[1].cycles * (1 + 1e-4)


def test_bad_shape_is_refused():
    from cosa.schedule import SchedulingError

    with pytest.raises(SchedulingError, match="positive"):
        choose_matmul_tiles((0, 16, 16))


def test_a_solver_stopped_by_its_time_limit_is_not_reported_as_no_tile_fitting(monkeypatch):
    import cosa.mip.loop_tiles as loop_tiles
    from cosa.mip.solve import SolveResult
    from cosa.schedule import SchedulingError

    def timed_out(model, **kw):
        return SolveResult("highs", "time_limit", False, None, None, None, kw["time_limit_s"])

    monkeypatch.setattr(loop_tiles, "solve", timed_out)
    with pytest.raises(SchedulingError, match=r"within its time limit \(0.5 s") as err:
        choose_matmul_tiles((100, 200, 300), time_limit_s=0.5)
    assert "fits" not in str(err.value)


@pytest.mark.parametrize("shape", [(49, 512, 2048), (196, 64, 64), (30, 17, 45)])
def test_the_mip_finds_the_models_optimum_on_the_socs_machine(shape):
    # Gemmini's units and the SoC's cold lines: the cold-B stall is linear in the (I, J) pair table
    from gemmini.config import CHIPYARD_SOC_CONFIG
    from gemmini.loop_schedule import loop_machine

    soc = loop_machine(CHIPYARD_SOC_CONFIG)
    assert soc.line_fill_cycles == 8
    choice = choose_matmul_tiles(shape, soc)
    assert choice.cost.cycles <= exhaustive_matmul_tiles(shape, soc)[1].cycles * (1 + 1e-4), choice.tiles
