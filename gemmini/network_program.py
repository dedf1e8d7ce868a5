"""A whole int8 network as one bare-metal Gemmini program (``cosa build gemmini MODEL.int8.onnx``).

``network_program(net, steps, run, feeds, schedules, scheduler)`` writes one self-checking C program that
runs every step of ``gemmini.network.plan`` in order:

* each Gemmini step is the command stream of its library calls (``gemmini.vendor``, loop instructions
  included) with the step's tiles (cosa's, or the library's own for ``gemmini-default``), printed as a C
  function over its buffers (``codegen.c.stream_c``) and called on the activations' places in the arena and
  on the weights and bias in the program's constants, then a fence (the core waits for Gemmini's stores);
* each host step is the C of ``gemmini/include/gemmini_cosa_net.h`` (``network_ops``' semantics);
* activations live in one arena placed by ``network.arena_plan`` (a buffer is reused once its last reader
  has run); four-dimensional ones are NHWC, as Gemmini's library reads and writes them;
* the constants (weights and biases in the layout the calls read, the input image, the expected output)
  are one binary blob beside the C file, included with ``.incbin`` (a C initializer of ResNet-50's weights
  would be 100 MB of text).

The program times every step with ``rdcycle`` (after the fence, for a Gemmini step), prints one line per
step (``cosa-net step <i> <name> <gemmini|host> <cycles>``), the compared tensor's bytes in hex, a
checksum, and ``gemmini network <name>: PASS|FAIL (<m> of <n> mismatches)`` against the expected output
(the functional model's, which ``cosa run gemmini --sim isa`` compares with ONNX Runtime); it exits 0 on
PASS.  ``parse_output`` reads those lines back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import CodegenError
from .network import Network, Step, arena_plan, tensor_bytes

#: The bare-metal runtime's memory (gemmini/runtime/link.ld), less the stack and room for the code.
MEMORY_BYTES = 64 << 20
RESERVED_BYTES = 2 << 20
_OUTPUTS = ("output", "C")
_INPUTS = ("input", "A")
_STEP_LINE = re.compile(r"^cosa-net step (\d+) (\S+) (gemmini|host) (\d+)$", re.M)
_HEX_LINE = re.compile(r"^cosa-net output ([0-9a-f]*)$", re.M)
_CHECK_LINE = re.compile(r"^gemmini network \S+: (PASS|FAIL) \((\d+) of (\d+) mismatches\)$", re.M)
_CHECKSUM_LINE = re.compile(r"^cosa-net checksum (-?\d+)$", re.M)


@dataclass(frozen=True)
class NetworkProgram:
    """source: the C text; blob: the constants it includes (``.incbin``); arena_bytes / constant_bytes: the
    activation arena and the blob; steps: (name, on) of every step the program runs, in order; compared:
    the tensor it checks and prints; expected: that tensor as the program lays it out (NHWC if 4-D)."""

    name: str
    source: str
    blob: bytes
    arena_bytes: int
    constant_bytes: int
    steps: tuple
    compared: str
    expected: np.ndarray
    scratch_bytes: int = 0
    """The explicit-command layers' scratch: the int32 partial sums they share (the largest one's) and each
    im2col fold's zero-bordered image copy."""


@dataclass(frozen=True)
class NetworkOutput:
    """What a run of the program printed: per-step cycles (name, on, rdcycle cycles), the compared tensor's
    bytes, the checksum, the program's own verdict."""

    steps: list
    output: np.ndarray | None
    checksum: int | None
    passed: bool
    mismatches: int | None


def _c_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text) or "x"


def _f32(value) -> str:
    """A float32 as an exact C hex-float literal."""
    v = float(np.float32(value))
    if not np.isfinite(v):
        raise CodegenError(f"a scale must be finite, got {v}", source="network program", field="scale")
    return f"{v.hex()}f"


def nhwc(array: np.ndarray) -> np.ndarray:
    """A tensor as the program stores it: NHWC if four-dimensional, else as it is."""
    a = np.asarray(array)
    return np.ascontiguousarray(np.transpose(a, (0, 2, 3, 1))) if a.ndim == 4 else np.ascontiguousarray(a)


class _Blob:
    """Constants placed at 64-byte offsets."""

    def __init__(self):
        self.parts, self.size = [], 0

    def add(self, array: np.ndarray) -> int:
        data = np.ascontiguousarray(array).tobytes()
        offset = self.size
        pad = -len(data) % 64
        self.parts.append(data + b"\0" * pad)
        self.size += len(data) + pad
        return offset

    def bytes(self) -> bytes:
        return b"".join(self.parts)


def _needed_steps(net: Network, steps: list[Step], compared: list[str]) -> list[Step]:
    """The steps the compared tensors depend on (a final DequantizeLinear to float is left out)."""
    producer = {s.output: s for s in steps}
    need, todo = set(), list(compared)
    while todo:
        t = todo.pop()
        s = producer.get(t)
        if s is None or s.name in need:
            continue
        need.add(s.name)
        todo += [i for i in s.inputs if i not in net.constants]
    return [s for s in steps if s.name in need]


def _check_spans(commands, spans, base: int, source: str) -> None:
    """Every main-memory address the stream uses lies inside one of its buffers (else the C would point
    outside the arena)."""
    from . import isa, isa_loops

    for cmd in isa.decode_stream(commands):
        f = isa.decode_fields(cmd)
        if cmd.funct in isa_loops.LOOP_FUNCTS:
            values = [f[n] for n, *_ in isa_loops.LAYOUTS[cmd.funct] if n in isa_loops._ADDRESS_FIELDS]
        elif cmd.funct in isa.MVIN_ID or cmd.funct == isa.MVOUT:
            values = [f["dram_addr"]]
        else:
            continue
        for v in values:
            if v >= base and not any(lo <= v < hi for lo, hi, _ in spans):
                raise CodegenError(f"address 0x{v:x} is outside the layer's buffers", source=source, field="stream")


def _host_call(net: Network, s: Step, ptr) -> list[str]:
    """C lines of one host step (``ptr(tensor)``: its C pointer expression)."""
    from .network import _scalar
    from .network_ops import _pool_geometry

    src = f"{net.source}: node {s.name}"
    sc = lambda i: _scalar(net, s.inputs[i]) if i < len(s.inputs) else 0  # noqa: E731
    x, y = s.inputs[0], s.output
    count = int(np.prod(net.shapes[y], dtype=np.int64))
    dt_in, dt_out = np.dtype(net.dtypes[x]), np.dtype(net.dtypes[y])
    for t, dt in ((x, dt_in), (y, dt_out)):
        if dt not in (np.dtype(np.int8), np.dtype(np.float32)):
            raise CodegenError(f"tensor {t} is {dt}; the network program runs int8 and float32 activations",
                               source=src, field=t)
    if s.op == "QuantizeLinear":
        return [f"cosa_net_quantize((const float *){ptr(x)}, (int8_t *){ptr(y)}, {count}L, {_f32(sc(1))}, "
                f"{int(sc(2))});"]
    if s.op == "DequantizeLinear":
        return [f"cosa_net_dequantize((const int8_t *){ptr(x)}, (float *){ptr(y)}, {count}L, {_f32(sc(1))}, "
                f"{int(sc(2))});"]
    if s.op == "Relu":
        kind = "f32" if dt_in == np.float32 else "i8"
        ctype = "float" if kind == "f32" else "int8_t"
        return [f"cosa_net_relu_{kind}((const {ctype} *){ptr(x)}, ({ctype} *){ptr(y)}, {count}L);"]
    if s.op == "QLinearAdd":
        if any(int(sc(i)) != 0 for i in (2, 5, 7)):
            raise CodegenError("zero points must be 0 (quantize with 'cosa quantize')", source=src, field="zero_point")
        if tuple(net.shapes[x]) != tuple(net.shapes[s.inputs[3]]):
            raise CodegenError("the network program adds tensors of one shape (no broadcasting)", source=src,
                               field="inputs")
        ra = np.float32(sc(1)) / np.float32(sc(6))
        rb = np.float32(sc(4)) / np.float32(sc(6))
        return [f"cosa_net_qlinear_add((const int8_t *){ptr(x)}, (const int8_t *){ptr(s.inputs[3])}, "
                f"(int8_t *){ptr(y)}, {count}L, {_f32(ra)}, {_f32(rb)}, 0, {int(s.relu)});"]
    if s.op == "MaxPool":
        if dt_in != np.int8:
            raise CodegenError("the network program max-pools int8 tensors", source=src, field=x)
        kernel, strides, dil, pads, (oh, ow) = _pool_geometry(net.shapes[x], s.attrs, src)
        n, c, h, w = net.shapes[x]
        return [f"cosa_net_max_pool((const int8_t *){ptr(x)}, (int8_t *){ptr(y)}, {n}, {c}, {h}, {w}, {kernel[0]}, "
                f"{kernel[1]}, {strides[0]}, {strides[1]}, {pads[0]}, {pads[1]}, {dil[0]}, {dil[1]}, {oh}, {ow});"]
    if s.op == "QLinearGlobalAveragePool":
        n, c, h, w = net.shapes[x]
        scale = np.float32(sc(1)) / (np.float32(sc(3)) * np.float32(h * w))
        return [f"cosa_net_qlinear_global_average_pool((const int8_t *){ptr(x)}, (int8_t *){ptr(y)}, {n}, {c}, "
                f"{h * w}L, {_f32(scale)}, {int(sc(2))}, {int(sc(4))});"]
    if s.op == "GlobalAveragePool":
        n, c, h, w = net.shapes[x]
        return [f"cosa_net_global_average_pool((const float *){ptr(x)}, (float *){ptr(y)}, {n}, {c}, {h * w}L);"]
    if s.op in ("Flatten", "Reshape"):
        shape_in = net.shapes[x]
        nbytes = tensor_bytes(net, y)
        if len(shape_in) == 4 and shape_in[2] * shape_in[3] > 1:
            if s.op == "Reshape" or len(net.shapes[y]) == 4:
                raise CodegenError(f"a reshape of a spatial tensor {list(shape_in)} is not placed in the network "
                                   "program (its activations are NHWC)", source=src, field="shape")
            n, c, h, w = shape_in
            return [f"cosa_net_flatten_nhwc((const uint8_t *){ptr(x)}, (uint8_t *){ptr(y)}, {n}, {c}, {h * w}L, "
                    f"{dt_in.itemsize});"]
        if len(net.shapes[y]) == 4 and net.shapes[y][2] * net.shapes[y][3] > 1:
            raise CodegenError(f"a reshape into a spatial tensor {list(net.shapes[y])} is not placed in the network "
                               "program", source=src, field="shape")
        return [f"memmove({ptr(y)}, {ptr(x)}, {nbytes});"]
    raise CodegenError(f"no C for host operator {s.op}", source=src, field="op")


def network_program(net: Network, steps: list[Step], values: dict, schedules: dict, scheduler: str = "cosa",
                    name: str | None = None, isa_layers: dict | None = None) -> NetworkProgram:
    """The program for ``net`` run on the graph inputs and intermediate values of ``values`` (a
    ``NetworkRun.values``: the program embeds the inputs and checks the compared tensor against it);
    ``schedules``: layer key -> ``LayerTiles`` (cosa's), unused for ``gemmini-default``.  ``isa_layers``
    (a ``NetworkRun.isa_layers`` of the explicit-command style): step name -> ``network_isa.IsaLayer``, each
    Gemmini step then the C of its program (``codegen.c.layer_function``) instead of library calls."""
    from .chipyard import vendor_stream
    from .codegen.c import device_inputs, layer_function, stream_c
    from .network_isa import bordered_bytes, partial_bytes
    from .network_run import compared_tensors, gemmini_layers, gemmini_operands

    name = _c_name(name or Path(net.source).stem)
    compared = compared_tensors(net)
    if len(compared) != 1:
        raise CodegenError(f"the network program checks one output tensor, the model has {len(compared)}",
                           source=net.source, field="outputs")
    run_steps = _needed_steps(net, steps, compared)
    arena = arena_plan(net, run_steps)
    layers = {g.step.name: g for g in gemmini_layers(net, run_steps)}
    blob = _Blob()
    inputs_at = {t: blob.add(nhwc(values[t])) for t in net.inputs}

    def ptr(t: str) -> str:
        if t in inputs_at:
            return f"(cosa_net_blob + {inputs_at[t]})"
        if t not in arena.offsets:
            raise CodegenError(f"tensor {t} has no place in the arena", source=net.source, field=t)
        return f"(cosa_net_arena + {arena.offsets[t]})"

    functions, body, order, scratch, bordered = [], [], [], 0, 0
    for i, s in enumerate(run_steps):
        body.append(f"  /* step {i}: {s.op} {s.name}{' (+' + ', '.join(s.fused) + ')' if s.fused else ''} */")
        body.append("  t0 = cosa_net_rdcycle();")
        if s.on == "gemmini" and isa_layers:
            fn = f"cosa_net_layer_{i}_{_c_name(s.name)}"
            compiled = isa_layers[s.name]
            scratch = max(scratch, partial_bytes(compiled.program))
            bordered += bordered_bytes(compiled.program)
            functions.append(layer_function(compiled.program, fn, partials="cosa_net_partials",
                                            zeros="cosa_net_zeros"))
            device = device_inputs(compiled.program, compiled.constants)   # a rewrite's weights in its layout
            w, b = (blob.add(device[k]) for k in ("weights", "bias"))
            body.append(f"  {fn}((const elem_t *){ptr(s.inputs[0])}, (const elem_t *)(cosa_net_blob + {w}), "
                        f"(const acc_t *)(cosa_net_blob + {b}), (elem_t *){ptr(s.output)});")
            body.append("  gemmini_cosa_fence();")
        elif s.on == "gemmini":
            layer = layers[s.name]
            sched = None if scheduler == "gemmini-default" else schedules[layer.key]
            vendor, operands = gemmini_operands(net, layer, values[s.inputs[0]], sched, scheduler)
            tiles = None if sched is None else sched.tiles
            commands = vendor_stream(vendor, tiles=tiles)
            fn = f"cosa_net_layer_{i}_{_c_name(s.name)}"
            spans = [(vendor.base + b.offset, vendor.base + b.offset + b.nbytes, _c_name(b.name))
                     for b in vendor.buffers]
            _check_spans(commands, spans, vendor.base, f"{net.source}: node {s.name}")
            functions.append(stream_c(commands, name=fn, spans=spans))
            args = []
            for b in sorted(vendor.buffers, key=lambda b: b.offset):
                if b.name in _INPUTS:
                    args.append(f"(void *){ptr(s.inputs[0])}")
                elif b.name in _OUTPUTS:
                    args.append(f"(void *){ptr(s.output)}")
                else:
                    data = np.asarray(operands[b.name], dtype=b.dtype)
                    if data.shape != tuple(b.shape):
                        raise CodegenError(f"operand {b.name} has shape {data.shape}, the call reads {b.shape}",
                                           source=f"{net.source}: node {s.name}", field=b.name)
                    args.append(f"(void *)(cosa_net_blob + {blob.add(data)})")
            body.append(f"  {fn}({', '.join(args)});")
            body.append("  gemmini_cosa_fence();")
        else:
            body += ["  " + line for line in _host_call(net, s, ptr)]
        body.append(f'  printf("cosa-net step {i} {_c_name(s.name)} {s.on} %lu\\n", cosa_net_rdcycle() - t0);')
        order.append((s.name, s.on))
    out = compared[0]
    expected = nhwc(values[out]).astype(np.int8)
    size = int(expected.size)
    expected_at = blob.add(expected)
    source = _c_source(name, functions, body, arena.size_bytes, ptr(out), expected_at, size, scratch,
                       bool(isa_layers))
    program = NetworkProgram(name, source, blob.bytes(), int(arena.size_bytes), blob.size, tuple(order), out,
                             expected, scratch + bordered)
    check_memory(program, net.source)
    return program


def check_memory(program: NetworkProgram, source: str) -> None:
    """Refuse a program whose constants and arena do not fit the runtime's memory, naming the sizes."""
    need = program.constant_bytes + program.arena_bytes + program.scratch_bytes
    if need > MEMORY_BYTES - RESERVED_BYTES:
        scratch = (f" and {program.scratch_bytes:,} bytes of partial sums and bordered images"
                   if program.scratch_bytes else "")
        raise CodegenError(f"the program needs {program.constant_bytes:,} bytes of constants and a "
                           f"{program.arena_bytes:,}-byte arena{scratch}, more than the "
                           f"{MEMORY_BYTES - RESERVED_BYTES:,} bytes the runtime's {MEMORY_BYTES >> 20} MiB leave "
                           "after code and stack", source=source, field="memory")


def _c_source(name, functions, body, arena_bytes, out_ptr, expected_at, size, scratch_bytes=0, zeros=False) -> str:
    from .codegen import ZEROS_BYTES
    from .codegen.c import PRELUDE

    head = [f"/* {name}: a whole int8 network on Gemmini (cosa build gemmini), self-checking. */",
            PRELUDE, "#include <stdio.h>", "#include <string.h>", '#include "gemmini_cosa_net.h"', "",
            "extern const uint8_t cosa_net_blob[];",
            '__asm__(".section .rodata\\n.balign 64\\n.global cosa_net_blob\\ncosa_net_blob:\\n'
            '.incbin \\"" COSA_NET_BLOB "\\"\\n.previous\\n");',
            f"static uint8_t cosa_net_arena[{max(arena_bytes, 64)}] __attribute__((aligned(64)));",
            *([f"static acc_t cosa_net_partials[{scratch_bytes // 4}] __attribute__((aligned(64)));"]
              if scratch_bytes else []),
            *([f"static const elem_t cosa_net_zeros[{ZEROS_BYTES}] __attribute__((aligned(64))) = {{0}};"]
              if zeros else []),
            "static inline unsigned long cosa_net_rdcycle(void) {",
            "  unsigned long c;", '  __asm__ volatile("rdcycle %0" : "=r"(c));', "  return c;", "}", ""]
    main = ["int main(void) {", "  unsigned long t0;", *body,
            f"  const int8_t *got = (const int8_t *){out_ptr};",
            f"  const int8_t *want = (const int8_t *)(cosa_net_blob + {expected_at});",
            "  long mismatches = 0, checksum = 0;",
            f"  for (long i = 0; i < {size}; i++) {{ mismatches += got[i] != want[i]; checksum += got[i] * (i % 251 + 1); }}",
            '  printf("cosa-net output ");',
            f'  for (long i = 0; i < {size}; i++) printf("%02x", (unsigned)(uint8_t)got[i]);',
            '  printf("\\ncosa-net checksum %ld\\n", checksum);',
            f'  printf("gemmini network {name}: %s (%ld of {size} mismatches)\\n", mismatches ? "FAIL" : "PASS", '
            "mismatches);",
            "  return mismatches ? 1 : 0;", "}"]
    return "\n".join(head + functions + main) + "\n"


def checksum(values: np.ndarray) -> int:
    """The program's checksum of the compared tensor (as laid out): sum of value * (index mod 251 + 1)."""
    v = np.asarray(values, dtype=np.int64).ravel()
    return int(np.sum(v * (np.arange(v.size) % 251 + 1)))


def build_network_elf(program: NetworkProgram, output) -> Path:
    """Write ``output``'s ``.c`` and ``.bin`` (the constants) and compile them into the bare-metal ELF
    ``output`` with our runtime."""
    from .build import compile_elf

    output = Path(output)
    c_file, blob_file = output.with_suffix(".c"), output.with_suffix(".bin")
    c_file.write_text(program.source)
    blob_file.write_bytes(program.blob)
    return compile_elf(c_file, output, defines=[f'COSA_NET_BLOB="{blob_file.resolve()}"'])


def parse_output(text: str, expected: np.ndarray | None = None) -> NetworkOutput:
    """The step cycles, output bytes, checksum and verdict a run of the program printed."""
    steps = [(m.group(2), m.group(3), int(m.group(4))) for m in _STEP_LINE.finditer(text)]
    hexes = _HEX_LINE.search(text)
    out = None
    if hexes:
        out = np.frombuffer(bytes.fromhex(hexes.group(1)), dtype=np.int8)
        if expected is not None and out.size == expected.size:
            out = out.reshape(expected.shape)
    check = _CHECK_LINE.search(text)
    total = _CHECKSUM_LINE.search(text)
    return NetworkOutput(steps, out, int(total.group(1)) if total else None, bool(check and check.group(1) == "PASS"),
                         int(check.group(2)) if check else None)
