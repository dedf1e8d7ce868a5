"""Progress of ``cosa.compare``: what a long comparison shows while it runs.

Two forms, both on standard error (standard output keeps the table or the JSON):

* ``"bar"`` (a terminal): rich progress bars, one for the layers (with the layer being
  scheduled) and one per scheduler (layers done, and how many failed so far);
* ``"lines"`` (a pipe, a log file, CI): one line per finished layer, e.g.
  ``compare [3/50] conv2 (1.2 s): cosa 1.000, gemmini-default FAILED, random 1.132``
  (the schedulers' seconds on that layer, then each one's ratio to the best there).

Under local processes or MPI ranks a layer's schedulers are reported together when
the layer comes back; in one process each scheduler advances its bar as it finishes.
"""

from __future__ import annotations

import math
import sys

from .schedule import SchedulingError

PROGRESS_FORMS = ("bar", "lines")


def progress_form(progress) -> str | None:
    """``compare``'s ``progress`` argument as a form: True -> "bar", "bar"/"lines" as given,
    None/False -> no progress."""
    if progress is True:
        return "bar"
    if progress in PROGRESS_FORMS:
        return progress
    if progress in (None, False):
        return None
    raise SchedulingError(f"must be True, False, None or one of {list(PROGRESS_FORMS)}, not {progress!r}",
                          source="compare", field="progress")


class Progress:
    """Reports a comparison of ``schedulers`` over ``layers`` (names) in ``form`` ("bar" or "lines").

    Calls: ``start()``, ``layer_started(k)``, ``scheduler_done(k, name, ok)`` (optional, from the
    process that schedules), ``layer_done(k, rows)`` (always, once per layer), ``stop()``."""

    def __init__(self, form: str, layers, schedulers, stream=None):
        self.form = form
        self.layers = list(layers)
        self.schedulers = list(schedulers)
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self.failed = {name: 0 for name in self.schedulers}
        self._counted: dict[int, set[str]] = {}   # layer index -> schedulers already advanced
        self._bar = None
        self._tasks: dict[str, int] = {}

    # --- life cycle ---
    def start(self) -> None:
        if self.form != "bar":
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(TextColumn("{task.fields[label]:<18}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.description}"),
                                 console=Console(file=self.stream), transient=True)
        self._bar.start()
        total = len(self.layers)
        self._tasks["layers"] = self._bar.add_task("", total=total, label="layers")
        for name in self.schedulers:
            self._tasks[name] = self._bar.add_task("", total=total, label=name)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    # --- events ---
    def layer_started(self, k: int) -> None:
        if self._bar is not None:
            self._bar.update(self._tasks["layers"], description=self.layers[k])

    def scheduler_done(self, k: int, name: str, ok: bool) -> None:
        seen = self._counted.setdefault(k, set())
        if name in seen or name not in self.failed:
            return
        seen.add(name)
        if not ok:
            self.failed[name] += 1
        if self._bar is not None:
            self._bar.update(self._tasks[name], advance=1, description=self._failed_text(name))

    def layer_done(self, k: int, rows) -> None:
        for r in rows:
            self.scheduler_done(k, r.scheduler, r.ok)
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._tasks["layers"], advance=1)
        elif self.form == "lines":
            print(self.line(k, rows), file=self.stream, flush=True)

    # --- text ---
    def _failed_text(self, name: str) -> str:
        n = self.failed[name]
        return f"[red]{n} failed[/]" if n else ""

    def line(self, k: int, rows) -> str:
        """The line of a finished layer (form "lines")."""
        seconds = sum(r.seconds for r in rows if isinstance(r.seconds, float) and math.isfinite(r.seconds))
        parts = []
        for r in rows:
            if not r.ok:
                parts.append(f"{r.scheduler} FAILED")
            elif isinstance(r.ratio, float) and math.isfinite(r.ratio):
                parts.append(f"{r.scheduler} {r.ratio:.3f}")
            else:
                parts.append(f"{r.scheduler} ok")
        width = len(str(len(self.layers)))
        return f"compare [{self.done:>{width}}/{len(self.layers)}] {self.layers[k]} ({seconds:.1f} s): " \
            + ", ".join(parts)
