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
from pathlib import Path

from .compare import CompareResult, CompareRow

CSV_FIELDS = ("layer", "scheduler", "repeat", "macs", "cycles", "energy_pj", "utilization", "dram_bytes",
              "seconds", "objective_value", "ratio", "bound_bytes", "bound_ratio", "roofline_cycles", "cycles_over_roofline",
              "measured_s", "measured_verified", "status", "error", "tile_args")


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


# --- table --------------------------------------------------------------------------------

def _fmt(x, spec: str) -> str:
    return format(x, spec) if _finite(x) else "-"


def _fmt_energy_uj(energy_pj) -> str:
    """Microjoules: two decimals for large values, four significant digits for small ones."""
    if not _finite(energy_pj):
        return "-"
    uj = energy_pj / 1e6
    return f"{uj:,.2f}" if abs(uj) >= 100 else f"{uj:.4g}"


def table(result: CompareResult, title: str | None = None):
    """A rich Table: one row per (layer, scheduler), then the geomeans."""
    from rich.table import Table

    t = Table(title=title or f"{result.arch}: objective {result.objective}", show_lines=False)
    for col, justify in (("layer", "left"), ("scheduler", "left"), ("cycles", "right"), ("energy uJ", "right"),
                         ("util", "right"), ("DRAM bytes", "right"), ("seconds", "right"), ("ratio", "right"),
                         ("traffic/bound", "right"), ("cycles/roofline", "right")):
        t.add_column(col, justify=justify)
    measured = any(r.measured_s is not None for r in result.rows)
    if measured:
        t.add_column("measured s", justify="right")
    groups = result.by_layer()
    for k, name in enumerate(result.layers):
        for r in groups[name]:
            if not r.ok:
                t.add_row(name, r.scheduler, "[red]failed[/]", "", "", "", _fmt(r.seconds, ".2f"), "",
                          (r.error or "")[:60])
                continue
            ratio = _fmt(r.ratio, ".3f")
            if _finite(r.ratio) and r.ratio == 1.0:
                ratio = f"[bold green]{ratio}[/]"
            # a peer's mapping that our levels could not state exactly is the nearest one: say so
            label = f"{r.scheduler} (adapted)" if r.status == "adapted" else r.scheduler
            t.add_row(name, label, _fmt(r.cycles, ",.0f"), _fmt_energy_uj(r.energy_pj),
                      _fmt(100 * r.utilization, ".1f") + "%", _fmt(r.dram_bytes, ",.0f"), _fmt(r.seconds, ".2f"),
                      ratio, _fmt(r.bound_ratio, ".2f"), _fmt(r.cycles_over_roofline, ".2f"),
                      *([_fmt(r.measured_s, ".4g") + ("" if r.measured_verified in (None, True) else " [red]WRONG[/]")]
                        if measured else []))
        if k != len(result.layers) - 1:
            t.add_section()
    summary = geomeans(result)
    t.add_section()
    for name, g in summary.items():
        t.add_row("[bold]geomean[/]" if name == result.schedulers[0] else "", name,
                  _fmt(g["total_cycles"], ",.0f"), _fmt_energy_uj(g["total_energy_pj"]),
                  _fmt(100 * g["utilization_geomean"], ".1f") + "%", _fmt(g["total_dram_bytes"], ",.0f"),
                  _fmt(g["total_seconds"], ".2f"), _fmt(g["ratio_geomean_weighted"], ".3f"),
                  _fmt(g["bound_ratio_geomean"], ".2f"), _fmt(g["cycles_over_roofline_total"], ".2f"),
                  *([""] if measured else []))
    t.caption = ("geomean rows: totals = sum of repeat x value; util and ratio = geomeans weighted by layer "
                 f"repeats; seconds and traffic/bound unweighted; over {len(common_layers(result))} layers "
                 "where every scheduler succeeded; cycles/roofline: total cycles over total roofline cycles")
    return t


def print_table(result: CompareResult, console=None, title: str | None = None) -> None:
    """Print the table; when stdout is not a terminal, 160 columns wide rather than truncated to 80."""
    import sys

    from rich.console import Console

    if console is None:
        console = Console() if sys.stdout.isatty() else Console(width=160)
    console.print(table(result, title))


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


def plot(result: CompareResult, path) -> Path:
    """Grouped bars: per layer, each scheduler's cycles over the best cycles of that layer (1 = best)."""
    path = Path(path)
    groups = result.by_layer()
    n_layers, n_sched = len(result.layers), len(result.schedulers)
    fig = _figure(max(6.0, 0.5 * n_layers * max(n_sched, 2) * 0.6 + 2), 4.5)
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / n_sched
    for s, name in enumerate(result.schedulers):
        xs, ys = [], []
        for k, layer in enumerate(result.layers):
            rows = [r for r in groups[layer] if r.ok]
            best = min((r.cycles for r in rows), default=None)
            mine = next((r for r in rows if r.scheduler == name), None)
            if mine is not None and best:
                xs.append(k - 0.4 + width * (s + 0.5))
                ys.append(mine.cycles / best)
        ax.bar(xs, ys, width=width, label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(n_layers))
    ax.set_xticklabels(result.layers, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("cycles / best cycles of the layer")
    ax.set_title(f"{result.arch}: cycles normalized to the best scheduler per layer")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
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
