"""cosa.mip.ragged: the vector dim tiled past its bound where no divisor fills the vectors; the schedule runs
on the nest as written with its last tile cut, and the estimate it was chosen by is what the padded nest
costs, scaled by the vectors the cut tile still runs."""

import pytest

import costmodel
import workloads
from cosa.mip.ragged import candidates, lane_share, ragged_schedule
from cosa.schedule import SchedulingError
from cosa.scheduler import schedule
from targets.cpu import kernel_nest, run
from targets.cpu.plan import arch_for


def _conv1x1(hw, c=32, k=32):
    return kernel_nest(workloads.conv2d("c1", C=c, K=k, H=hw, W=hw, R=1, S=1, bits=32))


def _arch(w):
    return arch_for(w, costmodel.preset("cpu"), registers=(32, 64))  # AVX-512: 16 fp32 lanes, blocks of 64


def test_candidates_round_the_vector_dim_up_to_whole_blocks():
    w = _conv1x1(14)
    assert w.dims["QP"] == 196
    assert candidates(w, _arch(w)) == [256, 224]          # blocks of 4 vectors, of 2
    for hw in (56, 7):                                       # 3136 = 49 x 64 fills them; 49 is one block
        w = _conv1x1(hw)
        assert candidates(w, _arch(w)) == []
    g = workloads.matmul("g", M=16, N=100, K=16, bits=32)
    assert candidates(g, costmodel.preset("cpu")) == []      # no register level: no micro-kernel to fill
    assert lane_share(196, 256, 16) == 208 / 256


def test_a_14x14_image_gets_a_ragged_tile_that_runs_and_verifies():
    w = _conv1x1(14)
    arch = _arch(w)
    plain = schedule(w, arch, time_limit_s=20, bound=False, seed=0)
    got = ragged_schedule(w, arch, time_limit_s=20, seed=0)
    assert got.extra["ragged"] == {"QP": [196, got.workload.dims["QP"]]}
    assert got.extra["ragged_cycles"] < plain.cost.cycles
    assert [t["padded"] for t in got.extra["ragged_tried"]] == [256, 224]
    result = run(w, got.mapping, arch, threads=2, repeat=1)
    assert result.verified, result.max_abs_err
    again = schedule(w, arch, time_limit_s=20, bound=False, seed=0, ragged=True)
    assert again.mapping == got.mapping                       # deterministic


def test_ragged_is_a_flag_and_not_with_pad():
    w = _conv1x1(14)
    for bad in ({"ragged": "yes"}, {"ragged": True, "pad": 0.1}):
        with pytest.raises(SchedulingError, match="ragged"):
            schedule(w, _arch(w), bound=False, **bad)
