"""Skipping runs of the vendor tile heuristic's shrink loop (``gemmini_default.tiled_conv_auto_tiles``):
the loop shrinks the largest argument one step at a time until the tile fits; where a run of those steps
is predictable, bisection finds where it ends, so a huge layer costs O(log n) fit checks, not O(n)."""

from __future__ import annotations


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


MAX_SHRINK_STEPS = 100_000
"""``gemmini_default.tiled_conv_auto_tiles`` refuses a layer whose shrink loop (skips included) runs longer than this; the
zoo's layers (ResNet-50, MobileNet-V2, VGG-16, AlexNet, BERT) take fewer than 50."""


def skip_rounds(args: list[int], dim: int, fits, channels: tuple[int, ...]) -> None:
    """``skip_run`` for several arguments tied at the top (a square image: porows = pocols): the loop
    then shrinks them in turn, one step each per round; rounds that keep them above every other argument
    and DIM are skipped by bisection up to the last one after which the tile still does not fit, from
    where the loop goes on step by step (a 2**24 x 2**24 image took minutes, 2**25 steps).  ``channels``: the indices of the arguments that
    shrink by DIM."""
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
