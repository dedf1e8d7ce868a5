"""Gemmini cycles on the real RTL: ResNet-50-, MobileNet- and BERT-shaped layers on a Chipyard Verilator simulator.

Per layer three programs, each a self-checking bare-metal ELF that times its accelerator work with
``rdcycle`` (as gemmini-rocc-tests do) and prints the cycles through HTIF: ``cosa`` (the MIP's mapping
through ``gemmini.codegen``, our header's RoCC instructions, each issued by the core), ``loops`` (the program
``cosa run gemmini`` runs: the library's loop-instruction calls with the loop-tile MIP's tile arguments,
``gemmini.loop_schedule``; ``--tile-budget`` N polishes them with N timing-model runs; a depthwise layer as
packed groups, cosa's own calls) and ``vendor`` (the faithful stream of Gemmini's own C library for the
layer, ``gemmini.vendor``, loop instructions included, run by the SoC's loop unrollers).  ``loops`` and
``vendor`` differ only in the tile arguments, except where ``loops_calls`` names cosa's own calls.
All run on the user's Chipyard simulator of a Rocket + Gemmini SoC (``CHIPYARD_SIM`` or ``--simulator``;
``gemmini.chipyard``).  Beside the real-RTL cycles: our timing model's (``gemmini.sim.timing``) and our RTL's
(``gemmini.sim.rtl``, its loop instructions expanded on the host) for the same stream, with the relative
error per layer, and vendor / cosa on the real RTL.  The 15 layers are scaled down (spatial size, sequence
length, widths) so that each program stays under about 200k cycles: the simulator runs 1-3 k cycles per
second.  ``--full-size`` adds four full-size layers (a 3x3, a 1x1, conv1, a BERT GEMM; minutes each).

    CHIPYARD_SIM=/path/to/simulator-chipyard-<config> python bench/gemmini_chipyard.py \\
        [--layers a,b] [--jobs 2] [--mem-latency 16] [--provenance TEXT] [--json out.json] [--results bench/RESULTS.md]

``--provenance`` records where the simulator came from (Chipyard and Gemmini versions, configuration);
it is printed with the results, the simulator's path is not.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

from results_section import run_stamp, save_outputs
from rich.console import Console
from rich.table import Table
from vendor_compare import fmt, geomean, vendor_rtl_row

import workloads
from cosa.mip import choose_loop_tiles
from cosa.scheduler import schedule
from gemmini import isa
from gemmini.build import build_elf
from gemmini.chipyard import find_simulator, loop_conv_layout, run_chipyard, vendor_elf
from gemmini.codegen import generate
from gemmini.config import CHIPYARD_SOC_CONFIG
from gemmini.errors import SimulationError
from gemmini import run_rtl
from gemmini.sim import rtl
from gemmini.sim.timing import timing
from gemmini.vendor import stream
from gemmini.loop_schedule import cosa_calls, tune_tiles
from gemmini.vendor.calls import from_workload
from gemmini.vendor.run import example_inputs as vendor_inputs, memory_image as vendor_image

#: ResNet-50's and BERT-base's layer shapes, scaled down (kinds, kernels, strides and channel ratios kept).
LAYERS = {
    "res2a_branch2a 1x1 64->64 @14": workloads.conv2d("r2a_2a", C=64, K=64, H=14, W=14, R=1, S=1),
    "res2a_branch2b 3x3 64->64 @8": workloads.conv2d("r2a_2b", C=64, K=64, H=8, W=8, R=3, S=3, padding=1),
    "res3a_branch1 1x1/2 64->128 @14": workloads.conv2d("r3a_1", C=64, K=128, H=14, W=14, R=1, S=1, stride=2),
    "res4a_branch2b 3x3/2 64->64 @14": workloads.conv2d("r4a_2b", C=64, K=64, H=14, W=14, R=3, S=3, stride=2,
                                                         padding=1),
    "conv1 7x7/2 3->32 @16": workloads.conv2d("conv1", C=3, K=32, H=16, W=16, R=7, S=7, stride=2, padding=3),
    "bert qkv 64x384x128": workloads.matmul("qkv", M=64, N=384, K=128),
    "bert ffn1 64x512x128": workloads.matmul("ffn1", M=64, N=512, K=128),
    "bert ffn2 64x128x512": workloads.matmul("ffn2", M=64, N=128, K=512),
    "bert attention 64x64x64": workloads.matmul("attn", M=64, N=64, K=64),
    "res3b_branch2b 3x3 64->64 @7": workloads.conv2d("r3b_2b", C=64, K=64, H=7, W=7, R=3, S=3, padding=1),
    "res4b_branch2a 1x1 256->64 @7": workloads.conv2d("r4b_2a", C=256, K=64, H=7, W=7, R=1, S=1),
    "res5a_branch2c 1x1 128->256 @7": workloads.conv2d("r5a_2c", C=128, K=256, H=7, W=7, R=1, S=1),
    "mobilenet dw 3x3 64 @14": workloads.conv2d("dw", C=64, K=64, H=14, W=14, R=3, S=3, padding=1, groups=64),
    "mobilenet dw/2 3x3 32 @16": workloads.conv2d("dw2", C=32, K=32, H=16, W=16, R=3, S=3, stride=2, padding=1,
                                                   groups=32),
    "shufflenet gconv 1x1 g3 48->48 @14": workloads.conv2d("gconv", C=48, K=48, H=14, W=14, R=1, S=1, groups=3),
}
#: Full-size layers (minutes each on the simulator: res4b_branch2b ran 465,390 cycles in 491 s): a 3x3, a 1x1,
#: conv1 and a BERT GEMM, run with ``--full-size`` or named in ``--layers``.
FULL = {f"{zoo_name} (full size)": zoo_name for zoo_name in
        ("resnet50/res4b_branch2b", "resnet50/res4b_branch2a", "resnet50/conv1", "bert_base_128/qkv_projection")}
QUICK = ("res2a_branch2b 3x3 64->64 @8", "bert attention 64x64x64")
RECORDED = Path(__file__).resolve().parent.parent / "tests" / "data" / "chipyard" / "real_cycles.json"
PROGRAMS = ("cosa", "loops", "vendor")


def _calls(vendor) -> str:
    """The library functions a program calls, e.g. ``tiled_conv_stride_auto`` (packed depthwise groups)."""
    return ",".join(sorted({call.fn for call in vendor.calls}))


def _loops_vendor(wl, vendor, calls: str | None, **kw):
    """The loops program's calls as a run recorded them (``loops_calls``): the library's ``vendor``, or cosa's
    own (``gemmini.loop_schedule.cosa_calls``); ``kw``: ``from_workload``'s bias, relu and scale."""
    if calls is None or calls == _calls(vendor):
        return vendor
    return cosa_calls(wl, vendor, **kw)


def _err(model, real):
    return (model - real) / real if model is not None and real else None


def prepare(label: str, wl, workdir: Path, args) -> dict:
    """Schedule and build both programs of a layer; our timing model's and our RTL's cycles for them."""
    arch = CHIPYARD_SOC_CONFIG.arch("ws")
    cfg = dataclasses.replace(CHIPYARD_SOC_CONFIG, dma_latency_cycles=args.mem_latency)
    mapping = schedule(wl, arch, scheduler="cosa", time_limit_s=args.time_limit, bound=False).mapping
    program = generate(wl, mapping, arch, dataflow="ws", scale="auto")
    vendor = from_workload(wl, bias=program.bias, relu=program.relu, scale=program.scale)
    # the loops program `cosa run gemmini` runs: the loop-tile MIP's tiles (budget 0), or a timing-model polish;
    # the library's calls, or cosa's own where the library's take no tiles (packed depthwise groups)
    loops = tune_tiles(wl, mapping, arch, scale=program.scale, budget=args.tile_budget, chooser=choose_loop_tiles)
    out = {"layer": label, "tiles": list(loops.tiles) if loops.tiles else None, "loops_calls": _calls(loops.vendor),
           "macs": wl.macs, "ideal": CHIPYARD_SOC_CONFIG.ideal_cycles(wl.macs), "progs": {}, "streams": {}}
    elfs = {"cosa": build_elf(program, workdir / f"{wl.name}_cosa.elf"),
            "loops": vendor_elf(loops.vendor, workdir / f"{wl.name}_loops.elf", tiles=loops.tiles,
                                layout=loop_conv_layout()),
            "vendor": vendor_elf(vendor, workdir / f"{wl.name}_vendor.elf", layout=loop_conv_layout())}
    streams = out["streams"] = {"cosa": program.commands, "loops": isa.decode_stream(loops.stream()),
                                "vendor": isa.decode_stream(stream(vendor))}
    for name in PROGRAMS:
        d = {"elf": str(elfs[name]), "model": timing(streams[name], cfg).cycles, "ours": None}
        if not args.no_rtl:
            try:
                if name == "cosa":
                    d["ours"] = run_rtl.run_program_rtl(program, mem_latency=args.mem_latency).report.cycles
                elif name == "loops":
                    image = vendor_image(loops.vendor, vendor_inputs(loops.vendor))
                    d["ours"] = rtl.run_trace(streams["loops"], image, cfg, mem_latency=args.mem_latency).cycles
                else:
                    row = vendor_rtl_row(wl, scale=program.scale, mem_latency=args.mem_latency,
                                         relu=program.relu)
                    d["ours"] = row.get("rtl_cycles")
            except SimulationError as exc:
                d["ours_error"] = str(exc)
        out["progs"][name] = d
    return out


def _workload(label: str):
    return workloads.load_one(FULL[label]) if label in FULL else LAYERS[label]


def run_real(elf: str, args) -> dict:
    try:
        r = run_chipyard(elf, simulator=args.simulator, max_cycles=args.max_cycles, timeout_s=args.timeout)
    except SimulationError as exc:
        return {"error": str(exc)}
    return {"verified": r.verified, "cycles": r.cycles, "core_cycles": r.core_cycles, "wall_s": r.wall_s,
            "cycles_per_s": r.cycles_per_s, "check": r.check}


def recalibrate(args, console: Console) -> dict:
    """Calibrate against the real cycles of an earlier run (``--json`` output): the layers' streams are
    generated again (same scheduler, time limit and scale), nothing is simulated."""
    import json

    old = json.loads(Path(args.calibrate_from).read_text())
    rows = []
    for r in old["rows"]:
        wl = _workload(r["layer"])
        arch = CHIPYARD_SOC_CONFIG.arch("ws")
        mapping = schedule(wl, arch, scheduler="cosa", time_limit_s=args.time_limit, bound=False).mapping
        program = generate(wl, mapping, arch, dataflow="ws", scale="auto")
        vendor = from_workload(wl, bias=program.bias, relu=program.relu, scale=program.scale)
        r["streams"] = {"cosa": program.commands, "vendor": isa.decode_stream(stream(vendor))}
        if "loops" in r["progs"]:  # the calls and tiles the run chose
            tiles = tuple(r["tiles"]) if r.get("tiles") else None
            lv = _loops_vendor(wl, vendor, r.get("loops_calls"), bias=program.bias, relu=program.relu,
                               scale=program.scale)
            r["streams"]["loops"] = isa.decode_stream(stream(lv, tiles=tiles))
        rows.append(r)
    names = [n for n in PROGRAMS if all(n in r["progs"] for r in rows)]
    table = Table(title="Real Gemmini RTL cycles (the programs' rdcycle) and vendor / cosa (> 1: cosa faster)")
    for col in ("layer", *names, "vendor / cosa"):
        table.add_column(col, justify="left" if col == "layer" else "right")
    for r in rows:
        cells = []
        for name in names:
            real = r["progs"][name]["real"]
            cells.append(f"{real['cycles']:,}" if real.get("verified") else
                         (real.get("check") or real.get("error") or "no result")[:48])
        c, v = r["progs"]["cosa"]["real"], r["progs"]["vendor"]["real"]
        ratio = v["cycles"] / c["cycles"] if c.get("verified") and v.get("verified") else None
        table.add_row(r["layer"], *cells, fmt(ratio, ".3f"))
    console.print(table)
    out = calibrate(rows, console, args)
    for r in rows:
        r.pop("streams")
    return {"rows": rows, "calibration": out}


def run(args, console: Console) -> dict:
    labels = QUICK if args.quick else (args.layers.split(",") if args.layers else
                                       list(LAYERS) + (list(FULL) if args.full_size else []))
    unknown = [lab for lab in labels if lab not in LAYERS and lab not in FULL]
    if unknown:
        raise SystemExit(f"gemmini_chipyard: unknown layers {unknown} (known: {', '.join([*LAYERS, *FULL])})")
    rows = []
    with tempfile.TemporaryDirectory(prefix="gemmini-chipyard-") as tmp:
        for label in labels:
            t0 = time.perf_counter()
            rows.append(prepare(label, _workload(label), Path(tmp), args))
            console.print(f"built {label} ({time.perf_counter() - t0:.0f} s)")
        jobs = [(r, name) for r in rows for name in PROGRAMS]
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(run_real, r["progs"][name]["elf"], args): (r, name) for r, name in jobs}
            for fut in concurrent.futures.as_completed(futures):
                r, name = futures[fut]
                r["progs"][name]["real"] = fut.result()
                real = r["progs"][name]["real"]
                console.print(f"ran {r['layer']} {name}: {real.get('check') or real.get('error')} "
                              f"{fmt(real.get('cycles'), ',')} cycles, {fmt(real.get('wall_s'), '.0f')} s")
    table = Table(title="Real Gemmini RTL (Chipyard Verilator simulator) against our timing model and our RTL")
    for col in ("layer", "program", "check", "real cycles", "util", "timing model", "err", "our RTL", "err",
                "sim cyc/s"):
        table.add_column(col, justify="left" if col in ("layer", "program", "check") else "right")
    errors = {"model": [], "ours": []}
    for r in rows:
        for name in PROGRAMS:
            d = r["progs"][name]
            real = d["real"]
            cyc = real.get("cycles") if real.get("verified") else None
            d["model_error"], d["ours_error_rel"] = _err(d["model"], cyc), _err(d["ours"], cyc)
            for key, col in (("model_error", "model"), ("ours_error_rel", "ours")):
                if d[key] is not None:
                    errors[col].append(abs(d[key]))
            check = "PASS" if real.get("verified") else (real.get("error") or real.get("check") or "FAIL")[:40]
            table.add_row(r["layer"], name, check, fmt(cyc, ","), fmt(r["ideal"] / cyc if cyc else None, ".0%"),
                          fmt(d["model"], ",.0f"), fmt(d["model_error"], "+.0%"), fmt(d["ours"], ",.0f"),
                          fmt(d["ours_error_rel"], "+.0%"), fmt(real.get("cycles_per_s"), ",.0f"))
    console.print(table)
    speed = Table(title="vendor / cosa on the real RTL (> 1: cosa faster)")
    for col in ("layer", "cosa cycles", "loops cycles", "vendor cycles", "vendor / cosa", "vendor / loops",
                "loops tiles"):
        speed.add_column(col, justify="left" if col in ("layer", "loops tiles") else "right")
    ratios = {"cosa": [], "loops": []}
    slower = {"cosa": [], "loops": []}
    for r in rows:
        real = {n: r["progs"][n]["real"] for n in PROGRAMS}
        cyc = {n: (real[n].get("cycles") if real[n].get("verified") else None) for n in PROGRAMS}
        row_ratios = {}
        for n in ("cosa", "loops"):
            ratio = cyc["vendor"] / cyc[n] if cyc[n] and cyc["vendor"] else None
            row_ratios[n] = ratio
            if ratio:
                ratios[n].append(ratio)
                if ratio < 1:
                    slower[n].append(r["layer"])
        r["vendor_over_cosa"], r["vendor_over_loops"] = row_ratios["cosa"], row_ratios["loops"]
        tiles = "library's own" if r["tiles"] is None else "x".join(str(t) for t in r["tiles"])
        speed.add_row(r["layer"], fmt(cyc["cosa"], ","), fmt(cyc["loops"], ","), fmt(cyc["vendor"], ","),
                      fmt(row_ratios["cosa"], ".3f"), fmt(row_ratios["loops"], ".3f"), tiles)
    speed.caption = "; ".join(f"vendor / {n}: geomean {fmt(geomean(ratios[n]), '.3f')} over {len(ratios[n])} "
                              f"layers, {n} slower on {len(slower[n])}" for n in ("cosa", "loops"))
    console.print(speed)
    summary = {k: {"median": statistics.median(v) if v else math.nan, "max": max(v) if v else math.nan,
                   "n": len(v)} for k, v in errors.items()}
    passed = sum(bool(r["progs"][n]["real"].get("verified")) for r in rows for n in PROGRAMS)
    console.print(f"{passed} of {len(PROGRAMS) * len(rows)} programs pass on the real RTL; |error| against it: timing model "
                  f"median {fmt(summary['model']['median'], '.1%')}, max {fmt(summary['model']['max'], '.1%')}; "
                  f"our RTL median {fmt(summary['ours']['median'], '.1%')}, max {fmt(summary['ours']['max'], '.1%')}")
    calibration = calibrate(rows, console, args) if args.calibrate else None
    for r in rows:
        r.pop("streams")
        for prog in r["progs"].values():
            prog.pop("elf", None)  # a temporary file, gone after the run
    return {"rows": rows, "errors": summary, "passed": passed, "total": len(PROGRAMS) * len(rows),
            "geomean_vendor_over_cosa": geomean(ratios["cosa"]), "cosa_slower": slower["cosa"],
            "geomean_vendor_over_loops": geomean(ratios["loops"]), "loops_slower": slower["loops"],
            "calibration": calibration}


#: What calibration may change: the DMA's bytes per cycle and main-memory latency as Gemmini sees it
#: through the SoC's L2 and memory bus; the queues are set to the reservation station's entries
#: (load / execute / store) of Gemmini's default configuration, as its RTL has them.
CAL_GRID = {"queues": ((8, 16, 4),), "dma_bytes_per_cycle": (8, 16), "dma_latency_cycles": (16, 32, 64, 96, 128)}
#: And the core's cycles per command it issues (a Rocket core running the program's C loops).
ISSUE_GRID = (1, 4, 8, 12, 16, 24)


def _errors(rows, cfg, programs=PROGRAMS) -> dict:
    out = {}
    for r in rows:
        for name in programs:
            if name not in r["progs"]:
                continue
            real = r["progs"][name]["real"]
            if real.get("verified") and real.get("cycles"):
                out[(r["layer"], name)] = (timing(r["streams"][name], cfg).cycles - real["cycles"]) / real["cycles"]
    return out


def calibrate(rows, console: Console, args) -> dict:
    """Grid search of ``CAL_GRID`` x ``ISSUE_GRID`` for the timing-model config with the smallest mean |error|
    (then max) against the real-RTL cycles; prints the error per layer before and after.  ``issue_cycles``
    changes only the cosa programs' times (the loops and vendor streams' commands come from the loop
    unrollers), so those streams are timed once per memory configuration."""
    base = dataclasses.replace(CHIPYARD_SOC_CONFIG, dma_latency_cycles=args.mem_latency)
    before = _errors(rows, base)
    best = None
    for queues in CAL_GRID["queues"]:
        for width in CAL_GRID["dma_bytes_per_cycle"]:
            for latency in CAL_GRID["dma_latency_cycles"]:
                mem = dataclasses.replace(CHIPYARD_SOC_CONFIG, ld_queue=queues[0], ex_queue=queues[1], st_queue=queues[2],
                                          dma_bytes_per_cycle=width, dma_latency_cycles=latency)
                vendor = _errors(rows, mem, ("loops", "vendor"))
                for issue in ISSUE_GRID:
                    cfg = dataclasses.replace(mem, issue_cycles=issue)
                    errs = {**vendor, **_errors(rows, cfg, ("cosa",))}
                    key = (statistics.mean(abs(e) for e in errs.values()), max(abs(e) for e in errs.values()))
                    if best is None or key < best[0]:
                        best = (key, cfg)
    cfg = best[1]
    after = _errors(rows, cfg)
    worst = max(abs(e) for e in after.values())
    table = Table(title=f"Timing model against the real RTL, before ({args.mem_latency}-cycle memory, queues 8/8/2, "
                        f"16 B/cycle) and after calibration (queues {cfg.ld_queue}/{cfg.ex_queue}/{cfg.st_queue}, "
                        f"{cfg.dma_bytes_per_cycle} B/cycle, {cfg.dma_latency_cycles}-cycle memory, "
                        f"{cfg.issue_cycles} core cycles per command)")
    for col in ("layer", "program", "error before", "error after"):
        table.add_column(col, justify="left" if col in ("layer", "program") else "right")
    for (layer, name), e in before.items():
        table.add_row(layer, name, fmt(e, "+.1%"), fmt(after[(layer, name)], "+.1%"))
    med = (statistics.median(abs(e) for e in before.values()), statistics.median(abs(e) for e in after.values()))
    mean = (statistics.mean(abs(e) for e in before.values()), statistics.mean(abs(e) for e in after.values()))
    table.caption = (f"|error| median {med[0]:.1%} -> {med[1]:.1%}, mean {mean[0]:.1%} -> {mean[1]:.1%}, "
                     f"max {max(abs(e) for e in before.values()):.1%} -> {worst:.1%}")
    console.print(table)
    return {"config": {k: getattr(cfg, k) for k in ("ld_queue", "ex_queue", "st_queue", "dma_bytes_per_cycle",
                                                     "dma_latency_cycles", "issue_cycles")},
            "before": {f"{k[0]} / {k[1]}": v for k, v in before.items()},
            "after": {f"{k[0]} / {k[1]}": v for k, v in after.items()},
            "median_before": med[0], "median_after": med[1]}


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"table": 0, "column": "check", "what": "Programs on the real RTL", "stats": ["equal:PASS"]},
    {"table": 0, "column": "err", "rows": {"program": "cosa"}, "what": "Timing model error against the real RTL, cosa",
     "stats": ["absmedian", "absmax"]},
    {"table": 0, "column": "err", "rows": {"program": "loops"},
     "what": "Timing model error against the real RTL, loops", "stats": ["absmedian", "absmax"]},
    {"table": 0, "column": "err", "rows": {"program": "vendor"},
     "what": "Timing model error against the real RTL, vendor", "stats": ["absmedian", "absmax"]},
    {"title": "vendor / cosa", "column": "vendor / cosa", "what": "The vendor's real cycles over cosa's explicit commands",
     "stats": ["geomean", "min", "max", "below:1"]},
    {"title": "vendor / cosa", "column": "vendor / loops", "what": "The vendor's real cycles over cosa's loops style",
     "stats": ["geomean", "min", "max", "below:1"]},
]
CALIBRATION_SUMMARY = [
    {"table": 0, "column": "vendor / cosa", "what": "The vendor's real cycles over cosa's",
     "stats": ["geomean", "min", "max", "below:1"]},
    {"table": 1, "column": "error before", "what": "Timing model error against the real RTL before calibration",
     "stats": ["absmedian", "absmax"]},
    {"table": 1, "column": "error after", "what": "After calibration", "stats": ["absmedian", "absmax"]},
]


RECORDED_SUMMARY = [
    {"table": 0, "column": "err", "what": "Timing model error against the recorded real-RTL cycles, at the recording's "
     "configuration (Gemmini f13847e's units, the SoC's cold lines)", "stats": ["absmedian", "absmax"]},
    {"table": 0, "column": "err, our units", "what": "With our RTL's units and a fixed-latency memory",
     "stats": ["absmedian", "absmax"]},
]


def print_recorded(console: Console, path: Path = RECORDED, results: str | None = None) -> int:
    """No simulator: the real-RTL cycles recorded in the test data (``gemmini.real_cycles``) beside the
    timing model as it is now, on the loop-instruction programs (the explicit ones are not recorded): at the
    recording's configuration (``gemmini.config.CHIPYARD_SOC_CONFIG``) and, beside it, with our RTL's
    units and a fixed-latency memory (``units`` "ours", no line fills).  ``results``: the results file
    to write the section ``gemmini_chipyard_recorded`` to."""
    from gemmini import real_cycles

    rec = real_cycles.load(path)
    errors = real_cycles.compare(rec)
    ours = dataclasses.replace(rec.config, units="ours", soc_line_fill_cycles=0)
    errors_ours = real_cycles.compare(dataclasses.replace(rec, config=ours))
    sim = rec.simulator
    console.print(f"No simulator set (CHIPYARD_SIM or --simulator): the real cycles recorded on {rec.recorded['date']} "
                  f"(Chipyard {sim['chipyard']}, Gemmini {sim['gemmini']}, Verilator {sim['verilator']}, "
                  f"{sim['memory_model']}) beside our timing model now")
    table = Table(title="Recorded real Gemmini RTL cycles against the timing model (err = (model - real) / real)")
    for col in ("layer", "program", "tiles", "real (rdcycle)", "timing model", "err", "our units",
                "err, our units"):
        table.add_column(col, justify="left" if col in ("layer", "program") else "right")
    rows = []
    for e, o in zip(errors, errors_ours):
        p = e.program
        table.add_row(p.layer, p.style, "library's own" if p.tiles is None else str(list(p.tiles)),
                      f"{p.real_cycles:,}", f"{e.model_cycles:,.0f}", f"{e.error:+.1%}", f"{o.model_cycles:,.0f}",
                      f"{o.error:+.1%}")
        rows.append({"layer": p.layer, "program": p.style, "tiles": list(p.tiles) if p.tiles else None,
                     "real": p.real_cycles, "model": e.model_cycles, "model_our_units": o.model_cycles})
    console.print(table)
    for label, errs in (("at the recording's configuration", errors), ("with our units", errors_ours)):
        s = real_cycles.summary(errs)
        console.print(f"timing model |err| {label}: " + "; ".join(
            f"{k} median {v['median']:.1%}, max {v['max']:.1%} (n={v['n']})" for k, v in s.items()))
    if results:
        date, machine = run_stamp()
        save_outputs(name="gemmini_chipyard_recorded",
                     title="Gemmini's recorded real-RTL cycles against the timing model (`bench/gemmini_chipyard.py` "
                           "with no simulator)",
                     command="python bench/gemmini_chipyard.py --results bench/RESULTS.md", date=date, machine=machine,
                     console=console, data={"recording": {"simulator": sim, "recorded": rec.recorded,
                                                          "config": dataclasses.asdict(rec.config)}, "rows": rows},
                     json_path=None, results_path=results, summary=RECORDED_SUMMARY,
                     notes="The real cycles are the recording's (its provenance above); the model's are computed "
                           "now from the same programs' command streams.  `timing model`: at the recording's "
                           "configuration, Gemmini f13847e's load, execute and store units (from its Scala) and the "
                           "SoC's memory (cold 64-byte lines over an 8-byte bus); `our units`: the load, execute and "
                           "store units of our RTL and a fixed-latency memory.")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulator", help="the Chipyard simulator (default: CHIPYARD_SIM)")
    ap.add_argument("--layers", help="comma-separated labels (default: all)")
    ap.add_argument("--quick", action="store_true", help=f"{len(QUICK)} layers only")
    ap.add_argument("--full-size", action="store_true",
                    help=f"also the {len(FULL)} full-size layers (minutes each on the simulator)")
    ap.add_argument("--tile-budget", type=int, default=0,
                    help="timing-model streams that polish the loops program's tiles (0: the MIP's, as `cosa run "
                         "gemmini` runs them)")
    ap.add_argument("--jobs", type=int, default=1, help="simulators run at once")
    ap.add_argument("--time-limit", type=float, default=10.0, help="MIP seconds per layer")
    ap.add_argument("--mem-latency", type=int, default=rtl.DEFAULT_MEM_LATENCY,
                    help="main-memory latency of our timing model and our RTL (cycles)")
    ap.add_argument("--max-cycles", type=int, default=1_000_000, help="the simulator's cycle limit per program")
    ap.add_argument("--timeout", type=float, default=1800.0, help="wall seconds per program")
    ap.add_argument("--no-rtl", action="store_true", help="skip our RTL")
    ap.add_argument("--calibrate", action="store_true",
                    help="fit the timing model's queue, DMA-width and memory-latency parameters to the real cycles")
    ap.add_argument("--calibrate-from", help="only calibrate, against the real cycles in this earlier --json output")
    ap.add_argument("--provenance", default="", help="the simulator's origin (Chipyard/Gemmini versions, config)")
    ap.add_argument("--json")
    ap.add_argument("--results")
    args = ap.parse_args(argv)
    try:
        if not args.calibrate_from:
            find_simulator(args.simulator)
    except SimulationError as exc:
        if args.simulator or args.layers or args.quick:  # a simulator was asked for, or a run of chosen layers
            print(f"gemmini_chipyard: {exc}", file=sys.stderr)
            return 2
        return print_recorded(Console(record=True, width=170), results=args.results)
    console = Console(record=True, width=170)
    date, machine = run_stamp()
    console.print(f"gemmini on the real RTL, {date}; {machine}; simulator: {args.provenance or 'origin not given'}")
    if args.calibrate_from:
        data = recalibrate(args, console)
        save_outputs(name="gemmini_chipyard_calibration",
                     title="Timing model calibrated against the real Gemmini RTL "
                           "(`bench/gemmini_chipyard.py --calibrate-from`)",
                     command=f"python bench/gemmini_chipyard.py --calibrate-from RUN.json --mem-latency {args.mem_latency}",
                     date=date, machine=machine, console=console, data=data, json_path=args.json,
                     results_path=args.results, notes=f"Simulator: {args.provenance}." if args.provenance else "",
                     summary=CALIBRATION_SUMMARY)
        return 0
    data = run(args, console)
    command = " ".join(["CHIPYARD_SIM=... python bench/gemmini_chipyard.py"] + (["--quick"] if args.quick else []) +
                       (["--full-size"] if args.full_size else []) +
                       ([f"--tile-budget {args.tile_budget}"] if args.tile_budget else []) +
                       ([f"--layers '{args.layers}'"] if args.layers else []) +
                       [f"--jobs {args.jobs} --mem-latency {args.mem_latency}"] +
                       (["--calibrate"] if args.calibrate else []))
    notes = (f"Simulator: {args.provenance}.  " if args.provenance else "") + (
        "Cycles: the program's own rdcycle around its accelerator work (core clock), fence included; every "
        "program checks its output against the embedded NumPy result.  Timing model and our RTL: the same "
        f"command stream at {args.mem_latency}-cycle main-memory latency; err = (model - real) / real.")
    save_outputs(name="gemmini_chipyard", title="Gemmini on the real RTL (Chipyard Verilator simulator)",
                 command=command, date=date, machine=machine, console=console, data=data, json_path=args.json,
                 results_path=args.results, notes=notes, summary=SUMMARY)
    return 0 if data["passed"] == data["total"] else 1


if __name__ == "__main__":
    sys.exit(main())
