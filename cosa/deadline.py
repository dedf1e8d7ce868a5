"""The wall-clock deadline of one ``cosa`` command (``--deadline S``).

``deadline(seconds)`` is a context manager: when ``seconds`` of wall time have
passed, ``DeadlineExceeded`` is raised in the main thread wherever it is
(reading, solving, pricing a schedule, running a baseline), through
``SIGALRM``.  It derives from ``BaseException`` so that no ``except Exception``
on the way swallows it; the command line turns it into one line and exit 1.
Code that blocks in a C library for long (the MIP solver) asks
``remaining_s()`` and gives the library no more than that
(``clamp_s``), so the alarm is seen in time.

Nesting: an alarm armed by the caller (a test harness's per-case limit) is
kept: the earlier of the two fires first, the caller's handler runs for its
own alarm, and the caller's timer is re-armed with its remaining time on the
way out.  Outside the main thread no signal can be used; the deadline then
only bounds ``clamp_s``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time

DEFAULT_DEADLINE_S = 3600.0
"""Every command's wall-time limit unless ``--deadline`` says otherwise (seconds)."""

RETRY_S = 0.1
"""Seconds after which a deadline whose exception was swallowed is raised again."""

_expires_at: float | None = None  # time.monotonic() at which the innermost deadline expires
_expiring_s: float | None = None  # the seconds of the deadline that expires first


class DeadlineExceeded(BaseException):
    """The command ran past its deadline: a failed run (exit 1)."""

    def __init__(self, seconds: float):
        super().__init__(f"deadline of {seconds:g} s reached (--deadline S raises it); the run was stopped")
        self.seconds = seconds


def remaining_s() -> float | None:
    """Seconds left before the current deadline; None when no deadline is set."""
    return None if _expires_at is None else _expires_at - time.monotonic()


def raise_if_expired() -> None:
    """Raise ``DeadlineExceeded`` when the current deadline has passed: for code that comes back from a long C
    call (the solver) after it, where the alarm's exception may not have been raised yet (it was swallowed,
    or comes again only after ``RETRY_S``) and a result made from the cut-short call would otherwise be
    reported as something else."""
    if _expires_at is not None and time.monotonic() >= _expires_at:
        raise DeadlineExceeded(_expiring_s)


def clamp_s(seconds: float) -> float:
    """``seconds`` cut to what the deadline leaves (at least 10 ms, so a solver still starts and returns)."""
    left = remaining_s()
    return seconds if left is None else max(0.01, min(seconds, left))


@contextlib.contextmanager
def deadline(seconds: float):
    """Raise ``DeadlineExceeded`` in the main thread once ``seconds`` of wall time have passed."""
    global _expires_at, _expiring_s
    start = time.monotonic()
    outer_expires, outer_seconds = _expires_at, _expiring_s
    mine = start + seconds
    if outer_expires is None or mine < outer_expires:
        _expires_at, _expiring_s = mine, seconds
    if threading.current_thread() is not threading.main_thread():
        try:
            yield
        finally:
            _expires_at, _expiring_s = outer_expires, outer_seconds
        return
    previous = signal.getsignal(signal.SIGALRM)
    outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)
    outer_at = start + outer_delay if outer_delay > 0 else None
    outer_fired = False

    def on_alarm(signum, frame):
        nonlocal outer_fired
        now = time.monotonic()
        if outer_at is not None and not outer_fired and now >= outer_at - 1e-3:
            outer_fired = True
            if callable(previous):
                previous(signum, frame)  # the caller's alarm: its handler decides (a harness raises)
        if now >= mine - 1e-3:
            # Python ignores an exception raised where it cannot propagate (a garbage-collector callback, a
            # __del__): the alarm comes again until one propagates and the way out disarms it
            signal.setitimer(signal.ITIMER_REAL, RETRY_S)
            raise DeadlineExceeded(seconds)
        signal.setitimer(signal.ITIMER_REAL, max(1e-3, mine - now))  # early wake-up: sleep again

    signal.signal(signal.SIGALRM, on_alarm)
    first = mine if outer_at is None else min(mine, outer_at)
    signal.setitimer(signal.ITIMER_REAL, max(1e-3, first - start))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _expires_at, _expiring_s = outer_expires, outer_seconds
        if outer_at is not None and not outer_fired:
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, outer_at - time.monotonic()), outer_interval)
