"""The one definition of Gemmini's integer arithmetic: scaling, shifting, activation, saturation.

The NumPy references, the functional model and the RTL all follow these rules:

* ``scale_round``: multiply in float32 (the value is first converted to
  float32, the product is computed in float32), round half to even, then
  saturate to the target width.  Used by the mvin scale (scratchpad mvins),
  and by the accumulator read-out scale of mvout.
* ``rounding_shift``: arithmetic right shift that rounds half to even
  (the output-stationary ``os_shift`` of config_ex).
* ``relu`` then ``saturate`` to int8 when an int32 value is written as int8.
* Accumulation is int32 with two's-complement wrap-around.
"""

from __future__ import annotations

import numpy as np

ACTIVATIONS = {"none": 0, "relu": 1}


def int_range(bits: int) -> tuple[int, int]:
    """Smallest and largest signed integer of ``bits`` bits."""
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def saturate(values, bits: int = 8) -> np.ndarray:
    """Clip to the signed ``bits``-bit range; returns int8/int16/int32/int64 by width."""
    lo, hi = int_range(bits)
    clipped = np.clip(np.asarray(values, dtype=np.int64), lo, hi)
    return clipped.astype(_dtype_for(bits))


def _dtype_for(bits: int):
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        if bits <= np.iinfo(dtype).bits:
            return dtype
    raise ValueError(f"no integer type of {bits} bits")


def wrap_int32(values) -> np.ndarray:
    """Two's-complement wrap to int32 (how the accumulator adds)."""
    return np.asarray(values, dtype=np.int64).astype(np.int32)


def scale_round(values, scale, out_bits: int = 8) -> np.ndarray:
    """Scale integers by a float32 factor: round-half-to-even of the float32 product, then saturate.

    values: integers (int8/int32).  scale: a float32 (any float is first
    rounded to float32, as the 32-bit field of the command holds it).
    out_bits: width to saturate to (8 for int8 results, 32 for the accumulator).
    """
    scale32 = np.float32(scale)
    if not np.isfinite(scale32):
        raise ValueError(f"scale must be a finite float32, got {scale!r}")
    with np.errstate(over="ignore"):  # an overflow to +-inf saturates below
        product = np.asarray(values).astype(np.float32) * scale32  # float32 times float32 stays float32
    rounded = np.rint(product)  # numpy rounds half to even
    lo, hi = int_range(out_bits)
    # clip in floating point first: an overflowing product must saturate, not wrap
    rounded = np.clip(rounded.astype(np.float64), lo, hi)
    return rounded.astype(np.int64).astype(_dtype_for(out_bits))


def rounding_shift(values, shift: int) -> np.ndarray:
    """Arithmetic right shift by ``shift`` bits, rounding half to even (int64 result)."""
    if shift < 0:
        raise ValueError(f"shift must be >= 0, got {shift}")
    v = np.asarray(values, dtype=np.int64)
    if shift == 0:
        return v.copy()
    floor = v >> shift
    remainder = v - (floor << shift)  # in [0, 2^shift)
    half = 1 << (shift - 1)
    round_up = (remainder > half) | ((remainder == half) & ((floor & 1) == 1))
    return floor + round_up.astype(np.int64)


def relu(values) -> np.ndarray:
    """max(x, 0), keeping the dtype."""
    v = np.asarray(values)
    return np.maximum(v, np.zeros((), dtype=v.dtype))


def activation_code(activation) -> int:
    """0 (none) or 1 (ReLU) from an int, bool or name."""
    if isinstance(activation, str):
        if activation.lower() not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; known {sorted(ACTIVATIONS)}")
        return ACTIVATIONS[activation.lower()]
    code = int(activation)
    if code not in (0, 1):
        raise ValueError(f"activation must be 0 (none) or 1 (relu), got {activation!r}")
    return code


def apply_activation(values, activation) -> np.ndarray:
    return relu(values) if activation_code(activation) == 1 else np.asarray(values)


def requantize(acc_values, scale=1.0, activation=0) -> np.ndarray:
    """int32 accumulator values -> int8 output: scale (``scale_round``), activation, saturate.

    This is the accumulator read-out of mvout (and the last step of the references).
    """
    scaled = scale_round(acc_values, scale, out_bits=32)
    return saturate(apply_activation(scaled, activation), 8)


def float32_bits(value) -> int:
    """The IEEE-754 bit pattern of ``value`` as a float32 (an unsigned 32-bit int)."""
    return int(np.array(value, dtype=np.float32).view(np.uint32))


def float32_from_bits(bits: int) -> float:
    return float(np.array(bits & 0xFFFFFFFF, dtype=np.uint32).view(np.float32))
