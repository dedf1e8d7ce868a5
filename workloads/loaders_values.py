"""Value checks shared by the workload file readers: each raises WorkloadError naming the file and field."""

from __future__ import annotations

from typing import Any, Mapping

from .errors import WorkloadError

# The largest loop bound, size, stride or count a workload file may give (2**24).  A bigger one is a typo in
# practice, and the exact cost model walks tile extents element by element, so 10**12 would not finish.
MAX_INT = 1 << 24


def _int(value: Any, source: str, field: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkloadError(f"must be an integer, got {_short_repr(value)}", source=source, field=field)
    if value < minimum:
        raise WorkloadError(f"must be >= {minimum}, got {value}", source=source, field=field)
    if value > MAX_INT:
        raise WorkloadError(f"must be <= {MAX_INT:,} (2**24), got {value:,}", source=source, field=field)
    return value


def check_bounds(nests: list, source: str) -> list:
    """``nests`` when every loop bound is at most ``MAX_INT``; a bound derived from the file's values (an
    output size from the padding, say) is held to the limit its inputs are."""
    for nest in nests:
        for dim, bound in nest.dims.items():
            if bound > MAX_INT:
                raise WorkloadError(f"loop bound {bound:,} (derived from the file's sizes) is over {MAX_INT:,} "
                                    "(2**24)", source=source, field=f"{nest.name}.{dim}")
    return nests


def _short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for one-line errors."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 5] + " ..." + text[-1]


def _pair_value(value: Any, source: str, field: str, minimum: int) -> int | tuple[int, int]:
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise WorkloadError(f"must be an int or a pair [height, width], got {value!r}", source=source, field=field)
        return (_int(value[0], source, f"{field}[0]", minimum), _int(value[1], source, f"{field}[1]", minimum))
    return _int(value, source, field, minimum)


def _float(value: Any, source: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WorkloadError(f"must be a number, got {value!r}", source=source, field=field)
    return float(value)


def _mapping(value: Any, source: str, field: str) -> dict:
    if not isinstance(value, dict):
        raise WorkloadError(f"must be a mapping, got {type(value).__name__}", source=source, field=field)
    return value


def _reject_unknown(doc: Mapping, allowed: set[str], source: str, where: str) -> None:
    unknown = sorted(str(k) for k in doc if k not in allowed)
    if unknown:
        raise WorkloadError(f"unknown key(s) {unknown}; allowed: {sorted(allowed)}", source=source, field=where)


def _wrap(source: str, where: str, call, *args, **kwargs):
    """Run a builder and prefix its errors with the file and the layer."""
    try:
        return call(*args, **kwargs)
    except WorkloadError as exc:
        field = f"{where}.{exc.field}" if exc.field else where
        raise WorkloadError(exc.reason if exc.source is None else f"{exc.source}: {exc.reason}",
                            source=source, field=field) from None
    except (TypeError, ValueError) as exc:
        raise WorkloadError(str(exc), source=source, field=where) from None
