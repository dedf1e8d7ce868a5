"""Run a generated program on a simulator and check it against the NumPy reference.

``run_program(program, inputs, sim="isa")`` lays the inputs out in main
memory as the program's buffers say, runs the command stream on the
functional model (``gemmini.sim.functional``) for the outputs and on the
timing model (``gemmini.sim.timing``) for cycles, and compares the output
with ``gemmini.reference`` bit for bit.
"""

from __future__ import annotations

import numpy as np

from .codegen import Program
from .codegen.data import example_inputs, memory_image, read_buffer, reference_output
from .errors import SimulationError
from .run_result import RunResult


def timing_result(program: Program):
    """The timing model's ``TimingResult`` for the stream, or None when it is not available."""
    try:
        from .sim.timing import timing
    except ImportError:
        return None
    return timing(program.commands, program.config)


def run_program(program: Program, inputs: dict | None = None, sim: str = "isa", *, seed: int = 0,
                with_timing: bool = True) -> RunResult:
    """Run ``program`` on ``sim`` ("isa": functional + timing models; "rtl": the Verilated RTL) with
    ``inputs`` (``example_inputs(program, seed)`` when None) and verify it against NumPy."""
    inputs = example_inputs(program, seed) if inputs is None else inputs
    expected = reference_output(program, inputs)
    ideal = program.config.ideal_cycles(program.macs)
    if sim == "rtl":
        try:
            from .run_rtl import run_rtl
        except ImportError:
            raise SimulationError("the RTL simulator is not available", source="run_program", field="sim") from None
        return run_rtl(program, inputs=inputs)
    if sim != "isa":
        raise SimulationError(f"unknown simulator {sim!r} (isa or rtl)", source="run_program", field="sim")
    from .sim.functional import execute

    memory = memory_image(program, inputs)
    result = execute(program.commands, memory, program.config)
    outputs = read_buffer(program, memory, "output")
    mismatches = int(np.count_nonzero(outputs != expected))
    timed = timing_result(program) if with_timing else None
    cycles = timed.cycles if timed is not None else None
    return RunResult(outputs, mismatches == 0, mismatches, cycles, ideal,
                     (ideal / cycles) if cycles else None, result.instructions, program.dram_bytes(),
                     dict(timed.busy) if timed is not None else None)
