"""The register micro-kernel of a CPU mapping and the cycles its instructions take to issue.

A CPU code generator (``targets.cpu.plan``) runs the innermost tile of a mapping (the *kernel tile*: the
tile of the level above an outputs-only register level, with that level's loops inside) as an outer
product: an ``mr`` x (``nv`` x lanes) block of outputs, rows along a dim ``i``, vector lanes along the
output's contiguous dim ``j`` (or an output dim that fills the vectors better, ``lane_dim``), stays in vector registers while the tile's reduction loops run.  Each
reduction step of a block issues ``mr * nv`` vector FMAs, one per accumulator, and the loads of their
operands: per input, ``nv`` vectors (an operand indexed by ``j``; ``mr * nv`` when it is indexed by
``i`` too, as a convolution's input row is) or one broadcast scalar (``mr`` when indexed by ``i``).

Issue cycles of one step (``step_cycles``), the slowest of three limits of the core (all machine facts
``cosa arch calibrate cpu`` measures, ``MicroKernelSpec``):

* the FMA pipes: ``mr * nv / fma_per_cycle``;
* the FMA latency: each accumulator's FMAs form a dependent chain, so a step takes at least one FMA
  latency, ``fma_chains / fma_per_cycle`` cycles, where ``fma_chains`` is the number of independent
  chains that reach the peak (latency x pipes);
* the load ports: ``loads / loads_per_cycle`` (a broadcast takes a load slot like a vector; a vector
  of an input read in place whose lanes are not adjacent there is gathered, a load per lane:
  ``packing.gathered_inputs``).

A block's row that is narrower than the lanes still issues whole vectors (``ceil(ext_j / lanes)`` per
row), and a kernel tile less than a quarter of a vector wide runs scalar code (one lane): a 7-wide row in
16 lanes issues 7 MACs per vector FMA, 7 times what scalar code does (AVX-512 loads and stores its partial
vectors masked).  So the issue cycles
of the nest on one core = (vector FMAs per core) x step cycles / (FMAs per step), with the MACs shared
evenly by the cores that the fan-outs above the kernel tile use, plus, per block, the load and store of
its ``mr * nv`` accumulators (whole vectors; along a strided output dim from a scratch copy of the output
with that dim innermost, ``scratch_axis``, whose copy into the output is priced as a packing copy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from workloads.divisors import largest_divisor_at_most


VECTOR_SHARE = 4  # a tile under 1 / VECTOR_SHARE of a vector wide along j runs scalar code


@dataclass(frozen=True)
class MicroKernelSpec:
    """The core's facts the issue model needs (``Arch.params["micro_kernel"]`` as a dict).

    lanes: words per vector of the compute type; registers: vector registers; fma_per_cycle: vector
    FMAs issued per cycle; fma_chains: independent FMA chains that reach that rate (latency x pipes);
    loads_per_cycle: vector or broadcast loads per cycle from the L1 cache; pack_cycles_per_word: cycles
    one word of a packing copy takes (``costmodel.packing``; 0: copies not priced)."""

    lanes: int
    registers: int
    fma_per_cycle: float = 1.0
    fma_chains: int = 4
    loads_per_cycle: float = 1.0
    pack_cycles_per_word: float = 0.0


@dataclass(frozen=True)
class Block:
    """The micro-kernel's register block: ``j`` (lanes), ``i`` (rows; None: one row), lanes used per
    vector (1: scalar code), ``mr`` rows by ``nv`` vectors."""

    j: str | None
    i: str | None
    lanes: int
    mr: int
    nv: int


def register_tile(rows: int, cols: int, lanes: int, registers: int) -> tuple[int, int]:
    """(mr, nv): the register block of an outer-product micro-kernel over a ``rows`` x ``cols`` output tile.

    Each K step loads ``nv`` vectors of ``lanes`` (the B row) and broadcasts ``mr`` scalars (the A
    column) into ``mr * nv`` accumulators, which stay in registers for the whole K panel; so the block
    needs ``mr * nv + nv + 1`` of the ``registers`` vector registers (accumulators, the B vectors, one
    broadcast), and it does ``mr * nv`` FMAs per ``mr + nv`` loads.  The block with the most FMAs per load
    that fits is chosen (AVX-512, 32 registers, fp32: 6 x 4 vectors = 6 x 64, or 14 x 2 = 14 x 32 when
    the tile is 32 wide; AVX2, 16 registers: 6 x 2 = 6 x 16 in fp32), preferring a row count that divides
    ``rows`` (no ragged last block) unless that loses more than a quarter of the FMAs per load.  A row of
    vectors that ``nv`` does not divide ends in a narrower block (196 words: three blocks of 4 vectors and
    one of 1), counted in the FMAs per load, where it follows at least two full blocks.
    """
    if lanes == 1:  # scalar accumulators: a block of rows by one column group
        nv_max = 1
    else:
        nv_max = max(1, min(4, -(-cols // lanes)))
    best = None
    vectors = -(-cols // lanes)
    for nv in range(1, nv_max + 1):
        blocks = -(-vectors // nv)  # the last one narrower when nv does not divide the row's vectors
        if lanes > 1 and nv > 1 and cols % (nv * lanes) and cols >= nv * lanes and blocks < 3:
            continue  # a ragged remainder block beside one or two full ones
        limit = max(1, min(rows, (registers - nv - 1) // nv))
        for mr in {limit, largest_divisor_at_most(rows, limit)}:
            # FMAs per load over a whole row of blocks (the remainder block loads mr broadcasts too)
            per_load = mr * vectors / (blocks * mr + vectors) if lanes > 1 and cols > nv * lanes else mr * nv / (mr + nv)
            score = per_load * (1.0 if rows % mr == 0 else 0.75)
            key = (score, mr * nv, -nv)
            if best is None or key > best[0]:
                best = (key, mr, nv)
    return best[1], best[2]


def separable(dim: str, output, bounds: dict) -> bool:
    """True when distinct values of ``dim`` (others fixed) address disjoint output elements: some output
    axis holds ``dim`` with a coefficient larger than the range of the rest of that axis (``K``,
    ``G*kg + K``; not ``P + R``)."""
    for expr in output.indices:
        c = abs(expr.coef(dim))
        if c and c > sum(abs(c2) * (bounds[d] - 1) for d, c2 in expr.terms if d != dim):
            return True
    return False


def contiguous_dim(workload) -> str | None:
    """The dim the output's last axis moves by one word (its vector lanes), or None."""
    out = workload.output
    last = out.indices[-1] if out.indices else None
    if last is not None and len(last.terms) == 1 and last.terms[0][1] == 1 and \
            sum(1 for e in out.indices if last.dims[0] in e.dims) == 1:
        return last.dims[0]
    return None


def lane_use(extent: int, lanes: int) -> float:
    """The share of vector lanes a run of ``extent`` words fills (7 in 16 lanes: 0.44; 32: 1)."""
    return extent / (-(-extent // lanes) * lanes)


#: Lanes go along another output dim than the contiguous one only when it fills this much more of the
#: vectors (a 7-wide image row fills 44 % of 16 lanes, 16 output channels all of them).  Such lanes move
#: their accumulators lane by lane: on a 7 x 7 1x1 convolution's 49-pixel rows (77 % of four vectors),
#: output-channel lanes ran 55 GFLOP/s and pixel lanes 76-77 (AVX-512, one core), so a gain under a
#: third does not pay for the strided moves.  Kept with the scratch (``scratch_axis``), which made those
#: moves whole vectors: ``bench/cpu_kernels.py --cases res4b_branch2b,res5b_branch2a --threads 1 --lane-gain
#: 1.1`` (Zen 4) ran res4b_branch2b's 14 x 2-vector channel blocks at 1.15x NumPy, as fast as its row
#: blocks (chosen at 1.35), but res5b_branch2a's 7 x 3 ones at 0.40x against 1.12x (0.42x again at
#: 56d4f3e: 512 channels are no whole number of 48-lane blocks, so the weights are no panel and are
#: gathered, ``packing.gathered_inputs``, which the model prices but not enough to keep the MIP off them).
LANE_GAIN = 1.35


def lane_dim(workload, extents: dict, lanes: int) -> str | None:
    """The dim of the vector lanes: the output's contiguous dim, unless another output-separable dim that no
    other output axis shares fills the vectors ``LANE_GAIN`` times better (a convolution's output channels
    on a 7x7 image: its accumulators are then loaded and stored with the channel stride, once per block,
    while the block's whole reduction runs in registers)."""
    out, bounds = workload.output, workload.dims
    j = contiguous_dim(workload)
    if lanes <= 1 or not out.indices:
        return j
    alone = [e.dims[0] for e in out.indices if len(e.terms) == 1 and e.terms[0][1] == 1]
    cands = [d for d in alone if d != j and separable(d, out, bounds) and extents.get(d, 1) >= lanes]
    best = max(cands, key=lambda d: (lane_use(extents[d], lanes), extents[d]), default=None)
    if best is None or (j is not None and lane_use(extents[best], lanes) <= LANE_GAIN * lane_use(extents[j], lanes)):
        return j
    return best


def block(workload, extents: dict, lanes: int, registers: int, scalar: bool = False) -> Block:
    """The register block of a kernel tile of ``extents`` (words per dim) on ``lanes``-wide vectors:
    ``j`` the lane dim (``lane_dim``: the output's contiguous dim, or an output dim that fills the vectors
    better; a run of at least a quarter of a vector goes in (partial) vectors, else scalar code, as with
    ``scalar``); ``i`` the largest other output-separable dim of the tile, one that some input does not
    depend on (its reuse) first; (mr, nv) from ``register_tile``."""
    dims = list(workload.dims)
    out, bounds = workload.output, workload.dims
    j = contiguous_dim(workload) if scalar else lane_dim(workload, extents, lanes)
    if j is None or scalar or VECTOR_SHARE * extents[j] < lanes:
        lanes = 1
        if j is None:
            cands = [d for d in dims if d in out.dims and separable(d, out, bounds)]
            j = max(cands, key=lambda d: extents[d], default=None)
    if j is None:
        return Block(None, None, 1, 1, 1)
    icands = [d for d in dims if d != j and d in out.dims and extents[d] > 1 and separable(d, out, bounds)]
    reuse = [d for d in icands if any(d not in t.dims for t in workload.inputs)]
    i = max(reuse or icands, key=lambda d: extents[d], default=None)
    mr, nv = register_tile(extents[i] if i is not None else 1, extents[j], lanes, registers)
    return Block(j, i, lanes, mr, nv)


def scratch_axis(workload, blk: Block) -> int | None:
    """The output axis of the lane dim ``j`` when that is not the output's contiguous dim (a 7x7 image's
    output channels, ``lane_dim``), else None.  The kernel then accumulates into a scratch copy of the
    output with that axis innermost (NCHWc-style), so a block's accumulators load and store as whole
    vectors, and transposes the scratch into the output once, after the nest.  ``bench/cpu_kernels.py``
    on Zen 4 (one core, the runs recorded at these commits): res5a_branch2b 0.81x NumPy with lane-by-lane
    moves (6de41d8), 1.09x with the scratch (dd97202); res5b_branch2b 1.13x and 1.21x."""
    if blk.j is None or blk.lanes <= 1 or blk.j == contiguous_dim(workload):
        return None
    return next((a for a, e in enumerate(workload.output.indices) if e.terms == ((blk.j, 1),)), None)


def step_cycles(workload, blk: Block, spec: MicroKernelSpec, gathered: frozenset = frozenset()) -> float:
    """Issue cycles of one reduction step of a block (see the module docstring); a vector of an input in
    ``gathered`` takes a load per lane."""
    fmas = blk.mr * blk.nv
    loads = 0
    for t in workload.inputs:
        rows = blk.mr if blk.i is not None and blk.i in t.dims else 1
        loads += rows * (blk.nv * (blk.lanes if t.name in gathered else 1) if blk.j in t.dims else 1)
    return max(fmas / spec.fma_per_cycle, spec.fma_chains / spec.fma_per_cycle, loads / spec.loads_per_cycle)


def lane_stride(tensor, dim: str, bounds: dict, shape: tuple[int, ...] | None = None) -> int:
    """Words between two elements of ``tensor``'s stored array (row-major over its axes; ``shape`` words per
    axis, else its stored shape) one step of ``dim`` apart: 1 where ``dim`` moves its last axis by one, as a
    vector's lanes need.  ``shape``: a packed box (``packing.pack_box``)."""
    if shape is None:
        shape = tensor.shape if tensor.shape is not None else \
            tuple(e.value_range(bounds)[1] + 1 for e in tensor.indices)
    stride, out = 1, 0
    for a in reversed(range(len(tensor.indices))):
        out += stride * tensor.indices[a].coef(dim)
        stride *= shape[a]
    return out


def issue_cycles(workload, mapping, kernel: int, spec: MicroKernelSpec, gathered: frozenset = frozenset()) -> float:
    """Cycles one core takes to issue the micro-kernel's FMAs and operand loads over the whole nest.

    ``kernel``: the level whose tile is the micro-kernel.  The MACs are shared by the instances of the
    fan-outs above it (the cores).  ``gathered``: the inputs whose vectors the kernel gathers lane by lane
    (``packing.gathered_inputs``)."""
    extents = mapping.tile_extents(kernel, workload.dims)
    blk = block(workload, extents, spec.lanes, spec.registers)
    cores = math.prod(mapping.levels[k].spatial_factor(d) for k in range(kernel) for d in workload.dims)
    per_core = workload.macs / cores
    if blk.j is not None and blk.lanes > 1:
        width = extents[blk.j]
        vector_fmas = per_core / width * math.ceil(width / blk.lanes)
    else:
        vector_fmas = per_core
    cycles = vector_fmas * step_cycles(workload, blk, spec, gathered) / (blk.mr * blk.nv)
    # each block loads its accumulators before its reduction and stores them after, through the load and
    # store ports: one whole vector each (along a strided output dim from the scratch, ``scratch_axis``,
    # which is copied into the output once, after the nest; lane by lane where there is none)
    steps = math.prod(extents[d] for d in workload.dims if d not in workload.output.dims)
    blocks = vector_fmas / (blk.mr * blk.nv * max(1, steps))
    scratch = scratch_axis(workload, blk) is not None
    strided = blk.j is not None and blk.lanes > 1 and blk.j != contiguous_dim(workload) and not scratch
    cycles += blocks * 2 * blk.mr * blk.nv * (blk.lanes if strided else 1) / spec.loads_per_cycle
    if scratch:
        cycles += workload.output.tile_words(workload.dims) * spec.pack_cycles_per_word
    return cycles


def kernel_level(arch) -> int:
    """The level whose tile is the micro-kernel: the innermost, or the one above it when the innermost
    holds outputs only (a register level: the micro-kernel runs its loops too)."""
    inner = len(arch.levels) - 1
    return inner - 1 if inner > 0 and frozenset(arch.levels[inner].holds) == {"output"} else inner


def spec_of(arch) -> MicroKernelSpec | None:
    """The arch's ``params["micro_kernel"]`` as a MicroKernelSpec; None where it has none (not a CPU
    arch with its register file as a level)."""
    got = arch.params.get("micro_kernel")
    return MicroKernelSpec(**got) if got else None
