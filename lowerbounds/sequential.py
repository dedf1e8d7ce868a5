"""The sequential bound used for comparisons: max(tile LP, explicit-constant HBL, compulsory traffic).

Unit convention: the fast memory is given in bytes (``memory``), and every
tensor moves its own element size (mixed precision).  The same bounds are
also reported in words, with every element one word and the memory holding
M / (smallest element size) words, the most it could hold.

What is bounded: words or bytes loaded into plus stored out of one fast
memory of size M from slower memory, for one execution of the nest.  For a
real hierarchy that memory is all the storage between DRAM and the MACs
(``bound_for_arch``), so the bound is comparable to ``Cost.dram_bytes``.
"""

from __future__ import annotations

import math
from typing import Iterable

from costmodel import Arch, ArchError
from workloads import LoopNest, WorkloadError

from .counts import touched_words, working_iterations
from .hbl import hbl_exponent
from .memory import onchip_bytes, parse_memory
from .report import BINDINGS, BoundCurve, BoundReport
from .segments import segment_bound
from .tile_lp import tile_lp


def compulsory(nest: LoopNest) -> tuple[float, float]:
    """(words, bytes) of one pass over every tensor: elements some iteration touches, nonzeros only."""
    words = bytes_ = 0.0
    for t in nest.tensors:
        count = touched_words(nest, t) * t.density
        words += count
        bytes_ += count * t.bytes_per_word
    return words, bytes_


def _less_one_segment(leading: float, memory: float) -> float:
    """|Z| M / M^khat - M, and exactly 0 when the LP says the whole nest fits (float noise aside)."""
    segments = leading / memory
    return 0.0 if segments <= 1.0 + 1e-9 else memory * (segments - 1.0)


def _pick(values: dict[str, float]) -> str:
    best = max(values.values())
    return next(name for name in ("compulsory", "lp", "hbl") if values[name] == best)


def bound(nest: LoopNest, memory=None, *, memory_words: float | None = None) -> BoundReport:
    """Lower bound on DRAM traffic of ``nest`` with a fast memory of ``memory`` bytes.

    ``memory``: bytes as a number or text ("256KiB", "2^15"); or give
    ``memory_words`` instead (words of the nest's widest element).  An
    infinite memory leaves only the compulsory traffic.  Nests with sparse
    tensors (density < 1) get only the compulsory bound: the HBL argument
    counts dense iterations.
    """
    if not isinstance(nest, LoopNest):
        raise WorkloadError(f"expected a LoopNest, got {type(nest).__name__}", source="lowerbounds.bound")
    src = f"bound of {nest.name}"
    if (memory is None) == (memory_words is None):
        raise ArchError("give exactly one of memory (bytes) and memory_words", source=src, field="memory")
    widest = max(t.bytes_per_word for t in nest.tensors)
    narrowest = min(t.bytes_per_word for t in nest.tensors)
    if memory_words is not None:
        memory_bytes = parse_memory(memory_words) * widest
    else:
        memory_bytes = parse_memory(memory)
    notes = []
    iterations = working_iterations(nest)
    comp_words, comp_bytes = compulsory(nest)
    try:
        hbl = hbl_exponent(nest)
        s_hbl, exponents = hbl.s_hbl, hbl.exponents
    except WorkloadError as err:
        s_hbl, exponents = None, {}
        notes.append(f"no finite HBL exponent without loop bounds: {err.reason}")
    lp_b = hbl_b = lp_w = hbl_w = 0.0
    khat = khat_w = None
    lambdas, tile = {}, {}
    finite = math.isfinite(memory_bytes)
    sparse = any(t.density < 1.0 for t in nest.tensors)
    if sparse:
        notes.append("sparse tensors: only the compulsory traffic is claimed")
    if not finite:
        notes.append("unbounded fast memory: only the compulsory traffic is claimed")
    if finite and not sparse:
        if memory_bytes < widest:
            raise ArchError(f"memory of {memory_bytes:g} bytes holds no element of {widest:g} bytes", source=src,
                            field="memory")
        sizes = {t.name: t.bytes_per_word for t in nest.tensors}
        if memory_bytes > 1.0:
            lp = tile_lp(nest, memory_bytes, "bytes")
            # the leading term less the last, partial segment: |Z| M / M^khat alone claims M
            # even when the whole problem fits and moves less
            khat, lambdas, lp_b = lp.khat, lp.lambdas, _less_one_segment(lp.bound, memory_bytes)
            tile = {d: int(min(nest.dims[d], max(1, math.floor(side + 1e-9)))) for d, side in lp.tile.items()}
            hbl_b = segment_bound(nest, memory_bytes, sizes, iterations)
        memory_w = memory_bytes / narrowest
        if widest == narrowest:
            # one element size: the words problem is the bytes problem scaled by it
            khat_w, lp_w, hbl_w = khat, lp_b / widest, hbl_b / widest
        elif memory_w > 1.0:
            lpw = tile_lp(nest, memory_w, "words")
            khat_w, lp_w = lpw.khat, _less_one_segment(lpw.bound, memory_w)
            hbl_w = segment_bound(nest, memory_w, None, iterations)
    values_b = {"lp": lp_b, "hbl": hbl_b, "compulsory": comp_bytes}
    values_w = {"lp": lp_w, "hbl": hbl_w, "compulsory": comp_words}
    binding = _pick(values_b)
    assert binding in BINDINGS
    return BoundReport(
        workload=nest.name, memory_bytes=memory_bytes if finite else None,
        memory_words=memory_bytes / narrowest if finite else None, iterations=iterations, s_hbl=s_hbl,
        hbl_exponents=exponents, khat=khat, khat_words=khat_w, lambdas=lambdas, tile=tile,
        lp_bytes=lp_b, hbl_bytes=hbl_b, compulsory_bytes=comp_bytes, bound_bytes=max(values_b.values()),
        lp_words=lp_w, hbl_words=hbl_w, compulsory_words=comp_words, bound_words=max(values_w.values()),
        binding=binding, notes=tuple(notes))


def bound_for_arch(nest: LoopNest, arch: Arch) -> BoundReport:
    """The bound at the level fed by DRAM: one fast memory as large as all on-chip storage.

    M = sum over levels 1.. of capacity_bytes x instances (e.g. Gemmini's
    scratchpad + accumulator + the array's registers).  Any schedule on the
    hierarchy is a schedule on one memory of that size with the same DRAM
    traffic, so the bound holds for ``evaluate(...).dram_bytes``.  Accumulators
    that widen outputs hold fewer elements than M / p_j, which only makes the
    bound safer.
    """
    if not isinstance(arch, Arch):
        raise ArchError(f"expected an Arch, got {type(arch).__name__}", source="lowerbounds.bound_for_arch")
    memory = onchip_bytes(arch)
    if memory is None:
        report = bound(nest, math.inf)
    elif memory <= 0:
        raise ArchError("the architecture has no on-chip storage below its outermost level",
                        source=f"arch {arch.name}", field="levels")
    else:
        report = bound(nest, memory)
    return report


def default_memories(nest: LoopNest, points_per_octave: int = 1) -> list[float]:
    """Powers of two from 64 bytes to twice the nest's total data (where only compulsory traffic is left)."""
    _, comp_bytes = compulsory(nest)
    top = max(128.0, 2.0 * comp_bytes)
    steps = int(math.ceil(math.log2(top / 64.0) * points_per_octave))
    return [64.0 * 2 ** (k / points_per_octave) for k in range(steps + 1)]


def bound_curve(nest: LoopNest, memories: Iterable | None = None) -> BoundCurve:
    """``bound`` at each memory size (bytes; default: powers of two up to twice the data)."""
    sizes = default_memories(nest) if memories is None else [parse_memory(m) for m in memories]
    widest = max(t.bytes_per_word for t in nest.tensors)
    sizes = [m for m in sizes if m >= widest]
    return BoundCurve(nest.name, tuple(bound(nest, m) for m in sorted(sizes)))
