"""Tie-breaks: cosa against the vendor's tiling where their cycles tie, on DRAM bytes and energy.

Per layer of ResNet-50 on the gemmini preset under the latency objective: the
cost model's cycles, DRAM bytes and energy of cosa (the MIP, ties broken
lexicographically: ``cosa.baselines.objective``) and of gemmini-default (the
vendor's tiling), which tie-break won cosa's schedule (main solve, the
fewest-DRAM-bytes solve, ...), and a flag where the two schedules' cycles tie
within ``--tie`` (1 %, relative to the smaller) and cosa moves more DRAM bytes
or spends more energy than the vendor: the target is no flagged layer.
Numbers are the cost model's, not measurements.

    python bench/tie_breaks.py [--quick] [--layers a,b] [--jobs N] [--tie 0.01]
                               [--json out.json] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import math
import sys
import time

from results_section import run_stamp, save_outputs
from rich.console import Console
from rich.table import Table

from costmodel import preset
from cosa import compare
from workloads import zoo

SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed table (bench/results_section.py)
    {"table": 0, "column": "vendor/cosa cycles", "what": "the vendor's cost-model cycles over cosa's",
     "stats": ["geomean", "min", "max", "below:1"]},
    {"table": 0, "column": "flag", "what": "Layers where the cycles tie and cosa moves more bytes or spends more energy",
     "stats": ["equal:bytes", "equal:energy", "equal:bytes+energy"]},
]
QUICK_LAYERS = ["res2a_branch2b", "res3a_branch2c", "res4b_branch2a", "res4b_branch2b", "res5a_branch2b"]


def _fmt(x, spec: str) -> str:
    return format(x, spec) if isinstance(x, (int, float)) and math.isfinite(x) else "-"


def flag(cosa: dict, vendor: dict, tie: float) -> str:
    """"" when the cycles differ by more than ``tie`` (relative to the smaller) or cosa is no worse in bytes and
    energy; else what cosa loses on ("bytes", "energy" or "bytes+energy")."""
    low = min(cosa["cycles"], vendor["cycles"])
    if abs(cosa["cycles"] - vendor["cycles"]) > tie * low:
        return ""
    worse = [name for name, key in (("bytes", "dram_bytes"), ("energy", "energy_pj")) if cosa[key] > vendor[key]]
    return "+".join(worse)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"a subset: {', '.join(QUICK_LAYERS)}")
    ap.add_argument("--layers", help="comma-separated layer names (default: every distinct ResNet-50 layer)")
    ap.add_argument("--jobs", type=int, default=1, help="local processes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=60.0, help="MIP time limit per layer (s)")
    ap.add_argument("--tie", type=float, default=0.01, help="cycles within this fraction count as a tie")
    ap.add_argument("--json", help="write every number here")
    ap.add_argument("--results", help="write the printed table, date and machine to this Markdown file")
    args = ap.parse_args(argv)

    layers = zoo.network("resnet50")
    keep = args.layers.split(",") if args.layers else (QUICK_LAYERS if args.quick else None)
    if keep:
        unknown = sorted(set(keep) - {w.name for w in layers})
        if unknown:
            print(f"bench/tie_breaks.py: --layers: unknown ResNet-50 layer(s) {unknown}", file=sys.stderr)
            return 2
        layers = [w for w in layers if w.name in keep]
    arch = preset("gemmini")
    console = Console(width=200, record=True)
    date, machine = run_stamp()
    console.print(f"tie-breaks, {date}; {machine}; seed {args.seed}, jobs {args.jobs}"
                  + (", quick subset" if args.quick else ""))
    start = time.perf_counter()
    result = compare(layers, arch, ["cosa", "gemmini-default"], jobs=args.jobs, objective="latency",
                     time_limit_s=args.time_limit, progress=console.is_terminal, seed=args.seed)
    wall = time.perf_counter() - start

    table = Table(title=f"ResNet-50 on {arch.name}, objective latency: cosa against the vendor (cost model)")
    for col in ("layer", "x", "cycles cosa", "cycles vendor", "vendor/cosa cycles", "MB cosa", "MB vendor",
                "uJ cosa", "uJ vendor", "cosa tie-break", "s cosa", "flag"):
        table.add_column(col, justify="left" if col in ("layer", "cosa tie-break", "flag") else "right")
    rows, flagged, failed = [], [], []
    for name, pair in result.by_layer().items():
        by = {r.scheduler: r for r in pair}
        c, v = by["cosa"], by["gemmini-default"]
        if not (c.ok and v.ok):
            failed.append(f"{name} ({'cosa' if not c.ok else 'gemmini-default'}: {(c.error or v.error)[:80]})")
            continue
        cd, vd = c.to_dict(), v.to_dict()
        mark = flag(cd, vd, args.tie)
        if mark:
            flagged.append(f"{name} ({mark})")
        how = (c.extra or {}).get("tie_break", "?")
        table.add_row(name, str(c.repeat), _fmt(c.cycles, ",.0f"), _fmt(v.cycles, ",.0f"),
                      _fmt(v.cycles / c.cycles, ".3f"), _fmt(c.dram_bytes / 1e6, ".3f"),
                      _fmt(v.dram_bytes / 1e6, ".3f"), _fmt(c.energy_pj / 1e6, ",.1f"),
                      _fmt(v.energy_pj / 1e6, ",.1f"), how, _fmt(c.seconds, ".2f"), mark or "")
        rows.append({"layer": name, "repeat": c.repeat, "cosa": cd, "vendor": vd, "flag": mark, "tie_break": how})
    console.print(table)
    ties = [r for r in rows if abs(r["cosa"]["cycles"] - r["vendor"]["cycles"])
            <= args.tie * min(r["cosa"]["cycles"], r["vendor"]["cycles"])]
    total = lambda who, key: sum(r["repeat"] * r[who][key] for r in rows)
    console.print(f"layers whose cycles tie within {args.tie:.1%}: {len(ties)} of {len(rows)}; flagged (cosa moves "
                  f"more DRAM bytes or spends more energy there): {len(flagged)}"
                  + (f": {', '.join(flagged)}" if flagged else ""))
    if rows:
        console.print(f"network totals (repeat-weighted): cycles cosa/vendor "
                      f"{total('cosa', 'cycles') / total('vendor', 'cycles'):.3f}, DRAM bytes cosa/vendor "
                      f"{total('cosa', 'dram_bytes') / total('vendor', 'dram_bytes'):.3f}, energy cosa/vendor "
                      f"{total('cosa', 'energy_pj') / total('vendor', 'energy_pj'):.3f}; "
                      f"cosa seconds {sum(r['cosa']['seconds'] for r in rows):.1f} over {len(rows)} layers")
    if failed:
        console.print("failed: " + "; ".join(failed))
    save_outputs(name="tie_breaks", title="Tie-breaks", date=date, machine=machine, console=console,
                 command="python bench/tie_breaks.py" + (" --quick" if args.quick else "")
                 + (f" --layers {args.layers}" if args.layers else ""),
                 data={"args": vars(args), "rows": rows, "flagged": flagged, "failed": failed, "wall_s": wall},
                 json_path=args.json, results_path=args.results, summary=SUMMARY)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
