"""The loop-nest IR: loop bounds plus tensors indexed by affine expressions.

A workload is a perfect loop nest ``for d in dims: out[...] += prod(in[...])``.
Each tensor axis is an affine expression of the loop variables with integer
coefficients, so strided and dilated convolutions are exact
(input row = stride*P + dilation*R - padding).  Each tensor has its own word
size in bits (mixed precision) and density (1.0 = dense).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np

from .dtypes import DTYPE_BITS, check_dtype
from .errors import WorkloadError
from .footprint import span_entries, tile_words as _tile_words

ROLES = ("input", "weight", "output")
"""Tensor roles.  An architecture level says which roles it may hold (CoSA's
"B" matrix); ``output`` is the read-write tensor that accumulates."""

_TERM = re.compile(r"\s*([+-])?\s*(?:(\d+)\s*\*\s*)?([A-Za-z_][A-Za-z_0-9]*|\d+)\s*(?:\*\s*(\d+))?")


def _disjoint_terms(expr, bounds: dict[str, int]) -> bool:
    """Whether the terms of ``expr`` over the loop ``bounds`` never overlap (mixed radix: injective)."""
    reach = 0  # the largest |value| the smaller terms reach together
    for dim, coef in sorted(expr.terms, key=lambda dc: abs(dc[1])):
        if abs(coef) <= reach:
            return False
        reach += abs(coef) * (bounds.get(dim, 1) - 1)
    return True


def _hash_once(obj, fields) -> int:
    """The hash of ``fields()`` (a frozen object's fields), computed once and kept on ``obj``: the cost
    model's caches hash tensors and their expressions in every key."""
    h = obj.__dict__.get("_hash")
    if h is None:
        h = obj.__dict__["_hash"] = hash(fields())
    return h


def _state_without_hash(obj) -> dict:
    """Pickled state without the kept hash: a string's hash differs from process to process."""
    return {k: v for k, v in obj.__dict__.items() if k != "_hash"}


@dataclass(frozen=True)
class AffineExpr:
    """sum(coef * dim) + offset, with integer coefficients.

    ``terms`` keeps (dim, coefficient) pairs in a stable order, without zeros.
    """

    terms: tuple[tuple[str, int], ...] = ()
    offset: int = 0

    def __post_init__(self):
        merged: dict[str, int] = {}
        for dim, coef in self.terms:
            if not isinstance(coef, (int, np.integer)):
                raise WorkloadError(f"coefficient {coef!r} of '{dim}' is not an integer")
            merged[dim] = merged.get(dim, 0) + int(coef)
        object.__setattr__(self, "terms", tuple((d, c) for d, c in merged.items() if c != 0))
        object.__setattr__(self, "offset", int(self.offset))

    @staticmethod
    def of(dim: str, coef: int = 1) -> "AffineExpr":
        return AffineExpr(((dim, coef),))

    @staticmethod
    def parse(text: str | int) -> "AffineExpr":
        """Parse ``"2*P + R - 1"``, ``"P*2+R"``, ``"K"`` or an integer constant."""
        if isinstance(text, (int, np.integer)):
            return AffineExpr((), int(text))
        src = str(text).strip()
        if not src:
            raise WorkloadError("empty index expression")
        pos, terms, offset = 0, [], 0
        while pos < len(src):
            m = _TERM.match(src, pos)
            if not m or m.end() == pos or (pos > 0 and m.group(1) is None):
                raise WorkloadError(f"cannot parse index expression '{src}' at '{src[pos:]}'")
            sign = -1 if m.group(1) == "-" else 1
            coef = int(m.group(2) or 1) * int(m.group(4) or 1) * sign
            name = m.group(3)
            if name.isdigit():
                offset += coef * int(name)
            else:
                terms.append((name, coef))
            pos = m.end()
            while pos < len(src) and src[pos].isspace():
                pos += 1
        return AffineExpr(tuple(terms), offset)

    @functools.cached_property
    def dims(self) -> tuple[str, ...]:
        return tuple(d for d, _ in self.terms)

    __getstate__ = _state_without_hash

    def __hash__(self) -> int:
        return _hash_once(self, lambda: (self.terms, self.offset))

    def coef(self, dim: str) -> int:
        return dict(self.terms).get(dim, 0)

    def evaluate(self, point: Mapping[str, int]) -> int:
        return self.offset + sum(c * point[d] for d, c in self.terms)

    def extent(self, extents: Mapping[str, int]) -> int:
        """Entries spanned over a box of loop ``extents``: ``workloads.footprint.span_entries``
        (1 + sum |c|*(extent-1); the distinct values are fewer when coefficients leave gaps)."""
        return span_entries(self.terms, extents)

    def value_range(self, bounds: Mapping[str, int]) -> tuple[int, int]:
        """(min, max) over 0 <= dim < bound."""
        lo = self.offset + sum(min(0, c * (bounds[d] - 1)) for d, c in self.terms)
        hi = self.offset + sum(max(0, c * (bounds[d] - 1)) for d, c in self.terms)
        return lo, hi

    def __str__(self) -> str:
        out = []
        for d, c in self.terms:
            term = d if abs(c) == 1 else f"{abs(c)}*{d}"
            out.append(("- " if c < 0 else "+ ") + term)
        if self.offset or not out:
            out.append(("- " if self.offset < 0 else "+ ") + str(abs(self.offset)))
        text = " ".join(out)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]


@dataclass(frozen=True)
class Tensor:
    """One operand of the loop nest.

    ``indices``: one affine expression per tensor axis.  ``role``: ``input``,
    ``weight`` or ``output`` (the accumulated read-write tensor).  ``bits``:
    word size in bits.  ``density``: fraction of nonzeros (1.0 = dense).
    ``dtype``: the number type (``float32``, ``float64``, ``int8``, ``int32``;
    see ``workloads.dtypes``) or None when only the bits are known (a
    target then decides: ``workloads.dtypes.resolve_dtype``).
    ``shape``: the stored extent per axis in words when it differs from the
    index range (padding: a padded convolution's input range covers the halo,
    but only ``shape`` words exist in memory); None = the index range.
    """

    name: str
    indices: tuple[AffineExpr, ...]
    role: str = "input"
    bits: int = 8
    density: float = 1.0
    shape: tuple[int, ...] | None = None
    dtype: str | None = None

    def __post_init__(self):
        object.__setattr__(
            self, "indices", tuple(e if isinstance(e, AffineExpr) else AffineExpr.parse(e) for e in self.indices)
        )
        if self.role not in ROLES:
            raise WorkloadError(f"role '{self.role}' is not one of {ROLES}", source=f"tensor {self.name}", field="role")
        if not (isinstance(self.bits, int) and self.bits > 0):
            raise WorkloadError(f"bits must be a positive integer, got {self.bits!r}", source=f"tensor {self.name}", field="bits")
        if not 0.0 < float(self.density) <= 1.0:
            raise WorkloadError(f"density must be in (0, 1], got {self.density!r}", source=f"tensor {self.name}", field="density")
        if self.dtype is not None:
            check_dtype(self.dtype, f"tensor {self.name}")
            if DTYPE_BITS[self.dtype] != self.bits:
                raise WorkloadError(f"dtype {self.dtype} has {DTYPE_BITS[self.dtype]} bits, not {self.bits}",
                                    source=f"tensor {self.name}", field="dtype")
        if self.shape is not None:
            object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
            if len(self.shape) != len(self.indices):
                raise WorkloadError("shape and indices differ in length", source=f"tensor {self.name}", field="shape")

    @property
    def is_output(self) -> bool:
        return self.role == "output"

    @property
    def bytes_per_word(self) -> float:
        return self.bits / 8

    @functools.cached_property
    def dims(self) -> frozenset[str]:
        """Loop dims that index this tensor (its row of the relevance matrix)."""
        return frozenset(d for e in self.indices for d in e.dims)

    __getstate__ = _state_without_hash

    def __hash__(self) -> int:
        return _hash_once(self, lambda: (self.name, self.indices, self.role, self.bits, self.density, self.shape,
                                         self.dtype))

    def is_projective(self) -> bool:
        """True when every axis is a single loop variable with coefficient 1."""
        return all(len(e.terms) <= 1 and all(c == 1 for _, c in e.terms) for e in self.indices)

    def tile_words(self, extents: Mapping[str, int]) -> int:
        """Words touched by a box of loop extents: ``workloads.footprint.tile_words`` (the span of each
        axis, halo included, bounded by ``shape`` when given)."""
        return _tile_words(self, extents)


@dataclass(frozen=True)
class LoopNest:
    """A perfect loop nest: ordered loop ``dims`` (name -> bound) and tensors.

    ``repeat``: how many times the layer occurs in its network (ResNet-50
    repeats identical blocks).  ``op``: what the nest came from, for back ends
    that need it (``{"kind": "conv2d", "stride": (sh, sw), ...}``).
    """

    name: str
    dims: dict[str, int]
    tensors: tuple[Tensor, ...]
    repeat: int = 1
    op: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "dims", {str(k): v for k, v in dict(self.dims).items()})
        object.__setattr__(self, "tensors", tuple(self.tensors))
        src = f"workload {self.name}"
        if not self.dims:
            raise WorkloadError("a loop nest needs at least one dimension", source=src, field="dims")
        for d, b in self.dims.items():
            if not isinstance(b, (int, np.integer)) or isinstance(b, bool) or b < 1:
                raise WorkloadError(f"bound of '{d}' must be a positive integer, got {b!r}", source=src, field=f"dims.{d}")
            self.dims[d] = int(b)
        names = [t.name for t in self.tensors]
        if len(set(names)) != len(names):
            raise WorkloadError(f"tensor names repeat: {names}", source=src, field="tensors")
        for t in self.tensors:
            unknown = t.dims - set(self.dims)
            if unknown:
                raise WorkloadError(
                    f"tensor '{t.name}' is indexed by unknown dimension(s) {sorted(unknown)}; known: {list(self.dims)}",
                    source=src, field=f"tensors.{t.name}")
        if not any(t.is_output for t in self.tensors):
            raise WorkloadError("no tensor has role 'output'", source=src, field="tensors")
        if not isinstance(self.repeat, int) or self.repeat < 1:
            raise WorkloadError(f"repeat must be a positive integer, got {self.repeat!r}", source=src, field="repeat")

    # --- derived quantities -------------------------------------------------
    @property
    def macs(self) -> int:
        """Multiply-accumulates of one execution (dense iteration space)."""
        return math.prod(self.dims.values())

    @property
    def effective_macs(self) -> float:
        """MACs that touch nonzeros only: the product of the read tensors' densities."""
        return self.macs * math.prod(t.density for t in self.tensors if not t.is_output)

    def tensor(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise WorkloadError(f"no tensor named '{name}'; have {[t.name for t in self.tensors]}", source=f"workload {self.name}")

    @property
    def output(self) -> Tensor:
        return next(t for t in self.tensors if t.is_output)

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if not t.is_output)

    def size_words(self, tensor: Tensor | str) -> int:
        """Stored words of a tensor (dense), from ``shape`` or the index ranges."""
        t = self.tensor(tensor) if isinstance(tensor, str) else tensor
        if t.shape is not None:
            return math.prod(t.shape)
        return t.tile_words(self.dims)

    def size_bytes(self, tensor: Tensor | str) -> float:
        t = self.tensor(tensor) if isinstance(tensor, str) else tensor
        return self.size_words(t) * t.bytes_per_word

    def relevance(self) -> np.ndarray:
        """CoSA's relevance matrix: rows = dims (in order), columns = tensors; 1 if the dim indexes it."""
        return np.array([[1 if d in t.dims else 0 for t in self.tensors] for d in self.dims], dtype=np.int8)

    def relevant(self, dim: str, tensor: Tensor | str) -> bool:
        t = self.tensor(tensor) if isinstance(tensor, str) else tensor
        return dim in t.dims

    def window_dims(self) -> frozenset[str]:
        """Dims that share a tensor axis with another dim in a sliding window (P and R in ``P + R``).

        A sum whose terms cannot overlap is not a window: ordered by |coefficient|, each term's
        coefficient exceeds the largest value the smaller terms reach together, so every point of
        the dims gives its own element (a mixed-radix number such as a grouped convolution's
        channel ``Cg*G + C`` with C < Cg, or ``2*P + R`` with R < 2).
        """
        out: set[str] = set()
        for t in self.tensors:
            for e in t.indices:
                if len(e.terms) > 1 and not _disjoint_terms(e, self.dims):
                    out.update(e.dims)
        return frozenset(out)

    def with_dims(self, **bounds: int) -> "LoopNest":
        """A copy with some loop bounds changed (for sweeps and small test cases)."""
        dims = dict(self.dims)
        for k, v in bounds.items():
            if k not in dims:
                raise WorkloadError(f"unknown dimension '{k}'", source=f"workload {self.name}")
            dims[k] = v
        return LoopNest(self.name, dims, self.tensors, self.repeat, dict(self.op))

    def describe(self) -> dict:
        """The JSON form printed by ``cosa show --json``."""
        return {
            "name": self.name,
            "dims": dict(self.dims),
            "macs": self.macs,
            "repeat": self.repeat,
            "tensors": [
                {
                    "name": t.name,
                    "role": t.role,
                    "bits": t.bits,
                    **({"dtype": t.dtype} if t.dtype else {}),
                    "density": t.density,
                    "indices": [str(e) for e in t.indices],
                    "words": self.size_words(t),
                }
                for t in self.tensors
            ],
        }


def tensor(name: str, indices: Iterable[str | AffineExpr], role: str = "input", bits: int | None = None,
           density: float = 1.0, shape: Iterable[int] | None = None, dtype: str | None = None) -> Tensor:
    """Convenience constructor that parses string index expressions (bits default to the dtype's, else 8)."""
    if bits is None:
        bits = DTYPE_BITS.get(dtype, 8) if dtype is not None else 8
    return Tensor(name, tuple(indices), role, bits, density, tuple(shape) if shape is not None else None, dtype)
