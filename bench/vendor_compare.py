"""Shared pieces of the Gemmini benchmarks that compare cosa with the vendor's own command stream.

``vendor_row`` runs what Gemmini's C library issues for a layer (``gemmini.vendor``: the calls
resnet50.c / mobilenet.c make, loop instructions included) on the functional model, checked bit for bit
against NumPy, and times the same stream on the timing model.  ``summarize`` turns per-layer cycles
into the ratios the benchmarks print: vendor / cosa per layer (> 1: cosa faster), the geomean over
layers, the repeat-weighted total and the layers where cosa is slower than the vendor.
"""

from __future__ import annotations

import math
import time


def geomean(values) -> float:
    """Geometric mean of the finite positive values (nan when there are none)."""
    vals = [v for v in values if v is not None and isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else math.nan


def fmt(x, spec: str) -> str:
    """``format(x, spec)``, or "-" for None and non-finite values."""
    return format(x, spec) if isinstance(x, (int, float)) and x is not None and math.isfinite(x) else "-"


def vendor_path(program) -> str:
    """The library call(s) a vendor program makes, as one short label (``tiled_conv_auto``, ``12x tiled_matmul_auto``)."""
    names = [c.fn for c in program.calls]
    kinds = sorted(set(names), key=names.index)
    return ", ".join(f"{names.count(k)}x {k}" if names.count(k) > 1 else k for k in kinds)


def summarize(rows: list[dict], *, base: str = "vendor", new: str = "cosa") -> dict:
    """Ratios of ``base`` cycles over ``new`` cycles for rows ``{"layer", "repeat", base: cycles, new: cycles}``.

    Returns speedups (per layer, None where either is missing), the geomean over layers with both, the
    repeat-weighted total ratio (sum of repeat * base over sum of repeat * new, over those layers), and
    ``slower``: the layers where ``new`` takes more cycles than ``base`` (speedup < 1)."""
    speedups, tot_base, tot_new, slower = {}, 0.0, 0.0, []
    for r in rows:
        b, n = r.get(base), r.get(new)
        if not b or not n:
            speedups[r["layer"]] = None
            continue
        s = b / n
        speedups[r["layer"]] = s
        tot_base += b * r.get("repeat", 1)
        tot_new += n * r.get("repeat", 1)
        if s < 1:
            slower.append(r["layer"])
    return {"speedups": speedups, "geomean": geomean(speedups.values()),
            "weighted": tot_base / tot_new if tot_new else math.nan, "slower": slower,
            "compared": sum(s is not None for s in speedups.values())}


def vendor_row(workload, *, scale: float, relu: bool = True, seed: int = 0, config=None) -> dict:
    """Build the library's program for ``workload``, run it on the functional model (verified against NumPy)
    and time its stream on the timing model.  A failure is returned as ``{"error": ...}``."""
    from gemmini import isa
    from gemmini.config import DEFAULT_CONFIG
    from gemmini.sim.timing import timing
    from gemmini.vendor import stream
    from gemmini.vendor.calls import from_workload
    from gemmini.vendor.run import run_vendor

    cfg = config or DEFAULT_CONFIG
    t0 = time.perf_counter()
    try:
        program = from_workload(workload, bias=True, relu=relu, scale=scale)
        run = run_vendor(program, seed=seed, config=cfg)
    except Exception as exc:  # a refused layer is a row, not a crash of the benchmark
        return {"error": f"vendor: {type(exc).__name__}: {exc}"}
    t1 = time.perf_counter()
    timed = timing(isa.decode_stream(stream(program)), cfg)
    t2 = time.perf_counter()
    ideal = cfg.ideal_cycles(workload.macs)
    return {"verified": run.verified, "mismatches": run.mismatches, "cycles": timed.cycles,
            "utilization": ideal / timed.cycles if timed.cycles else None, "instructions": run.instructions,
            "busy": dict(timed.busy), "dram_bytes": timed.load_bytes + timed.store_bytes,
            "path": vendor_path(program), "simulate_s": t1 - t0, "timing_s": t2 - t1}


def vendor_rtl_row(workload, *, scale: float, mem_latency: int, relu: bool = True, seed: int = 0) -> dict:
    """Run the library's stream for ``workload`` on our RTL (``gemmini.sim.rtl.run_trace``), check its output
    against NumPy, and time the same stream on the timing model at the same main-memory latency.

    Our RTL has no loop unroller: ``run_trace`` expands LOOP_WS / LOOP_CONV_WS on the host into the command
    sequence our model of Gemmini's unrollers issues (its queues never full) and the RTL runs that flat
    sequence through its decoupled load / execute / store queues."""
    import dataclasses

    import numpy as np

    from gemmini import isa
    from gemmini.config import DEFAULT_CONFIG
    from gemmini.sim import rtl
    from gemmini.sim.timing import timing
    from gemmini.vendor import stream
    from gemmini.vendor.calls import from_workload
    from gemmini.vendor.run import example_inputs, memory_image, reference

    t0 = time.perf_counter()
    try:
        program = from_workload(workload, bias=True, relu=relu, scale=scale)
        commands = isa.decode_stream(stream(program))
        inputs = example_inputs(program, seed)
        memory = memory_image(program, inputs)
        report = rtl.run_trace(commands, memory, DEFAULT_CONFIG, mem_latency=mem_latency)
    except Exception as exc:  # a refused layer is a row, not a crash of the benchmark
        return {"error": f"vendor rtl: {type(exc).__name__}: {exc}"}
    t1 = time.perf_counter()
    out = next(b for b in program.buffers if b.name in ("C", "output"))
    start = program.base + out.offset
    outputs = memory[start:start + out.nbytes].view(out.dtype).reshape(out.shape)
    mismatches = int(np.count_nonzero(outputs != reference(program, inputs).reshape(out.shape)))
    model = timing(commands, dataclasses.replace(DEFAULT_CONFIG, dma_latency_cycles=mem_latency))
    t2 = time.perf_counter()
    cycles = report.cycles
    return {"verified": mismatches == 0, "mismatches": mismatches, "rtl_cycles": cycles,
            "utilization": DEFAULT_CONFIG.ideal_cycles(workload.macs) / cycles if cycles else None,
            "instructions": report.instructions, "busy": report.busy, "sim_seconds": report.sim_seconds,
            "cycles_per_second": report.cycles_per_second, "timing_cycles": model.cycles,
            "timing_busy": dict(model.busy), "timing_error": (model.cycles - cycles) / cycles if cycles else None,
            "path": vendor_path(program), "rtl_s": t1 - t0, "timing_s": t2 - t1}
