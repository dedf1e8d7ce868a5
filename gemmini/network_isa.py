"""A network's Gemmini steps as explicit-command programs (``cosa build|run gemmini MODEL.int8.onnx --style isa``).

In the default loops style a step is the library's calls with tiles; in this style it is the program
``codegen.generate`` writes from the step's own MIP mapping: every mvin, preload, compute and mvout issued by
our C (software-pipelined where the plan double-buffers), with the step's int32 bias, float32 output scale
and fused ReLU.  Such a program has no store-side pooler, so a network planned for it keeps every max-pool
on the host (``network.plan(net, store_pool=False)``).

``isa_layer`` generates a step's program and lays its constants out as the program's buffers read them
(convolution weights [R, S, C/groups, K], matmul B [K, N]); ``run_isa_layer`` runs it on the functional and
timing models (``gemmini.run.run_program``), checked against the NumPy reference of the same layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .codegen import Program, generate
from .codegen.data import user_shapes
from .errors import CodegenError
from .run import run_program


@dataclass(frozen=True)
class LayerMapping:
    """A distinct layer's schedule in the explicit-command style: the MIP's ``mapping``, the ``arch`` it was
    made for (the Gemmini preset) and the ``workload`` it maps: None for the layer as written, else the rewrite
    the scheduler found cheaper (``codegen.choose_lowering``: an im2col fold or packed groups)."""

    mapping: object
    arch: object
    workload: object = None


@dataclass(frozen=True)
class IsaLayer:
    """A Gemmini step ready to run as explicit commands: its ``program`` and ``constants`` (``weights`` and
    ``bias`` in the program's buffer layout)."""

    program: Program
    constants: dict


def isa_layer(workload, kind: str, schedule: LayerMapping, *, scale: float, relu: bool, weights: np.ndarray,
              bias: np.ndarray, source: str) -> IsaLayer:
    """The program of one step (``kind`` "conv" or "matmul") under ``schedule`` (of its rewrite, when the
    schedule names one), with the float32 output ``scale`` and ``relu`` in its mvout; ``weights`` as ONNX holds
    them ([K, C/groups, KH, KW]) or the matmul's B [K, N]; ``bias`` int32.  The constants keep the layer's own
    layout (a rewrite's runner and C take theirs from it: ``codegen.c.device_inputs``)."""
    program = generate(schedule.workload or workload, schedule.mapping, schedule.arch, bias=True,
                       scale=float(np.float32(scale)), relu=bool(relu))
    if kind == "conv":
        weights = np.transpose(weights, (2, 3, 1, 0))
    constants = {"weights": np.ascontiguousarray(weights, dtype=np.int8),
                 "bias": np.ascontiguousarray(bias, dtype=np.int32)}
    shapes = user_shapes(program)
    for name, data in constants.items():
        want = tuple(shapes[name][0])
        if data.shape != want:
            raise CodegenError(f"operand {name} has shape {data.shape}, the program reads {want}", source=source,
                               field=name)
    return IsaLayer(program, constants)


def run_isa_layer(compiled: IsaLayer, x: np.ndarray, kind: str) -> tuple:
    """(output, ``RunResult``) of the step on the activation ``x`` (NCHW for a convolution, which the program
    reads NHWC; 2-D for a matmul); the output is laid out as ``x``."""
    if kind == "conv":
        x = np.transpose(x, (0, 2, 3, 1))
    run = run_program(compiled.program, dict(compiled.constants, input=np.ascontiguousarray(x)))
    out = run.outputs
    if kind == "conv":
        out = np.ascontiguousarray(np.transpose(out, (0, 3, 1, 2)))
    return out, run


def partial_bytes(program: Program) -> int:
    """Bytes of the program's int32 partial-sum buffer (0 when its tiles never leave a reduction early)."""
    buf = program.buffers.get("partials")
    return 0 if buf is None else int(buf.nbytes)


def bordered_bytes(program: Program) -> int:
    """Bytes of the zero-bordered image copy an im2col fold with width padding keeps (its C function's own
    global), else 0."""
    return int(program.buffers["input"].nbytes) if "image" in program.buffers else 0
