"""A generated program's data: example inputs, the NumPy reference output and the main-memory image.

``example_inputs(program, seed)`` draws the int8 inputs and weights and the int32 bias a program takes
(for a lowered workload, the original layer's arrays); ``reference_output`` computes what the program
must produce with ``gemmini.reference``; ``memory_image`` lays the inputs out in main memory as the
program's buffers say, and ``read_buffer`` reads a buffer back.  The self-checking C (``codegen.c``),
the simulators' runner (``gemmini.run``) and the outside-tool runners all take their data from here.
"""

from __future__ import annotations

import numpy as np

from ..errors import SimulationError
from .examples import EXAMPLE_BIAS
from .lowering import lowering_of
from .program import Program


def example_inputs(program: Program, seed: int = 0) -> dict:
    """Random int8 inputs/weights and int32 bias (in [-2^12, 2^12)) for ``program``, from ``seed``."""
    rng = np.random.default_rng(seed)
    shapes = user_shapes(program)
    out = {}
    for name in ("input", "weights"):
        out[name] = rng.integers(-128, 128, size=shapes[name][0]).astype(np.int8)
    if program.bias:
        out["bias"] = rng.integers(-EXAMPLE_BIAS, EXAMPLE_BIAS, size=shapes["bias"][0]).astype(np.int32)
    return out


def user_shapes(program: Program) -> dict:
    """name -> (shape, dtype) of the arrays a caller gives: the buffers', or for a lowered workload
    (``gemmini.codegen.lowering``) the original layer's, which ``memory_image`` transforms into the buffers."""
    low = lowering_of(program.workload)
    if low is not None:
        return low.user_shapes()
    return {name: (buf.shape, buf.dtype) for name, buf in program.buffers.items()}


def _check_inputs(program: Program, inputs: dict) -> dict:
    src = f"inputs of program {program.name}"
    needed = ("input", "weights") + (("bias",) if program.bias else ())
    shapes = user_shapes(program)
    arrays = {}
    for name in needed:
        if name not in inputs:
            raise SimulationError(f"missing array '{name}' (need {list(needed)})", source=src, field=name)
        shape, dtype = shapes[name]
        arr = np.asarray(inputs[name])
        if tuple(arr.shape) != tuple(shape):
            raise SimulationError(f"shape {arr.shape} differs from the program's {shape}", source=src, field=name)
        info = np.iinfo(dtype)
        if not np.issubdtype(arr.dtype, np.integer) or (arr.size and (arr.min() < info.min or arr.max() > info.max)):
            raise SimulationError(f"values must be {dtype}", source=src, field=name)
        arrays[name] = arr.astype(dtype)
    return arrays


def reference_output(program: Program, inputs: dict) -> np.ndarray:
    """The NumPy reference output of ``program`` for ``inputs``."""
    from ..reference import batched_matmul_ref, conv_ref, matmul_ref

    arrays = _check_inputs(program, inputs)
    bias = arrays.get("bias") if program.bias else None
    low = lowering_of(program.workload)
    if low is not None:
        return low.reference(arrays, bias, program.scale, program.relu)
    pr = program.problem
    if pr.kind == "matmul":
        ref = batched_matmul_ref if pr.grouped else matmul_ref
        return ref(arrays["input"], arrays["weights"], bias, program.scale, program.relu)
    return conv_ref(arrays["input"], arrays["weights"], bias, pr.stride, pr.padding, pr.dilation, program.scale,
                    program.relu, groups=pr.groups)


def memory_image(program: Program, inputs: dict) -> np.ndarray:
    """The main memory (uint8) with the inputs placed in their buffers; everything else zero."""
    arrays = _check_inputs(program, inputs)
    low = lowering_of(program.workload)
    if low is not None:
        arrays = low.device_arrays(arrays)
    memory = np.zeros(program.memory_bytes, dtype=np.uint8)
    for name, arr in arrays.items():
        buf = program.buffers[name]
        memory[buf.offset:buf.offset + buf.nbytes] = np.ascontiguousarray(arr).view(np.uint8).ravel()
    return memory


def read_buffer(program: Program, memory: np.ndarray, name: str) -> np.ndarray:
    buf = program.buffers[name]
    return memory[buf.offset:buf.offset + buf.nbytes].view(buf.dtype).reshape(buf.shape).copy()
