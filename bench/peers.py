"""Peers: our schedules and cost model against Timeloop's model (and mapper) on CoSA's Simba-like arch.

``record``: for every distinct ResNet-50 layer and a few AlexNet and DeepBench
layers, schedule with cosa (or take the mappings of ``--mappings``), run
timeloop-model (``TIMELOOP_MODEL`` or ``--timeloop-model``) on the exported
mapping with the arch file, and write the recorded outputs (Timeloop's cycles,
energy and per-level, per-tensor access counts and per-access energies) with
our model's numbers to a JSON file, the test data of
``tests/costmodel/test_timeloop_oracle.py``::

    TIMELOOP_MODEL=/path/to/timeloop-model python3 bench/peers.py record \\
        --arch ../shared/data/arch/cosa-simba.yaml --workloads ../shared/data/cosa-workloads \\
        --version "NVlabs/timeloop v3.0.3 (6b41058f), PAT energy" --out tests/data/timeloop/simba.json

``mapper``: timeloop-mapper (``TIMELOOP_MAPPER``) on the recorded layers with
CoSA's mapspace constraints, stopped after ``--search-size`` valid mappings,
against our schedules; both priced by timeloop-model.

``zigzag``: ZigZag's LOMA mapper and cost model against cosa and ours (``bench/peers_zigzag.py``).

``summary FILE``: per-layer agreement (our cycles, counts and energy priced
with Timeloop's per-access energies, against Timeloop's), as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LAYER_SETS = {  # (network, file or layer list under the CoSA workloads folder, how many layers)
    "resnet50": ("resnet50_graph/unique_layers.yaml", None),
    "alexnet": ("alexnet_graph/unique_layers.yaml", 3),
    "deepbench": (["deepbench_graph/01_DeepSpeech.yaml", "deepbench_graph/07_OCR.yaml",
                   "deepbench_graph/16_Vision.yaml"], None),
}

LEVEL_KEYS = ("reads", "fills", "updates")


def layers(workloads_dir: Path, networks: list[str]):
    from workloads import load

    out = []
    for net in networks:
        files, count = LAYER_SETS[net]
        nests = [n for f in ([files] if isinstance(files, str) else files) for n in load(workloads_dir / f)]
        out.extend((net, n) for n in nests[:count])
    return out


def timeloop_counts(stats: dict) -> dict:
    """Timeloop's counts summed over instances: {level: {tensor: {reads, fills, updates}}}."""
    out = {}
    for level, lv in stats["levels"].items():
        for tensor, t in lv["tensors"].items():
            n = t.get("instances", 1)
            out.setdefault(level, {})[tensor] = {k: t.get(k, 0) * n for k in LEVEL_KEYS}
    return out


def our_counts(cost) -> dict:
    """Ours in Timeloop's terms: fills, updates = writes - fills, reads."""
    return {level: {t: {"reads": a.reads, "fills": a.fills, "updates": a.writes - a.fills} for t, a in per.items()}
            for level, per in cost.accesses.items()}


def timeloop_energy_table(stats: dict, level_names) -> dict:
    """Timeloop's per-access energies as our energy table (its per-scalar-access figure per level)."""
    table = {}
    for name in level_names:  # the level's energy over its accesses (PAT prices every tensor alike)
        tensors = stats["levels"].get(name, {}).get("tensors", {}).values()
        energy = sum(t.get("energy_pj", 0.0) for t in tensors)
        words = sum((t.get("reads", 0) + t.get("fills", 0) + t.get("updates", 0)) * t.get("instances", 1)
                    for t in tensors)
        pj = energy / words if words else 0.0
        table[name] = {"read": pj, "write": pj, "update": pj}
    macs = stats.get("computes") or 1
    table["MAC"] = {"compute": stats.get("mac_energy_pj", 0.0) / macs}
    return table


def record(args) -> int:
    from costmodel import evaluate, load_arch
    from mappings import mapping_from_dict, to_timeloop
    from mappings.timeloop import run_timeloop_model, timeloop_problem
    from cosa.scheduler import schedule

    binary = args.timeloop_model or os.environ.get("TIMELOOP_MODEL")
    if not binary:
        print("peers: no timeloop-model (set TIMELOOP_MODEL or --timeloop-model)", file=sys.stderr)
        return 2
    arch = load_arch(args.arch)
    given = {}
    if args.mappings:
        given = {(e["network"], e["layer"]): e for e in json.loads(Path(args.mappings).read_text())}
    entries = []
    work = Path(args.workdir or tempfile.mkdtemp(prefix="timeloop-"))
    for net, w in layers(Path(args.workloads), args.networks.split(",")):
        t0 = time.time()
        if (net, w.name) in given:
            mapping, solve_s = mapping_from_dict(given[(net, w.name)]["mapping"], arch), given[(net, w.name)].get("t")
        else:
            mapping = schedule(w, arch, scheduler="cosa", objective="latency", time_limit_s=args.time_limit).mapping
            solve_s = time.time() - t0
        stats = run_timeloop_model(binary, args.arch, w, mapping, arch, work / f"{net}-{w.name}")
        no_links = run_timeloop_model(binary, args.arch, w, mapping, arch, work / f"{net}-{w.name}-nolinks",
                                      env={"TIMELOOP_DISABLE_LINK_TRANSFERS": "1"})
        cost = evaluate(w, arch, mapping)
        entries.append({"network": net, "layer": w.name, "problem": timeloop_problem(w)["problem"],
                        "mapping": to_timeloop(mapping, w, arch)["mapping"], "solve_s": solve_s,
                        "timeloop": stats, "timeloop_no_link_transfers": no_links})
        print(f"{net:10s} {w.name:22s} timeloop {stats['cycles']:>12,.0f}  ours {cost.cycles:>12,.0f}", flush=True)
    doc = {"timeloop": args.version, "arch": Path(args.arch).name, "layers": entries}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


def agreement(entry: dict, arch) -> dict:
    """Our model on a recorded entry against Timeloop's numbers."""
    import dataclasses

    from costmodel import evaluate
    from mappings import from_timeloop
    from workloads.loaders import parse_document

    w = parse_document({"problem": entry["problem"]}, entry["layer"])[0]
    mapping = from_timeloop({"mapping": entry["mapping"]}, w, arch)
    tl = entry["timeloop"]
    table = timeloop_energy_table(tl, arch.level_names)
    priced = dataclasses.replace(arch, params={**arch.params, "energy_table": table})
    cost = evaluate(w, arch, mapping)
    energy = evaluate(w, priced, mapping).energy_pj
    return {"layer": entry["layer"], "network": entry["network"], "ours_cycles": cost.cycles,
            "timeloop_cycles": tl["cycles"], "cycles_err": cost.cycles / tl["cycles"] - 1,
            "ours_energy_pj": energy, "timeloop_energy_pj": tl["energy_pj"],
            "energy_err": energy / tl["energy_pj"] - 1, "ours": our_counts(cost), "theirs": timeloop_counts(tl)}


def summary(args) -> int:
    from costmodel import load_arch, preset

    doc = json.loads(Path(args.file).read_text())
    arch = load_arch(args.arch) if args.arch else preset("simba")
    rows = [agreement(e, arch) for e in doc["layers"]]
    print(f"Timeloop: {doc['timeloop']}; arch {doc['arch']}\n")
    print("| network | layer | Timeloop cycles | ours | err | Timeloop energy uJ | ours (its pJ/access) | err |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['network']} | {r['layer']} | {r['timeloop_cycles']:,.0f} | {r['ours_cycles']:,.0f} | "
              f"{r['cycles_err']:+.2%} | {r['timeloop_energy_pj'] / 1e6:,.2f} | {r['ours_energy_pj'] / 1e6:,.2f} | "
              f"{r['energy_err']:+.2%} |")
    print(f"\ntotal cycles: Timeloop {sum(r['timeloop_cycles'] for r in rows):,.0f}, "
          f"ours {sum(r['ours_cycles'] for r in rows):,.0f}; median |energy err| "
          f"{statistics.median(abs(r['energy_err']) for r in rows):.2%}")
    return 0


def run_mapper(binary: str, arch_file: str, mapspace_file: str, problem: dict, workdir: Path, search_size: int,
               algorithm: str = "random-pruned", timeout_s: float = 900.0) -> dict:
    """timeloop-mapper on one recorded problem (``mappings.timeloop.run_timeloop_mapper_files``): its best
    mapping's cycles and energy and its wall time (s)."""
    from mappings.timeloop import run_timeloop_mapper_files

    _, out, wall = run_timeloop_mapper_files(binary, arch_file, {"problem": problem} if "problem" not in problem
                                             else problem, mapspace_file, workdir, search_size, timeout_s, algorithm)
    return {"cycles": out["cycles"], "energy_pj": out["energy_pj"], "wall_s": wall}


def mapper(args) -> int:
    """timeloop-mapper against our recorded schedules (both priced by timeloop-model)."""
    binary = args.timeloop_mapper or os.environ.get("TIMELOOP_MAPPER")
    if not binary:
        print("peers: no timeloop-mapper (set TIMELOOP_MAPPER or --timeloop-mapper)", file=sys.stderr)
        return 2
    doc = json.loads(Path(args.data).read_text())
    wanted = args.layers.split(",") if args.layers else None
    work = Path(args.workdir or tempfile.mkdtemp(prefix="timeloop-mapper-"))
    rows = []
    for e in doc["layers"]:
        if wanted and f"{e['network']}:{e['layer']}" not in wanted:
            continue
        got = run_mapper(binary, args.arch, args.mapspace, e["problem"], work / f"{e['network']}-{e['layer']}",
                         args.search_size, args.algorithm)
        rows.append({"network": e["network"], "layer": e["layer"], "cosa_cycles": e["timeloop"]["cycles"],
                     "cosa_s": e.get("solve_s"), "mapper_cycles": got["cycles"], "mapper_s": got["wall_s"],
                     "cosa_energy_pj": e["timeloop"]["energy_pj"], "mapper_energy_pj": got["energy_pj"]})
        r = rows[-1]
        print(f"{r['network']:10s} {r['layer']:22s} cosa {r['cosa_cycles']:>10,.0f} ({r['cosa_s'] or 0:.1f} s)  "
              f"timeloop-mapper {r['mapper_cycles']:>10,.0f} ({r['mapper_s']:.1f} s)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"mapper": f"{args.algorithm}, search-size {args.search_size}, "
                                                         "1 thread", "rows": rows}, indent=1) + "\n")
    if args.results:
        from results_section import run_stamp, save_outputs

        date, machine = run_stamp()
        save_outputs(name="peers", title="Timeloop peers: cosa against timeloop-mapper", date=date, machine=machine,
                     command=f"TIMELOOP_MAPPER=... python bench/peers.py mapper --arch {Path(args.arch).name} "
                             f"--mapspace {Path(args.mapspace).name} --search-size {args.search_size} "
                             f"--algorithm {args.algorithm}",
                     console=mapper_table(rows), data={"timeloop": doc.get("timeloop"), "rows": rows},
                     json_path=None, results_path=args.results, notes=mapper_notes(doc.get("timeloop", ""), args),
                     summary=SUMMARY)
    return 0


SUMMARY = [{"table": 0, "column": "mapper / cosa", "what": "Timeloop-mapper's cycles over cosa's",
            "stats": ["geomean", "min", "max", "below:1"]}]


def mapper_table(rows: list[dict]) -> str:
    """The mapper comparison as a Markdown table, one row per layer and a total row."""
    lines = ["| layer | cosa cycles | cosa s | timeloop-mapper cycles | mapper s | mapper / cosa |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['layer']} | {r['cosa_cycles']:,.0f} | {r['cosa_s'] or 0:.1f} | {r['mapper_cycles']:,.0f} | "
                     f"{r['mapper_s']:.1f} | {r['mapper_cycles'] / r['cosa_cycles']:.2f} |")
    cosa, mapped = sum(r["cosa_cycles"] for r in rows), sum(r["mapper_cycles"] for r in rows)
    lines.append(f"| total ({len(rows)} layers) | {cosa:,.0f} | {sum(r['cosa_s'] or 0 for r in rows):.1f} | "
                 f"{mapped:,.0f} | {sum(r['mapper_s'] for r in rows):.1f} | {mapped / cosa:.2f} |")
    return "\n".join(lines) + "\n"


def mapper_notes(timeloop: str, args) -> str:
    return (f"Layers of the recorded data on CoSA's Simba-like arch ({Path(args.arch).name}), every mapping priced "
            f"by timeloop-model ({timeloop}).  cosa: the recorded schedules; timeloop-mapper: {args.algorithm} over "
            f"CoSA's mapspace constraints ({Path(args.mapspace).name}), stopped after `--search-size` valid "
            "mappings, one thread.  `mapper / cosa` > 1: cosa's schedule is faster.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("record")
    p.add_argument("--arch", required=True)
    p.add_argument("--workloads", required=True, help="CoSA's workloads folder (resnet50_graph, ...)")
    p.add_argument("--networks", default="resnet50,alexnet,deepbench")
    p.add_argument("--mappings", help="JSON list of {network, layer, mapping} to use instead of scheduling")
    p.add_argument("--timeloop-model")
    p.add_argument("--version", required=True, help="where the binary comes from (recorded with the data)")
    p.add_argument("--time-limit", type=float, default=30.0)
    p.add_argument("--workdir")
    p.add_argument("--out", required=True)
    p.set_defaults(func=record)
    p = sub.add_parser("mapper", help="timeloop-mapper on the recorded layers against our schedules")
    p.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / "tests/data/timeloop/simba.json"))
    p.add_argument("--arch", required=True)
    p.add_argument("--mapspace", required=True, help="Timeloop mapspace constraints (CoSA's cosa-mapspace.yaml)")
    p.add_argument("--timeloop-mapper")
    p.add_argument("--layers", help="network:layer,... (default: all)")
    p.add_argument("--search-size", type=int, default=2000)
    p.add_argument("--algorithm", default="random-pruned")
    p.add_argument("--workdir")
    p.add_argument("--json")
    p.add_argument("--results", help="record the table in this results file (bench/RESULTS.md)")
    p.set_defaults(func=mapper)
    p = sub.add_parser("summary")
    p.add_argument("file")
    p.add_argument("--arch")
    p.set_defaults(func=summary)
    from peers_zigzag import add_parser

    add_parser(sub)  # ZigZag's LOMA and cost model: bench/peers_zigzag.py
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
