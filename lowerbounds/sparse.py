"""Parallel communication lower bounds for sparse kernels, from the nonzero count.

SpMM (C = S B), SDDMM (S o A B^T) and each stage of FusedMM perform one multiply-add per nonzero
S_ij and column k < r: nnz r iterations (i, j, k).  One of P processors performs at least
W = nnz r / P of them.  By the Loomis-Whitney inequality, which holds for any finite set of lattice
points (the sparsity only shrinks the set), those iterations touch |S_E| nonzeros, |A_E| words of
the m x r operand and |B_E| words of the n x r operand with |S_E| |A_E| |B_E| >= W^2, and each is
at most its whole tensor (nnz, m r, n r).  The least total footprint F minimises the sum under
these constraints (the uncapped terms equal, the caps taken smallest first).  A processor owns at
most 1/P of the data (balanced initial distribution), so it communicates at least F - (nnz + m r
+ n r) / P words (values; indices are not counted, so the bound stays below any count that adds them).

A FusedMM performs both stages, each with this iteration count and these tensor sizes; the busiest
processor of either stage moves at least the stage bound, which is reported for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads import WorkloadError


@dataclass(frozen=True)
class SparseParallelBound:
    kernel: str
    processors: int
    iterations: float           # W: the busiest processor's iterations
    footprint_words: float      # F: least words those iterations touch
    owned_words: float          # (nnz + m r + n r) / P
    memory_independent_words: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def least_sum(work: float, caps: list[float]) -> float:
    """min x + y + z subject to x y z >= work^2 and 0 <= each <= its cap (caps with a product >= work^2)."""
    need, caps, fixed = work * work, sorted(caps), 0.0
    while caps:
        t = need ** (1.0 / len(caps))
        if t <= caps[0]:
            return fixed + len(caps) * t
        fixed += caps[0]
        need /= caps[0]
        caps = caps[1:]
    return fixed


def sparse_parallel_bound(kernel: str, m: int, n: int, r: int, nnz: int, processors: int) -> SparseParallelBound:
    """The memory-independent bound on words the busiest processor moves (see the module docstring)."""
    if kernel not in ("spmm", "sddmm", "fusedmm"):
        raise WorkloadError(f"{kernel!r} is not spmm, sddmm or fusedmm", field="kernel")
    if processors < 1:
        raise WorkloadError(f"must be >= 1, got {processors}", field="processors")
    work = nnz * r / processors
    caps = [float(nnz), float(m * r), float(n * r)]
    footprint = least_sum(work, caps) if work > 0 else 0.0
    owned = (nnz + m * r + n * r) / processors
    return SparseParallelBound(kernel, processors, work, footprint, owned, max(0.0, footprint - owned))


def nest_parallel_bound(nest, processors: int) -> SparseParallelBound:
    """``sparse_parallel_bound`` of a ``workloads.sparse`` nest."""
    from workloads.sparse import nnz

    op = nest.op
    return sparse_parallel_bound(op["kind"], op["m"], op["n"], op["r"], nnz(nest), processors)


__all__ = ["SparseParallelBound", "least_sum", "nest_parallel_bound", "sparse_parallel_bound"]
