"""A generated program on our Verilated Gemmini RTL, checked against NumPy.

``run_program_rtl(program, mode="c")`` compiles the program's C (``codegen.c.emit_c``) with a small
driver that reads the inputs from files, runs it against the RTL (``gemmini.sim.rtl.run_c``) and
compares the output with the NumPy reference; ``mode="trace"`` runs the expanded command stream on a
main-memory image instead (``gemmini.sim.rtl.run_trace``).  ``run_rtl`` takes a ``Program`` or a
self-checking C source and returns the simulator-independent ``gemmini.run_result.RunResult``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .codegen.c import c_name, emit_c
from .codegen.data import example_inputs, memory_image, read_buffer, reference_output
from .config import GemminiConfig
from .errors import SimulationError
from .run_result import RunResult
from .sim.rtl import DEFAULT_MAX_CYCLES, DEFAULT_MEM_LATENCY, SOURCE, RtlReport, run_c, run_trace


_DRIVER_C = """\
/* Runs one generated Gemmini function on inputs read from files and writes its output:
 *   program INPUT WEIGHTS BIAS|- OUTPUT */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "gemmini_cosa.h"
typedef int8_t elem_t;
typedef int32_t acc_t;
void {fn}(const elem_t *input, const elem_t *weights, const acc_t *bias, elem_t *output);
void gemmini_rtl_drain(void);

static void *load(const char *path, size_t bytes) {{
  void *data = calloc(bytes ? bytes : 1, 1);
  FILE *f = fopen(path, "rb");
  if (!data || !f || fread(data, 1, bytes, f) != bytes) {{ fprintf(stderr, "cannot read %s\\n", path); exit(2); }}
  fclose(f);
  return data;
}}

int main(int argc, char **argv) {{
  if (argc != 5) {{ fprintf(stderr, "usage: program INPUT WEIGHTS BIAS|- OUTPUT\\n"); return 2; }}
  elem_t *input = load(argv[1], {input_bytes});
  elem_t *weights = load(argv[2], {weights_bytes});
  acc_t *bias = argv[3][0] == '-' ? 0 : load(argv[3], {bias_bytes});
  elem_t *output = calloc({output_bytes}, 1);
  {fn}(input, weights, bias, output);
  gemmini_rtl_drain(); /* finish without issuing a command of our own */
  FILE *f = fopen(argv[4], "wb");
  if (!f || fwrite(output, 1, {output_bytes}, f) != {output_bytes}) {{ fprintf(stderr, "cannot write\\n"); return 2; }}
  fclose(f);
  return 0;
}}
"""


@dataclass(frozen=True)
class RtlRun:
    """A generated program run on the RTL: the simulator-independent ``result`` (``gemmini.run_result.RunResult``)
    and the RTL's own measurements (``report``)."""

    result: object
    report: RtlReport
    mode: str


def run_program_rtl(program, inputs: dict | None = None, *, mode: str = "c", seed: int = 0,
                    mem_latency: int = DEFAULT_MEM_LATENCY, max_cycles: int = DEFAULT_MAX_CYCLES) -> RtlRun:
    """Run a ``gemmini.codegen.Program`` on the RTL and verify its output against NumPy.

    mode "c": the program's C (``emit_c``) is compiled natively with a small driver and every command it
    issues goes into the model (main memory = the process's own buffers).  mode "trace": the program's
    command stream runs on a main-memory image laid out as ``program.buffers`` say.
    """
    if mode not in ("c", "trace"):
        raise SimulationError(f"mode must be 'c' or 'trace', got {mode!r}", source=SOURCE, field="mode")
    inputs = example_inputs(program, seed) if inputs is None else inputs
    expected = reference_output(program, inputs)
    cfg = program.config
    if mode == "trace":
        memory = memory_image(program, inputs)
        report = run_trace(program.commands, memory, cfg, mem_latency=mem_latency, max_cycles=max_cycles)
        outputs = read_buffer(program, memory, "output")
    else:
        fn = c_name(program)
        bufs = program.buffers
        driver = _DRIVER_C.format(fn=fn, input_bytes=bufs["input"].nbytes, weights_bytes=bufs["weights"].nbytes,
                                  bias_bytes=bufs["bias"].nbytes if program.bias else 0,
                                  output_bytes=bufs["output"].nbytes)
        with tempfile.TemporaryDirectory(prefix="gemmini-rtl-io-") as tmp:
            io = Path(tmp)
            for name in ("input", "weights", "bias"):
                if name == "bias" and not program.bias:
                    continue
                np.ascontiguousarray(np.asarray(inputs[name], dtype=bufs[name].dtype)).tofile(io / f"{name}.bin")
            args = (str(io / "input.bin"), str(io / "weights.bin"),
                    str(io / "bias.bin") if program.bias else "-", str(io / "output.bin"))
            report = run_c(emit_c(program, with_main=False), cfg, mem_latency=mem_latency, max_cycles=max_cycles,
                           extra_c={"driver.c": driver}, args=args)
            if report.exit_code != 0:
                raise SimulationError(f"the program exited with status {report.exit_code}", source=SOURCE,
                                      field="program")
            out = bufs["output"]
            outputs = np.fromfile(io / "output.bin", dtype=out.dtype).reshape(out.shape)
    mismatches = int(np.count_nonzero(outputs != expected))
    ideal = cfg.ideal_cycles(program.macs)
    result = RunResult(outputs, mismatches == 0, mismatches, report.cycles, ideal,
                       ideal / report.cycles if report.cycles else None, report.instructions, program.dram_bytes(),
                       dict(report.busy))
    return RtlRun(result, report, mode)


def run_rtl(program_or_c, config: GemminiConfig | None = None, *, inputs: dict | None = None, mode: str = "c",
            seed: int = 0, mem_latency: int = DEFAULT_MEM_LATENCY, max_cycles: int = DEFAULT_MAX_CYCLES):
    """Run a generated ``Program`` (or a self-checking C source) on the Verilated RTL.

    Returns ``gemmini.run_result.RunResult`` with the same fields as the functional simulator
    (``cycles`` are RTL cycles).  For a C source the output array is empty and ``verified`` is the
    program's own verdict (exit status 0).  Raises ``SimulationError`` on an illegal command (with its
    index) or when the cycle limit is reached.
    """
    if isinstance(program_or_c, str):
        report = run_c(program_or_c, config, mem_latency=mem_latency, max_cycles=max_cycles)
        ok = report.exit_code == 0
        return RunResult(np.zeros(0, dtype=np.int8), ok, 0 if ok else -1, report.cycles, 0.0, None,
                         report.instructions, report.dma_read_bytes + report.dma_write_bytes, dict(report.busy))
    if config is not None and config != program_or_c.config:
        raise SimulationError("config differs from the program's config", source=SOURCE, field="config")
    return run_program_rtl(program_or_c, inputs, mode=mode, seed=seed, mem_latency=mem_latency,
                           max_cycles=max_cycles).result
