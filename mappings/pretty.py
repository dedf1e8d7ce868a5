"""Print a mapping as the tiled loop nest it stands for, with level names.

Example (a 3x3 convolution on a Gemmini-like hierarchy)::

    # conv on gemmini: 3 levels
    # DRAM holds Weights 36864 B, Inputs 200704 B, Outputs 200704 B
    for K1 in [0:4)  # DRAM
      for P1 in [0:7)  # DRAM
        # Scratchpad holds Weights 9216 B, Inputs 8192 B
        for Q1 in [0:8)  # Scratchpad
          parallel_for C0 in [0:16)  # Accumulator (spatial)
            ...
              Outputs[N, K, Q, P] += Weights[K, C, S, R] * Inputs[N, C, Q + S - 1, P + R - 1]

Loop variables are the dim name and a tile index counted from the innermost
loop of that dim (``K0`` innermost, ``K1`` the next one out, ...); the dim's
value is the mixed-radix sum of its loop variables.  Factor-1 loops are left
out.  With ``show_tiles`` a comment before each level's loops gives the bytes
of each tensor it keeps (one instance, one buffer).
"""

from __future__ import annotations

from .mapping import Mapping
from .validate import tile_bytes


def _statement(workload) -> str:
    def ref(t) -> str:
        return f"{t.name}[{', '.join(str(e) for e in t.indices)}]"

    out = [t for t in workload.tensors if t.is_output]
    ins = [t for t in workload.tensors if not t.is_output]
    lhs = ", ".join(ref(t) for t in out)
    rhs = " * ".join(ref(t) for t in ins) or "1"
    return f"{lhs} += {rhs}"


def format_loopnest(mapping: Mapping, workload, arch, *, show_tiles: bool = True, indent: str = "  ") -> str:
    """The tiled loop nest of ``mapping`` as text (see the module docstring)."""
    dims = list(workload.dims)
    loops = list(mapping.loops(dims))
    remaining = {d: sum(1 for lp in loops if lp.dim == d) for d in dims}
    names = [lv.name for lv in arch.levels] if arch is not None else [f"level{i}" for i in range(len(mapping.levels))]
    arch_name = getattr(arch, "name", "?")
    lines = [f"# {workload.name} on {arch_name}: {len(mapping.levels)} levels, {len(loops)} loops"]
    depth = 0
    for level_index in range(len(mapping.levels)):
        level_loops = [lp for lp in loops if lp.level == level_index]
        if show_tiles and arch is not None:
            held = tile_bytes(mapping, workload, arch, level_index)
            desc = ", ".join(f"{name} {b:g} B" for name, b in held.items()) or "nothing"
            lines.append(f"{indent * depth}# {names[level_index]} holds {desc}")
        for lp in level_loops:
            remaining[lp.dim] -= 1
            var = f"{lp.dim}{remaining[lp.dim]}"
            keyword = "parallel_for" if lp.spatial else "for"
            note = f"{names[lp.level]} (spatial)" if lp.spatial else names[lp.level]
            lines.append(f"{indent * depth}{keyword} {var} in [0:{lp.factor})  # {note}")
            depth += 1
    lines.append(f"{indent * depth}{_statement(workload)}")
    return "\n".join(lines)
