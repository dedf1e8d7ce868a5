"""C source of a generated program (over ``gemmini_cosa.h``), and a host-side command logger.

``emit_c`` prints the program's loop form as

    void NAME(const elem_t *input, const elem_t *weights, const acc_t *bias, elem_t *output);

(matmul: input = A [M, K], weights = B [K, N], output = C [M, N], batched
[B, M, K], [B, K, N], [B, M, N] with bias [B, N]; conv: NHWC input,
[R, S, C/groups, K] weights, NHWC output).  Scratch buffers are globals
``NAME_partials`` (int32 partial sums) and ``NAME_zeros`` (one zero row)
when the program uses them.  With ``with_main`` the file also embeds inputs
and the NumPy-computed expected output, runs the function, compares, prints
one line and returns non-zero on a mismatch.

``host_logger_c`` is a C file that, linked with the emitted C on the host,
runs the function on zeroed buffers and prints every issued command with the
buffers' base addresses, so the log can be compared with ``Program.commands``.
"""

from __future__ import annotations

import re

import numpy as np

from .data import example_inputs, reference_output
from .ir import c_body
from .lowering import lowering_of
from .program import Program
from ..errors import CodegenError

_ARG_NAMES = ("input", "weights", "bias", "output")
_C_TYPES = {"int8": "elem_t", "int32": "acc_t", "uint8": "elem_t"}


def c_name(program: Program, name: str | None = None) -> str:
    """A C identifier for the program's function."""
    text = name or program.name
    text = re.sub(r"[^A-Za-z0-9_]", "_", text)
    if not text or text[0].isdigit():
        text = "g_" + text
    return text


def _buffer_names(program: Program, fn: str) -> dict:
    """Buffer -> C name: the four parameters, the function's own globals (partial sums, the zero row, and for
    an im2col fold with width padding the zero-bordered copy of the image, whose ``image`` is then the first
    parameter)."""
    names = {n: n for n in _ARG_NAMES}
    names["partials"] = f"{fn}_partials"
    names["zeros"] = f"{fn}_zeros"
    if "image" in program.buffers:
        names["image"], names["input"] = "image", f"{fn}_input"
    return names


def first_parameter(program: Program) -> str:
    """The buffer the function's first parameter points to: ``image`` for an im2col fold with width padding
    (the program copies it into its zero-bordered ``input``), else ``input``."""
    return "image" if "image" in program.buffers else "input"


def device_inputs(program: Program, inputs: dict) -> dict:
    """Buffer name -> the array the function's parameters point to, from the layer's ``inputs`` (for a
    lowered program, ``codegen.lowering``, the original layer's arrays: the weights in the rewrite's layout)."""
    low = lowering_of(program.workload)
    return low.device_arrays(dict(inputs)) if low is not None else dict(inputs)


def _array(values: np.ndarray, per_line: int = 24) -> str:
    flat = [str(int(v)) for v in np.asarray(values).ravel()]
    lines = [", ".join(flat[i:i + per_line]) for i in range(0, len(flat), per_line)]
    return "{\n  " + ",\n  ".join(lines) + "\n}" if flat else "{0}"


def _function(program: Program, fn: str, partials: str | None = None, zeros: str | None = None) -> str:
    """``void fn(input, weights, bias, output)``; the partial sums and the zero row are the function's own
    statics, or the buffers named ``partials`` / ``zeros`` declared elsewhere (``layer_function``)."""
    p = program.plan
    grouped = p.problem.grouped
    e = [{d: v for d, v in ext.items() if d != "g" or grouped} for ext in p.extents]
    lines = [
        f"/* {program.kind} {program.name} on Gemmini (DIM {program.config.dim}, {program.dataflow.upper()}):",
        f" * {program.problem.bounds}; {len(program.commands)} commands;",
        f" * scratchpad tile {dict(e[1])}, accumulator tile {dict(e[2])}"
        + (" (walked down image columns: oh/ow and kh/kw exchanged)" if p.problem.transposed else "") + ";",
        f" * scratchpad {'double' if p.sp_double else 'single'} buffered, accumulator "
        f"{'double' if p.acc_double else 'single'} buffered. */",
    ]
    names = _buffer_names(program, fn)
    first = first_parameter(program)
    if first == "image":
        lines.append(f"elem_t {fn}_input[{int(np.prod(program.buffers['input'].shape))}]; /* the bordered image */")
    if "partials" in program.buffers:
        if partials is None:
            buf = program.buffers["partials"]
            lines.append(f"acc_t {fn}_partials[{int(np.prod(buf.shape))}];")
        else:
            names["partials"] = partials
    if "zeros" in program.buffers:
        if zeros is None:
            lines.append(f"const elem_t {fn}_zeros[{program.buffers['zeros'].shape[0]}] = {{0}};")
        else:
            names["zeros"] = zeros
    lines.append(f"void {fn}(const elem_t *{first}, const elem_t *weights, const acc_t *bias, elem_t *output) {{")
    if not program.bias:
        lines.append("  (void)bias; /* generated without bias */")
    lines.append(c_body(program.statements, names))
    lines.append("}")
    return "\n".join(lines)


def layer_function(program: Program, fn: str, *, partials: str, zeros: str) -> str:
    """The C function ``void fn(input, weights, bias, output)`` of ``program`` (no prelude, no main) whose
    partial sums (int32, ``program.buffers["partials"]``) and zero row (64 bytes) are the buffers named
    ``partials`` and ``zeros``, declared once by the caller (a whole network shares them across layers)."""
    return _function(program, c_name(program, fn), partials, zeros)


#: What every emitted file starts with: the header, the element types, the min/max macros its C uses.
PRELUDE = """#include <stdint.h>
#include "gemmini_cosa.h"

#ifndef GEMMINI_COSA_ELEM_TYPES
#define GEMMINI_COSA_ELEM_TYPES
typedef int8_t elem_t;
typedef int32_t acc_t;
#endif
#define GC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define GC_MAX(a, b) ((a) > (b) ? (a) : (b))
"""


def _self_check_main(program: Program, fn: str, inputs: dict | None, seed: int) -> str:
    """A ``main`` that runs ``fn`` on embedded inputs (``run.example_inputs(program, seed)`` when None),
    compares its output with the embedded NumPy-computed expectation, prints one line (``PASS`` or
    ``FAIL``) and returns non-zero on a mismatch."""
    inputs = example_inputs(program, seed) if inputs is None else inputs
    expected = reference_output(program, inputs)
    device = device_inputs(program, inputs)
    main = ["", "#ifndef GEMMINI_COSA_NO_MAIN", "#include <stdio.h>"]
    for arg, buf_name in (("input", first_parameter(program)), ("weights", "weights"), ("bias", "bias")):
        if arg == "bias" and not program.bias:
            continue
        buf = program.buffers[buf_name]
        main.append(f"static const {_C_TYPES[buf.dtype]} {fn}_test_{arg}[{int(np.prod(buf.shape))}] = "
                    f"{_array(np.asarray(device[buf_name], dtype=buf.dtype))};")
    size = int(np.prod(program.buffers["output"].shape))
    main.append(f"static const elem_t {fn}_expected[{size}] = {_array(expected)};")
    main.append(f"static elem_t {fn}_output[{size}];")
    bias_arg = f"{fn}_test_bias" if program.bias else "0"
    main += [
        "int main(void) {",
        f"  {fn}({fn}_test_input, {fn}_test_weights, {bias_arg}, {fn}_output);",
        "  long mismatches = 0;",
        f"  for (long i = 0; i < {size}; i++) mismatches += {fn}_output[i] != {fn}_expected[i];",
        f'  printf("gemmini {fn}: %s (%ld of {size} mismatches)\\n", mismatches ? "FAIL" : "PASS", mismatches);',
        "  return mismatches ? 1 : 0;",
        "}",
        "#endif",
    ]
    return "\n".join(main)


def emit_c(program: Program, *, with_main: bool = False, inputs: dict | None = None, name: str | None = None,
           seed: int = 0) -> str:
    """C source of ``program``; ``with_main`` adds a self-checking ``main`` with embedded ``inputs``
    (``run.example_inputs(program, seed)`` when None) and the NumPy-expected output."""
    fn = c_name(program, name)
    parts = [f"/* Generated Gemmini program {program.name}: {program.kind}, dataflow {program.dataflow}. */",
             PRELUDE, _function(program, fn)]
    if with_main:
        parts.append(_self_check_main(program, fn, inputs, seed))
    return "\n".join(parts) + "\n"


def host_logger_c(program: Program, *, name: str | None = None) -> str:
    """A host C file that runs the emitted function (linked separately) on zeroed buffers and prints
    ``buffer NAME ADDRESS BYTES`` lines, then one ``funct rs1 rs2`` line per command (``fence`` for fences)."""
    fn = c_name(program, name)
    lines = ["#include <stdint.h>", "#include <stdio.h>", "#include <inttypes.h>",
             "typedef int8_t elem_t;", "typedef int32_t acc_t;",
             f"void {fn}(const elem_t *input, const elem_t *weights, const acc_t *bias, elem_t *output);",
             "void gemmini_host_issue(uint64_t funct, uint64_t rs1, uint64_t rs2) {",
             '  printf("%" PRIu64 " 0x%" PRIx64 " 0x%" PRIx64 "\\n", funct, rs1, rs2);', "}",
             'void gemmini_host_fence(void) { printf("fence\\n"); }']
    decls, prints = [], []
    for buf_name, buf in program.buffers.items():
        ctype = _C_TYPES[buf.dtype]
        count = int(np.prod(buf.shape))
        if buf_name == "input" and "image" in program.buffers:
            decls.append(f"extern elem_t {fn}_input[{count}];")
            sym = f"{fn}_input"
        elif buf_name in _ARG_NAMES + ("image",):
            decls.append(f"static {ctype} buf_{buf_name}[{count}];")
            sym = f"buf_{buf_name}"
        elif buf_name == "partials":
            decls.append(f"extern acc_t {fn}_partials[{count}];")
            sym = f"{fn}_partials"
        elif buf_name == "zeros":
            decls.append(f"extern const elem_t {fn}_zeros[{count}];")
            sym = f"{fn}_zeros"
        else:
            raise CodegenError(f"unknown buffer '{buf_name}'", source=f"program {program.name}")
        prints.append(f'  printf("buffer {buf_name} 0x%" PRIx64 " {buf.nbytes}\\n", (uint64_t)(uintptr_t){sym});')
    lines += decls
    lines.append("int main(void) {")
    lines += prints
    lines.append(f"  {fn}(buf_{first_parameter(program)}, buf_weights, buf_bias, buf_output);")
    lines.append("  return 0;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def parse_host_log(text: str) -> tuple[list, list]:
    """(spans, commands) from a ``host_logger_c`` log: spans are (start, end, buffer) triples."""
    from .. import isa

    spans, body = [], []
    for line in text.splitlines():
        if line.startswith("buffer "):
            _, name, addr, size = line.split()
            start = int(addr, 16)
            spans.append((start, start + max(int(size), 1), name))
        else:
            body.append(line)
    return sorted(spans), list(isa.decode_stream("\n".join(body)))


def _library_tiles(tiles: list, fits, limits: list, channel_step: tuple = ()) -> tuple[list, bool]:
    """Shrink ``tiles`` (largest first) until ``fits(tiles)``, as the vendor's own tile search does: an
    argument whose index is in ``channel_step`` drops to the next lower multiple of ``channel_step[1]``
    (channels), every other by one; each stays in 1..its limit."""
    tiles = [max(1, min(t, lim)) for t, lim in zip(tiles, limits)]
    channels, step = channel_step or ((), 1)
    shrunk = False
    while not fits(tiles):
        i = max(range(len(tiles)), key=lambda j: tiles[j])
        if tiles[i] == 1:
            raise CodegenError("no tile of the vendor library fits", source="gemmini-h emitter")
        tiles[i] = max(1, (tiles[i] - 1) // step * step) if i in channels else tiles[i] - 1
        shrunk = True
    return tuple(tiles), shrunk


def library_tile_space(program: Program, as_matmul: bool = False) -> tuple:
    """The space of tile arguments of the library call that runs ``program``'s layer: (start, fits, limits,
    channel_step).  start: the mapping's scratchpad tile as those arguments (before any shrinking); fits(tiles):
    whether the library accepts them (its WS half of the scratchpad and accumulator); limits: each argument's
    largest useful value; channel_step: (indices of channel arguments, the step they move by) or ().
    Arguments: ``tiled_matmul``'s (tile_I, tile_J, tile_K) in DIM blocks for a matmul (or, ``as_matmul``, a 1x1
    convolution run as the [N*H*W, C] x [C, K] matmul the library's ResNet-50 makes of it), else
    ``tiled_conv``'s (batches, porows, pocols, pochs, krows, kcols, kchs)."""
    cfg, pr = program.config, program.problem
    e1, dim, b = dict(program.plan.extents[1]), cfg.dim, pr.bounds
    if pr.transposed:  # the plan walks image columns: name its tile in image terms
        e1 = {{"oh": "ow", "ow": "oh", "kh": "kw", "kw": "kh"}.get(d, d): v for d, v in e1.items()}
    halve = 2 if program.dataflow == "ws" else 1
    sp_rows, acc_rows = cfg.sp_rows // halve, cfg.acc_rows // halve
    if pr.kind == "matmul" or as_matmul:
        if pr.kind == "matmul":
            rows, whole = e1["ow"], b["ow"]
        else:
            rows, whole = e1["n"] * e1["oh"] * e1["ow"], b["n"] * b["oh"] * b["ow"]

        def fits(t):
            ti, tj, tk = t
            return (ti * tk + tk * tj) * dim <= sp_rows and ti * tj * dim <= acc_rows
        limits = [-(-v // dim) for v in (whole, b["k"], b["c"])]
        return [-(-v // dim) for v in (rows, e1["k"], e1["c"])], fits, limits, ()
    sh, dh = pr.stride[0], pr.dilation[0]

    def fits(t):  # the library's footprint of a conv tile (no pooling, no downsample path)
        batches, porows, pocols, pochs, krows, kcols, kchs = t
        irows = porows * sh + (krows + (dh - 1) * (krows - 1)) - 1
        icols = pocols * sh + (kcols + (dh - 1) * (kcols - 1)) - 1
        cin, cout = -(-kchs // dim), -(-pochs // dim)
        a_rows = cin * batches * irows * icols
        return (a_rows + cout * kcols * krows * kchs <= sp_rows
                and cout * batches * porows * pocols <= acc_rows)
    names = ("n", "oh", "ow", "k", "kh", "kw", "c")
    return [e1[d] for d in names], fits, [b[d] for d in names], ((3, 6), dim)


def library_tiles(program: Program, as_matmul: bool = False) -> tuple[tuple, bool]:
    """(tile arguments, shrunk) for running ``program``'s mapping through Gemmini's library
    (``library_tile_space``): the mapping's scratchpad tile, shrunk (largest argument first, channels by DIM)
    until it fits the half of the scratchpad and accumulator the library allows in WS."""
    start, fits, limits, channel_step = library_tile_space(program, as_matmul)
    return _library_tiles(start, fits, limits, channel_step)


def emit_gemmini_h(program: Program, *, name: str | None = None, with_main: bool = False, inputs: dict | None = None,
                   seed: int = 0) -> str:
    """C for users of Gemmini's own software stack: one call of the vendor library's ``tiled_matmul`` or
    ``tiled_conv`` (``include/gemmini.h`` of ucb-bar/gemmini-rocc-tests) with the mapping's scratchpad tile
    as the tile arguments; ``with_main`` adds the same self-checking ``main`` as ``emit_c``.

    The vendor library walks its tiles in its own fixed order and picks its own inner loops, so only the
    tile sizes of the mapping carry over (not its loop orders or array unrolling).  The library reserves
    half of the scratchpad and of the accumulator for double buffering (WS) and asserts that a tile fits
    in the other half: a mapping tile that does not is shrunk (largest argument first) until it does, and
    the file says so.  Matmul tiles are in DIM-blocks (rounded up); a batched matmul is one call per batch
    entry.  Convolutions need square kernels, equal row/column stride, padding and dilation (the vendor
    API takes one of each) and no groups."""
    fn = c_name(program, name)
    pr, dim = program.problem, program.config.dim
    b = pr.bounds
    act = "RELU" if program.relu else "NO_ACTIVATION"
    bias = "bias" if program.bias else "NULL"
    flow = "WS" if program.dataflow == "ws" else "OS"
    if pr.kind == "matmul":
        m, n, k = b["ow"], b["k"], b["c"]
        tiles, shrunk = library_tiles(program)
        call = [f"tiled_matmul({m}, {n}, {k},",
                "    input, weights, {bias}, output,".format(bias=bias),
                f"    {k}, {n}, {n}, {n},",
                "    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY,",
                f"    {act}, {program.scale!r}, ACC_SCALE_IDENTITY, true,",
                f"    {tiles[0]}, {tiles[1]}, {tiles[2]},",
                "    false, false, false, false, 3,",
                f"    {flow});"]
        if pr.grouped:  # one vendor call per batch entry (the vendor API has no batch argument)
            bias_at = f"bias + b * {n}" if program.bias else "NULL"
            call[1] = f"    input + b * {m * k}, weights + b * {k * n}, {bias_at}, output + b * {m * n},"
            body = [f"  for (int b = 0; b < {pr.groups}; b++) {{"] + ["    " + line for line in call] + ["  }"]
        else:
            body = ["  " + line for line in call]
        tile_text = f"tile_I, tile_J, tile_K = {tiles[0]}, {tiles[1]}, {tiles[2]} blocks of {dim}"
    else:
        if pr.grouped:
            raise CodegenError("the vendor's tiled_conv has no groups argument (grouped and depthwise "
                               "convolutions)", source=f"program {program.name}", field="op.groups")
        if flow != "WS":
            raise CodegenError("the vendor's tiled_conv runs weight-stationary only", source=f"program {program.name}",
                               field="dataflow")
        (sh, sw), (ph, pw), (dh, dw) = pr.stride, pr.padding, pr.dilation
        if b["kh"] != b["kw"] or sh != sw or ph != pw or dh != dw:
            raise CodegenError("the vendor's tiled_conv takes a square kernel and one stride, padding and dilation",
                               source=f"program {program.name}", field="op")
        h, w = pr.in_hw
        tiles, shrunk = library_tiles(program)
        body = [f"  tiled_conv({b['n']}, {h}, {w}, {b['c']},",
                f"      {b['k']}, {b['oh']}, {b['ow']},",
                f"      {sh}, 1, {dh}, {ph}, {b['kh']},",
                f"      {b['c']}, {b['k']}, {b['k']},",
                "      false, false, false, false, false,",
                "      " + ", ".join(str(t) for t in tiles) + ",",
                f"      input, weights, {bias}, output,",
                f"      {act}, {program.scale!r}, 1, 0, 0,",
                "      WS);"]
        tile_text = "batches, porows, pocols, pochs, krows, kcols, kchs = " + ", ".join(str(t) for t in tiles)
    note = (" (shrunk from the mapping's tile to fit the half of the scratchpad and accumulator that the library "
            "allows)" if shrunk else "")
    head = [f"/* Generated for Gemmini's gemmini.h: {program.kind} {program.name}, dataflow {flow};",
            f" * {tile_text}{note}. */",
            '#include "include/gemmini.h"', "",
            f"void {fn}(const elem_t *input, const elem_t *weights, const acc_t *bias, elem_t *output) {{"]
    if not program.bias:
        body.insert(0, "  (void)bias;")
    parts = ["\n".join(head + body + ["  gemmini_fence();", "}"])]
    if with_main:
        parts.append(_self_check_main(program, fn, inputs, seed))
    return "\n".join(parts) + "\n"


# --- a raw command stream as C (vendor streams, loop instructions) ---------------------------------------
_LOOP_C_NAMES = {8: "loop_ws_start", 15: "loop_conv_ws_start"}  # the start words; the rest as in isa_loops


def stream_c(commands, *, name: str = "gemmini_stream", spans=None) -> str:
    """A C function over ``gemmini_cosa.h`` that issues ``commands`` (``Command``s or (funct, rs1, rs2)) one for one.

    Loop words print as the header's named calls (``gemmini_cosa_loop_ws_config_bounds(...)``, ...), mvins
    and mvouts as ``gemmini_cosa_mvin``/``_mvout``, fences as ``gemmini_cosa_fence()``, every other command
    as its raw operands.  ``spans``: (start, end, buffer) triples of main memory (``codegen.relative_stream``);
    a main-memory address inside one prints as ``GEMMINI_COSA_PTR(buffer) + offset`` and the buffers become
    the function's ``void *`` parameters, in span order."""
    from .. import isa, isa_loops

    spans = sorted(spans or [])
    fn = re.sub(r"[^A-Za-z0-9_]", "_", name) or "gemmini_stream"
    bufs = [buf for _, _, buf in spans]

    def addr(value: int) -> str:
        for start, end, buf in spans:
            if start <= value < end:
                return f"GEMMINI_COSA_PTR({buf}) + {value - start}u"
        return f"0x{value:x}ull"

    lines = [f"void {fn}({', '.join(f'void *{b}' for b in bufs) or 'void'}) {{"]
    for b in bufs:
        lines.append(f"  (void){b};")
    for cmd in isa.decode_stream(commands):
        f = isa.decode_fields(cmd)
        if cmd.funct in isa_loops.LOOP_FUNCTS:
            args = []
            for field, _, _, width in isa_loops.LAYOUTS[cmd.funct]:
                value = f[field]
                args.append(addr(value) if field in isa_loops._ADDRESS_FIELDS and value else
                            f"{value}ull" if width > 32 else f"{value}u")
            call = _LOOP_C_NAMES.get(cmd.funct, isa_loops.FUNCT_NAMES[cmd.funct])
            lines.append(f"  gemmini_cosa_{call}({', '.join(args)});")
        elif cmd.funct in isa.MVIN_ID:
            lines.append(f"  gemmini_cosa_mvin({addr(f['dram_addr'])}, 0x{f['local_addr']:x}u, {f['rows']}u, "
                         f"{f['cols']}u, {f['id']});")
        elif cmd.funct == isa.MVOUT:
            lines.append(f"  gemmini_cosa_mvout({addr(f['dram_addr'])}, 0x{f['local_addr']:x}u, {f['rows']}u, "
                         f"{f['cols']}u);")
        elif cmd.funct == isa.FENCE:
            lines.append("  gemmini_cosa_fence();")
        else:
            lines.append(f"  gemmini_cosa_issue(gemmini_cosa_cmd({cmd.funct}, 0x{cmd.rs1:x}ull, 0x{cmd.rs2:x}ull));"
                         f"  /* {isa.disassemble(cmd)} */")
    lines.append("}")
    return "\n".join(lines) + "\n"
