"""Cycles of a matmul run by Gemmini's loop instruction LOOP_WS, as the library's ``tiled_matmul`` issues it.

The program: ``tiled_matmul`` (gemmini.h) walks tiles of (tile_I, tile_J, tile_K) DIM blocks, k innermost,
with ragged last tiles, and issues one LOOP_WS per tile; Gemmini's loop unroller (LoopMatmul.scala) expands
each into mvins of A (rows of the I tile, K blocks grouped by ``max_mvin_bytes``), of B (DIM rows per K block,
always, J blocks grouped), of the bias D (first K tile only), preload/compute pairs and the mvouts of C (last K
tile only).  Two loops are in flight: the loads of the next tile overlap the computes of this one.  When
``I0 * K0 <= 2`` the library keeps A in the scratchpad across J tiles (``a_reuse``), likewise B across I
tiles when ``J0 * K0 <= 2`` (``b_reuse``).

The model, in cycles, per mechanism (each term is a product of one factor per dimension, which is what the
MIP over these tiles, ``cosa.mip.loop_tiles``, linearises):

* load unit: an mvin row of ``b`` bytes costs ``ceil(b / dma_bytes_per_cycle) + 1`` cycles (one beat per
  cycle and one cycle to assemble the row; ``row_gap_cycles``), mvins back to back;  A: M rows per K tile group, once per J tile
  (once in all with ``a_reuse``); B: DIM rows per K block per J group, once per I tile (once with
  ``b_reuse``); D: M rows per J group at accumulator width, once;
* bank contention: while the array preloads weights from the bank the load unit is writing B into, the
  writer waits (the array has priority): ``contention`` lost cycles per preloaded row, once per B load.
  Gemmini's scratchpad serves the writes first (the timing model's f13847e units), so there the charge
  stands for something else; kept at 1 because without it the MIP picks one-block K tiles on res2a_branch2a
  (3136 x 64 x 64), which run 1.54x the best sampled tiling on that timing model for a per-loop cost this
  model lacks (``bench/gemmini_loop_model.py --soc chipyard-1.10``);
* execute: a weight block is preloaded once per I tile and streams the I tile's rows; one weight block used
  by a single A block costs ``weight_reload_cycles`` (its preload cannot hide behind one compute); the
  preload's DIM cycles hide behind the previous compute only, so after a ragged last A block of r < DIM
  rows, DIM - r cycles are exposed (``preload_exposure``: M = 49 streams 64 cycles per block, not 49);
* the A bank: a tile's computes start as soon as its first A block is in and then read the bank its
  remaining A blocks are being written into; the array has priority and the load unit is in order, so a
  tile that moves A in spends its A load cycles and its compute cycles one after the other on that bank
  (tiles that keep A resident, under ``a_reuse``, do not);
* the SoC's memory (``line_fill_cycles``): the first I tile reads B's lines for the first time, and where a B
  row's lines take longer to cross the memory bus than the array spends per B row, the array waits
  (``cold_b_stall``: the loads of a tile overlap the previous tile's computes only); likewise the first J
  tile reads A's lines (``cold_a_stall``); every line of A, B and the bias crosses the bus once
  (``memory_cycles``);
* cycles = max(load, execute + cold stalls, A bank, memory bus) + the first tile's A and D loads (nothing to
  compute before them) +
  the last tile's C stores (nothing left to hide them behind).

What it leaves out (its error against the timing model, ``gemmini.sim.timing``, is tested and reported):
the overlap of a tile's first A blocks with its computes, accumulator-bank conflicts of D rows, the
unroller's one-command-per-cycle issue and the load queue's depth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class LoopMachine:
    """Gemmini as its loop unrollers use it.

    dim: the array is dim x dim.  sp_rows / acc_rows: scratchpad and accumulator rows (the library gives each
    loop half of each).  input_bytes / acc_bytes: element bytes.  max_mvin_bytes: bytes of one mvin row
    (the library's MAX_BYTES).  dma_bytes_per_cycle: bytes per DMA beat.  weight_reload_cycles: cycles of a
    preload + compute pair whose weights serve one A block.  min_compute_cycles: the least a compute of few rows
    costs (its fixed cost in the array's pipeline).  contention: load-writer cycles lost per row
    the array preloads from the bank being loaded.  row_gap_cycles: load-unit cycles per mvin row beyond its
    beats (1 in our RTL; 0 in Gemmini f13847e, whose BeatMerger takes a row's request and first beat in one
    cycle).  repeated_row_fetched_once: a bias row repeated down the rows (an mvin of stride 0) is fetched
    once and written once per row, a cycle per DIM block (Gemmini f13847e's LoadController), not fetched
    per row (our RTL).  line_fill_cycles / line_bytes: the SoC's memory behind the DMA (0: none): a main-memory
    line of ``line_bytes`` that no earlier mvin read crosses the memory bus first, ``line_fill_cycles`` per
    line, one line after another (``GemminiConfig.soc_line_fill_cycles``)."""

    dim: int = 16
    sp_rows: int = 16384
    acc_rows: int = 1024
    input_bytes: int = 1
    acc_bytes: int = 4
    max_mvin_bytes: int = 64
    dma_bytes_per_cycle: int = 16
    weight_reload_cycles: int = 24
    min_compute_cycles: int = 6
    contention: float = 1.0
    row_gap_cycles: int = 1
    repeated_row_fetched_once: bool = False
    line_fill_cycles: int = 0
    line_bytes: int = 64

    @property
    def block_len(self) -> int:
        """DIM blocks per mvin at input width."""
        return max(self.max_mvin_bytes // (self.dim * self.input_bytes), 1)

    @property
    def block_len_acc(self) -> int:
        """DIM blocks per mvin at accumulator width."""
        return max(self.max_mvin_bytes // (self.dim * self.acc_bytes), 1)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def tile_extents(blocks: int, tile: int) -> list[int]:
    """DIM-block extents of the tiles of a dimension of ``blocks`` blocks (the last one ragged)."""
    full, last = divmod(blocks, tile)
    return [tile] * full + ([last] if last else [])


def tile_classes(n: int, tile: int) -> list[tuple[int, int]]:
    """The tiles of a dimension of ``n`` as (extent, how many) pairs: the full tiles, then the ragged last one."""
    full, last = divmod(n, tile)
    return ([(tile, full)] if full else []) + ([(last, 1)] if last else [])


def first_last(n: int, tile: int) -> tuple[int, int]:
    """Extents of the first and the last tile of a dimension of ``n``."""
    return min(tile, n), (n % tile or tile)


def class_sum(n: int, tile: int, f) -> float:
    """Sum of ``f(extent)`` over the tiles of a dimension of ``n``."""
    return sum(count * f(extent) for extent, count in tile_classes(n, tile))


def preload_exposure(rows: int, m: LoopMachine, floor: int = 0) -> int:
    """Execute cycles a weight block's preload adds after a compute of ``rows`` rows (the last row piece of up
    to DIM rows that the previous block streamed): the preload shifts its weights into the array in DIM
    cycles, behind the previous compute's stream only, so a last piece shorter than DIM leaves the rest
    exposed.  ``floor``: the least the caller's model already counts for that piece (the conv model's
    ``min_compute_cycles``)."""
    piece = rows % m.dim or m.dim
    return max(m.dim - max(piece, floor), 0)


def _row_cycles(blocks: int, group: int, elem_bytes: int, m: LoopMachine) -> int:
    """Load-unit cycles of one row of ``blocks`` DIM blocks moved in mvins of ``group`` blocks."""
    return class_sum(blocks, group, lambda g: cdiv(g * m.dim * elem_bytes, m.dma_bytes_per_cycle) + m.row_gap_cycles)


def bias_row_cycles(blocks: int, m: LoopMachine) -> int:
    """Load-unit cycles of one row of a repeated bias of ``blocks`` DIM blocks at accumulator width: fetched
    for every row, or (``repeated_row_fetched_once``) written once per row, a cycle per block."""
    if m.repeated_row_fetched_once:
        return blocks
    return _row_cycles(blocks, m.block_len_acc, m.acc_bytes, m)


def cold_rows(cols: int, tile: int, m: LoopMachine) -> list[tuple[int, float]]:
    """Per tile of ``tile`` blocks along a row-major operand's ``cols`` columns (A's K, B's J), (its blocks,
    the load-unit cycles of one of its rows the first time it is read): the lines of ``m.line_bytes`` that
    start in the row's bytes cross the memory bus first (a line read by the tile before it is not), so the
    row takes the longer of its mvins' cycles and those lines' ``m.line_fill_cycles``.  Empty without a
    line fill."""
    if not m.line_fill_cycles:
        return []
    out, start = [], 0
    width = m.dim * m.input_bytes  # bytes of one block of a row
    for blocks in tile_extents(cdiv(cols, m.dim), tile):
        a, b = start * width, (start + blocks) * width
        lines = cdiv(b, m.line_bytes) - cdiv(a, m.line_bytes)  # line starts in [a, b)
        out.append((blocks, max(_row_cycles(blocks, m.block_len, m.input_bytes, m),
                                lines * m.line_fill_cycles)))
        start += blocks
    return out


def _store_row_cycles(blocks: int, m: LoopMachine) -> float:
    """Store-unit cycles of one C row of ``blocks`` blocks at input width (one-beat rows: 2 per 3 cycles)."""
    return class_sum(blocks, m.block_len, lambda g: max(cdiv(g * m.dim * m.input_bytes, m.dma_bytes_per_cycle), 1.5))


@dataclass(frozen=True)
class MatmulFactors:
    """Per-dimension factors of one tile choice (the terms of ``matmul_cycles`` are products of them, or of
    one pair's: ``cold_b_stall`` of (I, J), ``cold_a_stall`` of (K, J)).

    count_*: tiles along I, J, K.  first_j_blocks: blocks of the first J tile.  a_row_cycles: load cycles of
    one A row over all K tiles.  b_row_cycles: of one B row over all J tiles, plus the contention of the
    preloads that read them.  d_row_cycles: of one bias row.  ex_rows: cycles the array spends per weight
    block, summed over the I tiles (the rows it streams plus the next preload's exposure, at least
    ``weight_reload_cycles`` each).  first_rows / last_rows: rows of the first / last I tile.
    first_a_row_cycles: one A row of the first K tile.  first_d_row_cycles: one bias row of the first J
    tile.  last_c_row_cycles: one C row of the last J tile.  first_ex_rows: ``ex_rows`` of the first I tile.
    b_cold_rows / a_cold_rows: ``cold_rows`` of B's J tiles / A's K tiles."""

    count_i: int
    count_j: int
    count_k: int
    first_j_blocks: int
    a_row_cycles: int
    b_row_cycles: float
    d_row_cycles: int
    ex_rows: int
    first_rows: int
    last_rows: int
    first_a_row_cycles: int
    first_d_row_cycles: int
    last_c_row_cycles: float
    first_ex_rows: int
    b_cold_rows: tuple
    a_cold_rows: tuple


def i_factors(M: int, tile_i: int, m: LoopMachine) -> dict:
    """The I dimension's factors (``MatmulFactors``) for ``tile_i`` blocks."""
    step = tile_i * m.dim
    first, last = first_last(M, step)
    ex = lambda r: max(r + preload_exposure(r, m), m.weight_reload_cycles)  # noqa: E731
    return {"count_i": cdiv(M, step), "ex_rows": class_sum(M, step, ex),
            "first_rows": first, "last_rows": last, "first_ex_rows": ex(first)}


def j_factors(N: int, tile_j: int, m: LoopMachine) -> dict:
    """The J dimension's factors for ``tile_j`` blocks."""
    jb = cdiv(N, m.dim)
    first, last = first_last(jb, tile_j)
    b = class_sum(jb, tile_j, lambda t: _row_cycles(t, m.block_len, m.input_bytes, m))
    d = class_sum(jb, tile_j, lambda t: bias_row_cycles(t, m))
    return {"count_j": cdiv(jb, tile_j), "b_row_cycles": b + m.contention * jb, "d_row_cycles": d,
            "b_cold_rows": tuple(cold_rows(N, tile_j, m)),
            "first_j_blocks": first, "first_d_row_cycles": bias_row_cycles(first, m),
            "last_c_row_cycles": _store_row_cycles(last, m)}


def k_factors(K: int, tile_k: int, m: LoopMachine) -> dict:
    """The K dimension's factors for ``tile_k`` blocks."""
    kb = cdiv(K, m.dim)
    row = lambda t: _row_cycles(t, m.block_len, m.input_bytes, m)  # noqa: E731
    return {"count_k": cdiv(kb, tile_k), "a_row_cycles": class_sum(kb, tile_k, row),
            "first_a_row_cycles": row(first_last(kb, tile_k)[0]), "a_cold_rows": tuple(cold_rows(K, tile_k, m))}


@dataclass(frozen=True)
class LoopCost:
    """Modelled cycles of one call: ``cycles`` = max(``load_cycles``, ``execute_cycles``, ``a_bank_cycles``)
    + ``fill_cycles`` for LOOP_WS (the convolution model adds the part of the fill before the first compute
    only to the terms that wait for it: ``gemmini_conv_loops``); ``a_reuse`` / ``b_reuse``: whether the
    library keeps A / B resident across tiles."""

    cycles: float
    load_cycles: float
    execute_cycles: float
    a_bank_cycles: float
    fill_cycles: float
    a_reuse: bool
    b_reuse: bool


def fits(tiles: tuple, m: LoopMachine) -> str | None:
    """None when ``tiled_matmul`` accepts (tile_I, tile_J, tile_K) on ``m`` (A and B in half the scratchpad,
    C in half the accumulator), else the reason."""
    ti, tj, tk = tiles
    if (ti * tk + tk * tj) * m.dim > m.sp_rows // 2:
        return f"A ({ti}x{tk} blocks) and B ({tk}x{tj} blocks) need more than half the scratchpad ({m.sp_rows // 2} rows)"
    if ti * tj * m.dim > m.acc_rows // 2:
        return f"C ({ti}x{tj} blocks) needs more than half the accumulator ({m.acc_rows // 2} rows)"
    return None


def matmul_factors(shape: tuple, tiles: tuple, m: LoopMachine) -> MatmulFactors:
    """The factors of (M, N, K) = ``shape`` (elements) tiled by ``tiles`` (DIM blocks)."""
    M, N, K = shape
    return MatmulFactors(**i_factors(M, tiles[0], m), **j_factors(N, tiles[1], m), **k_factors(K, tiles[2], m))


def memory_cycles(shape: tuple, m: LoopMachine) -> int:
    """The SoC's memory bus time of a matmul (M, N, K) = ``shape``: every line of A (M x K), B (K x N) and
    the bias row (N at accumulator width) crosses it once, ``m.line_fill_cycles`` each; 0 without a line
    fill.  The same for every tiling: a floor under the cycles, not a choice."""
    M, N, K = shape
    lines = sum(cdiv(b, m.line_bytes) for b in (M * K * m.input_bytes, K * N * m.input_bytes, N * m.acc_bytes))
    return lines * m.line_fill_cycles


def cold_b_stall(K: int, first_ex_rows: int, b_cold_rows: tuple, m: LoopMachine) -> float:
    """Cycles the array waits for B tiles read for the first time (the first I tile's): such a tile's loads
    overlap the previous tile's computes only (two loops in flight), so where a B row's cold cycles exceed the
    array's time per B row (the tile's weight blocks' ``first_ex_rows`` over DIM rows) the excess shows,
    for each of the K rows.  A function of the (I, J) tiles alone."""
    kb = cdiv(K, m.dim)
    return kb * m.dim * sum(max(0.0, cold - blocks * first_ex_rows / m.dim) for blocks, cold in b_cold_rows)


def cold_a_stall(M: int, first_j_blocks: int, a_cold_rows: tuple, m: LoopMachine) -> float:
    """Cycles the array waits for A tiles read for the first time (the first J tile's): as ``cold_b_stall``,
    per A row, against the array's slot per row for each of the tile's weight blocks (its K blocks times the
    first J tile's blocks; the exposed preloads of a ragged I tile are left out).  A function of the (K, J)
    tiles alone."""
    return M * sum(max(0.0, cold - blocks * first_j_blocks) for blocks, cold in a_cold_rows)


def matmul_cycles(shape: tuple, tiles: tuple, m: LoopMachine | None = None) -> LoopCost:
    """Modelled cycles of ``tiled_matmul`` (WS) on (M, N, K) = ``shape`` with (tile_I, tile_J, tile_K) =
    ``tiles`` in DIM blocks (module docstring)."""
    m = m or LoopMachine()
    M, N, K = shape
    f = matmul_factors(shape, tiles, m)
    a_reuse = f.count_i * f.count_k <= 2
    b_reuse = f.count_j * f.count_k <= 2
    kb, jb = cdiv(K, m.dim), cdiv(N, m.dim)
    a_load = M * f.a_row_cycles * (1 if a_reuse else f.count_j)
    load = a_load + kb * m.dim * f.b_row_cycles * (1 if b_reuse else f.count_i) + M * f.d_row_cycles
    execute = jb * kb * f.ex_rows + cold_b_stall(K, f.first_ex_rows, f.b_cold_rows, m) \
        + cold_a_stall(M, f.first_j_blocks, f.a_cold_rows, m)
    a_bank = a_load + (f.first_j_blocks if a_reuse else jb) * kb * f.ex_rows
    fill = f.first_rows * (f.first_a_row_cycles + f.first_d_row_cycles) + f.last_rows * f.last_c_row_cycles
    return LoopCost(max(load, execute, a_bank, memory_cycles(shape, m)) + fill, load, execute, a_bank, fill,
                    a_reuse, b_reuse)


EVERY_TILE_UP_TO = 256
"""``candidate_tiles(..., first_tile_counts=True)`` lists every tile of a dimension of at most this many blocks."""


def candidate_tiles(blocks: int, group: int = 0, first_tile_counts: bool = False) -> list[int]:
    """Tile values worth considering for a dimension of ``blocks`` DIM blocks: for every tile count the
    smallest tile that gives it (a larger one with the same count only takes more space), and the
    multiples of ``group`` when given (the mvin grouping, which can change a row's cost at the same count).
    ``first_tile_counts``: a term depends on the first tile's extent itself (the I dimension's ``cold_b_stall``),
    so every tile when ``blocks`` <= ``EVERY_TILE_UP_TO``, else the largest of each count too (then the MIP's
    optimum is over these candidates only)."""
    if first_tile_counts and blocks <= EVERY_TILE_UP_TO:
        return list(range(1, blocks + 1))
    root = math.isqrt(blocks) + 1       # ceil(blocks / c) for c <= root, and every tile up to root
    values = {cdiv(blocks, c) for c in range(1, root + 1)} | set(range(1, min(root, blocks) + 1))
    if first_tile_counts:  # the largest tile of each count: one less than the smallest of the count below
        values |= {cdiv(blocks, c - 1) - 1 for c in range(2, root + 2)} | {blocks}
    if group:
        values |= set(range(group, blocks + 1, group))
    return sorted(values)
