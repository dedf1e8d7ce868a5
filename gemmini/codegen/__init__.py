"""Gemmini code generation: a mapping of a matmul or convolution -> a command program -> C.

One job per module, imports pointing down the list (each module imports only modules above it here):

- ``ir``: the small loop IR the generator writes and the C and Python printers read.
- ``lowering``: rewrites of convolutions that leave the array idle (im2col folding, packed groups) as new
  workloads, and the on-device image copy a fold with width padding runs first (``prologue``).
- ``tiling``: the problem a workload poses (``problem_of``, a fold's im2col view included) and the tiling
  plan of a mapping (``make_plan``): tile sizes, loop orders, scratchpad and accumulator layout.
- ``examples``: the example data's distribution and the output scale that suits it (``self_check_scale``).
- ``pipeline``: software pipelining of a tile's moves among the previous tile's computes.
- ``build``: a plan's command program, as loop IR.
- ``program``: ``generate`` (workload + mapping -> ``Program``), the main-memory layout and the expansion
  of the loop IR into the exact command stream.
- ``choose_lowering``: the layer as written or its cheapest rewrite whose tiles fit (``schedule``).
- ``data``: a program's example inputs, NumPy reference output and main-memory image.
- ``c``: ``emit_c`` (the program as C over ``gemmini_cosa.h``) and ``emit_gemmini_h`` (cosa's tiles through
  the vendor library's calls).
"""

from .program import (DRAM_ALIGN, ZEROS_BYTES, Buffer, Program, choose_plan, dram_bytes, expand, generate,
                      relative_stream)

__all__ = ["Buffer", "DRAM_ALIGN", "Program", "ZEROS_BYTES", "choose_plan", "dram_bytes", "expand", "generate",
           "relative_stream"]
