"""The command program of a tiling plan, as loop IR (see ``codegen.ir``).

Structure (outer to inner), following the mapping:

* configuration: config_ex (dataflow, A stride), config_ld for mvin (inputs),
  mvin2 (weights) and mvin3 (row broadcasts: bias, zero padding), config_st
  (output stride, scale, ReLU);
* the temporal loops of levels 0, 1 and 2 in the mapping's orders;
* a scratchpad tile (inputs, weights) is moved in right inside the innermost
  level-0 loop that changes it, into the other half of the scratchpad when
  double buffered (the decoupled load queue then fills one half while the
  array reads the other);
* an accumulator tile is opened right inside the innermost level-0/1 loop
  that changes the output (on the first visit the int32 bias is broadcast
  into every row of the tile by stride-0 accumulator mvins in overwrite
  mode, as gemmini.h does, and every compute accumulates onto it; partial
  sums are moved back in on later visits) and
  closed at the end of that loop's body (scaled int8 mvout on the last visit,
  full 32-bit spill otherwise);
* pipelined (``pipeline``, the default for double-buffered plans;
  ``codegen.pipeline``): the first tiles' moves form a prologue, and the
  next scratchpad tiles' mvins, the next accumulator tile's bias and the
  previous accumulator tile's mvouts are issued among the current tile's
  computes instead of as bursts where the tile changes (the command
  stream then takes about max(transfers, compute) cycles);
* inside the level-2 loops, one array block: WS preloads the weight block
  (only when it changed since the last preload: the weights stay in the PEs)
  and streams the level-3 rows in computes of at most DIM rows; OS streams
  the level-3 reduction through the PEs and writes the block once.

A group/batch dim ``g`` (batched matmul, grouped convolution) is one more
loop that changes every tile: main-memory addresses step by the problem's
``g_strides``, and a tile that spans several groups keeps their column
blocks one after another (group-major); a new group means new weights.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

from .ir import (AccAddr, Assign, Cmd, Comment, Const, DramAddr, Expr, For, Garbage, SpAddr, Var,
                         all_of, cmp, emax, emin, lit, loop, negate, select, when)
from .pipeline import Stream, interleave, pipelined_nest
from .tiling import INPUT_DIMS, OUTPUT_DIMS, WEIGHT_DIMS, Plan

ACC_BYTES = 4


class _Builder:
    def __init__(self, plan: Plan, bias: bool, scale: float, relu: bool, pipeline: bool = False):
        self.p = plan
        self.pipeline = pipeline
        self.hooks: list = []  # moves spread among the computes (codegen.pipeline.Hook)
        self.sub: dict = {}  # loop var -> expression standing for it (another tile's moves)
        self.slots: dict = {}  # slot var -> expression standing for it
        self.pr = plan.problem
        self.cfg = plan.config
        self.dim = plan.config.dim
        self.bias = bias
        self.scale = float(scale)
        self.relu = 1 if relu else 0
        self.loops = plan.loops
        # elements of one weight row and of one output pixel in main memory (all groups' output channels)
        self.K = self.pr.pixel_elems
        self.H, self.W = self.pr.in_hw
        self.in_s, self.w_s, self.out_s = self.pr.in_strides, self.pr.w_strides, self.pr.out_strides
        # elements between consecutive groups in the input, weights, output (and partials) and bias
        self.in_g, self.w_g, self.out_g, self.bias_g = self.pr.g_strides
        self.out_row_bytes = self.out_s[2] * self.K  # main-memory bytes between the rows of one mvout
        self.padded = any(self.pr.padding)
        n = len(self.loops)

        def last(dims, levels):
            pos = 0
            for i, lp in enumerate(self.loops):
                if lp.level in levels and lp.dim in dims:
                    pos = i + 1
            return pos

        self.pos_a = last(INPUT_DIMS, (0,))
        self.pos_b = last(WEIGHT_DIMS, (0,))
        self.pos_acc = last(OUTPUT_DIMS, (0, 1))
        self.pos_w = last(WEIGHT_DIMS, (0, 1, 2))
        # reduction loops outside the accumulator visit: the tile is left and re-entered (partial sums)
        self.outer_red = [lp for lp in self.loops[:self.pos_acc] if lp.dim not in OUTPUT_DIMS]
        self.inner_red = [lp for lp in self.loops[self.pos_acc:n] if lp.dim not in OUTPUT_DIMS]
        self.spills = bool(self.outer_red)

    # --- index expressions -------------------------------------------------------------
    @contextmanager
    def view(self, sub=None, slots=None):
        """Build (and emit) moves of another tile: loop vars and slots stand for the given expressions."""
        saved = self.sub, self.slots
        self.sub, self.slots = dict(sub or {}), dict(slots or {})
        try:
            yield
        finally:
            self.sub, self.slots = saved

    def var(self, lp) -> Expr:
        return self.sub.get(lp.var, Var(lp.var))

    def start(self, dim: str, levels) -> Expr:
        """Offset of ``dim`` contributed by the loops of ``levels``."""
        out: Expr = Const(0)
        for lp in self.loops:
            if lp.dim == dim and lp.level in levels:
                out = out + self.var(lp) * lp.stride
        return out

    def first_visit(self) -> Expr:
        return all_of([cmp("==", self.var(lp), 0) for lp in self.outer_red])

    def last_visit(self) -> Expr:
        return all_of([cmp("==", self.var(lp), lp.count - 1) for lp in self.outer_red])

    def base(self, bases, slot_var: str) -> Expr:
        if len(bases) == 1:
            return Const(bases[0])
        return Const(bases[0]) + self.slots.get(slot_var, Var(slot_var)) * (bases[1] - bases[0])

    # --- program ---------------------------------------------------------------------------
    def program(self) -> list:
        p, pr = self.p, self.pr
        stmts = [Comment(f"{pr.kind} {pr.name}: {pr.bounds}, dataflow {p.dataflow}")]
        stmts.append(Cmd("config_ex", (1 if p.dataflow == "ws" else 0, 0, 0, 0, p.a_stride, 1.0, 1, 0)))
        stmts.append(Cmd("config_ld", (p.step_w * self.in_s[2], 1.0, 0, 0, p.a_pix)))
        stmts.append(Cmd("config_ld", (self.K, 1.0, 0, 1, p.b_rows_per_block)))
        stmts.append(Cmd("config_ld", (0, 1.0, 0, 2, self.dim)))
        stmts.append(Cmd("config_st", (self.out_row_bytes, self.relu, self.scale)))
        for var, bases in (("a_slot", p.a_bases), ("b_slot", p.b_bases), ("acc_slot", p.acc_bases)):
            if len(bases) > 1:
                stmts.append(Assign(var, Const(1)))
        if self.pipeline:
            stmts += pipelined_nest(self)
            stmts.append(Cmd("fence", ()))
            return stmts
        pre = {i: [] for i in range(len(self.loops) + 1)}
        post = {i: [] for i in range(len(self.loops) + 1)}
        pre[self.pos_a] += self.load_inputs()
        pre[self.pos_b] += self.load_weights()
        pre[self.pos_acc] += self.open_acc()
        post[self.pos_acc] += self.close_acc()

        def nest(depth):
            body = list(pre[depth])
            if depth == len(self.loops):
                body += self.block()
            else:
                lp = self.loops[depth]
                body.append(For(lp.var, Const(lp.count), tuple(nest(depth + 1))))
            body += post[depth]
            return body

        stmts += nest(0)
        stmts.append(Cmd("fence", ()))
        return stmts

    # --- scratchpad tiles ----------------------------------------------------------------
    def load_inputs(self) -> list:
        out = [Comment("input tile -> scratchpad")]
        if len(self.p.a_bases) > 1:
            out.append(Assign("a_slot", 1 - Var("a_slot")))
        return out + self.input_stream().emit_all()

    def input_stream(self) -> Stream:
        """The input tile's mvins, one unit per stored pixel row (image ``ln``, row ``lj``)."""
        p, pr, dim = self.p, self.pr, self.dim
        e1 = p.extents[1]
        sh, sw = pr.stride
        dh, dw = pr.dilation
        ph, pw = pr.padding
        base = self.base(p.a_bases, "a_slot")
        g = {d: self.start(d, (0,)) for d in ("g", "n", "c", "oh", "ow", "kh", "kw")}
        h0 = g["oh"] * sh + g["kh"] * dh - ph
        w0 = g["ow"] * sw + g["kw"] * dw - pw
        group = self.cfg.max_mvin_cols_sp // dim * dim if p.bc == dim else p.bc
        ws_ = p.stored_w
        c_blocks = e1["c"] // p.bc  # channel blocks of one group

        def per_group(body):
            return loop("lg", e1["g"], body)

        def pixel_row(n_i, j, i):
            return (n_i * p.stored_h + j) * ws_ + i

        def data(n_i, j, h, i_from, i_to):
            def chunk(li):
                rows = emin(dim, lit(i_to) - li)

                def in_group(gi):
                    def cgroup(cg):
                        cols = emin(group, e1["c"] - cg)
                        dram = DramAddr("input", (g["n"] + n_i) * self.in_s[0] + h * self.in_s[1]
                                        + (w0 + li * p.step_w) * self.in_s[2] + (g["g"] + gi) * self.in_g
                                        + g["c"] + cg)
                        local = SpAddr(base + (gi * c_blocks + cg // p.bc) * p.a_pix + pixel_row(n_i, j, li))
                        return [Cmd("mvin", (dram, local, rows, cols, 0))]
                    return loop("lc", e1["c"], cgroup, step=group)
                return per_group(in_group)
            return self._range_loop("li", i_from, i_to, dim, chunk)

        def zeros(n_i, j, i_from, i_to):
            def chunk(li):
                rows = emin(dim, lit(i_to) - li)

                def in_group(gi):
                    def cblock(cb):
                        local = SpAddr(base + (gi * c_blocks + cb // p.bc) * p.a_pix + pixel_row(n_i, j, li))
                        return [Cmd("mvin", (DramAddr("zeros", Const(0)), local, rows, p.bc, 2))]
                    return loop("lz", e1["c"], cblock, step=p.bc)
                return per_group(in_group)
            return self._range_loop("li", i_from, i_to, dim, chunk)

        def per_row(idx):
            n_i, j = idx["ln"], idx["lj"]
            h = h0 + j * p.step_h
            if not self.padded:
                return data(n_i, j, h, Const(0), Const(ws_))
            body = [Assign("lh", h)]
            lh = Var("lh")
            lo = select(cmp("<", w0, 0), emin(ws_, (p.step_w - 1 - w0) // p.step_w), 0)
            hi_raw = select(cmp("<", w0, self.W), emin(ws_, (self.W - w0 + p.step_w - 1) // p.step_w), 0)
            inside = [Assign("llo", lo), Assign("lhi", select(cmp("<", hi_raw, Var("llo")), Var("llo"), hi_raw))]
            inside += zeros(n_i, j, Const(0), Var("llo"))
            inside += data(n_i, j, lh, Var("llo"), Var("lhi"))
            inside += zeros(n_i, j, Var("lhi"), Const(ws_))
            in_rows = all_of([cmp("<=", 0, lh), cmp("<", lh, self.H)])
            body += when(in_rows, inside, zeros(n_i, j, Const(0), Const(ws_)))
            return body

        return Stream((("ln", e1["n"], 1), ("lj", p.stored_h, 1)), per_row)

    def _range_loop(self, var, start, stop, step, body_fn) -> list:
        start, stop = lit(start), lit(stop)
        if isinstance(start, Const) and start.value == 0:
            return loop(var, stop, body_fn, step)
        if isinstance(start, Const) and isinstance(stop, Const) and stop.value - start.value <= 0:
            return []
        return [For(var, stop, tuple(body_fn(Var(var))), step, start)]

    def load_weights(self) -> list:
        out = [Comment("weight tile -> scratchpad")]
        if len(self.p.b_bases) > 1:
            out.append(Assign("b_slot", 1 - Var("b_slot")))
        return out + self.weight_stream().emit_all()

    def weight_stream(self) -> Stream:
        """The weight tile's mvins, one unit per (kernel row, kernel column, DIM input channels)."""
        p, dim = self.p, self.dim
        e1 = p.extents[1]
        base = self.base(p.b_bases, "b_slot")
        g = {d: self.start(d, (0,)) for d in ("g", "k", "c", "kh", "kw")}
        group = self.cfg.max_mvin_cols_sp // dim * dim if p.bk == dim else p.bk
        k_blocks = e1["k"] // p.bk  # output-channel blocks of one group

        def per_c(idx):
            i_kh, i_kw, lc = idx["wkh"], idx["wkw"], idx["wc"]
            rows = emin(dim, e1["c"] - lc)

            def in_group(gi):
                def per_k(kg):
                    cols = emin(group, e1["k"] - kg)
                    row = (g["kh"] + i_kh) * self.w_s[0] + (g["kw"] + i_kw) * self.w_s[1] + g["c"] + lc
                    dram = DramAddr("weights", row * self.K + (g["g"] + gi) * self.w_g + g["k"] + kg)
                    local = SpAddr(base + (gi * k_blocks + kg // p.bk) * p.b_rows_per_block
                                   + (i_kh * e1["kw"] + i_kw) * e1["c"] + lc)
                    return [Cmd("mvin", (dram, local, rows, cols, 1))]
                return loop("wk", e1["k"], per_k, step=group)
            return loop("wg", e1["g"], in_group)

        return Stream((("wkh", e1["kh"], 1), ("wkw", e1["kw"], 1), ("wc", e1["c"], dim)), per_c)

    # --- accumulator tiles --------------------------------------------------------------------
    def acc_stream(self, body_fn) -> Stream:
        """Runs of <= DIM accumulator rows of the current tile that are contiguous in main memory too, per
        column block (one unit per run).

        ``body_fn(gi, kb, block, gpix, acc_row, rows)``: the run's group and output-channel block (and the
        tile's column-block index, group-major), the global output-pixel index of its first row, its
        accumulator row (relative to the block) and the run length.  Inner pixel dims that the tile spans
        whole are merged into one run (one image row after another)."""
        p, dim = self.p, self.dim
        e2 = p.extents[2]
        ga = {d: self.start(d, (0, 1)) for d in ("n", "oh", "ow")}
        strides = dict(zip(("n", "oh", "ow"), self.out_s))
        merged = self.merged_acc_rows()
        flat = math.prod(e2[d] for d in merged)
        outer_dims = [d for d in ("n", "oh", "ow") if d not in merged]
        per_group = e2["k"] // p.bk

        def run(idx):
            start = {d: Const(0) if d in merged else idx[f"o{d}"] for d in ("n", "oh", "ow")}
            gpix = sum(((ga[d] + start[d]) * strides[d] for d in ("n", "oh", "ow")), Const(0))
            arow = (start["n"] * e2["oh"] + start["oh"]) * e2["ow"] + start["ow"]
            gi, kb, f = idx["og"], idx["ob"], idx["orun"]
            return body_fn(gi, kb, gi * per_group + kb, gpix + f * strides["ow"], arow + f, emin(dim, flat - f))
        axes = ((("og", e2["g"], 1), ("ob", per_group, 1)) + tuple((f"o{d}", e2[d], 1) for d in outer_dims)
                + (("orun", flat, dim),))
        return Stream(axes, run)

    def out_units(self) -> int:
        """Units (runs) of the accumulator tile's moves out."""
        return self.acc_stream(lambda *args: []).units

    def merged_acc_rows(self) -> list:
        """Pixel dims of the accumulator tile (inner first) whose rows are one run in main memory too."""
        e2 = self.p.extents[2]
        strides = dict(zip(("n", "oh", "ow"), self.out_s))
        merged = ["ow"]
        for d, inner in (("oh", "ow"), ("n", "oh")):
            if merged[-1] == inner and strides[d] == e2[inner] * strides[inner]:
                merged.append(d)
        return merged

    def row_runs(self, outer_dims, extents, flat: int, loop_name: str, run_var: str, body_fn, idx=None) -> list:
        """Loops over ``outer_dims`` (named ``loop_name.format(dim)``, trip counts from ``extents``), inside
        them runs of at most DIM of the ``flat`` merged rows: ``body_fn(idx, first_row_of_run)``."""
        def nest(k, idx):
            if k < len(outer_dims):
                d = outer_dims[k]
                return loop(loop_name.format(d), extents[d], lambda v: nest(k + 1, {**idx, d: v}))
            return loop(run_var, flat, lambda f: body_fn(idx, f), step=self.dim)
        return nest(0, dict(idx or {}))

    def acc_base(self) -> Expr:
        return self.base(self.p.acc_bases, "acc_slot")

    def out_elem(self, gpix: Expr, gi: Expr, kb: Expr) -> Expr:
        """Main-memory element (of ``output``/``partials``) of a pixel of the tile's group ``gi`` and block ``kb``."""
        return (gpix * self.K + (self.start("g", (0, 1)) + gi) * self.out_g + self.start("k", (0, 1))
                + kb * self.p.bk)

    def bias_stream(self) -> Stream:
        """The int32 bias broadcast into every row of the accumulator tile (stride-0 accumulator mvins in
        overwrite mode, as gemmini.h does; every compute then accumulates onto it), per column block."""
        p, dim = self.p, self.dim
        base = self.acc_base()
        gk = self.start("k", (0, 1))
        gg = self.start("g", (0, 1))
        per_group = p.extents[2]["k"] // p.bk

        def rows_run(idx):
            gi, kb, r0 = idx["og"], idx["ob"], idx["brow"]
            blk = gi * per_group + kb
            rows = emin(dim, p.acc_pix - r0)
            return [Cmd("mvin", (DramAddr("bias", ((gg + gi) * self.bias_g + gk + kb * p.bk) * ACC_BYTES),
                                 AccAddr(base + blk * p.acc_pix + r0, Const(0)), rows, p.bk, 2))]
        return Stream((("og", p.extents[2]["g"], 1), ("ob", per_group, 1), ("brow", p.acc_pix, dim)), rows_run)

    def open_acc(self, toggle: bool = True, bias: bool = True) -> list:
        """Open the accumulator tile: the bias on the first visit (unless ``bias`` is False: moved in
        earlier), the partial sums on later ones; ``toggle``: switch to the other half first."""
        p, dim = self.p, self.dim
        out = [Comment("accumulator tile")]
        if toggle and len(p.acc_bases) > 1:
            out.append(Assign("acc_slot", 1 - Var("acc_slot")))
        base = self.acc_base()
        # Gemmini reads a compute's D (and a preload's) only from the scratchpad, at input width: the 32-bit
        # bias is moved into the tile's accumulator rows (overwrite) and every compute accumulates onto it
        first = self.bias_stream().emit_all() if self.bias and bias else []
        later = []
        if self.spills:
            later.append(Cmd("config_ld", (self.out_row_bytes * ACC_BYTES, 1.0, 0, 2, dim)))
            later += self.acc_stream(lambda gi, kb, blk, gp, ar, rows: [Cmd("mvin", (
                DramAddr("partials", self.out_elem(gp, gi, kb) * ACC_BYTES),
                AccAddr(base + blk * p.acc_pix + ar, Const(0)), rows, p.bk, 2))]).emit_all()
            later.append(Cmd("config_ld", (0, 1.0, 0, 2, dim)))
        out += when(self.first_visit(), first, later)
        return out

    def close_acc(self, emit=Stream.emit_all) -> list:
        """Close the accumulator tile: scaled int8 mvouts on the last visit, a 32-bit spill otherwise;
        ``emit(stream)``: which of the moves (default: all)."""
        p = self.p
        base = self.acc_base()
        final = [Comment("accumulator tile -> output (scaled int8)")] + emit(self.acc_stream(
            lambda gi, kb, blk, gp, ar, rows: [Cmd("mvout", (
                DramAddr("output", self.out_elem(gp, gi, kb)),
                AccAddr(base + blk * p.acc_pix + ar, Const(0)), rows, p.bk))]))
        spill = []
        if self.spills:
            spill.append(Cmd("config_st", (self.out_row_bytes * ACC_BYTES, 0, 1.0)))
            spill += emit(self.acc_stream(lambda gi, kb, blk, gp, ar, rows: [Cmd("mvout", (
                DramAddr("partials", self.out_elem(gp, gi, kb) * ACC_BYTES),
                AccAddr(base + blk * p.acc_pix + ar, Const(0), True), rows, p.bk))]))
            spill.append(Cmd("config_st", (self.out_row_bytes, self.relu, self.scale)))
        return when(self.last_visit(), final, spill)

    # --- one array block ----------------------------------------------------------------------
    def first_write(self) -> Expr:
        """1 when the current block is the first write of its accumulator rows in this tile, else 0."""
        return all_of([self.first_visit()] + [cmp("==", Var(lp.var), 0) for lp in self.inner_red])

    def accumulate_flag(self) -> Expr:
        """0 for the first write of an accumulator row in this tile (overwrite), else 1."""
        if self.bias:
            return Const(1)  # the tile starts from the broadcast bias
        return negate(self.first_write())

    def acc_block(self) -> Expr:
        """Column-block index (group-major) in the accumulator tile of the current array block."""
        p = self.p
        return self.start("g", (2,)) * (p.extents[2]["k"] // p.bk) + self.start("k", (2,)) // p.bk

    def operands(self, idx3):
        """Scratchpad/accumulator addresses of a block at the current level-0..2 point plus level-3 offsets."""
        p = self.p
        sh, sw = self.pr.stride
        dh, dw = self.pr.dilation
        e1, e2 = p.extents[1], p.extents[2]
        rel = {d: self.start(d, (1, 2)) + idx3.get(d, 0) for d in ("g", "n", "c", "oh", "ow", "kh", "kw", "k")}
        acc = {d: self.start(d, (2,)) + idx3.get(d, 0) for d in ("g", "n", "oh", "ow", "k")}
        j = rel["oh"] * (sh // p.step_h) + (rel["kh"] * (dh // p.step_h) if e1["kh"] > 1 else 0)
        i = rel["ow"] * (sw // p.step_w) + (rel["kw"] * (dw // p.step_w) if e1["kw"] > 1 else 0)
        pix = (rel["n"] * p.stored_h + j) * p.stored_w + i
        # column blocks are group-major in every tile
        a = self.base(p.a_bases, "a_slot") + (rel["g"] * (e1["c"] // p.bc) + rel["c"] // p.bc) * p.a_pix + pix
        b = (self.base(p.b_bases, "b_slot") + (rel["g"] * (e1["k"] // p.bk) + rel["k"] // p.bk) * p.b_rows_per_block
             + (rel["kh"] * e1["kw"] + rel["kw"]) * e1["c"] + rel["c"])
        c = (self.acc_base() + (acc["g"] * (e2["k"] // p.bk) + acc["k"] // p.bk) * p.acc_pix
             + (acc["n"] * e2["oh"] + acc["oh"]) * e2["ow"] + acc["ow"])
        return a, b, c

    def block(self) -> list:
        return self.block_ws() if self.p.dataflow == "ws" else self.block_os()

    def computes_per_block(self) -> int:
        """Computes of one array block (what ``interleave`` numbers within the block)."""
        p, e3 = self.p, self.p.extents[3]
        if p.dataflow == "os":
            return e3["kh"] * e3["kw"] * -(-e3["c"] // p.c_chunk)
        merged = self.merged_rows()
        runs = -(-math.prod(e3[d] for d in merged) // self.dim)
        return runs * math.prod(e3[d] for d in ("n", "oh") if d not in merged)

    def merged_rows(self) -> list:
        """Level-3 pixel dims (inner first) whose rows one compute can stream together: consecutive rows
        must stay ``a_stride`` apart in the scratchpad and 1 apart in the accumulator."""
        p = self.p
        sh = self.pr.stride[0]
        e2, e3 = p.extents[2], p.extents[3]
        a_oh = p.stored_w * (sh // p.step_h)  # scratchpad rows between output rows
        a_n = p.stored_h * p.stored_w  # ... between images
        merged = ["ow"]
        if e3["ow"] == e2["ow"] and a_oh == e3["ow"] * p.a_stride:
            merged.append("oh")
            if e3["oh"] == e2["oh"] and a_n == e3["oh"] * a_oh:
                merged.append("n")
        return merged

    def rows_per_compute(self) -> float:
        """Average rows a compute streams (what the orientation choice maximizes first)."""
        if self.p.dataflow == "os":
            return float(self.p.spatial[2]["ow"])
        return _rows_per_command(math.prod(self.p.extents[3][d] for d in self.merged_rows()), self.dim)

    def rows_per_store(self) -> float:
        """Average rows an accumulator move (mvout, partial-sum mvin) carries (the orientation choice's
        tie-break: fewer, longer DMA commands)."""
        return _rows_per_command(math.prod(self.p.extents[2][d] for d in self.merged_acc_rows()), self.dim)

    def block_ws(self) -> list:
        p, dim = self.p, self.dim
        e3 = p.extents[3]
        bc, bk = p.spatial[2]["c"], p.spatial[2]["k"]
        fresh = all_of([cmp("==", Var(lp.var), 0) for lp in self.loops[self.pos_w:]])
        acc_flag = self.accumulate_flag()
        merged = self.merged_rows()
        flat = 1
        for d in merged:
            flat *= e3[d]
        outer = [d for d in ("n", "oh") if d not in merged]

        # The short command of a run goes first: a new weight block's DIM-cycle shift overlaps only the
        # compute before it, which is then the previous run's last, full one (run rows r3 .. r3 + rows).
        short = -flat % dim

        def per_run(idx, step):
            r3, rows = emax(0, step - short), emin(dim, step + dim - short)
            a, b, c = self.operands(idx)
            a, c = a + r3 * p.a_stride, c + r3
            cl = AccAddr(c, acc_flag)
            d = Garbage()  # D: zeros (the bias already sits in the accumulator rows)
            first = all_of([fresh, cmp("==", step, 0)] + [cmp("==", idx[d], 0) for d in outer])
            with_weights = [Cmd("preload", (SpAddr(b), cl, bc, bk, rows, bk)),
                            Cmd("compute_preloaded", (SpAddr(a), d, rows, bc, rows, bk))]
            reuse = [Cmd("preload", (Garbage(), cl, bc, bk, rows, bk)),
                     Cmd("compute_accumulated", (SpAddr(a), d, rows, bc, rows, bk))]
            cidx: Expr = Const(0)
            for x in outer:
                cidx = cidx * e3[x] + idx[x]
            moves = interleave(self, cidx * runs + step // dim) if self.hooks else []
            return moves + when(first, with_weights, reuse)
        runs = -(-flat // dim)
        return self.row_runs(outer, e3, flat, "{}3", "r3", per_run)

    def block_os(self) -> list:
        p = self.p
        e3 = p.extents[3]
        rows, bk, w = p.spatial[2]["ow"], p.spatial[2]["k"], p.c_chunk
        acc_flag = self.accumulate_flag()

        def per_kh(kh3):
            def per_kw(kw3):
                def per_c(c3):
                    a, b, c = self.operands({"kh": kh3, "kw": kw3, "c": c3})
                    first = all_of([cmp("==", kh3, 0), cmp("==", kw3, 0), cmp("==", c3, 0)])
                    last = all_of([cmp("==", kh3, e3["kh"] - 1), cmp("==", kw3, e3["kw"] - 1),
                                   cmp("==", c3, e3["c"] - w)])
                    out_addr = select(last, AccAddr(c, acc_flag), Garbage())
                    d = Garbage()  # the PEs start from zero; the bias sits in the accumulator rows
                    start = Cmd("preload", (d, out_addr, rows, bk, rows, bk))
                    more = Cmd("preload", (Garbage(), out_addr, rows, bk, rows, bk))
                    cidx = (kh3 * e3["kw"] + kw3) * -(-e3["c"] // w) + c3 // w
                    moves = interleave(self, cidx) if self.hooks else []
                    return moves + when(first,
                                        [start, Cmd("compute_preloaded", (SpAddr(a), SpAddr(b), rows, w, w, bk))],
                                        [more, Cmd("compute_accumulated", (SpAddr(a), SpAddr(b), rows, w, w, bk))])
                return loop("c3", e3["c"], per_c, step=w)
            return loop("kw3", e3["kw"], per_kw)
        return loop("kh3", e3["kh"], per_kh)


def _rows_per_command(flat: int, dim: int) -> float:
    """Average rows per command when ``flat`` rows go in commands of at most ``dim``."""
    return flat / -(-flat // dim)


def build_program(plan: Plan, *, bias: bool, scale: float, relu: bool, pipeline: bool | None = None) -> list:
    """The loop-IR statements of ``plan``'s command stream.  ``pipeline``: spread the next tiles' moves in
    and the previous accumulator tile's moves out among the current tile's computes
    (``codegen.pipeline``); None: whenever the plan double-buffers a tile; False: each tile's moves as one
    burst where the tile changes."""
    if pipeline is None:
        pipeline = plan.sp_double or plan.acc_double
    return _Builder(plan, bias, scale, relu, pipeline).program()
