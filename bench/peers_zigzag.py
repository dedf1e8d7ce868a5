"""Peers: ZigZag's LOMA mapper and cost model beside our MIP scheduler and cost model (``bench/peers.py zigzag``).

For ResNet-50, MobileNet-V2 and BERT-base layers on the Eyeriss-like and Simba-like presets, per layer: the
cycles and energy of cosa's schedule and of LOMA's best mapping (``cosa.baselines.zigzag_mapper``), each in
our model and in ZigZag's; each search's seconds (wall and CPU, in one process, the layers in turn; with
``--repeat N`` every search runs N times, the tools in turn each round, and the fastest CPU time counts); and
where the two models price cosa's mapping differently, by how much and why (the count differences and
mechanisms of ``cosa.baselines.zigzag_compare``).  Before the layers, each tool searches a 16x16x16 matmul
once, untimed (one-time costs: imports, loading the solver), and before each timed search the process's heap
is collected and what survives frozen (``gc.freeze``), so that no search pays for scanning the objects another
left behind (one LOMA run leaves about 590,000).  A layer or arch ZigZag cannot express is a row with the
reason.  LOMA's mapping is read back exactly when our levels can place every loop where ZigZag
does; otherwise it is the nearest mapping (loops moved outwards) and its row says so::

    python3 bench/peers.py zigzag --quick --results bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

NETWORKS = ("resnet50", "mobilenet_v2", "bert_base_128")
QUICK = ("resnet50/res2a_branch2b", "mobilenet_v2/b3_dw", "bert_base_128/attention_context")
ARCHS = ("eyeriss", "simba")


def _layers(args):
    from workloads import zoo

    if args.layers:
        return [zoo.layer(n) for n in args.layers.split(",")]
    if args.quick:
        return [zoo.layer(n) for n in QUICK]
    return [w for net in NETWORKS for w in zoo.network(net)]


def quiet_heap() -> None:
    """Collect the heap and freeze what survives, so that the next timed search does not pay for scanning
    objects an earlier search (of either tool) left in this process."""
    gc.collect()
    gc.freeze()


def warm_up(arch, settings: list[str]) -> None:
    """Each tool searches a 16x16x16 matmul on ``arch`` once, untimed: imports and loading the solver are paid
    before the first layer's clock starts."""
    from cosa import SchedulingError, schedule
    from cosa.baselines.zigzag_mapper import loma
    from workloads import matmul

    tiny = matmul(M=16, N=16, K=16)
    for run in [lambda: schedule(tiny, arch, scheduler="cosa", bound=False)] + \
               [lambda s=s: loma(tiny, arch, setting=s) for s in settings]:
        try:
            run()
        except SchedulingError:  # a warm-up that cannot map the tiny layer has still loaded what it needs
            pass


def _timed(fn):
    quiet_heap()
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def run_layer(workload, arch, settings: list[str], time_limit_s: float, pad: float = 0.0,
              tie_tolerance: float | None = None, repeat: int = 1) -> dict:
    """One layer on one arch: cosa and LOMA in both models (numbers) or the reason it was skipped.
    ``repeat``: rounds of every search (the tools in turn each round); ``cpu_s`` is the fastest round's,
    ``cpu_rounds`` every round's."""
    from cosa import SchedulingError, schedule
    from cosa.baselines.zigzag_compare import count_differences, explain
    from cosa.baselines.zigzag_io import ZigZagConversionError
    from cosa.baselines.zigzag_mapper import build, loma, zigzag_evaluate
    from costmodel import evaluate

    row = {"layer": workload.name, "arch": arch.name}
    try:
        _, _, _, hw = build(workload, arch)
    except ZigZagConversionError as err:
        row["skip"] = str(err)
        return row
    try:
        extra = ({"pad": pad} if pad else {}) | ({"tie_tolerance": tie_tolerance} if tie_tolerance is not None else {})
        sched, wall, cpu = _timed(lambda: schedule(workload, arch, scheduler="cosa", time_limit_s=time_limit_s,
                                                   bound=False, **extra))
    except SchedulingError as err:
        row["skip"] = f"cosa found no schedule: {err}"
        return row
    try:
        theirs = zigzag_evaluate(sched.workload, arch, sched.mapping)
    except Exception as err:  # a ZigZag failure is a row with its reason, never a traceback
        row["skip"] = f"ZigZag cannot price cosa's mapping: {type(err).__name__}: {str(err).splitlines()[0]}"
        return row
    row["cosa"] = {"cycles": sched.cost.cycles, "energy_pj": sched.cost.energy_pj, "zigzag_cycles": theirs.cycles,
                   "zigzag_energy_pj": theirs.energy_pj, "wall_s": wall, "cpu_s": cpu, "zigzag": theirs.to_dict(),
                   "padded": sched.extra.get("padded", {}),
                   "why": explain(sched.workload, arch, sched.mapping, sched.cost, theirs, hw),
                   "differences": [d.to_dict() for d in count_differences(sched.workload, arch, sched.mapping,
                                                                          sched.cost, theirs, hw)]}
    # the same search without its tie-breaking solves (``tie_breaks=False``): its cycles, in a fraction of the time
    fast, wall, cpu = _timed(lambda: schedule(workload, arch, scheduler="cosa", time_limit_s=time_limit_s,
                                              bound=False, tie_breaks=False, **extra))
    row["cosa_no_ties"] = {"cycles": fast.cost.cycles, "energy_pj": fast.cost.energy_pj, "wall_s": wall,
                           "cpu_s": cpu}
    try:
        quick = zigzag_evaluate(fast.workload, arch, fast.mapping)
        row["cosa_no_ties"].update(zigzag_cycles=quick.cycles, zigzag_energy_pj=quick.energy_pj)
    except Exception as err:  # noqa: BLE001 - the row keeps its reason
        row["cosa_no_ties"]["error"] = f"ZigZag cannot price it: {type(err).__name__}: {str(err).splitlines()[0]}"
    for setting in settings:
        try:
            quiet_heap()
            got = loma(workload, arch, setting=setting)
        except SchedulingError as err:
            row[setting] = {"error": str(err)}
            continue
        row[setting] = {"zigzag_cycles": got.zigzag.cycles, "zigzag_energy_pj": got.zigzag.energy_pj,
                        "wall_s": got.wall_s, "cpu_s": got.cpu_s, "exact": got.mapping is not None and not got.moved,
                        "moved_loops": list(got.moved), "readback_error": got.readback_error,
                        "padded": {x: list(v) for x, v in got.padded.items()},
                        "level_order": [] if got.arch is arch else list(got.arch.level_names)}
        if got.mapping is not None:
            cost = evaluate(got.workload, got.arch, got.mapping)
            row[setting].update(cycles=cost.cycles, energy_pj=cost.energy_pj)
            if got.moved:  # how far the nearest mapping is from LOMA's in ZigZag's own model
                near = zigzag_evaluate(got.workload, got.arch, got.mapping)
                row[setting].update(adapted_zigzag_cycles=near.cycles, adapted_zigzag_energy_pj=near.energy_pj)
    _more_rounds(row, workload, arch, settings, repeat - 1,
                 dict(scheduler="cosa", time_limit_s=time_limit_s, bound=False, **extra))
    return row


def _more_rounds(row: dict, workload, arch, settings: list[str], rounds: int, options: dict) -> None:
    """``rounds`` more runs of every search of ``row``, the tools in turn each round: each search keeps its
    fastest CPU seconds (``cpu_s``, with the wall seconds of that round) and every round's (``cpu_rounds``).
    cosa's search is deterministic: a round that finds another schedule is an error."""
    from cosa import schedule
    from cosa.baselines.zigzag_mapper import loma

    runs = {"cosa": lambda: schedule(workload, arch, **options),
            "cosa_no_ties": lambda: schedule(workload, arch, tie_breaks=False, **options)}
    runs.update({s: (lambda s=s: loma(workload, arch, setting=s)) for s in settings if "error" not in row[s]})
    for key in runs:
        row[key]["cpu_rounds"] = [row[key]["cpu_s"]]
    for _ in range(rounds):
        for key, run in runs.items():
            if key.startswith("cosa"):
                got, wall, cpu = _timed(run)
                if got.cost.cycles != row[key]["cycles"] or got.cost.energy_pj != row[key]["energy_pj"]:
                    raise RuntimeError(f"{workload.name} on {arch.name}: {key} found another schedule in a "
                                       "later round; its search is meant to be deterministic")
            else:
                quiet_heap()
                got = run()
                wall, cpu = got.wall_s, got.cpu_s
            row[key]["cpu_rounds"].append(cpu)
            if cpu < row[key]["cpu_s"]:
                row[key].update(cpu_s=cpu, wall_s=wall)


def _n(x, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


NEAR = 0.01
"""A nearest mapping stands for LOMA's in our model when ZigZag prices its cycles within this of LOMA's own."""


def _readback_notes(z: dict) -> str:
    """How an exact read-back is stated: the dims ZigZag padded and the sibling-level order it needed."""
    notes = [f"{x} {b} padded to {c}" for x, (b, c) in z.get("padded", {}).items()]
    if z.get("level_order"):
        notes.append("levels as " + " > ".join(z["level_order"][1:]))
    return f" ({'; '.join(notes)})" if notes else ""


def schedule_table(rows: list[dict], arch: str, setting: str, what: str) -> str:
    """Cycles (``what`` "cycles") or energy (``"energy"``) of each tool's schedule in each model, on one arch."""
    key, zkey, scale, unit = (("cycles", "zigzag_cycles", 1.0, "") if what == "cycles"
                              else ("energy_pj", "zigzag_energy_pj", 1e-6, " uJ"))
    title = f"{what.capitalize()} on {arch}, LOMA {setting}: each tool's schedule in each model"
    lines = [title,
             f"| layer | cosa, ours{unit} | LOMA, ours{unit} | LOMA/cosa ours | cosa, ZigZag{unit} | "
             f"LOMA, ZigZag{unit} | cosa/LOMA ZigZag | LOMA read back |" + (" cosa CPU s | LOMA CPU s | LOMA s / cosa s | "
                                                      "cosa padded |" if what == "cycles" else ""),
             "|---|---:|---:|---:|---:|---:|---:|---|" + ("---:|---:|---:|---|" if what == "cycles" else "")]
    for r in rows:
        if r["arch"] != arch:
            continue
        if "skip" in r:
            lines.append(f"| {r['layer']} | skipped: {r['skip']} |" + " - |" * (6 + (4 if what == "cycles" else 0)))
            continue
        c, z = r["cosa"], r.get(setting, {})
        if "error" in z:
            cells = ["-", "-", _n(c[zkey] * scale), "-", "-", f"failed: {z['error']}"]
        else:
            # LOMA's mapping in our model: the one read back, exactly, or the nearest where ZigZag prices that
            # within NEAR of LOMA's own (else it is another schedule, shown in the read-back column only)
            priced = key in z and (z["exact"] or abs(z["adapted_zigzag_cycles"] / z["zigzag_cycles"] - 1) <= NEAR)
            ours = _n(z[key] * scale) if priced else "-"
            ratio = f"{z[key] / c[key]:.3f}" if priced else "-"
            if z["exact"]:
                back = "exact" + _readback_notes(z)
            elif z["readback_error"]:
                back = f"not expressible: {z['readback_error']}"
            else:
                near = z["adapted_" + zkey] / z[zkey]
                back = (f"nearest: {len(z['moved_loops'])} loop(s) moved, which ZigZag prices at {near:.3f}x LOMA's "
                        f"own" + ("" if priced else f"; ours {_n(z[key] * scale)}") + _readback_notes(z))
            cells = [ours, ratio, _n(c[zkey] * scale), _n(z[zkey] * scale), f"{c[zkey] / z[zkey]:.3f}", back]
        line = f"| {r['layer']} | {_n(c[key] * scale)} | " + " | ".join(cells) + " |"
        if what == "cycles":
            loma_cpu = "-" if "error" in z else f"{z['cpu_s']:.1f}"
            speed = "-" if "error" in z else f"{z['cpu_s'] / c['cpu_s']:.1f}"
            pads = "; ".join(f"{x} {b} to {p}" for x, (b, p) in c.get("padded", {}).items()) or "-"
            line += f" {c['cpu_s']:.1f} | {loma_cpu} | {speed} | {pads} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def no_ties_table(rows: list[dict], arch: str, settings: list[str]) -> str:
    """cosa without its tie-breaking solves beside cosa with them and LOMA: cycles in both models, seconds."""
    lines = [f"Without tie-breaks on {arch}: cosa's search stopped before its fewest-DRAM-bytes and least-energy "
             "solves",
             "| layer | no ties, ours | no ties/cosa ours | no ties uJ/cosa uJ ours | no ties, ZigZag | "
             + "".join(f"no ties/LOMA {s} ZigZag | " for s in settings) + "no ties CPU s | "
             + " | ".join(f"LOMA {s} s / no ties s" for s in settings) + " |",
             "|---|" + "---:|" * (5 + 2 * len(settings))]
    for r in rows:
        if r["arch"] != arch or "skip" in r or "cosa_no_ties" not in r:
            continue
        c, f = r["cosa"], r["cosa_no_ties"]
        priced = "zigzag_cycles" in f
        cells = [_n(f["cycles"]), f"{f['cycles'] / c['cycles']:.3f}", f"{f['energy_pj'] / c['energy_pj']:.3f}",
                 _n(f["zigzag_cycles"]) if priced else f.get("error", "-")]
        for s in settings:
            z = r.get(s, {})
            cells.append(f"{f['zigzag_cycles'] / z['zigzag_cycles']:.3f}" if priced and "zigzag_cycles" in z else "-")
        cells.append(f"{f['cpu_s']:.2f}")
        for s in settings:
            z = r.get(s, {})
            cells.append(f"{z['cpu_s'] / f['cpu_s']:.1f}" if "cpu_s" in z else "-")
        lines.append(f"| {r['layer']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def disagreement_table(rows: list[dict], arch: str) -> str:
    """cosa's mapping priced by both models on one arch: the ratios and why they differ."""
    lines = [f"Models on {arch}: cosa's mapping priced by ZigZag and by ours",
             "| layer | cycles ZigZag/ours | energy ZigZag/ours | why (cycle terms; largest count differences, ours vs "
             "ZigZag's, in words) |", "|---|---:|---:|---|"]
    for r in rows:
        if r["arch"] != arch or "skip" in r:
            continue
        c = r["cosa"]
        lines.append(f"| {r['layer']} | {c['zigzag_cycles'] / c['cycles']:.3f} | "
                     f"{c['zigzag_energy_pj'] / c['energy_pj']:.3f} | {c['why']} |")
    return "\n".join(lines) + "\n"


TARGETS = {"cosa_over_loma_zigzag_at_most": 1.02, "loma_over_cosa_seconds_at_least": 10,
           "models_disagree_above": 1.05, "models_disagree_below": 0.95}
"""The issue's targets, the thresholds of the summary (kept in the sidecar)."""

SUMMARY_WITH_TIES = [  # the sections recorded before the no-ties table
    {"each": True, "column": "LOMA/cosa ours", "what": "LOMA's over cosa's in our model",
     "stats": ["geomean", "min", "max", "below:1"]},
    {"each": True, "column": "cosa/LOMA ZigZag", "what": "cosa's over LOMA's in ZigZag's model",
     "stats": ["geomean", "min", "max", "above:1.02"]},
    {"each": True, "column": "LOMA s / cosa s", "what": "LOMA's CPU seconds over cosa's",
     "stats": ["geomean", "min", "below:10"]},
    {"each": True, "column": "cycles ZigZag/ours", "what": "ZigZag's cycles over ours for cosa's mapping",
     "stats": ["min", "max", "above:1.05"]},
    {"each": True, "column": "energy ZigZag/ours", "what": "ZigZag's energy over ours for cosa's mapping",
     "stats": ["min", "max", "above:1.05", "below:0.95"]},
]

NO_TIES_SUMMARY = [  # the table of cosa without its tie-breaking solves
    {"each": True, "column": "no ties/cosa ours", "what": "cosa's cycles without its tie-breaks over with them, "
     "in our model", "stats": ["min", "max", "above:1.02"]},
    {"each": True, "column": "no ties uJ/cosa uJ ours", "what": "cosa's energy without its tie-breaks over with "
     "them, in our model", "stats": ["geomean", "min", "max"]},
    {"each": True, "column": "no ties/LOMA default ZigZag", "what": "cosa's cycles without tie-breaks over LOMA "
     "default's, in ZigZag's model", "stats": ["geomean", "max", "above:1.02"]},
    {"each": True, "column": "no ties/LOMA large ZigZag", "what": "cosa's cycles without tie-breaks over LOMA "
     "large's, in ZigZag's model", "stats": ["geomean", "max", "above:1.02"]},
    {"each": True, "column": "LOMA default s / no ties s", "what": "LOMA default's CPU seconds over cosa's without "
     "tie-breaks", "stats": ["geomean", "min", "below:10"]},
    {"each": True, "column": "LOMA large s / no ties s", "what": "LOMA large's CPU seconds over cosa's without "
     "tie-breaks", "stats": ["geomean", "min", "below:10"]},
]


def report(rows: list[dict], settings: list[str], archs: list[str]) -> str:
    parts = []
    for arch in archs:
        for setting in settings:
            parts.append(schedule_table(rows, arch, setting, "cycles"))
            parts.append(schedule_table(rows, arch, setting, "energy"))
        parts.append(no_ties_table(rows, arch, settings))
        parts.append(disagreement_table(rows, arch))
    return "\n".join(parts)


NOTES = ("Both searches minimise latency.  `ours` prices a mapping with `costmodel.evaluate`, `ZigZag` with "
         "ZigZag's cost model on the converted inputs (`cosa.baselines.zigzag_io`: a memory our arch gives no "
         "bandwidth gets a port per operand and direction there, since ZigZag serialises the transfers that share "
         "a port and ours sets no such limit).  `LOMA/cosa ours` > 1 and "
         "`cosa/LOMA ZigZag` < 1 favour cosa.  cosa may pad a dim by up to `--pad` of its bound where the padded "
         "factors fill the array better (`cosa.mip.padding`, `cosa padded`); ZigZag pads as it needs, and both "
         "tools' padded mappings are priced, in both models, on the padded layer (extra iterations on idle units; "
         "our model then also moves the padded outputs and counts the padded MACs' energy, which biases the "
         "energy against whoever pads).  `LOMA read back`: `exact` when one of our level orders places every loop "
         "where ZigZag does (`levels as`: an order of the arch's sibling levels other than the preset's, "
         "`costmodel.arch.sibling_orders`, the same hardware listed another way); `nearest` when ZigZag keeps a "
         "loop inside one operand's tile and outside another's in a memory our levels give both (its loops "
         "moved), shown in our model only when ZigZag prices that nearest mapping within 1 % of LOMA's own; "
         "`not expressible` with the reason.  Seconds are CPU seconds, in one process, on a machine shared with "
         "other jobs: the fastest of the rounds the command line's `--repeat` asks for (one when it does not; "
         "the tools in turn each round), after each tool has searched a small matmul once untimed and with the "
         "heap collected and frozen before each search (so that no search pays for scanning objects another "
         "left behind); cosa's include building the MIP and its padded solves.  `why` lists "
         "ZigZag's cycle terms and the access counts that differ most in energy, with the mechanism "
         "(`cosa.baselines.zigzag_compare.MECHANISMS`).  `Without tie-breaks`: the same cosa search run again "
         "with `tie_breaks=False` (`cosa schedule --no-tie-breaks`), which stops before the solves that pick, "
         "among schedules within the tie tolerance, the fewest DRAM bytes and then the least energy; its "
         "schedule priced in both models and its CPU seconds beside LOMA's.")


ROOM_NOTE = ("  With `--refill-needs-room` both Eyeriss and Simba carry ZigZag's rule for double buffering in our "
             "model and MIP (`params[\"refill_needs_room\"]`): a transfer from a double-buffered level (DRAM) into "
             "the next level overlaps compute only while that level's tiles fill at most half of it, else it stalls "
             "(`costmodel.evaluate.refills_without_room`), and the MIP keeps those levels' tiles within half "
             "(`Arch.usable_capacity`); without it ours overlaps every such transfer, as Timeloop's does.")


FILL_NOTE = ("  With `--fill-before-compute` our model also waits for the first tiles before the loops and for the "
             "output's last tiles after them (`params[\"fill_before_compute\"]`, `costmodel.onload`: ZigZag's "
             "onloading and offloading in our tiles and bandwidths; a tile loaded once is part of that fill, "
             "overlapped with the loops where its port is idle, as in ZigZag), and the scheduler, whose MIP does "
             "not price the fill, also tries factor moves and re-solves with the slowest-filling level's budget "
             "halved or the room rule lifted, choosing by the cost model (`cosa.mip.fill`).")


WINDOWS_NOTE = ("  With `--whole-windows` our model counts a changed input tile as ZigZag does, its whole window "
                "moved again (`params[\"delta_fetch\"]` off), not only the rows the sliding window lacks, as "
                "Timeloop's model and Simba's preset count them; the Eyeriss preset already counts whole windows.")


def zigzag_rules(arch, refill_needs_room: bool = False, fill_before_compute: bool = False,
                 whole_windows: bool = False):
    """``arch`` with ZigZag's rules in our model and scheduler, each one a flag of the bench.

    ``refill_needs_room``: a refill from a double-buffered level overlaps the loops only into a level filled at
    most half (``costmodel.evaluate.refills_without_room``); ``fill_before_compute``: the first fill and the
    last drain before and after the loops (``costmodel.onload``); ``whole_windows``: a changed input tile moves
    its whole window, halo included (``delta_fetch`` off)."""
    params = dict(arch.params)
    if refill_needs_room:
        params["refill_needs_room"] = True
    if fill_before_compute:
        params["fill_before_compute"] = True
    if whole_windows:
        params["delta_fetch"] = False
    return dataclasses.replace(arch, params=params) if params != arch.params else arch


def main(args) -> int:
    from costmodel import preset
    from cosa.baselines.zigzag_mapper import EXTRA, SETTINGS, zigzag_version

    if args.tie_tolerance is not None and not 0 <= args.tie_tolerance < 1:
        print(f"peers zigzag: --tie-tolerance: must be in [0, 1), got {args.tie_tolerance:g}", file=sys.stderr)
        return 2
    version = zigzag_version()
    if version is None:
        print(f"peers zigzag: ZigZag is not installed: {EXTRA}", file=sys.stderr)
        return 2
    settings = args.settings.split(",")
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        print(f"peers zigzag: --settings: unknown {unknown}; choose from {sorted(SETTINGS)}", file=sys.stderr)
        return 2
    if args.repeat < 1:
        print(f"peers zigzag: --repeat: must be at least 1, got {args.repeat}", file=sys.stderr)
        return 2
    archs = args.archs.split(",")
    rows = []
    for arch_name in archs:
        arch = zigzag_rules(preset(arch_name), args.refill_needs_room, args.fill_before_compute, args.whole_windows)
        warm_up(arch, settings)
        for w in _layers(args):
            rows.append(run_layer(w, arch, settings, args.time_limit, args.pad, args.tie_tolerance, args.repeat))
            r = rows[-1]
            print(f"{arch_name:8s} {w.name:24s} " + (f"skipped: {r['skip']}" if "skip" in r else
                  f"cosa {r['cosa']['cycles']:>12,.0f} ({r['cosa']['cpu_s']:.1f} s)  " + "  ".join(
                      f"{s} " + (r[s]['error'] if 'error' in r[s] else
                                 f"{r[s]['zigzag_cycles']:>12,.0f} ZigZag ({r[s]['cpu_s']:.1f} s)")
                      for s in settings)), file=sys.stderr, flush=True)
    text = report(rows, settings, archs)
    print(text)
    data = {"zigzag": version, "settings": {s: SETTINGS[s] for s in settings}, "targets": TARGETS, "rows": rows}
    if args.json or args.results:
        from results_section import run_stamp, save_outputs

        date, machine = run_stamp()
        command = ("python bench/peers.py zigzag" + (" --quick" if args.quick else "")
                   + (f" --layers {args.layers}" if args.layers else "") + f" --archs {args.archs} --settings "
                   f"{args.settings} --time-limit {args.time_limit:g} --pad {args.pad:g}"
                   + (" --refill-needs-room" if args.refill_needs_room else "")
                   + (" --fill-before-compute" if args.fill_before_compute else "")
                   + (" --whole-windows" if args.whole_windows else "")
                   + (f" --tie-tolerance {args.tie_tolerance:g}" if args.tie_tolerance is not None else "")
                   + (f" --repeat {args.repeat}" if args.repeat > 1 else "")
                   + ("" if args.section == "peers_zigzag" else f" --section {args.section}"))
        title = "ZigZag peers: cosa against ZigZag's LOMA, in both cost models (`bench/peers.py zigzag`)"
        if args.refill_needs_room:
            title += ", ZigZag's double-buffering rule in ours too"
        if args.fill_before_compute:
            title += ", ZigZag's first fill and last drain in ours too"
        if args.whole_windows:
            title += ", ZigZag's whole input windows in ours too"
        if args.tie_tolerance is not None:
            title += f", cosa's tie tolerance {args.tie_tolerance:g}"
        if not args.layers and not args.quick:
            title += ", every layer of the networks"
        save_outputs(name=args.section, title=title, date=date, machine=machine, command=command, console=text,
                     data=data, json_path=args.json, results_path=args.results,
                     notes=NOTES + (ROOM_NOTE if args.refill_needs_room else "")
                     + (FILL_NOTE if args.fill_before_compute else "")
                     + (WINDOWS_NOTE if args.whole_windows else ""), summary=SUMMARY_WITH_TIES + NO_TIES_SUMMARY,
                     packages=("numpy", "scipy", "highspy", "zigzag-dse"))
    return 0


def add_parser(sub) -> None:
    """The ``zigzag`` subcommand of ``bench/peers.py``."""
    p = sub.add_parser("zigzag", help="ZigZag's LOMA and cost model against cosa and ours")
    p.add_argument("--quick", action="store_true", help=f"one layer per network ({', '.join(QUICK)}): fits 2 cores")
    p.add_argument("--layers", help="zoo names network/layer,... (default: every distinct layer of the networks)")
    p.add_argument("--archs", default=",".join(ARCHS))
    p.add_argument("--settings", default="default", help="LOMA settings, comma-separated: default, large")
    p.add_argument("--time-limit", type=float, default=30.0, help="cosa's MIP time limit per layer (s)")
    p.add_argument("--pad", type=float, default=0.125,
                   help="cosa may pad a dim by up to this fraction to fill the array (0: never; ZigZag pads as it needs)")
    p.add_argument("--refill-needs-room", action="store_true",
                   help="ZigZag's double-buffering rule in our model and MIP (a refill overlaps only into a level "
                        "filled at most half)")
    p.add_argument("--fill-before-compute", action="store_true",
                   help="ZigZag's first fill and last drain in our model (before and after the loops), which the "
                        "scheduler then looks to shrink")
    p.add_argument("--whole-windows", action="store_true",
                   help="ZigZag's input counts in our model: a changed input tile moves its whole window again "
                        "(Simba's preset counts only the new rows, as Timeloop does)")
    p.add_argument("--tie-tolerance", type=float, default=None,
                   help="cosa's tie tolerance (share of the latency it may trade for fewer DRAM bytes, then less "
                        "energy; 0: latency alone, as LOMA's objective; default the scheduler's 2%%)")
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds of every search, the tools in turn each round; each keeps its fastest CPU time")
    p.add_argument("--json")
    p.add_argument("--results", help="record the tables in this results file (bench/RESULTS.md)")
    p.add_argument("--section", default="peers_zigzag",
                   help="the results section's name (peers_zigzag_networks for a run over whole networks)")
    p.set_defaults(func=main)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_parser(parser.add_subparsers(dest="cmd", required=True))
    ns = parser.parse_args(["zigzag", *sys.argv[1:]])
    sys.exit(ns.func(ns))
