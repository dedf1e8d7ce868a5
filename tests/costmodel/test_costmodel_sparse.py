"""A sparse tensor moves its nonzeros: bytes scale by its density, words, footprints and MACs stay dense."""

from dataclasses import replace

import pytest

import workloads as W
from costmodel import Arch, Level, evaluate
from mappings import LevelMapping as LM, Mapping


def test_sparse_input_moves_density_times_its_bytes():
    arch = Arch("two", (
        Level("DRAM", read_bandwidth=2.0, write_bandwidth=2.0, read_energy_pj_per_byte=100.0,
              write_energy_pj_per_byte=50.0, double_buffered=True),
        Level("Buffer", 4096, read_energy_pj_per_byte=1.0, write_energy_pj_per_byte=2.0, fanout=4),
    ), mac_energy_pj=0.5)
    dense = W.matmul(M=8, N=8, K=8)
    sparse = W.LoopNest(dense.name, dense.dims, tuple(replace(t, density=0.25) if t.name == "A" else t
                                                      for t in dense.tensors), dense.repeat, dense.op)
    mapping = Mapping((LM(temporal={"M": 2, "N": 2, "K": 2}), LM(temporal={"M": 4, "K": 4}, spatial={"N": 4})))
    d, s = evaluate(dense, arch, mapping), evaluate(sparse, arch, mapping)
    assert s.accesses == d.accesses and s.footprint_words == d.footprint_words
    assert s.compute_cycles == d.compute_cycles
    a_reads = d.accesses["DRAM"]["A"].reads            # 1-byte words
    assert d.dram_bytes - s.dram_bytes == pytest.approx(0.75 * a_reads)
    assert d.energy_breakdown_pj["DRAM"] - s.energy_breakdown_pj["DRAM"] == pytest.approx(0.75 * a_reads * 100.0)
    assert s.transfer_cycles["DRAM"] < d.transfer_cycles["DRAM"]


def test_sparse_kernel_dram_bytes_count_nonzeros():
    """SpMM with everything resident: DRAM moves S's nonzeros once, B and C whole."""
    nest = W.spmm(m=8, n=8, r=4, nnz=16)
    arch = Arch("two", (Level("DRAM", read_bandwidth=8.0, write_bandwidth=8.0),
                        Level("Buffer", 1 << 20)), mac_energy_pj=0.0)
    whole = Mapping((LM(), LM(temporal={"M": 8, "N": 8, "R": 4})))
    cost = evaluate(nest, arch, whole)
    assert cost.dram_bytes == pytest.approx(8 * (16 + 8 * 4 + 8 * 4))
