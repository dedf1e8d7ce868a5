"""targets.cpu.prelude: the block transposer a panel pack copies with, whole squares and partial ones."""

import ctypes

import numpy as np
import pytest

from targets.cpu import build
from targets.cpu.prelude import transpose_block, transposer


@pytest.mark.parametrize("dtype,ctype", [("float32", "float"), ("float64", "double"), ("int32", "int32_t")])
def test_transposer_copies_rows_into_columns(dtype, ctype):
    lines = ["#include <stdint.h>"]
    transposer(lambda s="": lines.append(s), dtype)
    lines.append(f"void go(const {ctype} *s, long ss, {ctype} *d, long ds, int rows, int cols) "
                 f"{{ trp_{dtype}(s, ss, d, ds, rows, cols); }}")
    go = ctypes.CDLL(build.build("\n".join(lines))).go
    go.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_int]
    n = transpose_block(dtype)
    src = np.arange(40 * 40).astype(dtype).reshape(40, 40)
    for rows, cols, ds in [(n, n, 40), (3, n, 40), (n, 5, 40), (2, 2, 40), (4, n, 4), (4, 5, 4)]:
        dst = np.zeros(40 * 40, dtype)
        go(src.ctypes.data + (1 * 40 + 2) * src.itemsize, 40, dst.ctypes.data, ds, rows, cols)
        want = np.zeros_like(dst)
        for c in range(cols):
            want[c * ds:c * ds + rows] = src[1:1 + rows, 2 + c]
        np.testing.assert_array_equal(dst, want)
