"""Run a vendor stream on our simulators and check it against NumPy.

``run_vendor(program)`` places random inputs in the program's buffers (a
main memory of ``program.base + program.arena_bytes`` bytes: the stream's
addresses are absolute), decodes the stream with ``gemmini.isa`` (loop
instructions included), runs it on the functional model and compares the
output buffer with the NumPy reference of ``program.layer`` bit for bit;
with ``with_timing`` the timing model's cycles come too.

Reference semantics (gemmini.h's CPU paths): out = requantize(conv or
matmul + bias) with the ReLU; a fused max-pool then takes the maximum over
each window, positions in the pool padding counting as 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import GemminiConfig
from ..errors import SimulationError
from .calls import VendorProgram

_OUTPUTS = ("C", "output")


@dataclass(frozen=True)
class VendorRun:
    """outputs: the output buffer after the run; verified: equal to the reference bit for bit;
    mismatches: differing elements; instructions: commands in the stream; cycles: the timing model's
    cycles (None unless asked for)."""

    outputs: np.ndarray
    verified: bool
    mismatches: int
    instructions: int
    cycles: float | None


def _output_name(program: VendorProgram) -> str:
    for b in program.buffers:
        if b.name in _OUTPUTS:
            return b.name
    raise SimulationError("no output buffer (C or output)", source=f"program {program.name}", field="buffers")


def example_inputs(program: VendorProgram, seed: int = 0) -> dict:
    """Random int8 operands and int32 bias (in [-2^12, 2^12)) for every buffer but the output."""
    rng = np.random.default_rng(seed)
    out = {}
    for b in program.buffers:
        if b.name in _OUTPUTS:
            continue
        if b.dtype == "int8":
            out[b.name] = rng.integers(-128, 128, size=b.shape).astype(np.int8)
        else:
            out[b.name] = rng.integers(-(1 << 12), 1 << 12, size=b.shape).astype(b.dtype)
    if program.layer.get("weights_layout") == "block_diagonal":  # packed depthwise: zero off the diagonal
        w = out["weights"]
        pack, channels = w.shape[2], w.shape[3]
        w *= (np.arange(pack)[:, None] == np.arange(channels)[None, :] % pack).astype(np.int8)
    return out


def memory_image(program: VendorProgram, inputs: dict) -> np.ndarray:
    memory = np.zeros(program.base + program.arena_bytes, dtype=np.uint8)
    for b in program.buffers:
        if b.name in inputs:
            arr = np.asarray(inputs[b.name], dtype=b.dtype)
            if arr.shape != b.shape:
                raise SimulationError(f"shape {arr.shape} differs from the buffer's {b.shape}",
                                      source=f"inputs of {program.name}", field=b.name)
            start = program.base + b.offset
            memory[start:start + b.nbytes] = np.ascontiguousarray(arr).view(np.uint8).ravel()
    return memory


def _maxpool(x: np.ndarray, size: int, stride: int, padding: int) -> np.ndarray:
    n, h, w, c = x.shape
    ph, pw = (h + 2 * padding - size) // stride + 1, (w + 2 * padding - size) // stride + 1
    padded = np.zeros((n, h + 2 * padding, w + 2 * padding, c), dtype=x.dtype)
    padded[:, padding:padding + h, padding:padding + w] = x
    out = np.full((n, ph, pw, c), np.iinfo(np.int8).min, dtype=x.dtype)
    for dr in range(size):
        for dc in range(size):
            out = np.maximum(out, padded[:, dr:dr + stride * ph:stride, dc:dc + stride * pw:stride])
    return out


def reference(program: VendorProgram, inputs: dict) -> np.ndarray:
    """The NumPy reference output of ``program.layer`` for ``inputs``."""
    from ..reference import batched_matmul_ref, conv_ref, matmul_ref

    layer = program.layer
    kind = layer.get("kind")
    src = f"program {program.name}"
    if kind == "matmul":
        ref = batched_matmul_ref if layer.get("batched") else matmul_ref
        return ref(inputs["A"], inputs["B"], inputs.get("D") if layer["bias"] else None, layer["scale"],
                   layer["relu"])
    if kind not in ("conv", "depthwise"):
        raise SimulationError(f"no reference for layer kind {kind!r}", source=src, field="layer")
    w = inputs["weights"]
    if kind == "depthwise" and layer.get("weights_layout") == "block_diagonal":  # [KH, KW, pack, C]: the diagonal
        channels = w.shape[3]
        w = w[:, :, np.arange(channels) % w.shape[2], np.arange(channels)][:, :, None, :]
    elif kind == "depthwise":  # [C, KH, KW] -> [KH, KW, 1, C]
        w = np.transpose(w, (1, 2, 0))[:, :, None, :]
    out = conv_ref(inputs["input"], w, inputs.get("bias") if layer["bias"] else None, layer["stride"],
                   layer["padding"], layer["dilation"], layer["scale"], layer["relu"], groups=layer["groups"])
    if layer.get("pool"):
        out = _maxpool(out, *layer["pool"])
    return out


def run_vendor(program: VendorProgram, inputs: dict | None = None, *, seed: int = 0, with_timing: bool = False,
               config: GemminiConfig | None = None, tiles: tuple | None = None) -> VendorRun:
    """Execute ``program``'s stream on the functional model (and timing model) and verify it; ``tiles``: the
    calls run with these tile arguments instead of the library's own (``gemmini.vendor.stream``).  The
    stream's LOOP_CONV_WS words are in ``config.loop_conv_layout``, as the modelled hardware decodes them."""
    from dataclasses import replace

    from .. import isa
    from ..sim.functional import execute
    from . import stream
    from .params import DEFAULT_PARAMS

    inputs = example_inputs(program, seed) if inputs is None else inputs
    expected = reference(program, inputs)
    params = DEFAULT_PARAMS if config is None else replace(DEFAULT_PARAMS, loop_conv_layout=config.loop_conv_layout)
    commands = isa.decode_stream(stream(program, params, tiles=tiles))
    memory = memory_image(program, inputs)
    execute(commands, memory, config)
    out_buf = program.buffer(_output_name(program))
    start = program.base + out_buf.offset
    outputs = memory[start:start + out_buf.nbytes].view(out_buf.dtype).reshape(out_buf.shape).copy()
    expected = expected.reshape(outputs.shape)
    mismatches = int(np.count_nonzero(outputs != expected))
    cycles = None
    if with_timing:
        from ..sim.timing import timing

        cycles = timing(commands, config).cycles
    return VendorRun(outputs, mismatches == 0, mismatches, len(commands), cycles)


def run_through_library(program, *, seed: int = 0, with_timing: bool = True,
                        config: GemminiConfig | None = None) -> VendorRun:
    """A generated ``program``'s mapping executed by Gemmini's own library, as its ``gemmini-h`` style runs
    on Gemmini: the library call Gemmini's networks make for the layer (``calls.from_workload``) with the
    mapping's scratchpad tile as its tile arguments (``codegen.c.library_tiles``; a 1x1 stride-1
    convolution, which the library runs as a matmul, gets matmul tiles) instead of the library's own choice.
    The loops, loop orders and array blocks are then the library's (its loop instructions); only the tile
    sizes come from the mapping.  Same inputs (``seed``) and checks as ``run_vendor``."""
    from ..codegen.c import library_tiles
    from .calls import from_workload

    vendor = from_workload(program.workload, dataflow=program.dataflow, bias=program.bias, relu=program.relu,
                           scale=program.scale)
    as_matmul = program.kind != "matmul" and vendor.calls[0].fn in ("tiled_matmul_auto", "tiled_matmul_nn_auto")
    tiles, _ = library_tiles(program, as_matmul=as_matmul)
    return run_vendor(vendor, seed=seed, with_timing=with_timing, config=config, tiles=tiles)
