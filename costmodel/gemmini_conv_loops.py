"""Cycles of a convolution run by Gemmini's loop instruction LOOP_CONV_WS, as the library's ``tiled_conv`` issues it.

The program: ``tiled_conv`` (gemmini.h) walks tiles of (batches, porows, pocols, pochs, krows, kcols, kchs),
kch innermost, ragged last tiles included, and issues one LOOP_CONV_WS per tile; Gemmini's LoopConv.scala
expands it into mvins of the bias (first kernel slice only), of the input (one mvin per image row piece of
up to DIM pixels and per group of ``max_mvin_bytes`` channels, padding included), of the weights (DIM rows
per channel block and kernel position, output channels grouped), preload/compute pairs (one weight block
per output-channel block, kernel row, kernel column group and input-channel block, streaming the tile's
output pixels) and the mvouts (last kernel slice only).  ``a_reuse`` / ``b_reuse`` as in the library: the
input stays when the tile counts other than pochs multiply to at most 2, the weights when kchs, pochs,
krows and kcols counts do.

The mechanisms and the resources are those of ``costmodel.gemmini_loops`` (LOOP_WS): the load unit (an mvin
row costs its beats + 1), bank contention of weight loads with preloads, the execute unit (a weight block
costs the rows it streams, at least ``min_compute_cycles`` per compute and ``weight_reload_cycles`` per block), the input bank (a tile that moves its input in
spends those loads and its computes one after the other on that bank), the head (the first tile's input,
weights and bias: LoopConv issues a loop's weights before its input, and starts its computes only once all
its loads are issued) and the tail (the last tile's stores).  cycles = max(load, execute + head, input bank
+ head less the first input, which the bank term already holds) + tail: the load unit is busy from the
start, so the head delays only the units that wait for it.  A weight block's computes run row by row, each
row's pieces in order, so the last compute before the next block's preload is a row's last piece: its
exposure (``gemmini_loops.preload_exposure``) is paid once per weight block and output tile (a 7-pixel row:
9 cycles on top of the block's 49).

A max-pool fused into the stores (``ConvLayer.pool_size`` ...) makes the row and column tile arguments count
pooled outputs: each tile computes the convolution outputs its pool window reads (``conv_extents``; neighbouring
tiles compute the rows and columns their windows share twice), and the library's fit test counts
``porows * pool_stride + pool_size - 1`` of them.

Every sum over tiles is a product of one factor per *super-dimension*: batches, output rows with kernel
rows (the input rows a tile moves in depend on both), output columns with kernel columns, output
channels, input channels.  ``conv_factors`` computes those factors; ``conv_cycles`` multiplies them, and the
MIP (``cosa.mip.conv_tiles``) linearises the same products.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gemmini_loops import (LoopCost, LoopMachine, bias_row_cycles, cdiv, class_sum, first_last, preload_exposure,
                            tile_classes)


@dataclass(frozen=True)
class ConvLayer:
    """A convolution as ``tiled_conv`` takes it: batch ``N``, input ``H`` x ``W`` x ``C``, ``K`` output channels,
    an ``R`` x ``R`` kernel, ``stride``, ``padding`` (elements), dilation 1, and the max-pool fused into its
    stores (``pool_size``, ``pool_stride``, ``pool_padding``; 1, 1, 0: none).  With a pool the row and column
    tile arguments count pooled outputs, as ``tiled_conv``'s do."""

    N: int
    H: int
    W: int
    C: int
    K: int
    R: int
    stride: int = 1
    padding: int = 0
    pool_size: int = 1
    pool_stride: int = 1
    pool_padding: int = 0

    @property
    def P(self) -> int:
        """Convolution output rows (before the pool)."""
        return (self.H + 2 * self.padding - self.R) // self.stride + 1

    @property
    def Q(self) -> int:
        """Convolution output columns (before the pool)."""
        return (self.W + 2 * self.padding - self.R) // self.stride + 1

    @property
    def pooled(self) -> bool:
        return (self.pool_size, self.pool_stride, self.pool_padding) != (1, 1, 0)

    @property
    def PP(self) -> int:
        """Pooled output rows (the row tile argument's extent; P without a pool)."""
        return (self.P + 2 * self.pool_padding - self.pool_size) // self.pool_stride + 1

    @property
    def PQ(self) -> int:
        """Pooled output columns (Q without a pool)."""
        return (self.Q + 2 * self.pool_padding - self.pool_size) // self.pool_stride + 1

    @property
    def downsample(self) -> bool:
        """The library's stride-2 1x1 path (every other input row and column moved in; never with a pool)."""
        return (self.stride == 2 and self.R == 1 and self.padding == 0 and self.H % 2 == 0 and self.W % 2 == 0
                and not self.pooled)


def _group_cycles(elems: int, m: LoopMachine, elem_bytes: int = 1) -> int:
    """Load cycles of one row of ``elems`` elements moved in mvins of at most ``max_mvin_bytes``."""
    per = max(m.max_mvin_bytes // elem_bytes, 1)
    return class_sum(elems, per, lambda e: cdiv(e * elem_bytes, m.dma_bytes_per_cycle) + m.row_gap_cycles)


def pixels_per_row(layer: ConvLayer, kchs: int, kcols: int, m: LoopMachine) -> int:
    """Kernel columns one row of A holds (the library's max_pixels_per_row)."""
    return 1 if layer.downsample or kchs > m.dim else min(m.dim // kchs, kcols)


def _pooled_extent(layer: ConvLayer, n_conv: int, n_pooled: int, tile: int, start: int) -> int:
    """Convolution outputs the pooled tile starting at pooled output ``start`` computes."""
    ps, size, pad = layer.pool_stride, layer.pool_size, layer.pool_padding
    first = start * ps - pad
    last = first + min(tile, n_pooled - start) * ps + size - 1   # one past the window's last output
    return min(last, n_conv) - max(first, 0)


def conv_extent_classes(layer: ConvLayer, n_conv: int, n_pooled: int, tile: int) -> list[tuple[int, int]]:
    """``conv_extents`` as (extent, tiles) pairs, largest extent first, in O(1) tiles' work (an image axis of
    millions of outputs stays cheap): only the first two and last three tiles can meet an edge of the image."""
    if not layer.pooled:
        return sorted(tile_classes(n_conv, tile), reverse=True)
    n = cdiv(n_pooled, tile)
    edge = sorted({k for k in (0, 1, n - 3, n - 2, n - 1) if 0 <= k < n})
    counts: dict = {}
    for k in edge:
        e = _pooled_extent(layer, n_conv, n_pooled, tile, k * tile)
        counts[e] = counts.get(e, 0) + 1
    if n > len(edge):                       # tiles 2 .. n-4: whole windows, unless the image clips them
        full = tile * layer.pool_stride + layer.pool_size - 1
        ends = (_pooled_extent(layer, n_conv, n_pooled, tile, 2 * tile),
                _pooled_extent(layer, n_conv, n_pooled, tile, (n - 4) * tile))
        if ends != (full, full):           # a window wider than the tiles (first and last are monotone in k)
            extents = conv_extents(layer, n_conv, n_pooled, tile)
            return sorted({e: extents.count(e) for e in extents}.items(), reverse=True)
        counts[full] = counts.get(full, 0) + n - len(edge)
    return sorted(counts.items(), reverse=True)


def conv_extents(layer: ConvLayer, n_conv: int, n_pooled: int, tile: int) -> list[int]:
    """The convolution outputs each tile of ``tile`` pooled outputs computes along one image axis (``n_conv``
    convolution outputs pooled to ``n_pooled``), in tile order: ``tiled_conv``'s window of ``tile`` *
    pool_stride + pool_size - 1 outputs less the pool's padding at the edges (without a pool: ``tile``, the last
    one ragged)."""
    if not layer.pooled:
        return [min(tile, n_conv - start) for start in range(0, n_conv, tile)]
    return [_pooled_extent(layer, n_conv, n_pooled, tile, start) for start in range(0, n_pooled, tile)]


def _window(layer: ConvLayer, n_conv: int, n_pooled: int, out_tile: int, k_tile: int) -> dict:
    """One image axis tiled by ``out_tile`` (pooled) outputs and ``k_tile`` kernel taps: tile counts, the
    input extent moved in summed over its tiles, the convolution outputs computed summed over its tiles and
    by extent (``classes``: [(extent, tiles)]), and the first, last and full tiles' extents (the full tile's
    as the library's fit test counts it: ``out_tile`` * pool_stride + pool_size - 1 outputs)."""
    ds = int(layer.downsample)
    span = lambda o, k: (o * layer.stride + k - 1) >> ds  # noqa: E731
    classes = conv_extent_classes(layer, n_conv, n_pooled, out_tile)
    n_out = cdiv(n_pooled, out_tile)
    first_out = (_pooled_extent(layer, n_conv, n_pooled, out_tile, 0) if layer.pooled else min(out_tile, n_conv))
    last_out = (_pooled_extent(layer, n_conv, n_pooled, out_tile, (n_out - 1) * out_tile) if layer.pooled
                else n_conv - (n_out - 1) * out_tile)
    k0 = first_last(layer.R, k_tile)[0]
    full = out_tile * layer.pool_stride + layer.pool_size - 1
    return {"n_out": cdiv(n_pooled, out_tile), "n_k": cdiv(layer.R, k_tile),
            "inputs": sum(co * ck * span(o, k) for o, co in classes for k, ck in tile_classes(layer.R, k_tile)),
            "first_inputs": span(first_out, k0), "first_out": first_out, "last_out": last_out,
            "full_inputs": span(full, k_tile), "full_out": full, "out_sum": sum(e * c for e, c in classes),
            "classes": classes}


def rows_factors(layer: ConvLayer, porows: int, krows: int) -> dict:
    """The (output rows, kernel rows) super-dimension: tile counts, input rows moved in over all its tiles,
    the convolution rows computed (summed, by extent, first, last and full tile's)."""
    w = _window(layer, layer.P, layer.PP, porows, krows)
    return {"n_pr": w["n_out"], "n_kr": w["n_k"], "irows": w["inputs"], "first_irows": w["first_inputs"],
            "first_orows": w["first_out"], "last_orows": w["last_out"], "full_irows": w["full_inputs"],
            "full_orows": w["full_out"], "orows": w["out_sum"], "row_classes": w["classes"]}


def cols_factors(layer: ConvLayer, pocols: int, kcols: int, kchs: int, m: LoopMachine) -> dict:
    """The (output columns, kernel columns) super-dimension (``kchs``: a thin layer packs kernel columns)."""
    w = _window(layer, layer.Q, layer.PQ, pocols, kcols)
    return {"n_pc": w["n_out"], "n_kc": w["n_k"], "icols": w["inputs"], "first_icols": w["first_inputs"],
            "first_ocols": w["first_out"], "last_ocols": w["last_out"], "full_icols": w["full_inputs"],
            "full_ocols": w["full_out"], "ocols": w["out_sum"], "col_classes": w["classes"],
            "kcol_groups": class_sum(layer.R, kcols, lambda k: cdiv(k, pixels_per_row(layer, kchs, k, m)))}


def och_factors(layer: ConvLayer, pochs: int, m: LoopMachine) -> dict:
    """The output-channel super-dimension: DIM blocks and weight-row load cycles summed over its tiles."""
    first, last = first_last(layer.K, pochs)
    return {"n_po": cdiv(layer.K, pochs), "blocks": class_sum(layer.K, pochs, lambda o: cdiv(o, m.dim)),
            "w_row_cycles": class_sum(layer.K, pochs, lambda o: _group_cycles(o, m)),
            "first_w_row_cycles": _group_cycles(first, m),
            "first_blocks": cdiv(first, m.dim), "last_blocks": cdiv(last, m.dim)}


def ich_factors(layer: ConvLayer, kchs: int, m: LoopMachine) -> dict:
    """The input-channel super-dimension: DIM blocks and input-pixel load cycles summed over its tiles."""
    return {"n_kh": cdiv(layer.C, kchs), "blocks": class_sum(layer.C, kchs, lambda i: cdiv(i, m.dim)),
            "in_pixel_cycles": class_sum(layer.C, kchs, lambda i: _group_cycles(i, m)),
            "first_in_pixel_cycles": _group_cycles(first_last(layer.C, kchs)[0], m)}


def col_compute_cycles(ocols: int, m: LoopMachine) -> int:
    """Execute cycles of one output row of ``ocols`` pixels under one weight block: a compute per DIM pixels."""
    return class_sum(ocols, m.dim, lambda piece: max(piece, m.min_compute_cycles))


def conv_fits(layer: ConvLayer, tiles: tuple, m: LoopMachine) -> str | None:
    """None when ``tiled_conv`` accepts ``tiles`` (its footprint in half the scratchpad and accumulator)."""
    batches, porows, pocols, pochs, krows, kcols, kchs = tiles
    ds = int(layer.downsample)
    orows = porows * layer.pool_stride + layer.pool_size - 1   # the convolution outputs the tile's pool reads
    ocols = pocols * layer.pool_stride + layer.pool_size - 1
    irows = (orows * layer.stride + krows - 1) >> ds
    icols = (ocols * layer.stride + kcols - 1) >> ds
    a_rows = cdiv(kchs, m.dim) * batches * irows * icols
    b_rows = cdiv(pochs, m.dim) * krows * kcols * kchs
    if a_rows + b_rows > m.sp_rows // 2:
        return (f"inputs ({a_rows} rows) and weights ({b_rows} rows) need more than half the scratchpad "
                f"({m.sp_rows // 2} rows)")
    if cdiv(pochs, m.dim) * batches * orows * ocols > m.acc_rows // 2:
        return f"outputs need more than half the accumulator ({m.acc_rows // 2} rows)"
    return None


def conv_cycles(layer: ConvLayer, tiles: tuple, m: LoopMachine | None = None) -> LoopCost:
    """Modelled cycles of ``tiled_conv`` on ``layer`` with (batches, porows, pocols, pochs, krows, kcols, kchs)
    = ``tiles`` (module docstring).  ``a_reuse`` / ``b_reuse`` report the library's input / weight reuse."""
    m = m or LoopMachine()
    batches, porows, pocols, pochs, krows, kcols, kchs = tiles
    b0, bl = first_last(layer.N, batches)
    n_b = cdiv(layer.N, batches)
    r = rows_factors(layer, porows, krows)
    c = cols_factors(layer, pocols, kcols, kchs, m)
    o = och_factors(layer, pochs, m)
    i = ich_factors(layer, kchs, m)
    a_reuse = i["n_kh"] * r["n_kr"] * c["n_kc"] * n_b * r["n_pr"] * c["n_pc"] <= 2
    b_reuse = i["n_kh"] * o["n_po"] * r["n_kr"] * c["n_kc"] <= 2
    inp = layer.N * r["irows"] * c["icols"] * i["in_pixel_cycles"] * (1 if a_reuse else o["n_po"])
    w_tiles = 1 if b_reuse else n_b * r["n_pr"] * c["n_pc"]
    weights = w_tiles * layer.R * layer.R * layer.C * o["w_row_cycles"]
    bias_row = bias_row_cycles(1, m)
    bias = layer.N * r["orows"] * c["ocols"] * o["blocks"] * bias_row
    # weight blocks x the cycles of the computes each serves (one per image row piece of up to DIM pixels, at
    # least min_compute_cycles each; the next block's preload exposed behind the tile's last piece; at least
    # weight_reload_cycles per block and output tile)
    exposed = lambda ocol: preload_exposure(ocol, m, m.min_compute_cycles)  # noqa: E731
    spatial = sum(cb * cr * cc * max(b * orow * col_compute_cycles(ocol, m) + exposed(ocol), m.weight_reload_cycles)
                  for b, cb in tile_classes(layer.N, batches) for orow, cr in r["row_classes"]
                  for ocol, cc in c["col_classes"])
    per_pixel_weights = o["blocks"] * i["blocks"] * layer.R * c["kcol_groups"]
    execute = per_pixel_weights * spatial
    preloads = m.dim * o["blocks"] * i["blocks"] * layer.R * c["kcol_groups"] * w_tiles
    load = inp + weights + bias + m.contention * preloads
    a_bank = inp + execute * (o["first_blocks"] / o["blocks"] if a_reuse else 1)
    first_input = b0 * r["first_irows"] * c["first_icols"] * i["first_in_pixel_cycles"]
    head = (first_input + krows * kcols * min(kchs, layer.C) * o["first_w_row_cycles"]
            + b0 * r["first_orows"] * c["first_ocols"] * o["first_blocks"] * bias_row)
    tail = bl * r["last_orows"] * c["last_ocols"] * o["last_blocks"] * 1.5
    cycles = max(load, execute + head, a_bank + head - first_input) + tail
    return LoopCost(cycles, load, execute, a_bank, head + tail, a_reuse, b_reuse)
