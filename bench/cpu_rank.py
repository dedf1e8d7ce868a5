"""The CPU cost model against the CPU: how well its cycles rank mappings by their measured time.

For a GEMM, a 3x3 convolution and a 1x1 convolution (small shapes, so a study runs in minutes), >= 50
random valid mappings (``cosa.baselines.mapspace``, a fixed seed) and the CoSA MIP's mapping, all on this
machine's arch as ``cosa run cpu`` schedules it (``cosa arch calibrate cpu --quick`` now, or ``--arch``;
the register file as the innermost level, ``targets.cpu.plan.arch_for``; as many cores as ``--threads``;
the nest ``targets.cpu.kernel_nest`` gives, the 1x1 convolution's 14 x 14 pixels fused into a row of 196;
the MIP may tile that row past its bound with a cut last tile, ``cosa.mip.ragged``, and its mapping is
then priced by the estimate it was chosen by),
are each built with the CPU code
generator, checked against NumPy and timed: ``--repeat`` rounds, every kernel once per round, in an order
shuffled afresh each round from the seed (``round_orders``: a busy machine slows them alike, and no
kernel always runs after the same one), each kernel's fastest round kept.  Reported per workload: Kendall's tau
between the model's cycles and the measured seconds over the random mappings (and with the MIP's), the
measurement's tau against itself (``split_half_tau``: even rounds against odd ones, its own ceiling),
where the MIP's mapping ranks by measured time and its time over the fastest, and where the mapping the
model likes best ranks.

    python3 bench/cpu_rank.py --samples 50
    python3 bench/cpu_rank.py --samples 50 --results bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import costmodel  # noqa: E402
import workloads  # noqa: E402
from workloads.dtypes import apply_dtype  # noqa: E402

from targets.cpu import build as cbuild  # noqa: E402
from targets.cpu import compile_kernel, kernel_nest  # noqa: E402
from targets.cpu.plan import arch_for  # noqa: E402
from targets.cpu.reference import compare, random_inputs, reference  # noqa: E402


def study_cases() -> list:
    """The three workloads of the study: small enough that 51 kernels of each build and run in minutes."""
    f32 = lambda w: apply_dtype(w, "float32", False, "bench", "dtype")  # noqa: E731
    return [f32(workloads.matmul("gemm256", M=256, N=256, K=256)),
            f32(workloads.conv2d("conv3x3_64_14", C=64, K=64, H=14, W=14, R=3, S=3, padding=1)),
            f32(workloads.conv2d("conv1x1_128_14", C=128, K=128, H=14, W=14, R=1, S=1))]


def register_arch(w, base):
    """The arch ``cosa run cpu`` schedules on: ``base`` with this machine's register file as a level."""
    isa = cbuild.isa()
    return arch_for(w, base, registers=(isa.registers, isa.vector_bytes))


def on_cores(base, threads: int):
    """``base`` with ``threads`` cores: the fan-out of its first level below DRAM that has one (the
    cores) cut to ``threads``.  The kernels run on ``threads`` threads, so the model describes that
    many cores: with two modelled and one running, the model halved the compute of every mapping that
    splits the cores and gave each core's caches half the data, and one core's L2 holds it all."""
    from dataclasses import replace

    levels = list(base.levels)
    k = next((k for k in range(1, len(levels)) if levels[k].fanout > 1), None)
    if k is None or levels[k].fanout <= threads:
        return base
    levels[k] = replace(levels[k], fanout=threads)
    return replace(base, levels=tuple(levels), params={**base.params, "cores": threads})


def round_orders(n: int, repeat: int, seed: int) -> list[list[int]]:
    """The order the ``n`` kernels run in, per interleaved round: a fresh permutation each round, seeded.

    With one fixed order every kernel ran right after the same neighbour, whose footprint decides what
    of the kernel's data the caches still hold, so each kernel's best round kept that neighbour's bias:
    the 51 GEMM kernels' measured times ranked alike across two processes at Kendall tau 0.70 in a fixed
    order and 0.92 shuffled (15 rounds each, AVX-512, one core)."""
    rng = random.Random(seed + 1)
    return [rng.sample(range(n), n) for _ in range(repeat)]


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def split_half_tau(rounds: list[list[float]]) -> float | None:
    """Kendall's tau between two measurements of the same kernels: each kernel's fastest of the even rounds
    against its fastest of the odd ones (``rounds``: per kernel, its seconds round by round).  How well the
    measurement ranks the kernels against itself, the most any model's tau against it can be expected to
    reach (each half has half the rounds, so the full measurement is somewhat steadier than this says); None
    with fewer than two rounds."""
    from scipy.stats import kendalltau

    if not rounds or min(len(r) for r in rounds) < 2:
        return None
    even, odd = [min(r[0::2]) for r in rounds], [min(r[1::2]) for r in rounds]
    return float(kendalltau(even, odd).statistic)


def rank_study(w, arch, samples: int, time_limit: float, threads: int, repeat: int, seed: int) -> dict:
    """Kendall's tau of the model's cycles against measured seconds over ``samples`` distinct random valid
    mappings of ``w`` on ``arch``, and the ranks of the MIP's mapping and of the model's favourite."""
    from scipy.stats import kendalltau

    from cosa.baselines.mapspace import MapSpace, random_mapping
    from cosa.scheduler import schedule

    space = MapSpace(w, arch)
    rng = random.Random(seed)
    mip = schedule(w, arch, time_limit_s=time_limit, bound=False, seed=0, ragged=True)
    maps = [("mip", mip.mapping)]
    seen = {repr(maps[0][1])}
    tries = 0
    while len(maps) < samples + 1 and tries < 50 * samples:
        tries += 1
        m = random_mapping(w, arch, rng, space=space)
        if repr(m) not in seen:
            seen.add(repr(m))
            maps.append((f"random{len(maps)}", m))
    runs = []
    for label, m in maps:
        k = compile_kernel(w, m, arch)
        arrays = random_inputs(w, k.plan.dtypes, k.plan.input_shapes, 0)
        out = k(arrays, threads=threads)
        ok, _ = compare(out, reference(w, k.prepared(arrays), k.plan.shapes, k.plan.compute_dtype),
                        k.plan.compute_dtype)
        if not ok:
            raise SystemExit(f"cpu_rank: {w.name} {label}: the kernel's output differs from NumPy's")
        # a ragged MIP mapping is priced as the MIP chose it (cosa.mip.ragged's estimate)
        cycles = mip.extra["ragged_cycles"] if label == "mip" and "ragged" in mip.extra else \
            costmodel.evaluate(w, arch, m).cycles
        runs.append((label, cycles, k, arrays, out))
    times = {label: [] for label, *_ in runs}
    for order in round_orders(len(runs), repeat, seed):  # interleaved rounds
        for label, _, k, arrays, out in (runs[i] for i in order):
            times[label].append(_timed(lambda: k(arrays, out, threads)))
    points = [(label, cycles, min(times[label])) for label, cycles, *_ in runs]
    tau = kendalltau([p[1] for p in points[1:]], [p[2] for p in points[1:]]).statistic
    ceiling = split_half_tau([times[label] for label, *_ in runs[1:]])
    tau_all = kendalltau([p[1] for p in points], [p[2] for p in points]).statistic
    by_time = [p[0] for p in sorted(points, key=lambda p: p[2])]
    fastest = min(p[2] for p in points)
    favourite = min(points, key=lambda p: p[1])[0]
    return {"case": w.name, "samples": len(points) - 1, "tau": float(tau), "tau_with_mip": float(tau_all),
            "measured_tau": ceiling,
            "mip_rank": 1 + by_time.index("mip"), "of": len(points), "mip_s": points[0][2], "fastest_s": fastest,
            "mip_over_fastest": points[0][2] / fastest, "model_best_rank": 1 + by_time.index(favourite),
            "median_over_fastest": float(np.median([p[2] for p in points])) / fastest,
            "points": [{"mapping": p[0], "cycles": p[1], "seconds": p[2]} for p in points]}


def rank_table(studies: list, title: str):
    from rich.table import Table

    table = Table(title=title)
    for col in ("case", "mappings", "Kendall tau", "tau incl. MIP", "measured vs measured tau", "MIP rank",
                "MIP / fastest", "median / fastest", "model's best: rank"):
        table.add_column(col)
    for s in studies:
        ceiling = "-" if s.get("measured_tau") is None else f"{s['measured_tau']:.2f}"
        table.add_row(s["case"], str(s["of"]), f"{s['tau']:.2f}", f"{s['tau_with_mip']:.2f}", ceiling,
                      f"{s['mip_rank']} of {s['of']}", f"{s['mip_over_fastest']:.2f}x",
                      f"{s['median_over_fastest']:.2f}x", str(s["model_best_rank"]))
    return table


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed table (bench/results_section.py)
    {"table": 0, "column": "Kendall tau", "what": "Kendall tau, model cycles vs measured time",
     "stats": ["min", "max", "median"]},
    {"table": 0, "column": "measured vs measured tau",
     "what": "Kendall tau of the even rounds' fastest times against the odd rounds' (the measurement's own ceiling)",
     "stats": ["min", "max", "median"]},
    {"table": 0, "column": "MIP / fastest", "what": "The MIP's mapping over the fastest sampled",
     "stats": ["min", "max"]},
]


def main(argv=None) -> int:
    from rich.console import Console

    from bench.results_section import run_stamp, save_outputs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=50, help="random valid mappings per workload (default 50)")
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds; each kernel's fastest is kept")
    ap.add_argument("--threads", type=int, default=1, help="threads per kernel (default 1)")
    ap.add_argument("--time-limit", type=float, default=20.0, help="MIP seconds per workload")
    ap.add_argument("--arch", default=None, help="arch YAML (default: cosa arch calibrate cpu --quick now)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random mappings")
    ap.add_argument("--json", default=None)
    ap.add_argument("--results", default=None, help="record the table in this results file")
    args = ap.parse_args(argv)
    for name in ("samples", "repeat", "threads"):
        if getattr(args, name) < 1:
            raise SystemExit(f"cpu_rank: --{name} must be >= 1")
    if args.arch:
        base = costmodel.load_arch(args.arch)
    else:
        from targets.cpu.calibrate import calibrate

        base = calibrate(quick=True)
    base = on_cores(base, args.threads)
    load_before = os.getloadavg()
    console = Console(width=200, record=True)
    console.print(f"arch {base.name} with the register file as a level (isa {cbuild.isa().name}); "
                  f"{args.samples} random mappings + the MIP's per workload, {args.threads} thread(s), "
                  f"{args.repeat} interleaved rounds, fastest of each")
    studies = []
    for w in map(kernel_nest, study_cases()):
        studies.append(rank_study(w, register_arch(w, base), args.samples, args.time_limit, args.threads,
                                  args.repeat, args.seed))
        console.print(f"  {w.name}: measured", style="dim")
    console.print(rank_table(studies, "Cost model vs measurement over random valid mappings"))
    load_after = os.getloadavg()
    date, machine = run_stamp()
    command = f"python bench/cpu_rank.py --samples {args.samples} --repeat {args.repeat} --threads {args.threads}" + \
        (f" --arch {args.arch}" if args.arch else "")
    save_outputs(name="cpu_rank", title="CPU cost model vs measured time", command=command, date=date,
                 machine=machine, console=console,
                 data={"args": vars(args), "studies": studies, "arch": base.params,
                       "load_average": {"minutes": [1, 5, 15], "before": load_before, "after": load_after}},
                 json_path=args.json, results_path=args.results,
                 notes=f"Load average (1, 5, 15 min) before {tuple(round(x, 1) for x in load_before)}, after "
                       f"{tuple(round(x, 1) for x in load_after)} on {os.cpu_count()} cores: other jobs shared the "
                       "machine.  Ranks count from 1 (the fastest).",
                 summary=SUMMARY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
