"""Gemmini code generation: a mapping of a matmul or convolution -> a command program -> C.

One job per module, imports pointing down the list:

- ``tiling``: the problem a workload poses (``problem_of``) and the tiling plan of a mapping
  (``make_plan``): tile sizes, loop orders, scratchpad and accumulator layout.
- ``ir``: the small loop IR the generator writes and the C and Python printers read.
- ``pipeline``: software pipelining of a tile's moves among the previous tile's computes.
- ``build``: a plan's command program, as loop IR.
- ``program``: ``generate`` (workload + mapping -> ``Program``), the main-memory layout and the expansion
  of the loop IR into the exact command stream.
- ``c``: ``emit_c`` (the program as C over ``gemmini_cosa.h``) and ``emit_gemmini_h`` (cosa's tiles through
  the vendor library's calls).
"""

from .program import (DRAM_ALIGN, ZEROS_BYTES, Buffer, Program, choose_plan, dram_bytes, expand, generate,
                      relative_stream)

__all__ = ["Buffer", "DRAM_ALIGN", "Program", "ZEROS_BYTES", "choose_plan", "dram_bytes", "expand", "generate",
           "relative_stream"]
