"""Measured peers of ``cosa compare``: tools that search and compile a kernel of their own (TVM's
MetaSchedule) instead of giving a mapping that our cost model prices.

A peer is a callable ``(workload) -> dict`` passed to ``compare`` under its name in ``PEERS`` (the command
line passes ``targets.cpu.tvm_peer``'s for ``--schedulers ...,tvm`` on a CPU arch; this module does not
import targets).  The dict holds ``seconds`` (the kernel's measured seconds per call), ``verified``,
``gflops`` (1e9 FLOP/s, 2 FLOP per MAC) and ``tuning_s`` (the search's wall seconds); the rest goes to the
row's ``extra``.  A peer's row has no cost-model figures (NaN): ``seconds`` is its tuning time,
``measured_s`` its kernel's time.  Peers run after every mapping has been scheduled and measured, one layer
at a time in this process, never side by side with other runs.  A peer that raises a FrameworkError on a
layer gives a failed row with its message (the other layers go on).
"""

from __future__ import annotations

import math
import sys

from workloads import FrameworkError

from .compare_rows import CompareResult, CompareRow

PEERS = ("tvm",)
"""Names ``compare`` takes beside ``cosa.scheduler.SCHEDULERS``: measured peers (this module's docstring)."""


def peer_row(layer: str, name: str, workload, peer) -> CompareRow:
    """``peer`` run on ``workload``: a measured row, or a failed one carrying the error's message."""
    try:
        got = dict(peer(workload))
    except FrameworkError as err:
        return CompareRow(layer, name, workload.repeat, workload.macs, status="failed", error=str(err))
    extra = {k: v for k, v in got.items() if k not in ("seconds", "verified", "times_s")}
    return CompareRow(layer, name, workload.repeat, workload.macs, seconds=float(got["tuning_s"]),
                      measured_s=float(got["seconds"]), measured_verified=bool(got["verified"]), status="measured",
                      extra=extra, claim=f"{name}'s own search and compiled kernel, measured; no cost-model figures")


def add_peer_rows(rows: tuple[CompareRow, ...], nests, layers, schedulers, peers: dict,
                  progress: bool = False) -> tuple[CompareRow, ...]:
    """``rows`` (the mapping schedulers', layer by layer) with every peer's row of each layer inserted in
    ``schedulers`` order.  ``progress``: a line per peer and layer on standard error."""
    by_layer: dict[str, dict[str, CompareRow]] = {name: {} for name in layers}
    for r in rows:
        by_layer[r.layer][r.scheduler] = r
    for workload, layer in zip(nests, layers):
        for name in schedulers:
            if name in peers:
                row = peer_row(layer, name, workload, peers[name])
                by_layer[layer][name] = row
                if progress:
                    what = (f"{row.extra.get('gflops', math.nan):.1f} GFLOP/s after {row.seconds:.1f} s of tuning"
                            if row.ok else "failed")
                    print(f"{name}: {layer}: {what}", file=sys.stderr)
    return tuple(by_layer[layer][name] for layer in layers for name in schedulers if name in by_layer[layer])


def gflops(row: CompareRow) -> float:
    """A measured row's GFLOP/s: the measurement's own figure, else 2 * MACs over its measured seconds."""
    value = row.extra.get("gflops") or (row.extra.get("measured") or {}).get("gflops")
    if value:
        return float(value)
    return 2 * row.macs / row.measured_s / 1e9 if row.measured_s else math.nan


def measured_rows(result: CompareResult, peer: str) -> list[dict]:
    """Per layer and scheduler with a measured kernel: GFLOP/s, seconds to a schedule (the MIP's solve, the
    peer's tuning), whether verified, and the row's speed over ``peer``'s on that layer (> 1: faster)."""
    out = []
    for layer, rows in result.by_layer().items():
        ref = next((r for r in rows if r.scheduler == peer and r.ok and r.measured_s), None)
        for r in rows:
            if not r.ok or not r.measured_s:
                out.append({"layer": layer, "scheduler": r.scheduler, "gflops": None, "seconds": r.seconds,
                            "verified": None, "over_peer": None})
                continue
            out.append({"layer": layer, "scheduler": r.scheduler, "gflops": gflops(r), "seconds": r.seconds,
                        "verified": r.measured_verified,
                        "over_peer": ref.measured_s / r.measured_s if ref is not None else None})
    return out


def print_measured(result: CompareResult, peer: str, console=None) -> None:
    """A table of ``measured_rows`` after the comparison's table."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title=f"Measured kernels, one thread: GFLOP/s and speed over {peer}")
    for col in ("layer", "scheduler", "GFLOP/s", "schedule/tune s", f"speed / {peer}", "verified"):
        table.add_column(col, justify="left" if col in ("layer", "scheduler") else "right")
    fmt = lambda v, spec: "-" if v is None or not math.isfinite(v) else format(v, spec)
    for rec in measured_rows(result, peer):
        table.add_row(rec["layer"], rec["scheduler"], fmt(rec["gflops"], ".2f"), fmt(rec["seconds"], ".2f"),
                      fmt(rec["over_peer"], ".3f"),
                      "-" if rec["verified"] is None else ("yes" if rec["verified"] else "[red]NO[/]"))
    console.print(table)
