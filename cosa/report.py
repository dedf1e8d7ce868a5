"""Reports of a comparison: a rich table, CSV, JSON, geomeans and bar charts.

Summary statistics (``geomeans``), per scheduler, over the layers on which
every scheduler succeeded (so that all schedulers are summarised on the same
layers):

* ``ratio_geomean``: geometric mean of the ratio to the best scheduler of each
  layer, every distinct layer counted once (how good a scheduler is per layer);
* ``ratio_geomean_weighted``: the same weighted by the layer's repeat count in
  its network (how good it is on the network as run);
* ``utilization_geomean``: geometric mean of utilization, weighted by repeats;
* ``total_cycles``, ``total_energy_pj``, ``total_dram_bytes``: sums of
  repeat * value (whole-network totals);
* ``total_seconds``: sum of the seconds to solution, each distinct layer
  scheduled once (not weighted);
* ``total_roofline_cycles``, ``cycles_over_roofline_total``: the network's
  roofline (``lowerbounds.roofline``, repeat-weighted sum) and total cycles over it.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from .compare_rows import CompareResult, CompareRow

CSV_FIELDS = ("layer", "scheduler", "repeat", "macs", "cycles", "energy_pj", "utilization", "dram_bytes",
              "seconds", "objective_value", "ratio", "bound_bytes", "bound_ratio", "roofline_cycles", "cycles_over_roofline",
              "measured_s", "measured_verified", "status", "claim", "error", "tile_args")


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def weighted_geomean(values, weights=None) -> float:
    """exp(sum w*log(x) / sum w) of positive values (NaN when there are none)."""
    values = list(values)
    weights = [1.0] * len(values) if weights is None else list(weights)
    pairs = [(v, w) for v, w in zip(values, weights) if _finite(v) and v > 0 and w > 0]
    if not pairs:
        return math.nan
    total = sum(w for _, w in pairs)
    return math.exp(sum(w * math.log(v) for v, w in pairs) / total)


def common_layers(result: CompareResult) -> list[str]:
    """Layers on which every scheduler produced a schedule."""
    groups = result.by_layer()
    return [name for name in result.layers if groups[name] and all(r.ok for r in groups[name])]


def geomeans(result: CompareResult) -> dict[str, dict]:
    """Per scheduler summary over the common layers (see the module docstring for each field)."""
    layers = set(common_layers(result))
    out = {}
    for name in result.schedulers:
        rows = [r for r in result.rows if r.scheduler == name and r.layer in layers]
        reps = [r.repeat for r in rows]
        out[name] = {
            "layers": len(rows),
            "failed": sum(1 for r in result.rows if r.scheduler == name and not r.ok),
            "ratio_geomean": weighted_geomean([r.ratio for r in rows]),
            "ratio_geomean_weighted": weighted_geomean([r.ratio for r in rows], reps),
            "utilization_geomean": weighted_geomean([r.utilization for r in rows], reps),
            "bound_ratio_geomean": weighted_geomean([r.bound_ratio for r in rows]),
            "total_cycles": sum(r.repeat * r.cycles for r in rows),
            "total_roofline_cycles": sum(r.repeat * (r.roofline_cycles or math.nan) for r in rows),
            "cycles_over_roofline_total": (sum(r.repeat * r.cycles for r in rows)
                                           / sum(r.repeat * (r.roofline_cycles or math.nan) for r in rows)
                                           if rows else math.nan),
            "total_energy_pj": sum(r.repeat * r.energy_pj for r in rows),
            "total_dram_bytes": sum(r.repeat * r.dram_bytes for r in rows),
            "total_seconds": sum(r.seconds for r in rows),
        }
    return out


# --- failures -----------------------------------------------------------------------------

@dataclass(frozen=True)
class FailureCause:
    """The layers on which one scheduler failed for one reason.  ``number``: 1, 2, ... in the
    order the causes first occur (the table's failed cells say ``[number]``); ``message``: the
    error of the first such layer, in full."""

    number: int
    scheduler: str
    layers: tuple[str, ...]
    message: str

    @property
    def count(self) -> int:
        return len(self.layers)

    def line(self, shown: int = 3) -> str:
        """One line: number, scheduler, count, the first ``shown`` layers, the message."""
        first = ", ".join(self.layers[:shown]) + (f", ... ({self.count - shown} more)" if self.count > shown else "")
        noun = "layer" if self.count == 1 else "layers"
        return f"[{self.number}] {self.scheduler} failed on {self.count} {noun} ({first}): {self.message}"

    def to_dict(self) -> dict:
        return {"number": self.number, "scheduler": self.scheduler, "count": self.count, "layers": list(self.layers),
                "message": self.message}


def _cause_key(row: CompareRow) -> str:
    """A failure's message with its layer's name and every number blanked: layers that failed for
    the same reason (e.g. a group count of 4 on one layer and 8 on another) share a key."""
    text = row.error or ""
    base = row.layer.split("#", 1)[0]  # "conv#2": the second occurrence of the layer "conv"
    if base:
        text = text.replace(base, "<layer>")
    return re.sub(r"\d+(\.\d+)?", "#", text)


def failure_causes(result: CompareResult) -> list[FailureCause]:
    """Failed rows grouped by scheduler and cause (see ``_cause_key``), in the order they first occur."""
    groups: dict[tuple[str, str], list[CompareRow]] = {}
    for r in result.rows:
        if not r.ok:
            groups.setdefault((r.scheduler, _cause_key(r)), []).append(r)
    return [FailureCause(k + 1, rows[0].scheduler, tuple(r.layer for r in rows), rows[0].error or "")
            for k, rows in enumerate(groups.values())]


def failure_number(causes: list[FailureCause], row: CompareRow) -> int | None:
    """The number of the cause of a failed row (None for a row that did not fail)."""
    for c in causes:
        if c.scheduler == row.scheduler and row.layer in c.layers:
            return c.number
    return None


def failure_summary(result: CompareResult) -> list[str]:
    """Lines for the end of a comparison with failures: a count, then one line per cause (empty when
    nothing failed)."""
    causes = failure_causes(result)
    if not causes:
        return []
    failed = sum(c.count for c in causes)
    plural = lambda n, word: f"{n} {word}" + ("" if n == 1 else "s")
    head = (f"{failed} of {plural(len(result.rows), 'run')} failed ({plural(len(result.layers), 'layer')} x "
            f"{plural(len(result.schedulers), 'scheduler')}), {plural(len(causes), 'cause')}:")
    return [head] + ["  " + c.line() for c in causes]


def error_reason(message: str) -> str:
    """The innermost reason of an error message: what follows its last "field '...': " (messages
    nest as "source: field 'f': reason"; the table's cell shows this part, the summary the whole)."""
    parts = re.split(r"field '[^']*': ", message)
    return parts[-1].strip() or message


def clip_words(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with " ..." when cut
    (a first word longer than ``limit`` is kept whole)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 3)
    if cut <= 0:
        cut = text.find(" ")
        if cut < 0:
            return text
    return text[:cut].rstrip(" ,;:") + " ..."


# --- table --------------------------------------------------------------------------------

def _fmt(x, spec: str) -> str:
    return format(x, spec) if _finite(x) else "-"


def _pct(fraction) -> str:
    """A fraction as a percentage with one decimal ("-" when it is not a number, e.g. a measured peer's)."""
    return _fmt(100 * fraction, ".1f") + "%" if _finite(fraction) else "-"


def _fmt_energy_uj(energy_pj) -> str:
    """Microjoules: two decimals for large values, four significant digits for small ones."""
    if not _finite(energy_pj):
        return "-"
    uj = energy_pj / 1e6
    return f"{uj:,.2f}" if abs(uj) >= 100 else f"{uj:.4g}"


ERROR_CELL_CHARS = 60
"""A failed row's error cell holds at most this many characters of its reason, cut between words;
the failure summary below the table has each cause's message in full."""


def table(result: CompareResult, title: str | None = None, error_chars: int = ERROR_CELL_CHARS):
    """A rich Table: one row per (layer, scheduler); failed rows say FAILED and, in an "error" column,
    the number of their cause and (``error_chars`` > 0) its reason cut between words; then a "total"
    row and a "geomean" row per scheduler (see ``geomeans``)."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=title or f"{result.arch}: objective {result.objective}", show_lines=False)
    for col, justify in (("layer", "left"), ("scheduler", "left"), ("cycles", "right"), ("energy uJ", "right"),
                         ("util", "right"), ("DRAM bytes", "right"), ("seconds", "right"), ("ratio", "right"),
                         ("traffic/bound", "right"), ("cycles/roofline", "right")):
        t.add_column(col, justify=justify)
    measured = any(r.measured_s is not None for r in result.rows)
    if measured:
        t.add_column("measured s", justify="right")
    causes = failure_causes(result)
    if causes:  # words wrap inside the cell (print_table drops the reasons where they would not fit)
        t.add_column("error", justify="left")
    tail = [""] if causes else []
    groups = result.by_layer()
    for k, name in enumerate(result.layers):
        label = name + "".join({f" x{r.repeat}" for r in groups[name] if r.repeat > 1})  # identical layers
        for r in groups[name]:
            if not r.ok:
                number = failure_number(causes, r)
                t.add_row(escape(label), r.scheduler, "[bold red]FAILED[/]", "-", "-", "-", _fmt(r.seconds, ".2f"),
                          "-", "-", "-", *(["-"] if measured else []),
                          escape(f"[{number}]" + (" " + clip_words(error_reason(r.error or ""), error_chars)
                                                   if error_chars > 0 else "")))
                continue
            ratio = _fmt(r.ratio, ".3f")
            if _finite(r.ratio) and r.ratio == 1.0:
                ratio = f"[bold green]{ratio}[/]"
            # a peer's mapping that our levels could not state exactly is the nearest one: say so
            sched = f"{r.scheduler} (adapted)" if r.status == "adapted" else r.scheduler
            t.add_row(escape(label), sched, _fmt(r.cycles, ",.0f"), _fmt_energy_uj(r.energy_pj),
                      _pct(r.utilization), _fmt(r.dram_bytes, ",.0f"), _fmt(r.seconds, ".2f"),
                      ratio, _fmt(r.bound_ratio, ".2f"), _fmt(r.cycles_over_roofline, ".2f"),
                      *([_fmt(r.measured_s, ".4g") + ("" if r.measured_verified in (None, True) else " [red]WRONG[/]")]
                        if measured else []), *tail)
        if k != len(result.layers) - 1:
            t.add_section()
    summary = geomeans(result)
    t.add_section()
    for name, g in summary.items():
        none = g["layers"] == 0  # no layer where every scheduler succeeded: no totals (not zeros)
        t.add_row("[bold]total[/]", name, "-" if none else _fmt(g["total_cycles"], ",.0f"),
                  "-" if none else _fmt_energy_uj(g["total_energy_pj"]), "-",
                  "-" if none else _fmt(g["total_dram_bytes"], ",.0f"), "-" if none else _fmt(g["total_seconds"], ".2f"),
                  "-", "-", _fmt(g["cycles_over_roofline_total"], ".2f"), *(["-"] if measured else []), *tail)
    t.add_section()
    for name, g in summary.items():
        t.add_row("[bold]geomean[/]", name, "-", "-", _pct(g["utilization_geomean"]), "-", "-",
                  _fmt(g["ratio_geomean_weighted"], ".3f"), _fmt(g["bound_ratio_geomean"], ".2f"), "-",
                  *(["-"] if measured else []), *tail)
    common = len(common_layers(result))
    over = (f"the {common} layers" if common == len(result.layers)
            else f"the {common} of {len(result.layers)} layers where every scheduler succeeded")
    t.caption = (f"total and geomean rows over {over}. total: sums of repeat x value (seconds: each distinct "
                 "layer once; cycles/roofline: total cycles over total roofline cycles). geomean: util and ratio "
                 "weighted by layer repeats, traffic/bound unweighted."
                 + (" \\[n]: the number of a failure's cause, listed in full after the table." if causes else ""))
    return t


def print_table(result: CompareResult, console=None, title: str | None = None) -> None:
    """Print the table, then the failure summary (``failure_summary``) when a run failed; when stdout
    is not a terminal, 160 columns wide rather than truncated to 80."""
    import sys

    from rich.console import Console

    if console is None:
        console = Console() if sys.stdout.isatty() else Console(width=160)
    t = table(result, title)
    # the table's narrowest form keeps every word whole; where even that is too wide, the causes' numbers only
    if console.measure(t, options=console.options.update_width(1 << 16)).minimum > console.width:
        t = table(result, title, error_chars=0)
    console.print(t)
    for line in failure_summary(result):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


# --- CSV and JSON ---------------------------------------------------------------------------

def _row_record(r: CompareRow) -> dict:
    d = r.to_dict()
    tile_args = r.extra.get("tile_args")
    d["tile_args"] = json.dumps(tile_args, sort_keys=True) if tile_args else ""
    return d


def write_csv(result: CompareResult, path) -> Path:
    """One line per (layer, scheduler); vendor tile arguments as a JSON cell."""
    path = Path(path)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for r in result.rows:
            rec = _row_record(r)
            writer.writerow({k: ("" if rec[k] is None or (isinstance(rec[k], float) and math.isnan(rec[k]))
                                 else rec[k]) for k in CSV_FIELDS})
    return path


def _clean(obj):
    """JSON-safe: NaN and infinities become None, tuples lists, dataclass-like objects their dicts."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "to_dict"):
        return _clean(obj.to_dict())
    if isinstance(obj, (int, str, bool)) or obj is None:
        return obj
    return str(obj)


def to_json(result: CompareResult) -> dict:
    """Everything in the table plus the per-row solver statistics and scheduler facts."""
    return _clean({
        "arch": result.arch,
        "objective": result.objective,
        "schedulers": list(result.schedulers),
        "layers": list(result.layers),
        "rows": [r.to_dict() for r in result.rows],
        "geomeans": geomeans(result),
        "failures": [c.to_dict() for c in failure_causes(result)],
        "meta": result.meta,
    })


def write_json(result: CompareResult, path) -> Path:
    path = Path(path)
    path.write_text(json.dumps(to_json(result), indent=2))
    return path


# --- plots ---------------------------------------------------------------------------------------

def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


PLOT_LAYERS_PER_PANEL = 25
"""Layers per panel of ``plot`` (more panels, one under the other, for longer networks)."""
PLOT_MAX_PANELS = 8
"""At most this many panels: past PLOT_LAYERS_PER_PANEL x PLOT_MAX_PANELS layers the panels hold more
layers each, so the image stays within PLOT_MAX_PX pixels."""
PLOT_DPI = 100
PLOT_MAX_PX = (1400, 2500)
"""The largest image ``plot`` writes, (width, height) in pixels, whatever the number of layers."""
FAILED_HATCH = "xx"


def plot_figure(result: CompareResult):
    """The figure ``plot`` saves: grouped bars, per layer each scheduler's cycles over the best cycles
    of that layer (1 = best), in panels of at most PLOT_LAYERS_PER_PANEL layers stacked vertically
    (spread evenly; more per panel past PLOT_MAX_PANELS panels).  A scheduler that failed on a layer gets an empty
    hatched bar up to the top of its panel (legend: "failed"), not a gap; a log scale when a ratio
    exceeds 10."""
    from matplotlib.patches import Patch

    groups = result.by_layer()
    layers, schedulers = list(result.layers), list(result.schedulers)
    panels = max(1, math.ceil(len(layers) / max(PLOT_LAYERS_PER_PANEL, math.ceil(len(layers) / PLOT_MAX_PANELS))))
    per_panel = max(1, math.ceil(len(layers) / panels))  # the layers spread evenly over the panels
    shown = min(len(layers), per_panel)
    width_in = min(PLOT_MAX_PX[0] / PLOT_DPI, max(6.0, 2.5 + 0.2 * shown * max(len(schedulers), 2)))
    height_in = min(PLOT_MAX_PX[1] / PLOT_DPI, 1.2 + 2.9 * panels)
    fig = _figure(width_in, height_in)
    colors = {name: f"C{s % 10}" for s, name in enumerate(schedulers)}
    ratios = {}
    for layer in layers:
        best = min((r.cycles for r in groups[layer] if r.ok and _finite(r.cycles)), default=None)
        for r in groups[layer]:
            if r.ok and best and _finite(r.cycles):
                ratios[(layer, r.scheduler)] = r.cycles / best
    log = max(ratios.values(), default=1.0) > 10
    bar_w = 0.8 / max(len(schedulers), 1)
    any_failed = False
    for p in range(panels):
        ax = fig.add_subplot(panels, 1, p + 1)
        chunk = layers[p * per_panel:(p + 1) * per_panel]
        top = max([ratios.get((layer, name), 1.0) for layer in chunk for name in schedulers] + [1.0]) * 1.08
        for s, name in enumerate(schedulers):
            xs, ys, failed = [], [], []
            for k, layer in enumerate(chunk):
                x = k - 0.4 + bar_w * (s + 0.5)
                if (layer, name) in ratios:
                    xs.append(x)
                    ys.append(ratios[(layer, name)])
                elif any(r.scheduler == name and not r.ok for r in groups[layer]):
                    failed.append(x)
            ax.bar(xs, ys, width=bar_w, color=colors[name])
            if failed:
                any_failed = True
                ax.bar(failed, [top] * len(failed), width=bar_w, fill=False, hatch=FAILED_HATCH,
                       edgecolor=colors[name], linewidth=0.6)
        ax.axhline(1.0, color="black", linewidth=0.8)
        if log:
            ax.set_yscale("log", nonpositive="clip")
        ax.set_ylim(0.9 if log else 0.0, top)
        ax.set_xlim(-0.6, (per_panel if panels > 1 else max(len(chunk), 1)) - 0.4)  # same bar width in every panel
        ax.set_xticks(range(len(chunk)))
        ax.set_xticklabels(chunk, rotation=60, ha="right", fontsize=7 if per_panel <= 40 else 5)
        ax.tick_params(axis="y", labelsize=7)
    handles = [Patch(color=colors[name], label=name) for name in schedulers]
    if any_failed:
        handles.append(Patch(fill=False, hatch=FAILED_HATCH, edgecolor="black", label="failed (no schedule)"))
    top_in = 0.5  # inches above the panels: the title, then the legend
    fig.suptitle(f"{result.arch}: cycles normalized to the best scheduler per layer", fontsize=10,
                 y=1 - 0.06 / height_in, va="top")
    fig.legend(handles=handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.3 / height_in),
               ncols=min(len(handles), max(2, int(width_in // 2))), frameon=False)
    fig.supylabel("cycles / best cycles of the layer", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - top_in / height_in))
    return fig


def plot(result: CompareResult, path) -> Path:
    """Save ``plot_figure(result)`` as a PNG at PLOT_DPI (at most PLOT_MAX_PX pixels)."""
    path = Path(path)
    plot_figure(result).savefig(path, dpi=PLOT_DPI)
    return path


def plot_bound_curve(workload, rep, schedules, path) -> Path:
    """The lower bound on DRAM traffic versus fast-memory size (log-log, ``lowerbounds.bound_curve``),
    the compulsory traffic, and each schedule's DRAM traffic at its architecture's on-chip
    memory (``lowerbounds.onchip_bytes``: where ``bound_for_arch`` evaluates the bound).
    ``rep``: the bound report at the memory of interest (drawn as a dashed vertical line)."""
    from lowerbounds import bound_curve, onchip_bytes

    path = Path(path)
    d = rep.to_dict()
    here = d.get("memory_bytes")
    curve = bound_curve(workload)
    points = sorted(zip(curve.memories_bytes, curve.bounds_bytes))
    if here is not None and math.isfinite(here) and here not in dict(points):
        points = sorted(points + [(here, d["bound_bytes"])])
    fig = _figure(6.0, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    ax.loglog([m for m, _ in points], [b for _, b in points], marker=".", label="lower bound")
    if d.get("compulsory_bytes"):
        ax.axhline(d["compulsory_bytes"], color="gray", linewidth=0.8, label="compulsory traffic")
    for s in schedules:
        x = onchip_bytes(s.arch) or here
        ax.scatter([x], [s.cost.dram_bytes], label=f"{s.scheduler} ({s.arch.name})", zorder=3)
    if here is not None and math.isfinite(here):
        ax.axvline(here, color="gray", linewidth=0.8, linestyle="--")
    ax.set_xlabel("fast memory (bytes)")
    ax.set_ylabel("DRAM traffic (bytes)")
    ax.set_title(f"{workload.name}: traffic lower bound versus memory size")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path
