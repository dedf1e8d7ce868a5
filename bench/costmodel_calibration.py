"""Calibration of the cost model against the Gemmini timing model (issue #5).

For every layer: the schedules of gemmini-default, the CoSA MIP and random
search, plus a few random valid mappings (seeded), each evaluated twice: by
the cost model on the ``gemmini`` preset (``costmodel.evaluate``) and by the
command-level timing model of the generated program (``gemmini.sim.timing``
of ``gemmini.codegen.generate``, bias on, as the code generator defaults).

Printed: per case the two cycle counts and the relative error
(cost / timing - 1), the DRAM bytes of both; per layer Kendall's tau between
the two orderings of all its cases (do both models rank the schedules the
same way?); overall the median |error| per scheduler and over all schedules,
and the mean tau.  WS also prints the previous cost model's error (every
compute charged DIM cycles: ``compute_quantum`` instead of ``compute_rows``)
against the same timing runs, and the compute commands the cost model counts
against those of the generated program.  Per-row DMA cost: every case is
also evaluated with the DRAM row cycles off (``flat``: every byte at
16 B/cycle, the model before per-row transfers), and the cost model's DRAM
transfer cycles are compared with the timing model's busy cycles of the load
and store units (``dma error``).  ``--maps DIR`` adds saved mappings
(``LAYER.SCHEDULER.yaml``; ones that no longer validate are skipped).
``--json`` writes the same numbers.

The timing model is a Python loop over commands (tens of thousands of
commands a second): random mappings are drawn among those whose programs have
at most ``--max-commands`` commands (which leaves out the slowest mappings),
and a scheduler's program above it is skipped and reported as such.  Quick default: three layers; ``--all`` runs every
ResNet-50 layer and every BERT-base (sequence 128) GEMM.

    python3 bench/costmodel_calibration.py                       # quick
    python3 bench/costmodel_calibration.py --all --jobs 2 --json calib.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

QUICK = ("bert_base_128/ffn1", "resnet50/res4b_branch2b", "resnet50/res5a_branch2c")
NETWORKS = ("resnet50", "bert_base_128")
SCHEDULERS = ("gemmini-default", "cosa", "random")


def _schedules(workload, arch, seed: int, search_s: float):
    """(label, Mapping or None, error or None) of the schedulers."""
    from cosa.scheduler import schedule

    out = []
    for name in SCHEDULERS:
        options = {"seconds": search_s} if name == "random" else {}
        try:
            sch = schedule(workload, arch, scheduler=name, seed=seed, bound=False, **options)
        except Exception as exc:  # a scheduler that cannot map this layer is reported, not fatal
            out.append((name, None, f"{type(exc).__name__}: {exc}"))
            continue
        out.append((name, sch.mapping, None))
    return out


def _samples(workload, arch, dataflow: str, randoms: int, seed: int, max_commands: int, tries: int = 200):
    """(label, Mapping or None, error or None): random valid mappings that the code generator accepts
    (its scratchpad layout pads narrow blocks, so some valid mappings do not fit) within ``max_commands``."""
    from cosa.baselines.mapspace import MapSpace, random_mapping
    from costmodel import evaluate
    from costmodel.evaluate import quantized_iterations
    from gemmini import codegen

    dim = arch.params["dim"]
    rng = random.Random(10_000 + seed)  # a stream apart from random search's (same seed), so no duplicates
    space = MapSpace(workload, arch)
    out = []
    for i in range(randoms):
        found, reason = None, "no sample"
        for _ in range(tries):
            try:
                mapping = random_mapping(workload, arch, rng, space=space)
                # a preload and a compute each: counted by the cost model where it models computes (WS)
                computes = evaluate(workload, arch, mapping).computes or quantized_iterations(arch, mapping) // dim
                if 2 * computes > max_commands:  # skip before generating a program too long to time
                    reason = f"about {2 * computes} commands > --max-commands {max_commands}"
                    continue
                commands = len(codegen.generate(workload, mapping, arch, dataflow=dataflow).commands)
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                continue
            if commands <= max_commands:
                found = mapping
                break
            reason = f"{commands} commands > --max-commands {max_commands}"
        out.append((f"sample{i}", found, None if found else f"after {tries} draws: {reason}"))
    return out


def flat_arch(arch):
    """``arch`` with the per-row transfer cycles off at every level (bytes over bandwidth only)."""
    off = {lv.name: dict(read_row_extra_cycles=0.0, read_row_min_cycles=0.0, write_row_extra_cycles=0.0,
                         write_row_min_cycles=0.0) for lv in arch.levels if lv.row_transfer_costed}
    return arch.with_levels(**off) if off else None


def saved_mappings(directory: str, layer: str, arch):
    """(label, Mapping or None, error or None) of the saved ``<layer name>.<scheduler>.yaml`` files."""
    import glob
    import os

    import yaml

    from mappings.io import mapping_from_dict

    name = layer.split("/")[-1]
    out = []
    for path in sorted(glob.glob(os.path.join(directory, f"{name}.*.yaml"))):
        label = "saved-" + os.path.basename(path)[len(name) + 1:-len(".yaml")]
        try:
            with open(path) as fh:
                out.append((label, mapping_from_dict(yaml.safe_load(fh), arch), None))
        except Exception as exc:
            out.append((label, None, f"{type(exc).__name__}: {exc}"))
    return out


def measure_layer(layer: str, dataflow: str, randoms: int, seed: int, search_s: float,
                  max_commands: int, maps: str | None = None) -> list[dict]:
    """Every case of one layer: cost-model and timing-model cycles and bytes."""
    from costmodel import evaluate
    from gemmini import GemminiConfig, codegen
    from gemmini.sim import timing
    from workloads import load_one

    cfg = GemminiConfig()
    arch = cfg.arch(dataflow)
    # the previous model for comparison: every compute occupies the array DIM cycles (compute_quantum)
    regs = arch.levels[-1]
    quantum_arch = arch.with_levels(**{regs.name: dict(compute_rows=None, compute_overhead_cycles=0,
                                                       compute_quantum=arch.params["dim"])}) \
        if regs.compute_rows is not None else None
    flat = flat_arch(arch)
    workload = load_one(layer)
    try:  # layers the code generator cannot run (batched matmuls) are reported once, not scheduled
        from gemmini.codegen.tiling import problem_of
        problem_of(workload)
    except Exception as exc:
        return [{"layer": layer, "case": "-", "dataflow": dataflow, "skipped": f"codegen: {exc}"}]
    rows = []
    cases = _schedules(workload, arch, seed, search_s) + _samples(workload, arch, dataflow, randoms, seed, max_commands)
    if maps:
        cases += saved_mappings(maps, layer, arch)
    for label, mapping, error in cases:
        row = {"layer": layer, "case": label, "dataflow": dataflow, "mapping": mapping}
        if mapping is None:
            rows.append({**row, "skipped": error})
            continue
        try:
            cost = evaluate(workload, arch, mapping)
        except Exception as exc:  # a saved mapping the current validator refuses
            rows.append({**row, "skipped": f"evaluate: {type(exc).__name__}: {exc}"})
            continue
        row["cost_dram_cycles"] = cost.transfer_cycles[arch.levels[0].name]
        if flat is not None:
            flat_cost = evaluate(workload, flat, mapping)
            row.update(flat_cycles=flat_cost.cycles, flat_dram_cycles=flat_cost.transfer_cycles[flat.levels[0].name])
        row.update(cost_cycles=cost.cycles, cost_dram_bytes=cost.dram_bytes, bound_by=cost.bound_by,
                   cost_computes=cost.computes)
        if quantum_arch is not None:
            row["quantum_cycles"] = evaluate(workload, quantum_arch, mapping).cycles
        try:
            program = codegen.generate(workload, mapping, arch, dataflow=dataflow)
        except Exception as exc:  # e.g. OS on a layer the code generator cannot run output-stationary
            rows.append({**row, "skipped": f"codegen: {type(exc).__name__}: {exc}"})
            continue
        commands = len(program.commands)
        if commands > max_commands:
            rows.append({**row, "skipped": f"{commands} commands > --max-commands {max_commands}"})
            continue
        start = time.perf_counter()
        tr = timing(program.commands, cfg)
        row.update(timing_cycles=tr.cycles, timing_dram_bytes=tr.load_bytes + tr.store_bytes,
                   busy=dict(tr.busy), commands=commands, timing_s=round(time.perf_counter() - start, 2),
                   error=cost.cycles / tr.cycles - 1,
                   program_computes=sum(1 for c in program.commands if c.name.startswith("compute")))
        if "quantum_cycles" in row:
            row["quantum_error"] = row["quantum_cycles"] / tr.cycles - 1
        dma_busy = tr.busy["load"] + tr.busy["store"]
        row["dma_error"] = row["cost_dram_cycles"] / dma_busy - 1 if dma_busy else None
        row["compute_error"] = cost.compute_cycles / tr.busy["execute"] - 1 if tr.busy["execute"] else None
        if "flat_cycles" in row:
            row["flat_error"] = row["flat_cycles"] / tr.cycles - 1
            row["flat_dma_error"] = row["flat_dram_cycles"] / dma_busy - 1 if dma_busy else None
        rows.append(row)
    return rows


def _pct(value) -> str:
    return f"{'-':>8s}" if value is None else f"{value:+8.1%}"


def kendall_tau(xs, ys) -> float | None:
    """Kendall's tau-b of two equally long sequences (None below 3 points or without variation)."""
    from scipy.stats import kendalltau

    if len(xs) < 3:
        return None
    tau = kendalltau(xs, ys).statistic
    return None if tau != tau else float(tau)  # NaN when one side is constant


def summarize(rows: list[dict]) -> dict:
    done = [r for r in rows if "error" in r]
    per_sched = {}
    for name in SCHEDULERS + ("sample", "saved"):
        errs = [abs(r["error"]) for r in done if r["case"].startswith(name) and (name != "random" or r["case"] == "random")]
        if errs:
            per_sched[name] = statistics.median(errs)
    taus = {}
    for layer in dict.fromkeys(r["layer"] for r in done):
        cases = [r for r in done if r["layer"] == layer]
        taus[layer] = kendall_tau([r["cost_cycles"] for r in cases], [r["timing_cycles"] for r in cases])
    sched = [r for r in done if r["case"] in SCHEDULERS]
    quantum = [r for r in done if "quantum_error" in r]
    quantum_taus = {}
    for layer in dict.fromkeys(r["layer"] for r in quantum):
        cases = [r for r in quantum if r["layer"] == layer]
        quantum_taus[layer] = kendall_tau([r["quantum_cycles"] for r in cases], [r["timing_cycles"] for r in cases])
    valid_quantum_taus = [t for t in quantum_taus.values() if t is not None]
    modelled = [r for r in done if r.get("cost_computes")]
    valid_taus = [t for t in taus.values() if t is not None]
    mip_vs_default = []
    for layer in taus:
        by = {r["case"]: r for r in done if r["layer"] == layer}
        if "cosa" in by and "gemmini-default" in by:
            mip_vs_default.append(by["cosa"]["timing_cycles"] / by["gemmini-default"]["timing_cycles"])
    def med(key, cases=done):
        vals = [abs(r[key]) for r in cases if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    def worst(key):
        vals = [r for r in done if r.get(key) is not None]
        if not vals:
            return None
        r = max(vals, key=lambda r: abs(r[key]))
        return f"{r[key]:+.3f} ({r['layer']} {r['case']})"

    flat_taus = {}
    for layer in dict.fromkeys(r["layer"] for r in done if "flat_cycles" in r):
        cases = [r for r in done if r["layer"] == layer and "flat_cycles" in r]
        flat_taus[layer] = kendall_tau([r["flat_cycles"] for r in cases], [r["timing_cycles"] for r in cases])
    valid_flat_taus = [t for t in flat_taus.values() if t is not None]
    return {
        # per-row DMA cost: total and DRAM-transfer errors with row cycles (now) and without (flat)
        "median_abs_error_flat": med("flat_error"),
        "worst_error": worst("error"),
        "worst_error_flat": worst("flat_error"),
        "median_abs_dma_error": med("dma_error"),
        "median_abs_dma_error_flat": med("flat_dma_error"),
        "worst_dma_error": worst("dma_error"),
        "worst_dma_error_flat": worst("flat_dma_error"),
        "median_abs_compute_error": med("compute_error"),
        "flat_mean_kendall_tau": statistics.mean(valid_flat_taus) if valid_flat_taus else None,
        "median_abs_error_schedulers": statistics.median([abs(r["error"]) for r in sched]) if sched else None,
        "median_abs_error_all": statistics.median([abs(r["error"]) for r in done]) if done else None,
        "median_abs_error_by_case": per_sched,
        "kendall_tau_by_layer": taus,
        "mean_kendall_tau": statistics.mean(valid_taus) if valid_taus else None,
        "mip_over_default_timing_cycles": mip_vs_default,
        # the previous model (every compute DIM cycles) against the same timing runs
        "quantum_median_abs_error_all": statistics.median([abs(r["quantum_error"]) for r in quantum])
        if quantum else None,
        "quantum_mean_kendall_tau": statistics.mean(valid_quantum_taus) if valid_quantum_taus else None,
        # compute commands: the cost model's count against the generated program's
        "computes_exact_fraction": sum(r["cost_computes"] == r["program_computes"] for r in modelled) / len(modelled)
        if modelled else None,
        "computes_median_ratio": statistics.median([r["cost_computes"] / r["program_computes"] for r in modelled])
        if modelled else None,
        "cases": len(rows), "measured": len(done), "skipped": len(rows) - len(done),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", nargs="*", default=None, help="zoo names like resnet50/res4b_branch2b")
    ap.add_argument("--all", action="store_true", help="every ResNet-50 layer and BERT-base-128 GEMM")
    ap.add_argument("--dataflow", default="ws", choices=("ws", "os"))
    ap.add_argument("--random", type=int, default=4, help="random valid mappings per layer (rank agreement)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--search-seconds", type=float, default=2.0, help="random search's time budget")
    ap.add_argument("--max-commands", type=int, default=200_000)
    ap.add_argument("--jobs", type=int, default=1, help="layers measured in parallel processes")
    ap.add_argument("--maps", default=None, help="also measure saved mappings LAYER.SCHEDULER.yaml in this folder")
    ap.add_argument("--json", default=None, help="write cases and summary here")
    ap.add_argument("--pickle", default=None, help="also pickle the cases with their Mapping objects here")
    args = ap.parse_args(argv)

    if args.all:
        from workloads import load
        layers = [f"{net}/{w.name}" for net in NETWORKS for w in load(net)]
    else:
        layers = list(args.layers or QUICK)
    task = dict(dataflow=args.dataflow, randoms=args.random, seed=args.seed, search_s=args.search_seconds,
                max_commands=args.max_commands, maps=args.maps)
    rows: list[dict] = []
    print(f"{'layer':32s} {'case':16s} {'cost cyc':>11s} {'timing cyc':>11s} {'error':>7s} "
          f"{'cost DRAM B':>12s} {'timing DRAM B':>13s} {'quantum err':>11s} {'computes cost/prog':>19s} "
          f"{'flat err':>8s} {'dma err':>8s} {'flat dma':>8s} {'comp err':>8s}")

    def show(layer_rows):
        for r in layer_rows:
            if "skipped" in r:
                print(f"{r['layer']:32s} {r['case']:16s} skipped: {r['skipped'][:80]}")
                continue
            quantum = f"{r['quantum_error']:+11.1%}" if "quantum_error" in r else f"{'-':>11s}"
            print(f"{r['layer']:32s} {r['case']:16s} {r['cost_cycles']:11.0f} {r['timing_cycles']:11d} "
                  f"{r['error']:+7.1%} {r['cost_dram_bytes']:12.0f} {r['timing_dram_bytes']:13d} {quantum} "
                  f"{r['cost_computes']:>9d}/{r['program_computes']:<9d} {_pct(r.get('flat_error'))} "
                  f"{_pct(r.get('dma_error'))} {_pct(r.get('flat_dma_error'))} {_pct(r.get('compute_error'))}")
        sys.stdout.flush()

    def keep(layer_rows):
        rows.extend(layer_rows)
        show(layer_rows)
        if args.pickle:  # after every layer, so that an interrupted run keeps what it measured
            import pickle
            with open(args.pickle, "wb") as fh:
                pickle.dump(rows, fh)

    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            for layer_rows in pool.map(measure_layer, layers, *[[v] * len(layers) for v in task.values()]):
                keep(layer_rows)
    else:
        for layer in layers:
            keep(measure_layer(layer, **task))
    summary = summarize(rows)
    print()
    for key, value in summary.items():
        if isinstance(value, float):
            value = f"{value:.3f}"
        elif isinstance(value, dict):
            value = ", ".join(f"{k}: {'-' if v is None else f'{v:.3f}'}" if not isinstance(v, str) else f"{k}: {v}"
                              for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(f"{v:.2f}" for v in value)
        print(f"{key}: {value}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "summary": summary, "cases": rows}, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
