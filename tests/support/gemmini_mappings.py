"""Shared test support for the Gemmini back end: hand-mapping shorthand, a bit-exact run check, and random
valid mappings drawn by a small generator of their own (independent of the schedulers under test)."""

from __future__ import annotations

from cosa.baselines.mapspace import prime_factors
from gemmini.run import run_program
from mappings import LevelMapping, Mapping
from workloads import matmul


def lm(temporal=None, spatial=None, order=()) -> LevelMapping:
    return LevelMapping(temporal or {}, spatial or {}, tuple(order))


# a 12x8x16 matmul on DIM 4 mapped by hand: WS, WS with spilled partial sums, OS
MM = matmul("mm", M=12, N=8, K=16)
MM_WS = Mapping((lm({"M": 3}, order=("M", "N", "K")), lm({"K": 2}),
                 lm({"N": 2, "K": 2}, {"K": 4, "N": 4}, ("N", "K")), lm({"M": 4})))
MM_WS_SPILL = Mapping((lm({"M": 3, "K": 2}, order=("K", "M", "N")), lm(),
                       lm({"N": 2, "K": 2}, {"K": 4, "N": 4}, ("N", "K")), lm({"M": 4})))
MM_OS = Mapping((lm({"M": 3}, order=("N", "M", "K")), lm(),
                 lm({"N": 2, "K": 2}, {"M": 4, "N": 4}, ("N", "K")), lm({"K": 8})))


def check(program, seed=0, with_timing=True):
    """Run ``program`` on the functional model; it must match the NumPy reference bit for bit."""
    result = run_program(program, seed=seed, with_timing=with_timing)
    assert result.mismatches == 0 and result.verified
    return result


def random_gemmini_mapping(wl, flow: str, dim: int, rng, extra_level3=frozenset()) -> Mapping:
    """Random factors at levels 0..3 honouring the array's rules: the array's row and column dims unrolled at
    level 2 (<= ``dim``), level-3 loops by dataflow (WS: the streamed pixels or M; OS: the reduction) and any
    dims in ``extra_level3``, random loop orders at levels 0-2."""
    names = dict(wl.dims)
    conv = "P" in names
    rows_dim = ("C" if conv else "K") if flow == "ws" else ("P" if conv else "M")
    cols_dim = "K" if conv else "N"
    level3 = ({"N", "P", "Q"} if conv else {"M"}) if flow == "ws" else ({"C", "R", "S"} if conv else {"K"})
    level3 = level3 | set(extra_level3)
    temporal = [dict() for _ in range(4)]
    spatial = {}
    for d, bound in names.items():
        if d in (rows_dim, cols_dim):
            spatial[d] = rng.choice([x for x in range(1, min(dim, bound) + 1) if bound % x == 0])
            bound //= spatial[d]
        parts = [1] * (4 if d in level3 else 3)
        for prime in prime_factors(bound):
            parts[rng.randrange(len(parts))] *= prime
        for level, f in enumerate(parts):
            temporal[level][d] = f
    orders = [tuple(rng.sample(list(names), len(names))) for _ in range(3)]
    return Mapping(tuple(lm(temporal[i], spatial if i == 2 else {}, orders[i] if i < 3 else ()) for i in range(4)))


def check_or_refused_for_capacity(wl, mapping, config, flow: str, seed: int, bias: bool) -> None:
    """Generate ``mapping`` (a random one): the program runs bit-exact, or the generator refuses it for capacity."""
    from gemmini.codegen import generate
    from gemmini.errors import CodegenError

    try:
        program = generate(wl, mapping, config, dataflow=flow, bias=bias, relu=seed % 2 == 0, scale=0.02)
    except CodegenError as exc:
        assert "capacity" in str(exc) or "block stride" in str(exc)
        return
    check(program, seed=seed, with_timing=False)
