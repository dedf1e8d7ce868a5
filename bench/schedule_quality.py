"""Schedule quality: CoSA's MIP against the vendor heuristic, random search and exhaustive search.

Per layer of ResNet-50 and of the BERT-base GEMMs (sequence 128), on the
gemmini (weight-stationary) and simba presets: cycles, utilization, DRAM
traffic over its lower bound, seconds to solution, and each scheduler's
cycles over the MIP's.  The random baseline gets ``--random-factor`` (10) times
the MIP's own build + solve time on the same layer.  gemmini-default runs on
gemmini only (it is Gemmini's library heuristic).  Exhaustive search runs
where the mapspace has at most ``--exhaustive-limit`` points (the real layers
have far more: the table gives a lower bound of their size); a last table
checks every scheduler against the exhaustive optimum on tiny GEMMs (objective
energy there: their cycles all tie at the ideal).

    python bench/schedule_quality.py [--quick] [--archs gemmini,simba] [--jobs N]
                                     [--json out.json] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

from results_section import run_stamp, save_outputs
from rich.console import Console
from rich.table import Table

from costmodel import preset
from cosa import compare, report
from cosa.baselines import MapSpace
from workloads import zoo

NETWORKS = {"resnet50": "ResNet-50", "bert_base_128": "BERT-base GEMMs (seq 128)"}
QUICK_LAYERS = {"resnet50": ["res2a_branch2b", "res3a_branch2c", "res4b_branch2a", "res5a_branch2b"],
                "bert_base_128": ["qkv_projection", "attention_scores"]}


def _layers(network: str, quick: bool):
    layers = zoo.network(network)
    if quick:
        keep = QUICK_LAYERS[network]
        layers = [w for w in layers if w.name in keep]
    return layers


def _geo(values) -> float:
    vals = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else math.nan


def _fmt(x, spec: str) -> str:
    return format(x, spec) if x is not None and isinstance(x, (int, float)) and math.isfinite(x) else "-"


def _exhaustive_rows(layers, arch, limit: int, seed: int):
    """Exhaustive search on the layers whose mapspace fits ``limit``; the others get their size bound."""
    out = {}
    for w in layers:
        space = MapSpace(w, arch)
        size = space.size_lower_bound()
        if size <= limit:
            size = space.exhaustive_size()
        if size > limit:
            out[w.name] = {"fits": False, "space_at_least": size}
            continue
        res = compare([w], arch, ["exhaustive"], progress=False, seed=seed)
        row = res.rows[0]
        out[w.name] = {"fits": True, "space": size, "cycles": row.cycles, "seconds": row.seconds, "error": row.error}
    return out


def run_network(network: str, arch_name: str, args, console: Console) -> dict:
    arch = preset(arch_name)
    layers = _layers(network, args.quick)
    # cosa: the MIP warm-started from the best baseline mapping (the vendor's on gemmini), as `cosa schedule`
    # runs it; cosa-cold: the same MIP with no start, to show what the start contributes
    schedulers = ["cosa", "cosa-cold"] + (["gemmini-default"] if arch_name == "gemmini" else []) + ["random"]
    start = time.perf_counter()
    result = compare(layers, arch, schedulers, jobs=args.jobs, objective="latency", time_limit_s=args.time_limit,
                     progress=console.is_terminal, seed=args.seed, random_time_factor=args.random_factor)
    exhaustive = _exhaustive_rows(layers, arch, args.exhaustive_limit, args.seed)
    wall = time.perf_counter() - start

    title = f"{NETWORKS[network]} on {arch.name}: cycles over the MIP's (cosa = 1)"
    table = Table(title=title)
    short = {"cosa": "cosa", "cosa-cold": "cold", "gemmini-default": "vendor", "random": "random"}
    for col in ["layer", "x"] + [f"cycles {short[s]}" for s in schedulers] + \
            [f"{short[s]}/cosa" for s in schedulers[1:]] + ["util cosa", "traffic/bound cosa"] + \
            [f"s {short[s]}" for s in schedulers] + ["exhaustive/cosa"]:
        table.add_column(col, justify="left" if col == "layer" else "right")
    per_layer = []
    for name, rows in result.by_layer().items():
        by = {r.scheduler: r for r in rows}
        mip = by["cosa"]
        rel = {s: (by[s].cycles / mip.cycles if by[s].ok and mip.ok else math.nan) for s in schedulers[1:]}
        ex = exhaustive[name]
        ex_text = (f"{ex['cycles'] / mip.cycles:.3f}x" if ex["fits"] and ex.get("cycles") and mip.ok
                   else f"n/a (>= {ex['space_at_least']:.1e})" if not ex["fits"] else "failed")
        table.add_row(name, str(mip.repeat), *[_fmt(by[s].cycles, ",.0f") for s in schedulers],
                      *[_fmt(rel[s], ".3f") for s in schedulers[1:]], _fmt(100 * mip.utilization, ".1f") + "%",
                      _fmt(mip.bound_ratio, ".2f"), *[_fmt(by[s].seconds, ".2f") for s in schedulers], ex_text)
        per_layer.append({"layer": name, "repeat": mip.repeat, "relative": rel, "exhaustive": ex,
                          "rows": {s: by[s].to_dict() for s in schedulers}})
    g = report.geomeans(result)
    geo_rel = {s: _geo([p["relative"][s] for p in per_layer]) for s in schedulers[1:]}
    geo_rel_w = {s: math.exp(sum(p["repeat"] * math.log(p["relative"][s]) for p in per_layer
                                 if math.isfinite(p["relative"][s]))
                             / max(1, sum(p["repeat"] for p in per_layer if math.isfinite(p["relative"][s]))))
                 for s in schedulers[1:]}
    table.add_section()
    table.add_row("geomean", "", *[_fmt(g[s]["total_cycles"], ",.0f") for s in schedulers],
                  *[_fmt(geo_rel[s], ".3f") for s in schedulers[1:]],
                  _fmt(100 * g["cosa"]["utilization_geomean"], ".1f") + "%",
                  _fmt(g["cosa"]["bound_ratio_geomean"], ".2f"),
                  *[_fmt(g[s]["total_seconds"], ".1f") for s in schedulers], "")
    table.caption = ("cosa = the MIP warm-started from the best baseline mapping; cold = the MIP without a start.  "
                     + ("vendor = gemmini-default.  " if "gemmini-default" in schedulers else "")
                     + "x: repeats in the network.  geomean row: cycles = network totals (sum of repeat x cycles); "
                     "x/cosa = geomean over distinct layers (repeat-weighted: "
                     + ", ".join(f"{s} {_fmt(geo_rel_w[s], '.3f')}" for s in schedulers[1:])
                     + "); util = repeat-weighted geomean; seconds = sums over distinct layers.  "
                     f"random budget: {args.random_factor:g}x the MIP's seconds per layer.")
    console.print(table)
    # the MIP's own word on each layer: solved to optimality, or stopped by the clock (and what it returned then)
    stopped, returned_start = [], []
    for p in per_layer:
        row = p["rows"]["cosa"]
        returned = (row.get("extra") or {}).get("returned", "mip")
        if row.get("status") != "optimal":
            stopped.append(f"{p['layer']} ({row.get('status')}, returned {returned})")
        if returned != "mip":
            returned_start.append(f"{p['layer']} ({returned})")
    mip_seconds = sorted(p["rows"]["cosa"]["seconds"] for p in per_layer if p["rows"]["cosa"].get("seconds") is not None)
    console.print(f"cosa: median MIP time {_fmt(statistics.median(mip_seconds) if mip_seconds else None, '.2f')} s per "
                  f"layer; not proven optimal within {args.time_limit:g} s: {', '.join(stopped) or 'none'}; "
                  f"returned its warm start rather than its own solution: {', '.join(returned_start) or 'none'}")
    return {"network": network, "arch": arch.name, "schedulers": schedulers, "layers": per_layer,
            "geomean_relative_to_cosa": geo_rel, "geomean_relative_to_cosa_weighted": geo_rel_w,
            "summary": g, "wall_s": wall, "compare": report.to_json(result)}


TINY_LAYERS = (("mm_4x8x4", 4, 8, 4), ("mm_6x6x6", 6, 6, 6), ("mm_8x4x8", 8, 4, 8))


def run_tiny(args, console: Console) -> dict:
    """Ground truth: tiny GEMMs on a 2 x 2 Gemmini with 1 KiB memories, where exhaustive search fits.
    Objective energy: every scheduler reaches the ideal cycles on them, energies differ."""
    from workloads import matmul

    arch = preset("gemmini", dim=2, scratchpad_kib=1, accumulator_kib=1)
    layers = [matmul(name, M=m, N=n, K=k) for name, m, n, k in TINY_LAYERS]
    result = compare(layers, arch, ["cosa", "gemmini-default", "random", "exhaustive"], jobs=args.jobs,
                     objective="energy", time_limit_s=args.time_limit, progress=console.is_terminal,
                     seed=args.seed, random_time_factor=args.random_factor)
    console.print(report.table(result, title="Tiny GEMMs on gemmini(dim=2, 1 KiB scratchpad, 1 KiB accumulator), "
                                             "objective energy (latency ties on all of them): every scheduler "
                                             "against the exhaustive optimum"))
    spaces = {r.layer: r.extra.get("space_size") for r in result.rows if r.scheduler == "exhaustive" and r.ok}
    console.print("mapspace sizes (factorizations x cost-relevant orders): "
                  + ", ".join(f"{k} {v:,}" for k, v in spaces.items()))
    return {"arch": "gemmini(dim=2, 1 KiB, 1 KiB)", "compare": report.to_json(result)}


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"each": True, "column": "vendor/cosa", "what": "gemmini-default's cost-model cycles over cosa's",
     "stats": ["geomean", "min", "max", "below:1"]},
    {"each": True, "column": "cold/cosa", "what": "The MIP without a start over the warm-started MIP",
     "stats": ["min", "max", "below:1"]},
    {"each": True, "column": "random/cosa", "what": "Random search over cosa", "stats": ["geomean", "min"]},
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a subset: 4 ResNet-50 layers and 2 BERT GEMMs")
    ap.add_argument("--archs", default="gemmini,simba")
    ap.add_argument("--networks", default=",".join(NETWORKS))
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=60.0, help="MIP time limit per layer (s)")
    ap.add_argument("--random-factor", type=float, default=10.0, help="random budget over the MIP's seconds")
    ap.add_argument("--exhaustive-limit", type=int, default=20_000)
    ap.add_argument("--no-tiny", action="store_true", help="skip the tiny GEMMs checked by exhaustive search")
    ap.add_argument("--json", help="write every number here")
    ap.add_argument("--results", help="write the printed tables, date and machine to this Markdown file")
    args = ap.parse_args(argv)

    console = Console(width=200, record=True)
    date, machine = run_stamp()
    console.print(f"schedule quality, {date}; {machine}; seed {args.seed}, jobs {args.jobs}"
                  + (", quick subset" if args.quick else ""))
    runs = []
    for arch_name in [a.strip() for a in args.archs.split(",") if a.strip()]:
        for network in [n.strip() for n in args.networks.split(",") if n.strip()]:
            runs.append(run_network(network, arch_name, args, console))
    tiny = None if args.no_tiny else run_tiny(args, console)
    save_outputs(name="schedule_quality", title="Schedule quality", date=date, machine=machine, console=console,
                 command="python bench/schedule_quality.py " + _result_options(args, ap),
                 data={"args": vars(args), "runs": runs, "tiny": tiny}, json_path=args.json,
                 results_path=args.results, summary=SUMMARY)
    return 0


def _result_options(args, parser) -> str:
    """The options that change the numbers (not where they are written), when not at their defaults."""
    out = []
    for action in parser._actions:
        dest = action.dest
        if dest in ("help", "json", "results") or not action.option_strings:
            continue
        value = getattr(args, dest)
        if value != action.default:
            flag = action.option_strings[-1]
            out.append(flag if value is True else f"{flag} {value}")
    return " ".join(out)




if __name__ == "__main__":
    sys.exit(main())
