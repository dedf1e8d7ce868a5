"""validate / fits: each rule accepts a correct mapping and rejects a precise violation."""

import pytest
from hypothesis import given, settings, strategies as st

from costmodel.arch import Arch, Level, SpatialAxis
from mappings import LevelMapping, Mapping, MappingError, fits, validate, violations
from workloads import conv2d, matmul

DIM = 4


def small_gemmini(dim=DIM, sp_bytes=1024, acc_bytes=256, double_buffered=False):
    """A Gemmini-shaped WS hierarchy with a dim x dim array (sizes in bytes)."""
    return Arch("mini", (
        Level("DRAM"),
        Level("Scratchpad", sp_bytes, frozenset({"input", "weight"}), word_bits=8, double_buffered=double_buffered),
        Level("Accumulator", acc_bytes, frozenset({"output"}), word_bits=32, fanout=dim * dim, spatial_axes=(
            SpatialAxis("rows", dim, frozenset({"input", "weight"})),
            SpatialAxis("cols", dim, frozenset({"weight", "output"})))),
        Level("Registers", 1, frozenset({"weight"})),
    ))


def good_matmul_mapping():
    # M=16, N=8, K=8 on a 4x4 array: K on rows, N on cols, M streamed at the registers
    return Mapping((
        LevelMapping(temporal={"M": 2, "N": 2}, order=("N", "M")),
        LevelMapping(temporal={"K": 2}),
        LevelMapping(spatial={"K": 4, "N": 4}),
        LevelMapping(temporal={"M": 8}),
    ))


MM = matmul("mm", M=16, N=8, K=8)


def test_valid_mapping_passes():
    validate(good_matmul_mapping(), MM, small_gemmini())
    assert fits(good_matmul_mapping(), MM, small_gemmini())
    assert violations(good_matmul_mapping(), MM, small_gemmini()) == []


def _with_level(mapping, index, **changes):
    levels = list(mapping.levels)
    old = levels[index]
    fields = dict(temporal=old.temporal, spatial=old.spatial, order=old.order, bypass=old.bypass)
    fields.update(changes)
    levels[index] = LevelMapping(**fields)
    return Mapping(tuple(levels))


def _error(mapping, workload=MM, arch=None):
    with pytest.raises(MappingError) as info:
        validate(mapping, workload, arch or small_gemmini())
    assert not fits(mapping, workload, arch or small_gemmini())
    return str(info.value)


def test_wrong_level_count():
    m = Mapping(good_matmul_mapping().levels[:3])
    assert "3 levels" in _error(m) and "4" in _error(m)


def test_unknown_dim_and_order():
    msg = _error(_with_level(good_matmul_mapping(), 1, temporal={"K": 2, "Z": 2}))
    assert "unknown dimension 'Z'" in msg and "Scratchpad" in msg
    msg = _error(_with_level(good_matmul_mapping(), 0, order=("N", "X")))
    assert "order" in msg and "'X'" in msg and "DRAM" in msg
    msg = _error(_with_level(good_matmul_mapping(), 0, order=("N", "N")))
    assert "twice" in msg


def test_non_positive_factor():
    msg = _error(_with_level(good_matmul_mapping(), 1, temporal={"K": 0}))
    assert "positive integer" in msg and "'K'" in msg


def test_factor_product_mismatch():
    msg = _error(_with_level(good_matmul_mapping(), 1, temporal={"K": 4}))
    assert "'K'" in msg and "16" in msg and "bound is 8" in msg


def test_bypass_rules():
    msg = _error(_with_level(good_matmul_mapping(), 0, bypass={"A"}))
    assert "outermost" in msg and "'A'" in msg
    msg = _error(_with_level(good_matmul_mapping(), 1, bypass={"Nope"}))
    assert "unknown tensor 'Nope'" in msg
    # bypassing a real tensor at an inner level is allowed (and frees capacity)
    validate(_with_level(good_matmul_mapping(), 1, bypass={"A"}), MM, small_gemmini())


def test_fanout_limit():
    arch = small_gemmini(dim=2)
    m = Mapping((
        LevelMapping(temporal={"M": 2, "N": 4, "K": 4}),
        LevelMapping(),
        LevelMapping(spatial={"K": 2, "N": 2}),
        LevelMapping(temporal={"M": 8}),
    ))
    validate(m, MM, arch)
    m2 = _with_level(m, 2, spatial={"K": 2, "N": 2, "M": 2})
    m2 = _with_level(m2, 3, temporal={"M": 4})
    msg = _error(m2, arch=arch)
    assert "fanout is 4" in msg and "Accumulator" in msg


def test_axis_admission_and_size():
    # M indexes input and output: neither rows (input, weight) nor cols (weight, output) admit it
    m = Mapping((
        LevelMapping(temporal={"M": 2, "N": 8, "K": 8}),
        LevelMapping(),
        LevelMapping(spatial={"M": 4}),
        LevelMapping(temporal={"M": 2}),
    ))
    msg = _error(m)
    assert "'M'" in msg and "cannot be unrolled" in msg and "rows" in msg
    # N=8 on cols of size 4 fits the fanout 16 but not the axis
    m = Mapping((
        LevelMapping(temporal={"M": 2, "K": 8}),
        LevelMapping(),
        LevelMapping(spatial={"N": 8}),
        LevelMapping(temporal={"M": 8}),
    ))
    msg = _error(m)
    assert "cols=4" in msg and "axis size" in msg


def test_no_axes_only_fanout_applies():
    arch = Arch("flat", (Level("DRAM", fanout=8), Level("PE", 64)))
    m = Mapping((LevelMapping(spatial={"M": 8}, temporal={"M": 2, "N": 8, "K": 8}), LevelMapping()))
    validate(m, MM, arch)


def test_capacity_names_level_and_tensors():
    m = _with_level(good_matmul_mapping(), 3, temporal={"M": 8})
    validate(m, MM, small_gemmini(acc_bytes=128))  # outputs tile: M 8 x N 4 x 4 bytes = 128 B
    arch = small_gemmini(acc_bytes=100)
    msg = _error(m, arch=arch)
    assert "Accumulator" in msg and "C 128 B" in msg and "capacity is 100" in msg


def test_registers_hold_one_weight():
    # a temporal K loop at the registers would need K weights in a 1-byte register
    m = Mapping((
        LevelMapping(temporal={"M": 2, "N": 2}),
        LevelMapping(),
        LevelMapping(spatial={"K": 4, "N": 4}),
        LevelMapping(temporal={"M": 8, "K": 2}),
    ))
    msg = _error(m)
    assert "Registers" in msg and "B 2 B" in msg


def test_double_buffer_doubles_need():
    # scratchpad tile: A (M8 x K8) + B (K8 x N4) at level 1 = 64 + 32 = 96 B
    m = good_matmul_mapping()
    validate(m, MM, small_gemmini(sp_bytes=96))
    msg = _error(m, arch=small_gemmini(sp_bytes=191, double_buffered=True))
    assert "192 bytes" in msg and "double buffered" in msg
    validate(m, MM, small_gemmini(sp_bytes=192, double_buffered=True))


def test_mixed_precision_and_halo_in_capacity():
    conv = conv2d("c", C=4, K=4, P=4, Q=4, R=3, S=3, bits={"input": 16, "weight": 8, "output": 32})
    arch = Arch("two", (Level("DRAM"), Level("Buf", 10_000)))
    m = Mapping((LevelMapping(), LevelMapping(temporal=dict(conv.dims))))
    validate(m, conv, arch)
    # inputs carry a halo: (4+2) x (4+2) x 4 channels x 2 bytes
    need = 4 * 6 * 6 * 2 + 4 * 4 * 9 * 1 + 4 * 4 * 4 * 4
    validate(m, conv, Arch("two", (Level("DRAM"), Level("Buf", need))))
    msg = _error(m, workload=conv, arch=Arch("two", (Level("DRAM"), Level("Buf", need - 1))))
    assert f"{need} bytes" in msg and "Inputs 288 B" in msg


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_split_valid_iff_products_and_capacity(data):
    """Any split of each bound over the four levels passes the factor check; capacity decides the rest."""
    arch = Arch("two", (Level("DRAM"), Level("Buf", 512), Level("Reg", 64)))
    wl = matmul("p", M=12, N=8, K=6)
    levels = [dict(), dict(), dict()]
    for dim, bound in wl.dims.items():
        rest = bound
        for lv in (2, 1):
            f = data.draw(st.sampled_from(_divisors(rest)))
            levels[lv][dim] = f
            rest //= f
        levels[0][dim] = rest
    m = Mapping(tuple(LevelMapping(temporal=t) for t in levels))
    assert all(m.factor(d) == b for d, b in wl.dims.items())

    def need(level):
        ext = m.tile_extents(level, wl.dims)
        return sum(t.tile_words(ext) * t.bits / 8 for t in wl.tensors)

    expected = need(1) <= 512 and need(2) <= 64
    assert fits(m, wl, arch) == expected
    # breaking one factor always breaks validity
    broken = Mapping((LevelMapping(temporal={**levels[0], "M": levels[0]["M"] * 2}),) + m.levels[1:])
    assert not fits(broken, wl, arch)
