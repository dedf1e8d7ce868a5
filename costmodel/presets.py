"""Architecture presets: gemmini (WS and OS), simba, eyeriss, cpu, cluster and gpu (generic, H200-like).

Energy figures come from ``costmodel.energy`` (Horowitz, ISSCC 2014, 45 nm)
unless a preset says otherwise; each preset names the source of its sizes and
bandwidths.  Latency convention (``costmodel.evaluate``): a level marked
``double_buffered`` overlaps its transfers with compute; on-chip buffers are
marked so only where the software really splits them in two, because the
validator and the schedulers then give each half of the capacity.
"""

from __future__ import annotations

from workloads import ROLES

from .arch import Arch, ArchError, Level, SpatialAxis
from .cosa_arch import from_cosa_v02
from .energy import (DRAM_PJ_PER_BYTE, FP32_MAC_PJ, INT8_MAC_PJ, REGISTER_PJ_PER_BYTE, sram_pj_per_byte)

ALL = frozenset(ROLES)


def gemmini(dim: int = 16, scratchpad_kib: int = 256, accumulator_kib: int = 64, dataflow: str = "ws",
            sp_banks: int = 4, acc_banks: int = 2, compute_overhead_cycles: int = 0, pipelined: bool = True) -> Arch:
    """Gemmini (ucb-bar/gemmini's default configuration; see its README and configs).

    Levels: DRAM (128-bit DMA bus: 16 B/cycle), Scratchpad (int8 inputs and
    weights), Accumulator (int32 outputs, fans out to the DIM x DIM array),
    Registers (one PE: the stationary weight in WS, the output in OS).
    The vendor's weight-stationary tiling double-buffers the scratchpad and
    the accumulator (it plans with half of each); output-stationary uses them
    whole.  Calibrated against the command-level timing model
    (``gemmini.sim.timing`` of the generated programs): with ``pipelined``
    (WS), the code generator issues the next tiles' mvins and the previous
    accumulator tile's mvouts among the current tile's computes
    (``gemmini.codegen.pipeline``), so DRAM transfers overlap compute (the
    DRAM level is double buffered: cycles = max(compute, transfers)); with
    ``pipelined=False`` (and always under OS, whose tiles are single
    buffered) each tile's moves are one burst and DRAM transfers stall the
    array (the command queues are too shallow to run ahead).  Partial sums
    move through DRAM as int32.  WS: a compute streams a run of at most DIM
    pixel rows and occupies the array for its rows plus
    ``compute_overhead_cycles`` (``compute_rows``; 0: back-to-back computes
    leave no bubble in our RTL, and the timing model that follows it within
    1% agrees best with 0 (2.5% median error on ResNet-50/BERT schedules,
    11.5% with 3));
    OS: every compute occupies the array DIM cycles (``compute_quantum``).
    The scratchpad (WS) and the accumulator are row-addressed
    (``Level.row_bytes``/``row_axes``) as the code generator lays them out.
    Energies: Horowitz ISSCC 2014 (SRAM by capacity, DRAM, int8 MAC);
    Gemmini publishes none.
    """
    dataflow = str(dataflow).lower()
    src = "preset gemmini"
    if dataflow not in ("ws", "os"):
        raise ArchError(f"dataflow must be 'ws' or 'os', got {dataflow!r}", source=src, field="dataflow")
    for label, value in (("dim", dim), ("scratchpad_kib", scratchpad_kib), ("accumulator_kib", accumulator_kib),
                         ("sp_banks", sp_banks), ("acc_banks", acc_banks)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ArchError(f"must be a positive integer, got {value!r}", source=src, field=label)
    if isinstance(compute_overhead_cycles, bool) or not isinstance(compute_overhead_cycles, int) \
            or compute_overhead_cycles < 0:
        raise ArchError(f"must be a non-negative integer, got {compute_overhead_cycles!r}", source=src,
                        field="compute_overhead_cycles")
    if not isinstance(pipelined, bool):
        raise ArchError(f"must be true or false, got {pipelined!r}", source=src, field="pipelined")
    ws = dataflow == "ws"
    overlapped = ws and pipelined
    sp_bytes, acc_bytes = scratchpad_kib * 1024, accumulator_kib * 1024
    stationary_bytes = 1 if ws else 4
    if ws:
        # rows take reduction channels; a kernel's R and S are walked in time by Gemmini's programs (ours and
        # the library's) even where they index no window (a 1x1 image), so the MIP never unrolls them there
        rows = SpatialAxis("rows", dim, roles=frozenset({"input", "weight"}), window_dims=False,
                           excluded=frozenset({"R", "S"}))
    else:
        rows = SpatialAxis("rows", dim, roles=frozenset({"input", "output"}), window_dims=True)
    cols = SpatialAxis("cols", dim, roles=frozenset({"weight", "output"}))
    levels = (
        # DRAM transfers overlap compute only when the code generator pipelines (the next tile's mvins
        # among the current tile's computes): the core issues commands in program order into shallow
        # queues (8 execute entries, a few DIM-cycle computes), so a tile's mvins issued as one burst
        # enter the load queue only when the previous tile's computes have nearly all been issued
        # (calibrated against gemmini.sim.timing).
        # The DMA moves rows (measured on our RTL, gemmini/rtl): an mvin row costs its 16-byte beats + 1
        # cycle, an mvout row at least 1.5 cycles (one-beat rows go at 2 per 3 cycles), so narrow rows
        # cost up to twice their bytes at 16 B/cycle.
        Level("DRAM", None, ALL, read_bandwidth=16.0, write_bandwidth=16.0,
              read_energy_pj_per_byte=DRAM_PJ_PER_BYTE, write_energy_pj_per_byte=DRAM_PJ_PER_BYTE,
              double_buffered=overlapped, read_row_extra_cycles=1.0, write_row_min_cycles=1.5),
        # Rows of DIM bytes: under WS an input row holds the channels unrolled on the array rows, a weight
        # row the output channels unrolled on its columns (a narrower block still takes a whole row).  OS
        # input rows hold a chunk of the Registers-level reduction, which no spatial axis describes, so the
        # OS scratchpad is counted in words (it may then admit tiles the code generator refuses).
        Level("Scratchpad", sp_bytes, frozenset({"input", "weight"}), word_bits=8,
              read_energy_pj_per_byte=sram_pj_per_byte(sp_bytes), write_energy_pj_per_byte=sram_pj_per_byte(sp_bytes),
              fanout=1, double_buffered=ws, row_bytes=dim if ws else None,
              row_axes=(("input", "rows"), ("weight", "cols")) if ws else (),
              # one mvin row carries up to 64 bytes (the code generator's max_mvin_cols_sp; at least a block)
              max_transfer_row_bytes=max(64, dim)),
        Level("Accumulator", acc_bytes, frozenset({"output"}), word_bits=32,
              read_energy_pj_per_byte=sram_pj_per_byte(acc_bytes),
              write_energy_pj_per_byte=sram_pj_per_byte(acc_bytes),
              fanout=dim * dim, spatial_axes=(rows, cols), double_buffered=ws,
              # rows of DIM int32: one row per output pixel holds the output channels on the columns
              row_bytes=4 * dim, row_axes=(("output", "cols"),),
              # mvout and partial-sum mvin rows move one DIM-column block
              max_transfer_row_bytes=4 * dim,
              # Partial sums spill to DRAM and come back as full int32 rows (mvout full width, mvin3).
              # Every output tile starts from its int32 bias, broadcast into all of its rows by mvins
              # (Gemmini reads D only from the scratchpad, so the bias cannot be added on the fly).
              partial_sum_bits=32, init_fill_bits=32),
        # WS: the weights shift through the array one row per cycle, so one PE gets a new word every
        # DIM cycles (its reads feed the MAC every cycle and are not a bottleneck); the PE's second
        # register lets the next preload overlap the current compute (double buffered).  OS: the
        # stationary partial sum is updated in place by every MAC (a write per cycle), so no
        # bandwidth limit: a write bandwidth there would throttle the MACs themselves.
        Level("Registers", 2 * stationary_bytes, frozenset({"weight"}) if ws else frozenset({"output"}),
              word_bits=8 if ws else 32, write_bandwidth=stationary_bytes / dim if ws else None,
              read_energy_pj_per_byte=REGISTER_PJ_PER_BYTE, write_energy_pj_per_byte=REGISTER_PJ_PER_BYTE,
              fanout=1, double_buffered=True,
              # WS: one compute streams a run of at most DIM pixel rows under one weight block (rows equally
              # spaced in the scratchpad and consecutive in the accumulator) and occupies the array for its
              # rows + 3 cycles (calibrated against our RTL, gemmini/rtl); a new weight block's DIM-cycle shift
              # overlaps only the compute before it (double_buffered + write bandwidth: ComputeRuns.work), so
              # short runs under changing weights take about DIM + rows / 2 cycles.  OS: the code generator streams
              # the reduction, one compute per (kh, kw) of up to DIM channels, which the run rule does not
              # describe: each compute is charged DIM cycles instead.
              compute_rows=dim if ws else None, compute_overhead_cycles=compute_overhead_cycles if ws else 0,
              compute_quantum=1 if ws else dim),
    )
    return Arch(
        name="gemmini" if ws else "gemmini-os", levels=levels, macs_per_cycle=1, mac_energy_pj=INT8_MAC_PJ,
        dataflow=dataflow, source="Gemmini default config (ucb-bar/gemmini); energies Horowitz ISSCC 2014",
        params={"dim": dim, "scratchpad_kib": scratchpad_kib, "accumulator_kib": accumulator_kib,
                "sp_banks": sp_banks, "acc_banks": acc_banks, "dataflow": dataflow,
                "compute_overhead_cycles": compute_overhead_cycles, "pipelined": overlapped},
    )


# CoSA's Simba-like architecture (ucb-bar/cosa configs/arch/simba.yaml, the v0.2 form), innermost first:
# (name, entries, instances, word-bits, extra fields).  1,024 MACs per cycle; DRAM 20 words/cycle.
_SIMBA_STORAGE = (
    ("Registers", 1, 1024, 8, {"cluster-size": 64, "num-ports": 2, "num-banks": 8}),
    ("AccumulationBuffer", 64, 128, 24, {"cluster-size": 8, "network-word-bits": 16, "num-ports": 2,
                                         "num-banks": 2}),
    ("WeightBuffer", 16384, 128, 8, {"block-size": 8, "num-ports": 1, "num-banks": 8}),
    ("InputBuffer", 4096, 16, 8, {"block-size": 8, "num-ports": 2, "num-banks": 1}),
    ("GlobalBuffer", 65536, 1, 8, {"block-size": 8, "num-ports": 2, "num-banks": 256}),
    ("DRAM", None, 1, 8, {"technology": "DRAM", "block-size": 64, "bandwidth": 20.0}),
)


def simba_v02_document() -> dict:
    """The v0.2 ``arch`` mapping of CoSA's Simba (the form ``load_arch`` reads from files)."""
    storage = []
    for name, entries, instances, bits, extra in _SIMBA_STORAGE:
        st = {"name": name, "instances": instances, "word-bits": bits, **extra}
        if entries is not None:
            st["entries"] = entries
        storage.append(st)
    return {"arithmetic": {"instances": 1024, "word-bits": 8}, "storage": storage}


def simba() -> Arch:
    """CoSA's Simba-like accelerator: 16 PEs x 8 vector units x 8 lanes = 1,024 int8 MACs per cycle.

    Sizes, instances and the DRAM bandwidth (20 words/cycle) from CoSA's
    simba.yaml; which level holds which tensor from CoSA's mapspace; energies
    from Horowitz ISSCC 2014 by capacity (CoSA's Accelergy tables are not
    reproduced).  Its on-chip buffers are not double-buffered (Timeloop does
    not halve them); DRAM transfers overlap compute as in Timeloop.
    """
    arch = from_cosa_v02(simba_v02_document(), source="preset simba", name="simba")
    return arch


def eyeriss(pe_rows: int = 12, pe_cols: int = 14, glb_kib: int = 108) -> Arch:
    """An Eyeriss-like row-stationary accelerator (Chen et al., ISSCC 2016 / JSSC 2017).

    12 x 14 PEs of 16-bit MACs; a 108 KB global buffer for input feature maps
    and partial sums (filters go from DRAM straight to the PEs); per PE a
    224-word filter scratchpad, a 12-word input scratchpad and a 24-word psum
    scratchpad; a 64-bit off-chip data bus (8 B/cycle).  Energies follow the
    paper's normalized costs (DRAM 200x, global buffer 6x, register file 1x a
    16-bit MAC), with a 16-bit MAC taken as 1 pJ (between Horowitz's 8-bit and
    32-bit figures).
    """
    mac_pj = 1.0
    per_byte = mac_pj / 2  # the normalized costs are per 16-bit word
    pes = pe_rows * pe_cols
    levels = (
        Level("DRAM", None, ALL, read_bandwidth=8.0, write_bandwidth=8.0,
              read_energy_pj_per_byte=200 * per_byte, write_energy_pj_per_byte=200 * per_byte,
              double_buffered=True),
        Level("GlobalBuffer", glb_kib * 1024, frozenset({"input", "output"}), word_bits=16,
              read_energy_pj_per_byte=6 * per_byte, write_energy_pj_per_byte=6 * per_byte, fanout=pes),
        Level("FilterSpad", 224 * 2, frozenset({"weight"}), word_bits=16,
              read_energy_pj_per_byte=per_byte, write_energy_pj_per_byte=per_byte),
        Level("InputSpad", 12 * 2, frozenset({"input"}), word_bits=16,
              read_energy_pj_per_byte=per_byte, write_energy_pj_per_byte=per_byte),
        Level("PsumSpad", 24 * 2, frozenset({"output"}), word_bits=16,
              read_energy_pj_per_byte=per_byte, write_energy_pj_per_byte=per_byte),
    )
    return Arch("eyeriss", levels, macs_per_cycle=1, mac_energy_pj=mac_pj,
                source="Eyeriss (Chen et al., ISSCC 2016, JSSC 2017)",
                params={"pe_rows": pe_rows, "pe_cols": pe_cols, "glb_kib": glb_kib})


def cpu(cores: int = 8, simd_lanes: int = 16, fma_per_cycle: int = 2, l1_kib: int = 32, l2_kib: int = 1024,
        l3_mib: int = 16, dram_bytes_per_cycle: float = 20.0) -> Arch:
    """A multicore CPU: DRAM, a shared L3 fanning out to the cores, private L2 and L1, SIMD lanes.

    Fan-out: L3 -> ``cores`` private L2/L1 pairs; L1 -> ``simd_lanes`` fp32
    lanes, each doing ``fma_per_cycle`` FMAs per cycle (two FMA ports).
    Bandwidths per instance (bytes/cycle): L1 128 read / 64 write (two 64-byte
    loads, one store), L2 64, L3 32 per core, DRAM ``dram_bytes_per_cycle``
    (about 60 GB/s at 3 GHz): representative of a current x86 server core.
    Caches are not double-buffered; hardware prefetching overlaps DRAM
    transfers with compute.  The core (``params``, read by the micro-kernel
    issue model, ``costmodel.microkernel``): an FMA latency of 4 cycles (so
    ``fma_chains`` = 4 x ``fma_per_cycle`` independent chains reach the peak),
    two vector loads per cycle, half a cycle per word of a packing copy (``costmodel.packing``; the
    mean over the generator's copy shapes measured on a Zen 4 core).  The caches are hardware-managed (``lru_caches``:
    a tile that comes back while the data touched since fits is a hit,
    ``costmodel.evaluate.cache_tile_level``).  Energies: Horowitz ISSCC 2014 (SRAM by capacity,
    DRAM, fp32 FMA).
    """
    l1, l2, l3 = l1_kib * 1024, l2_kib * 1024, l3_mib * 1024 * 1024
    levels = (
        Level("DRAM", None, ALL, read_bandwidth=dram_bytes_per_cycle, write_bandwidth=dram_bytes_per_cycle,
              read_energy_pj_per_byte=DRAM_PJ_PER_BYTE, write_energy_pj_per_byte=DRAM_PJ_PER_BYTE,
              double_buffered=True),
        Level("L3", l3, ALL, read_bandwidth=32.0 * cores, write_bandwidth=32.0 * cores,
              read_energy_pj_per_byte=sram_pj_per_byte(l3), write_energy_pj_per_byte=sram_pj_per_byte(l3),
              fanout=cores),
        Level("L2", l2, ALL, read_bandwidth=64.0, write_bandwidth=64.0,
              read_energy_pj_per_byte=sram_pj_per_byte(l2), write_energy_pj_per_byte=sram_pj_per_byte(l2)),
        Level("L1", l1, ALL, read_bandwidth=128.0, write_bandwidth=64.0,
              read_energy_pj_per_byte=sram_pj_per_byte(l1), write_energy_pj_per_byte=sram_pj_per_byte(l1),
              fanout=simd_lanes),
    )
    return Arch("cpu", levels, macs_per_cycle=fma_per_cycle, mac_energy_pj=FP32_MAC_PJ, frequency_hz=3e9,
                source="representative x86 server core; energies Horowitz ISSCC 2014",
                params={"cores": cores, "simd_lanes": simd_lanes, "fma_per_cycle": fma_per_cycle,
                        "fma_chains": 4 * fma_per_cycle, "loads_per_cycle": 2, "pack_cycles_per_word": 0.5,
                        "lru_caches": ["L3", "L2", "L1"],
                        "l1_kib": l1_kib, "l2_kib": l2_kib, "l3_mib": l3_mib})


def cluster(nodes: int = 4, link_bytes_per_cycle: float = 4.0, network_pj_per_byte: float = 80.0,
            node_dram_gib: int = 64, **cpu_args) -> Arch:
    """A cluster: a network level outermost with ``nodes`` CPU nodes (``cpu`` preset) below it.

    The network holds the whole problem (the distributed data) and fans out
    to the nodes' DRAM (``node_dram_gib`` each).  Link: 4 B/cycle per node
    (about 100 Gb/s at 3 GHz, an InfiniBand EDR port); energy about 10 pJ/bit
    for a switched electrical link: representative figures, not measured.
    """
    node = cpu(**cpu_args)
    dram = node.levels[0]
    node_dram = Level("DRAM", node_dram_gib * 1024 ** 3, ALL, read_bandwidth=dram.read_bandwidth,
                      write_bandwidth=dram.write_bandwidth, read_energy_pj_per_byte=dram.read_energy_pj_per_byte,
                      write_energy_pj_per_byte=dram.write_energy_pj_per_byte, fanout=dram.fanout,
                      double_buffered=True)
    network = Level("Network", None, ALL, read_bandwidth=link_bytes_per_cycle * nodes,
                    write_bandwidth=link_bytes_per_cycle * nodes, read_energy_pj_per_byte=network_pj_per_byte,
                    write_energy_pj_per_byte=network_pj_per_byte, fanout=nodes, double_buffered=True)
    return Arch("cluster", (network, node_dram) + node.levels[1:], macs_per_cycle=node.macs_per_cycle,
                mac_energy_pj=node.mac_energy_pj, frequency_hz=node.frequency_hz,
                source="cpu nodes on a switched network; representative figures",
                params={"nodes": nodes, "link_bytes_per_cycle": link_bytes_per_cycle, **node.params})


def gpu(sms: int = 32, lanes_per_sm: int = 128, shared_kib: int = 48, l2_mib: int = 4,
        register_words: int = 128, dram_bytes_per_cycle: float = 512.0, l2_bytes_per_cycle: float = 1536.0,
        frequency_hz: float = 1.5e9, name: str = "gpu") -> Arch:
    """A GPU: DRAM -> L2 (fans out to thread blocks) -> shared memory per block (fans out to threads)
    -> registers per thread.

    One block per SM and one thread per FP32 lane (``lanes_per_sm`` threads per
    block), each doing one FMA per cycle, so the machine peaks at ``sms`` x
    ``lanes_per_sm`` MACs per cycle.  Capacities: L2 ``l2_mib`` MiB shared by
    all blocks (hardware-managed: the mapping's L2 tile is a loop band, not a
    copy); shared memory ``shared_kib`` KiB per block (48 KiB is CUDA's limit
    for static shared arrays); registers ``register_words`` 32-bit words per
    thread for tiles.  Bandwidths in bytes per cycle of the whole machine
    (DRAM, L2) or per block (shared memory: 32 banks x 4 B).  Defaults: a
    generic mid-range GPU (32 SMs, 1.5 GHz, 768 GB/s); ``preset("gpu-h200")``
    gives H200-like figures.  Energies: Horowitz ISSCC 2014 (SRAM by capacity,
    DRAM, fp32 FMA).  The L2 and shared levels are not double-buffered (the
    generated kernels stage one tile at a time).
    """
    src = f"preset {name}"
    for label, value in (("sms", sms), ("lanes_per_sm", lanes_per_sm), ("shared_kib", shared_kib),
                         ("l2_mib", l2_mib), ("register_words", register_words)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ArchError(f"must be a positive integer, got {value!r}", source=src, field=label)
    l2, shared, regs = l2_mib * 1024 * 1024, shared_kib * 1024, register_words * 4
    levels = (
        Level("DRAM", None, ALL, read_bandwidth=dram_bytes_per_cycle, write_bandwidth=dram_bytes_per_cycle,
              read_energy_pj_per_byte=DRAM_PJ_PER_BYTE, write_energy_pj_per_byte=DRAM_PJ_PER_BYTE,
              double_buffered=True),
        Level("L2", l2, ALL, read_bandwidth=l2_bytes_per_cycle, write_bandwidth=l2_bytes_per_cycle,
              read_energy_pj_per_byte=sram_pj_per_byte(l2), write_energy_pj_per_byte=sram_pj_per_byte(l2),
              fanout=sms),
        Level("Shared", shared, ALL, read_bandwidth=128.0, write_bandwidth=128.0,
              read_energy_pj_per_byte=sram_pj_per_byte(shared), write_energy_pj_per_byte=sram_pj_per_byte(shared),
              fanout=lanes_per_sm),
        Level("Registers", regs, ALL, read_energy_pj_per_byte=REGISTER_PJ_PER_BYTE,
              write_energy_pj_per_byte=REGISTER_PJ_PER_BYTE),
    )
    return Arch(name, levels, macs_per_cycle=1, mac_energy_pj=FP32_MAC_PJ, frequency_hz=frequency_hz,
                source="representative GPU figures; energies Horowitz ISSCC 2014",
                params={"kind": "gpu", "sms": sms, "lanes_per_sm": lanes_per_sm, "shared_kib": shared_kib,
                        "l2_mib": l2_mib, "register_words": register_words})


def gpu_h200(**kwargs) -> Arch:
    """H200-like figures for ``gpu``: 132 SMs x 128 FP32 lanes at 1.98 GHz (67 TFLOP/s fp32), 50 MiB L2,
    48 KiB static shared memory per block, HBM3e 4.8 TB/s (2,424 B/cycle), L2 about 2.5x that (NVIDIA's
    H100/H200 datasheets; the L2 bandwidth is an estimate)."""
    args = dict(sms=132, lanes_per_sm=128, shared_kib=48, l2_mib=50, register_words=128,
                dram_bytes_per_cycle=2424.0, l2_bytes_per_cycle=6000.0, frequency_hz=1.98e9, name="gpu-h200")
    args.update(kwargs)
    return gpu(**args)


_PRESETS = {
    "gemmini": lambda **kw: gemmini(**kw),
    "gemmini-ws": lambda **kw: gemmini(**{**kw, "dataflow": "ws"}),
    "gemmini-os": lambda **kw: gemmini(**{**kw, "dataflow": "os"}),
    "simba": lambda **kw: simba(**kw),
    "eyeriss": lambda **kw: eyeriss(**kw),
    "cpu": lambda **kw: cpu(**kw),
    "cluster": lambda **kw: cluster(**kw),
    "gpu": lambda **kw: gpu(**kw),
    "gpu-h200": lambda **kw: gpu_h200(**kw),
}


def list_presets() -> list[str]:
    """Names ``preset`` accepts."""
    return list(_PRESETS)


def preset(name: str, **kwargs) -> Arch:
    """The preset called ``name`` (``list_presets()``), with keyword overrides of its arguments."""
    key = str(name).lower()
    if key not in _PRESETS:
        raise ArchError(f"unknown preset '{name}'; known: {list_presets()}", source="preset", field="name")
    try:
        return _PRESETS[key](**kwargs)
    except TypeError as exc:
        raise ArchError(f"bad arguments {sorted(kwargs)}: {exc}", source=f"preset {key}", field="arguments") from None
