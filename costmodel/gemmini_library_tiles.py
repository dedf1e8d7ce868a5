"""The tiles Gemmini's C library (gemmini.h) picks for a layer: ``tiled_matmul_auto``'s and
``tiled_conv_auto``'s greedy rules, step by step, as facts of the vendor's library.

Units: DIM-blocks for matmul tiles, elements for conv tiles; footprints in scratchpad rows (DIM int8
each) and accumulator rows (DIM int32 each).  One deliberate reading: for the output-stationary matmul
the starting ``tile_K`` is ``(BANK_NUM*BANK_ROWS/2/DIM) / floor(sqrt(ACC_ROWS/DIM))`` as in the vendor's
source (its ``partition_rows`` is half the scratchpad).

Two users: ``gemmini.vendor`` (the library's exact command stream) and the ``gemmini-default`` baseline
(``cosa.baselines.gemmini_default``, the same tiles as a Mapping).  The loop programs those tiles issue are
priced by ``costmodel.gemmini_loops`` and ``costmodel.gemmini_conv_loops``.

The conv rule's shrink loop takes one step at a time; where a run of steps is predictable (one argument,
or several tied, above all others and DIM), bisection finds where it ends (``skip_run``, ``skip_rounds``),
so a huge layer costs O(log n) fit checks, not O(n).  Bad arguments, a configuration too small for one
block and a shrink loop over ``MAX_SHRINK_STEPS`` raise ``LibraryTileError`` (an ``ArchError``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .arch import ArchError


class LibraryTileError(ArchError):
    """The library's tile rule cannot tile this layer with this configuration (or got bad arguments)."""


ACC_BYTES_PER_ENTRY = 4
"""The accumulator stores int32 partial sums: one row is DIM * 4 bytes."""

MAX_SHRINK_STEPS = 100_000
"""``tiled_conv_auto_tiles`` refuses a layer whose shrink loop (skips included) runs longer than this; the
zoo's layers (ResNet-50, MobileNet-V2, VGG-16, AlexNet, BERT) take fewer than 50."""


@dataclass(frozen=True)
class GemminiTileConfig:
    """The sizes the vendor heuristic reads (all in rows of DIM elements).

    ``bank_rows``: rows per scratchpad bank (a row is DIM int8 = DIM bytes);
    ``acc_rows``: accumulator rows (a row is DIM int32 = 4*DIM bytes).
    """

    dim: int = 16
    bank_num: int = 4
    bank_rows: int = 4096
    acc_rows: int = 1024

    def __post_init__(self):
        for name in ("dim", "bank_num", "bank_rows", "acc_rows"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise LibraryTileError(f"must be a positive integer, got {value!r}", source="GemminiTileConfig",
                                       field=name)

    @staticmethod
    def from_params(dim: int = 16, scratchpad_kib: float = 256, accumulator_kib: float = 64, sp_banks: int = 4,
                    acc_banks: int = 2) -> "GemminiTileConfig":
        """From the preset's parameters: BANK_ROWS = scratchpad rows / banks,
        ACC_ROWS = accumulator bytes / (DIM*4).  ``acc_banks`` does not enter the heuristic."""
        sp_rows = int(scratchpad_kib * 1024) // dim
        return GemminiTileConfig(dim=int(dim), bank_num=int(sp_banks), bank_rows=sp_rows // int(sp_banks),
                                 acc_rows=int(accumulator_kib * 1024) // (int(dim) * ACC_BYTES_PER_ENTRY))

    @staticmethod
    def from_arch(arch) -> "GemminiTileConfig":
        """From a gemmini preset's ``params``."""
        params = getattr(arch, "params", None) or {}
        missing = [k for k in ("dim", "scratchpad_kib", "accumulator_kib", "sp_banks") if k not in params]
        if missing:
            raise LibraryTileError(
                f"the library's tile rule needs a gemmini preset; params lack {missing}",
                source=f"arch {getattr(arch, 'name', '?')}", field="params")
        return GemminiTileConfig.from_params(params["dim"], params["scratchpad_kib"], params["accumulator_kib"],
                                             params["sp_banks"], params.get("acc_banks", 2))


@dataclass(frozen=True)
class MatmulTiles:
    """``tiled_matmul_auto``'s choice, in DIM-blocks."""

    tile_I: int
    tile_J: int
    tile_K: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ConvTiles:
    """``tiled_conv_auto``'s choice, in elements (pooled output rows/cols, channels, kernel taps)."""

    batches: int
    porows: int
    pocols: int
    pochs: int
    krows: int
    kcols: int
    kchs: int

    def to_dict(self) -> dict:
        return asdict(self)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --- tiled_matmul_auto ------------------------------------------------------

def matmul_spad_rows(tile_I: int, tile_J: int, tile_K: int, dim: int) -> int:
    """Scratchpad rows of one A tile plus one B tile."""
    return (tile_I * tile_K + tile_K * tile_J) * dim


def matmul_acc_rows(tile_I: int, tile_J: int, dim: int) -> int:
    """Accumulator rows of one C tile."""
    return tile_I * tile_J * dim


def tiled_matmul_auto_tiles(I: int, J: int, K: int, config: GemminiTileConfig | None = None,
                            dataflow: str = "ws") -> MatmulTiles:
    """The vendor's tile choice for C[I, J] = A[I, K] * B[K, J] (sizes in elements).

    WS is double-buffered (half the scratchpad and accumulator); OS uses both whole.
    Start from the square-ish tile, then grow J, I, K by one block at a time
    while everything fits, until a full pass changes nothing.
    """
    config = config or GemminiTileConfig()
    for name, value in (("I", I), ("J", J), ("K", K)):
        if not isinstance(value, int) or value < 1:
            raise LibraryTileError(f"must be a positive integer, got {value!r}", source="tiled_matmul_auto",
                                   field=name)
    dim = config.dim
    Ip, Jp, Kp = _ceil_div(I, dim), _ceil_div(J, dim), _ceil_div(K, dim)
    if dataflow == "ws":
        max_spad_rows = config.bank_num * config.bank_rows // 2
        max_acc_rows = config.acc_rows // 2
        max_tile_ij = math.isqrt(max_acc_rows // dim)
        max_tile_k = (max_spad_rows // 2 // dim) // max(max_tile_ij, 1)
    elif dataflow == "os":
        max_spad_rows = config.bank_num * config.bank_rows
        max_acc_rows = config.acc_rows
        max_tile_ij = math.isqrt(max_acc_rows // dim)
        max_tile_k = (max_spad_rows // 2 // dim) // max(max_tile_ij, 1)
    else:
        raise LibraryTileError(f"dataflow must be 'ws' or 'os', got {dataflow!r}", source="tiled_matmul_auto",
                               field="dataflow")
    tile_I, tile_J, tile_K = min(Ip, max_tile_ij), min(Jp, max_tile_ij), min(Kp, max_tile_k)
    if min(tile_I, tile_J, tile_K) < 1:
        raise LibraryTileError(f"the memories are too small for one DIM x DIM block ({config})",
                               source="tiled_matmul_auto", field="config")

    def fits(ti: int, tj: int, tk: int) -> bool:
        return (matmul_spad_rows(ti, tj, tk, dim) <= max_spad_rows
                and matmul_acc_rows(ti, tj, dim) <= max_acc_rows)

    while True:
        increased = False
        if tile_J + 1 <= Jp and fits(tile_I, tile_J + 1, tile_K):
            tile_J += 1
            increased = True
        if tile_I + 1 <= Ip and fits(tile_I + 1, tile_J, tile_K):
            tile_I += 1
            increased = True
        if tile_K + 1 <= Kp and matmul_spad_rows(tile_I, tile_J, tile_K + 1, dim) <= max_spad_rows:
            tile_K += 1
            increased = True
        if not increased:
            break
    return MatmulTiles(tile_I, tile_J, tile_K)


# --- tiled_conv_auto --------------------------------------------------------

CONV_ARGS = ("batches", "porows", "pocols", "pochs", "krows", "kcols", "kchs")
_POROWS, _POCOLS, _POCHS, _KCHS = 1, 2, 3, 6


def conv_rows(args, config: GemminiTileConfig, stride: int = 1, kernel_dilation: int = 1, pool_size: int = 1,
              pool_stride: int = 1, downsample: bool = False) -> tuple[int, int]:
    """(scratchpad rows of inputs + weights, accumulator rows of outputs) of one conv tile.

    ``downsample``: the library's stride-2 1x1 path, which moves in every other
    input row and column only (input rows and cols halved, rounding down)."""
    batches, porows, pocols, pochs, krows, kcols, kchs = args
    dim = config.dim
    orows = porows * pool_stride + pool_size - 1
    ocols = pocols * pool_stride + pool_size - 1
    krows_dilated = krows + (kernel_dilation - 1) * (krows - 1)
    kcols_dilated = kcols + (kernel_dilation - 1) * (kcols - 1)
    irows = orows * stride + krows_dilated - 1
    icols = ocols * stride + kcols_dilated - 1
    in_blocks, out_blocks = _ceil_div(kchs, dim), _ceil_div(pochs, dim)
    a_rows = in_blocks * batches * (irows >> int(downsample)) * (icols >> int(downsample))
    b_rows = out_blocks * kcols * krows * kchs
    c_rows = out_blocks * batches * orows * ocols
    return a_rows + b_rows, c_rows


def tiled_conv_auto_tiles(batch_size: int, out_rows: int, out_cols: int, out_channels: int, in_channels: int,
                          kernel_rows: int, kernel_cols: int | None = None, config: GemminiTileConfig | None = None,
                          *, stride: int = 1, kernel_dilation: int = 1, pool_size: int = 1,
                          pool_stride: int = 1, pool_padding: int = 0, downsample: bool = False) -> ConvTiles:
    """The vendor's tile choice for a WS convolution (sizes in elements, no pooling by default).

    ``out_rows``/``out_cols`` are the convolution's output (before pooling);
    pooling (size, stride, padding) tiles the pooled output, as the library
    does; ``downsample`` is its stride-2 1x1 path (see ``conv_rows``).

    Start from the whole layer; while the tile overflows half the scratchpad or
    half the accumulator, shrink the largest argument (ties: the earliest; skip
    pocols while pocols <= DIM and porows > 1): channels to the next lower
    multiple of DIM (by DIM when already one, never below 1), others by 1.
    Then grow pocols by 1 while it fits, then grow each argument in list order
    by 1 when it fits and stays within the layer, until a pass changes nothing.
    """
    config = config or GemminiTileConfig()
    kernel_cols = kernel_rows if kernel_cols is None else kernel_cols
    src = "tiled_conv_auto"
    values = dict(batch_size=batch_size, out_rows=out_rows, out_cols=out_cols, out_channels=out_channels,
                  in_channels=in_channels, kernel_rows=kernel_rows, kernel_cols=kernel_cols, stride=stride,
                  kernel_dilation=kernel_dilation, pool_size=pool_size, pool_stride=pool_stride)
    for name, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise LibraryTileError(f"must be a positive integer, got {value!r}", source=src, field=name)
    if not isinstance(pool_padding, int) or pool_padding < 0:
        raise LibraryTileError(f"must be a non-negative integer, got {pool_padding!r}", source=src,
                               field="pool_padding")
    dim = config.dim
    pool_out_rows = (out_rows + 2 * pool_padding - pool_size) // pool_stride + 1
    pool_out_cols = (out_cols + 2 * pool_padding - pool_size) // pool_stride + 1
    args = [batch_size, pool_out_rows, pool_out_cols, out_channels, kernel_rows, kernel_cols, in_channels]
    max_args = list(args)
    max_spad_rows = config.bank_num * config.bank_rows // 2
    max_acc_rows = config.acc_rows // 2

    def fits(candidate) -> bool:
        spad, acc = conv_rows(candidate, config, stride, kernel_dilation, pool_size, pool_stride, downsample)
        return spad <= max_spad_rows and acc <= max_acc_rows

    steps = 0
    while not fits(args):
        _skip_rounds(args, dim, fits)
        if fits(args):
            break
        steps += 1
        if steps > MAX_SHRINK_STEPS:  # several huge arguments shrinking in turn: give up rather than hang
            raise LibraryTileError(f"the vendor's tile search takes more than {MAX_SHRINK_STEPS:,} shrink steps "
                                   f"on this layer (output {out_rows:,} x {out_cols:,}, {in_channels:,} -> "
                                   f"{out_channels:,} channels); use another scheduler", source=src, field="tiles")
        max_val, max_idx = -1, -1
        for i, value in enumerate(args):
            # the vendor keeps pocols (the array's streamed rows) when it can shrink porows instead
            if not (i == _POCOLS and value <= dim and args[_POROWS] > 1) and value > max_val:
                max_val, max_idx = value, i
        if max_val <= 1:
            raise LibraryTileError(f"even a 1-element tile overflows the memories ({config})", source=src,
                                   field="config")
        if max_idx in (_POCHS, _KCHS):
            value = args[max_idx]
            value = (value // dim) * dim if value % dim else value - dim
            args[max_idx] = max(value, 1)
        else:
            args[max_idx] -= 1
        skip_run(args, max_idx, dim if max_idx in (_POCHS, _KCHS) else 1, dim, fits)

    while args[_POCOLS] + 1 <= max_args[_POCOLS]:
        candidate = list(args)
        candidate[_POCOLS] += 1
        if not fits(candidate):
            break
        args = candidate

    changed = True
    while changed:
        changed = False
        for i in range(len(args)):
            candidate = list(args)
            candidate[i] += 1
            if candidate[i] <= max_args[i] and fits(candidate):
                args = candidate
                changed = True
    return ConvTiles(*args)


def _skip_rounds(args: list[int], dim: int, fits) -> None:
    skip_rounds(args, dim, fits, channels=(_POCHS, _KCHS))


# --- skipping predictable runs of the shrink loop ------------------------------

def skip_run(args: list[int], idx: int, step: int, dim: int, fits) -> None:
    """Jump over the shrink steps the loop above would take one by one on ``args[idx]``.

    While ``args[idx]`` stays above every other argument and above DIM, each
    shrink step picks it again and subtracts ``step`` (DIM for channels, which
    are a multiple of DIM by then; 1 for the others).  ``fits`` only gets truer
    as an argument shrinks, so the first value of that run that fits is found
    by bisection; without one, ``args[idx]`` ends at the run's last value.  The
    result is the step-by-step loop's, in O(log n) checks instead of O(n) (a
    layer with 2**31 channels took minutes).
    """
    value = args[idx]
    floor = max([dim] + [v for i, v in enumerate(args) if i != idx])
    if value <= floor or value % step:
        return
    run = (value - floor - 1) // step  # values value - k*step for k = 0..run stay above floor
    if run < 2 or fits(args):
        return

    def fits_at(k: int) -> bool:
        return fits(args[:idx] + [value - k * step] + args[idx + 1:])

    lo, hi = 1, run  # fits_at(0) is False; find the first k <= run that fits, else run
    if not fits_at(hi):
        args[idx] = value - run * step
        return
    while lo < hi:
        mid = (lo + hi) // 2
        if fits_at(mid):
            hi = mid
        else:
            lo = mid + 1
    args[idx] = value - lo * step


def skip_rounds(args: list[int], dim: int, fits, channels: tuple[int, ...]) -> None:
    """``skip_run`` for several arguments tied at the top (a square image: porows = pocols): the loop
    then shrinks them in turn, one step each per round; rounds that keep them above every other argument
    and DIM are skipped by bisection up to the last one after which the tile still does not fit, from
    where the loop goes on step by step (a 2**24 x 2**24 image took minutes, 2**25 steps).  ``channels``:
    the indices of the arguments that shrink by DIM."""
    value = max(args)
    tied = [i for i, v in enumerate(args) if v == value]
    steps = {dim if i in channels else 1 for i in tied}
    if len(tied) < 2 or len(steps) != 1:
        return
    step = steps.pop()
    floor = max([dim] + [v for i, v in enumerate(args) if i not in tied])
    if value <= floor or value % step:
        return
    run = (value - floor - 1) // step  # rounds after which the tied arguments stay above floor

    def state(r: int) -> list[int]:
        return [value - r * step if i in tied else v for i, v in enumerate(args)]

    if run < 2 or fits(args):
        return
    if not fits(state(run)):
        args[:] = state(run)
        return
    lo, hi = 1, run  # the first round after which it fits
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(state(mid)):
            hi = mid
        else:
            lo = mid + 1
    args[:] = state(lo - 1)


__all__ = ["ACC_BYTES_PER_ENTRY", "CONV_ARGS", "ConvTiles", "GemminiTileConfig", "LibraryTileError", "MAX_SHRINK_STEPS",
           "MatmulTiles", "conv_rows", "matmul_acc_rows", "matmul_spad_rows", "skip_rounds", "skip_run",
           "tiled_conv_auto_tiles", "tiled_matmul_auto_tiles"]
