"""From a workload and a mapping on the Gemmini preset to a tiling plan.

Matmuls and convolutions are handled by one plan: a matmul C[M,N] = A[M,K] B[K,N]
is the 1x1 convolution with one image of one row of M pixels, K input channels
and N output channels (A is then exactly the NHWC input, B the [R*S*C, K]
weights and C the NHWC output).  The plan uses seven internal dims:

* ``n`` images, ``oh``/``ow`` output rows/columns (the GEMM rows: pixels),
* ``k`` output channels (the GEMM columns),
* ``c`` input channels, ``kh``/``kw`` kernel rows/columns (the reduction),
* ``g`` groups: independent GEMMs that share nothing (a batched matmul's
  batch, a grouped or depthwise convolution's groups).  Every tensor depends
  on ``g``, so it is never unrolled on the array; its loops run at levels 0-2
  and a tile holds one block of rows per group (inputs, weights,
  accumulator), group-major.

In the workload IR a convolution's ``Q``/``S`` are the height dims and
``P``/``R`` the width dims (Timeloop naming), so Q -> oh, P -> ow, S -> kh,
R -> kw.

Mapping levels on the preset: 0 DRAM, 1 Scratchpad, 2 Accumulator, 3 Registers.
The plan records, per level, the temporal factors, loop orders and tile
extents, and derives the scratchpad and accumulator layouts:

* a scratchpad input tile stores one row per input pixel of the tile's
  (strided, haloed) window, in column blocks of ``bc`` channels;
* a scratchpad weight tile stores one row per (kh, kw, c), in column blocks
  of ``bk`` output channels;
* an accumulator tile stores one row per output pixel, in column blocks of
  ``bk`` output channels.

Pixels are ordered image row by image row, or column by column when the plan
is made for the transposed problem (``Problem.transpose``): a WS compute
streams rows that are evenly spaced in the scratchpad, so a tile that is tall
and narrow streams down its columns.  Where the mapping leaves the
Accumulator-level order unspecified, the plan orders it for reuse in the array
(WS: pixel loops innermost, under fixed weights; OS: reduction loops
innermost), and innermost level-2 loops that only lengthen what one compute
chain streams are merged into level 3 (``_fold_innermost``).  Neither changes
the tiles, and so neither the traffic nor the results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from workloads.divisors import largest_divisor_at_most as _largest_divisor_at_most
from workloads.footprint import box_rows, stored_axis

from .lowering import lowering_of
from ..config import GemminiConfig
from ..errors import CodegenError

DIMS = ("g", "n", "k", "c", "oh", "ow", "kh", "kw")
INPUT_DIMS = frozenset({"g", "n", "c", "oh", "ow", "kh", "kw"})
WEIGHT_DIMS = frozenset({"g", "k", "c", "kh", "kw"})
OUTPUT_DIMS = frozenset({"g", "n", "k", "oh", "ow"})
PIXEL_DIMS = ("n", "oh", "ow")
REDUCTION_DIMS = ("kh", "kw", "c")


@dataclass(frozen=True)
class Problem:
    """A matmul or convolution in the internal dims.

    bounds: internal dim -> loop bound.  names: workload dim -> internal dim.
    stride/dilation/padding: (rows, cols).  in_hw: input (height, width).
    Main-memory strides: ``in_strides`` (image, row, column of the input, in
    elements), ``w_strides`` (kernel row, kernel column, in weight rows of the
    [R*S*C, K] matrix), ``out_strides`` (image, row, column of the output, in
    pixels of ``row_elems`` elements).  ``row_elems``: elements of one
    weight row and of one output pixel in main memory (the output channels
    of all groups; 0 = ``bounds["k"]``).  ``g_strides``: elements between
    consecutive groups in the input, weights, output and bias.
    ``transposed``: the internal rows are the image's columns
    (``transpose``), so computes and moves can run down image columns.
    """

    kind: str
    name: str
    bounds: dict
    names: dict
    stride: tuple = (1, 1)
    dilation: tuple = (1, 1)
    padding: tuple = (0, 0)
    in_hw: tuple = (1, 1)
    in_strides: tuple = (1, 1, 1)
    w_strides: tuple = (1, 1)
    out_strides: tuple = (1, 1, 1)
    shapes: dict = field(default_factory=dict, compare=False)
    transposed: bool = False
    row_elems: int = 0
    g_strides: tuple = (0, 0, 0, 0)

    @property
    def macs(self) -> int:
        return math.prod(self.bounds.values())

    @property
    def grouped(self) -> bool:
        """Whether the workload has a group/batch dim (even of bound 1): its buffers carry it."""
        return "g" in self.names.values()

    @property
    def groups(self) -> int:
        return self.bounds.get("g", 1)

    @property
    def pixel_elems(self) -> int:
        """Elements of one weight row / output pixel in main memory (see ``row_elems``)."""
        return self.row_elems or self.bounds["k"]

    def buffer_shapes(self) -> dict:
        """Main-memory buffers: name -> (shape, numpy dtype name) (of the workload, transposed or not)."""
        return dict(self.shapes)

    def transpose(self) -> "Problem":
        """The same problem with image rows and columns exchanged (main memory is unchanged)."""
        swap = {"oh": "ow", "ow": "oh", "kh": "kw", "kw": "kh"}
        bounds = {swap.get(d, d): v for d, v in self.bounds.items()}
        names = {wd: swap.get(d, d) for wd, d in self.names.items()}

        def flip(pair):
            return (pair[1], pair[0])
        return replace(self, bounds=bounds, names=names, stride=flip(self.stride), dilation=flip(self.dilation),
                       padding=flip(self.padding), in_hw=flip(self.in_hw),
                       in_strides=(self.in_strides[0],) + flip(self.in_strides[1:]), w_strides=flip(self.w_strides),
                       out_strides=(self.out_strides[0],) + flip(self.out_strides[1:]),
                       transposed=not self.transposed)


def untransposed(problem: "Problem") -> "Problem":
    return problem.transpose() if problem.transposed else problem


def _strided(kind, bounds, in_hw, in_channels=None) -> dict:
    """Main-memory strides of the NHWC input/output and [R][S][C][K] weights (see Problem);
    ``in_channels``: channels of one input pixel (all groups; default ``bounds["c"]``)."""
    h, w = in_hw
    b = bounds
    chans = in_channels or b["c"]
    return {"in_strides": (h * w * chans, w * chans, chans), "w_strides": (b["kw"] * b["c"], b["c"]),
            "out_strides": (b["oh"] * b["ow"], b["ow"], 1)}


def problem_of(workload) -> Problem:
    """The internal view of a (batched) matmul or a (grouped) conv2d LoopNest; CodegenError for other kinds.

    Main-memory layouts: matmul A [M, K], B [K, N], bias [N], C [M, N]; batched
    matmul A [B, M, K], B [B, K, N], bias [B, N], C [B, M, N]; convolution
    NHWC input, [R, S, C, K] weights, bias [K], NHWC output, where a grouped
    convolution's weights are [R, S, C/groups, K] (output channel
    ``g*K/groups + k`` of group ``g`` reads input channels ``g*C/groups + c``).
    """
    src = f"workload {getattr(workload, 'name', workload)!s}"
    op = dict(getattr(workload, "op", {}) or {})
    kind = op.get("kind")
    for t in workload.tensors:
        if t.bits != 8:
            raise CodegenError(f"tensor '{t.name}' has {t.bits}-bit words; the Gemmini generator needs int8 "
                               "inputs, weights and outputs (int32 accumulation is internal)",
                               source=src, field=f"tensors.{t.name}.bits")
    dims = dict(workload.dims)
    if kind == "matmul":
        batched = bool(op.get("batched")) or "batch" in dims
        expected = {"batch", "M", "N", "K"} if batched else {"M", "N", "K"}
        if set(dims) != expected:
            raise CodegenError(f"expected matmul dims {sorted(expected)}, got {sorted(dims)}", source=src,
                               field="dims")
        lead = ("batch",) if batched else ()
        layout = {"input": lead + ("M", "K"), "weight": lead + ("K", "N"), "output": lead + ("M", "N")}
        for t in workload.tensors:
            axes = tuple(str(e) for e in t.indices)
            if axes != layout.get(t.role):
                raise CodegenError(f"matmul tensor '{t.name}' ({t.role}) is indexed {list(axes)}; the generator "
                                   f"reads it as {list(layout.get(t.role, ()))}", source=src,
                                   field=f"tensors.{t.name}.indices")
        names = {"M": "ow", "N": "k", "K": "c"}
        if batched:
            names["batch"] = "g"
        bounds = {d: 1 for d in DIMS if d != "g" or batched}
        for d, v in dims.items():
            bounds[names[d]] = v
        m, n, k = dims["M"], dims["N"], dims["K"]
        nb = (dims["batch"],) if batched else ()
        shapes = {"input": (nb + (m, k), "int8"), "weights": (nb + (k, n), "int8"),
                  "bias": (nb + (n,), "int32"), "output": (nb + (m, n), "int8")}
        return Problem("matmul", workload.name, bounds, names, in_hw=(1, m), shapes=shapes, row_elems=n,
                       g_strides=(m * k, k * n, m * n, n) if batched else (0, 0, 0, 0),
                       **_strided("matmul", bounds, (1, m)))
    if kind == "conv2d" and (op.get("lowering") or {}).get("kind") == "fold":  # im2col view (gemmini.codegen.lowering)
        return fold_problem(workload)
    if kind == "conv2d":
        groups = int(op.get("groups", 1) or 1)
        names = {"N": "n", "K": "k", "C": "c", "Q": "oh", "P": "ow", "S": "kh", "R": "kw"}
        if groups > 1 or "G" in dims:
            names["G"] = "g"
            if dims.get("G") != groups:
                raise CodegenError(f"op.groups={groups} but the dims have G={dims.get('G')}", source=src,
                                   field="op.groups")
        if set(dims) != set(names):
            raise CodegenError(f"expected conv dims {sorted(names)}, got {sorted(dims)}", source=src, field="dims")
        bounds = {names[d]: v for d, v in dims.items()}
        if not op.get("input_hw"):
            raise CodegenError("the convolution does not record its input size (op.input_hw)", source=src,
                               field="op.input_hw")
        h, w = tuple(op["input_hw"])
        b = bounds
        c_all, k_all = b.get("g", 1) * b["c"], b.get("g", 1) * b["k"]
        shapes = {"input": ((b["n"], h, w, c_all), "int8"), "weights": ((b["kh"], b["kw"], b["c"], k_all), "int8"),
                  "bias": ((k_all,), "int32"), "output": ((b["n"], b["oh"], b["ow"], k_all), "int8")}
        return Problem("conv2d", workload.name, bounds, names, tuple(op.get("stride", (1, 1))),
                       tuple(op.get("dilation", (1, 1))), tuple(op.get("padding", (0, 0))), (h, w), shapes=shapes,
                       row_elems=k_all, g_strides=(b["c"], b["k"], b["k"], b["k"]),
                       **_strided("conv2d", bounds, (h, w), c_all))
    raise CodegenError(f"workload kind {kind!r} is not supported by the Gemmini generator "
                       "(supported: matmul, batched matmul, conv2d, grouped and depthwise conv2d)", source=src,
                       field="op.kind")


def fold_problem(workload):
    """``problem_of`` for a ``fold`` workload (``codegen.lowering``): the im2col view of the bordered (or
    original) NHWC input -- pixel stride C bytes, Cf contiguous elements per lowered pixel."""
    low = lowering_of(workload)
    o = low.original
    n, c, k, cf = o["N"], o["C"], o["K"], low.cf
    wp = low.wp or o["W"]
    d = workload.dims
    bounds = {"n": n, "k": k, "c": cf, "oh": o["Q"], "ow": o["P"], "kh": o["S"], "kw": 1}
    names = {"N": "n", "K": "k", "C": "c", "Q": "oh", "P": "ow", "S": "kh", "R": "kw"}
    if set(d) != set(names) or d["C"] != cf or d["R"] != 1:
        raise CodegenError(f"a fold workload has dims {sorted(names)} with C = {cf}, R = 1; got {d}",
                           source=f"workload {workload.name}", field="dims")
    shapes = {"input": ((n, o["H"], wp, c), "int8"), "weights": ((o["S"], 1, cf, k), "int8"),
              "bias": ((k,), "int32"), "output": ((n, o["Q"], o["P"], k), "int8")}
    if low.wp:
        shapes["image"] = ((n, o["H"], o["W"], c), "int8")
    h = o["H"]
    return Problem("conv2d", workload.name, bounds, names, tuple(o["stride"]), (o["dilation"][0], 1),
                   (o["padding"][0], 0), (h, workload.op["input_hw"][1]), in_strides=(h * wp * c, wp * c, c),
                   w_strides=(cf, cf), out_strides=(o["Q"] * o["P"], o["P"], 1), shapes=shapes, row_elems=k,
                   g_strides=(cf, k, k, k))


@dataclass(frozen=True)
class TileLoop:
    """One temporal loop of the tiled nest (levels 0-2): its level, internal dim, trip count, and the
    distance (in elements of ``dim``) between consecutive iterations."""

    level: int
    dim: str
    count: int
    stride: int

    @property
    def var(self) -> str:
        return f"{self.dim}{self.level}"


@dataclass(frozen=True)
class Plan:
    """Everything the command builder needs, in internal dims.

    temporal/spatial: per level, dim -> factor.  extents: per level (0..4),
    the tile extents (extents[4] = 1).  loops: temporal loops of levels 0-2,
    outer to inner.  Row counts are scratchpad/accumulator rows.
    """

    problem: Problem
    config: GemminiConfig
    dataflow: str
    temporal: tuple
    spatial: tuple
    extents: tuple
    loops: tuple
    bc: int  # channels per scratchpad column block (input tile)
    bk: int  # output channels per column block (weights, accumulator)
    c_chunk: int  # channels per compute (WS: bc; OS: the chunk of the level-3 reduction)
    step_h: int
    step_w: int
    stored_h: int
    stored_w: int
    a_stride: int
    a_pix: int  # rows of one channel block of the input tile
    a_rows: int
    b_rows_per_block: int
    b_rows: int
    acc_pix: int
    acc_rows: int
    sp_double: bool
    acc_double: bool
    a_bases: tuple
    b_bases: tuple
    acc_bases: tuple
    notes: tuple = field(default_factory=tuple)

    def tile(self, level: int, dim: str) -> int:
        return self.extents[level][dim]


def _place(sizes, capacity: int, bank_rows: int, layout: str):
    """Row offsets for buffers of ``sizes`` rows, None when they do not fit in ``capacity``.

    ``layout``: "spread" starts every buffer at a bank boundary (the array reads its inputs and the weight path
    reads its next weights at the same time, and two reads of one bank take turns); "aligned" keeps a buffer
    that fits in one bank from straddling a boundary; "packed" puts them end to end."""
    offsets, pos = [], 0
    for size in sizes:
        boundary = (pos + bank_rows - 1) // bank_rows * bank_rows
        if layout == "spread" or (layout == "aligned" and size <= bank_rows
                                  and (pos % bank_rows) + size > bank_rows):
            pos = boundary
        offsets.append(pos)
        pos += size
    return offsets if pos <= capacity else None


def _allocate(sizes_single, capacity, bank_rows, double):
    """(offsets per buffer: (slot0, slot1) or (slot0,), double?) trying double buffering first."""
    tries = ([True] if double in (None, True) else []) + ([False] if double in (None, False) else [])
    for dbl in tries:
        sizes = [s for s in sizes_single for _ in range(2 if dbl else 1)]
        for layout in ("spread", "aligned", "packed"):
            offs = _place(sizes, capacity, bank_rows, layout)
            if offs is not None:
                per = 2 if dbl else 1
                return [tuple(offs[i * per:(i + 1) * per]) for i in range(len(sizes_single))], dbl
    return None, False


#: level-3 loop nesting (outer to inner) of the rows a WS compute streams / the reduction an OS chain sums
LEVEL3_NEST = {"ws": ("n", "oh", "ow"), "os": ("kh", "kw", "c")}


def _internal_orders(mapping, inv, temporal, ws: bool, reuse_order: bool) -> list:
    """Loop orders of levels 0-2 in internal dims.  With ``reuse_order``, a level-2 order the mapping leaves
    empty (unspecified) is completed for reuse in the array: WS walks the streamed pixel dims innermost (the
    weights stay in the PEs), OS the reduction dims (the sums stay in the PEs)."""
    orders = []
    for i in range(3):
        lm = mapping.levels[i]
        order = [inv[d] for d in lm.loop_order(tuple(inv))]
        if i == 2 and reuse_order and not lm.order:
            inner = LEVEL3_NEST["ws" if ws else "os"]
            order = [d for d in order if d not in inner] + list(inner)
        orders.append(order)
    return orders


def _fold_innermost(temporal, order2, ws: bool, free_level3: bool = False) -> list:
    """Merge innermost level-2 loops into level 3 while that only lengthens what one compute chain streams
    (WS: the rows of A under fixed weights; OS: the reduction in the PEs) and keeps the iteration order
    (every level-3 loop outside the folded dim has trip count 1).  With ``free_level3`` (the mapping leaves
    the level-2 and level-3 orders unspecified) the folded loops may also change places with level-3 loops:
    WS then streams the same rows under the same weights in another order (OS: sums the same products).
    Computes get up to DIM rows (WS) or channels (OS) instead of the level-3 factor.  Returns the folded
    dims."""
    nest = LEVEL3_NEST["ws" if ws else "os"]
    folded = []
    while True:
        dims2 = [d for d in order2 if temporal[2][d] > 1]
        if not dims2 or dims2[-1] not in nest:
            return folded
        d = dims2[-1]
        if not free_level3 and any(temporal[3][x] > 1 for x in nest[:nest.index(d)]):
            return folded
        temporal[3][d] *= temporal[2][d]
        temporal[2][d] = 1
        folded.append(d)


def make_plan(problem: Problem, mapping, config: GemminiConfig, dataflow: str, *, source: str,
              double_buffer: bool | None = None, acc_double_buffer: bool | None = None,
              reuse_order: bool = True) -> Plan:
    """Check ``mapping`` against what the generator supports and derive the plan (CodegenError otherwise).

    ``double_buffer`` / ``acc_double_buffer``: True or False to ask for (or refuse) two buffers in the
    scratchpad / accumulator (falling back to one when two do not fit), None to use two whenever they fit."""
    dim = config.dim
    if len(mapping.levels) != 4:
        raise CodegenError(f"the mapping has {len(mapping.levels)} levels; the Gemmini preset has 4 (DRAM, "
                           "Scratchpad, Accumulator, Registers)", source=source, field="levels")
    inv = problem.names
    temporal, spatial = [], []
    for i, lm in enumerate(mapping.levels):
        t = {d: 1 for d in DIMS}
        s = {d: 1 for d in DIMS}
        for d, f in lm.temporal.items():
            if d not in inv:
                raise CodegenError(f"level {i} names unknown dim '{d}'", source=source, field=f"levels[{i}].temporal")
            t[inv[d]] = f
        for d, f in lm.spatial.items():
            if d not in inv:
                raise CodegenError(f"level {i} names unknown dim '{d}'", source=source, field=f"levels[{i}].spatial")
            s[inv[d]] = f
        temporal.append(t)
        spatial.append(s)
    outer = {v: k for k, v in inv.items()}
    for d in DIMS:
        total = math.prod(temporal[i][d] * spatial[i][d] for i in range(4))
        if total != problem.bounds.get(d, 1):
            raise CodegenError(f"factors of '{outer.get(d, d)}' multiply to {total}, not its bound "
                               f"{problem.bounds.get(d, 1)}", source=source, field=f"factors.{outer.get(d, d)}")
    for i in range(4):
        if spatial[i]["g"] > 1:
            raise CodegenError(f"level {i} unrolls '{outer['g']}' spatially ({spatial[i]['g']}); every tensor "
                               f"depends on '{outer['g']}' (independent GEMMs), so the array cannot unroll it: "
                               "its loops must be temporal at levels 0-2", source=source,
                               field=f"levels[{i}].spatial")
    for i in (0, 1, 3):
        used = {outer[d]: f for d, f in spatial[i].items() if f > 1}
        if used:
            raise CodegenError(f"level {i} has spatial factors {used}; only the Accumulator level (2) unrolls "
                               "onto the array", source=source, field=f"levels[{i}].spatial")
    ws = dataflow == "ws"
    rows_dims = ("c",) if ws else ("ow",)
    for d, f in spatial[2].items():
        if f > 1 and d not in rows_dims + ("k",):
            raise CodegenError(f"{dataflow.upper()} cannot unroll '{outer[d]}' on the array (rows take "
                               f"{[outer[x] for x in rows_dims]}, columns '{outer['k']}')",
                               source=source, field="levels[2].spatial")
        if f > dim:
            raise CodegenError(f"spatial factor {f} of '{outer[d]}' exceeds the {dim}x{dim} array",
                               source=source, field="levels[2].spatial")
    # a Registers-level loop over groups changes the weights (WS) or the outputs (OS) held in the array, so it
    # runs as the innermost Accumulator-level loop instead: the tiles of levels 0-2 stay the same
    hoisted_g = temporal[3]["g"]
    if hoisted_g > 1:
        temporal[2]["g"] *= hoisted_g
        temporal[3]["g"] = 1
    allowed3 = set(PIXEL_DIMS) if ws else set(REDUCTION_DIMS)
    for d, f in temporal[3].items():
        if f > 1 and d not in allowed3:
            what = "weight-irrelevant (streamed rows)" if ws else "reduction"
            raise CodegenError(f"{dataflow.upper()}: the Registers level may only iterate {what} dims, not "
                               f"'{outer[d]}'", source=source, field="levels[3].temporal")
    orders = _internal_orders(mapping, inv, temporal, ws, reuse_order)
    if hoisted_g > 1:
        orders[2] = [d for d in orders[2] if d != "g"] + ["g"]
    free = reuse_order and not mapping.levels[2].order and not mapping.levels[3].order
    folded = _fold_innermost(temporal, orders[2], ws, free)
    extents = [dict() for _ in range(5)]
    extents[4] = {d: 1 for d in DIMS}
    for i in range(3, -1, -1):
        extents[i] = {d: temporal[i][d] * spatial[i][d] * extents[i + 1][d] for d in DIMS}
    loops = []
    for i in range(3):
        for d in orders[i]:
            if temporal[i][d] > 1:
                loops.append(TileLoop(i, d, temporal[i][d], spatial[i][d] * extents[i + 1][d]))
    e1, e2, e3 = extents[1], extents[2], extents[3]
    bk = spatial[2]["k"]
    if ws:
        bc = c_chunk = spatial[2]["c"]
    else:
        c_chunk = _largest_divisor_at_most(e3["c"], dim)
        bc = c_chunk
    # the input rows and columns of the scratchpad tile: the strided, dilated window over the tile, the gaps of
    # a common stride skipped (workloads.footprint, as mappings.validate and the MIP count it)
    sh, sw = problem.stride
    dh, dw = problem.dilation
    in_h = stored_axis((("oh", sh), ("kh", dh)), e1)
    in_w = stored_axis((("ow", sw), ("kw", dw)), e1)
    step_h, stored_h = in_h.step, in_h.entries
    step_w, stored_w = in_w.step, in_w.entries
    a_stride = sw // step_w if e1["ow"] > 1 else 1
    if not ws and e2["ow"] // spatial[2]["ow"] < 1:
        raise CodegenError("internal: bad OS tiling", source=source)
    # rows hold one block of bc input channels / bk output channels (DIM elements per row), group-major:
    # a tile holds e["g"] groups of channel (input) / output-channel blocks
    a_pix = e1["n"] * stored_h * stored_w
    a_rows = box_rows(e1["g"] * e1["c"] * a_pix, 1, dim, bc)
    b_rows_per_block = e1["kh"] * e1["kw"] * e1["c"]
    b_rows = box_rows(e1["g"] * e1["k"] * b_rows_per_block, 1, dim, bk)
    acc_pix = e2["n"] * e2["oh"] * e2["ow"]
    acc_rows = box_rows(e2["g"] * e2["k"] * acc_pix, 1, dim, bk)
    if max(a_pix, b_rows_per_block) > 0xFFFF:
        raise CodegenError(f"a scratchpad tile block of {max(a_pix, b_rows_per_block)} rows exceeds the 16-bit "
                           "block stride of config_ld", source=source, field="levels[1]")
    notes = []
    sp_bases, sp_double = _allocate([a_rows, b_rows], config.sp_rows, config.bank_rows,
                                    None if double_buffer else double_buffer)
    if sp_bases is None:
        raise CodegenError(f"the scratchpad tiles need {a_rows} (inputs) + {b_rows} (weights) rows of {dim} "
                           f"bytes but the scratchpad has {config.sp_rows} rows (blocks of {bc}/{bk} columns are "
                           "padded to a full row)", source=source, field="Scratchpad.capacity")
    a_bases, b_bases = sp_bases
    acc_alloc, acc_double = _allocate([acc_rows], config.acc_rows, config.acc_bank_rows,
                                      None if acc_double_buffer else acc_double_buffer)
    if acc_alloc is None:
        raise CodegenError(f"the accumulator tile needs {acc_rows} rows but the accumulator has "
                           f"{config.acc_rows} rows", source=source, field="Accumulator.capacity")
    (acc_bases,) = acc_alloc
    if reuse_order and not mapping.levels[2].order:
        notes.append("unspecified Accumulator-level order completed for reuse in the array")
    if hoisted_g > 1:
        notes.append(f"Registers-level loop over '{outer['g']}' ({hoisted_g}) run as the innermost "
                     "Accumulator-level loop (the array holds one group's weights or sums at a time)")
    if folded:
        notes.append(f"innermost level-2 loops over {[outer[d] for d in folded]} streamed by the level-3 computes")
    if double_buffer and not sp_double:
        notes.append("scratchpad tiles do not fit twice: single buffered")
    if acc_double_buffer and not acc_double:
        notes.append("accumulator tile does not fit twice: single buffered")
    return Plan(problem, config, dataflow, tuple(temporal), tuple(spatial), tuple(extents), tuple(loops), bc, bk,
                c_chunk, step_h, step_w, stored_h, stored_w, a_stride, a_pix, a_rows, b_rows_per_block, b_rows,
                acc_pix, acc_rows, sp_double, acc_double, a_bases, b_bases, acc_bases, tuple(notes))
