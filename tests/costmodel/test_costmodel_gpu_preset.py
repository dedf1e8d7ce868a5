"""The gpu presets: shape, units, argument checks, and the MIP maps a GEMM and a convolution onto them."""

import time

import pytest

import cosa
import costmodel
import workloads
from costmodel import ArchError
from mappings import validate


def test_gpu_levels_and_fanouts():
    arch = costmodel.preset("gpu")
    assert [lv.name for lv in arch.levels] == ["DRAM", "L2", "Shared", "Registers"]
    assert [lv.fanout for lv in arch.levels] == [1, 32, 128, 1]
    assert arch.levels[2].capacity_bytes == 48 * 1024
    assert arch.levels[3].capacity_bytes == 128 * 4
    assert arch.params["kind"] == "gpu"


def test_h200_peak_is_sms_times_lanes():
    arch = costmodel.preset("gpu-h200")
    assert arch.name == "gpu-h200"
    assert arch.total_macs_per_cycle == 132 * 128
    # 132 x 128 FMA x 2 FLOP at 1.98 GHz: about 67 TFLOP/s fp32
    assert 2 * arch.total_macs_per_cycle * arch.frequency_hz == pytest.approx(66.9e12, rel=0.01)
    assert arch.levels[1].capacity_bytes == 50 * 1024 ** 2


def test_bad_argument_is_one_line():
    with pytest.raises(ArchError) as err:
        costmodel.preset("gpu", sms=0)
    assert "sms" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("workload", [
    workloads.matmul("gemm", M=64, N=64, K=64, bits=32),
    workloads.conv2d("conv", C=16, K=16, H=8, W=8, R=3, S=3, padding=1, bits=32),
], ids=["gemm", "conv"])
def test_mip_maps_onto_gpu(workload):
    arch = costmodel.preset("gpu")
    start = time.perf_counter()
    sched = cosa.schedule(workload, arch, time_limit_s=20, bound=False)
    assert time.perf_counter() - start < 30
    validate(sched.mapping, workload, arch)
    # the schedule uses the machine's parallelism: several blocks and several threads per block
    assert sched.mapping.levels[1].fanout_used > 1 and sched.mapping.levels[2].fanout_used > 1
