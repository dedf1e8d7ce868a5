"""The loops-style programs of ``bench/gemmini_spike.py --loops``: Gemmini's library call streams (LOOP_WS and
LOOP_CONV_WS loop instructions, in the encoding Gemmini 180c468 decodes) with two tile choices per layer,
each run on Spike + libgemmini and on our functional model.

Per layer: ``gemmini.loop_schedule.tune_tiles`` with the loop-tile MIP (``cosa.mip.choose_loop_tiles``) as
its chooser and no polishing (``--tile-budget 0``, what ``cosa run gemmini --style loops`` runs), giving

* "mip": cosa's calls (``loop_schedule.cosa_calls``: the downsample path through ``tiled_conv_auto``,
  depthwise layers as packed groups with block-diagonal weights) with the MIP's tile arguments, run even
  when the timing model prefers the library's own (the "CLI runs" column says which one the command runs);
* "library": the library's own calls with its own tiles (``tiles=None``).

Each stream becomes a self-checking C program (``gemmini.chipyard.vendor_elf``: embedded inputs and the
NumPy-computed output; PASS = exit 0 and a PASS line) run on ``GEMMINI_SPIKE``, and the same stream runs
on our functional model (``gemmini.vendor.run.run_vendor``) against the same NumPy reference.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import workloads
from cosa.mip import choose_loop_tiles
from cosa.scheduler import schedule
from gemmini.build import check_line, run_spike
from gemmini.chipyard import vendor_elf
from gemmini.codegen import generate
from gemmini.config import DEFAULT_CONFIG
from gemmini.errors import SimulationError
from gemmini.loop_schedule import cosa_calls, tune_tiles
from gemmini.vendor.calls import from_workload
from gemmini.vendor.run import run_vendor

#: Layers the loops section adds to ``gemmini_spike.SMALL``: thin-channel convolutions (an RGB input), a
#: stride-2 depthwise layer whose channels pack by 15 (not a power of two), a stride-2 1x1 convolution that
#: resnet50.c runs through ``tiled_conv_downsample`` (named so); ``REAL``: full-size layers of the zoo.
EXTRA = {
    "thin conv 3->16 32x32 3x3": workloads.conv2d("thin", C=3, K=16, H=32, W=32, R=3, S=3, padding=1),
    "thin conv 3->16 32x32 3x3 stride 2": workloads.conv2d("thin_s2", C=3, K=16, H=32, W=32, R=3, S=3, stride=2,
                                                           padding=1),
    "depthwise 3x3 60 ch stride 2": workloads.depthwise_conv2d("dw60s2", C=60, H=14, W=14, R=3, S=3, stride=2,
                                                               padding=1),
    "downsample 1x1 stride 2 32->64 12x12": workloads.conv2d("res4a_branch1", C=32, K=64, H=12, W=12, R=1, S=1,
                                                             stride=2),
}
REAL = ("resnet50/conv1", "resnet50/res2a_branch2b", "resnet50/res3a_branch1", "resnet50/res4b_branch2a",
        "resnet50/fc1000", "bert_base_128/attention_scores", "mobilenet_v2/b2_dw")
#: The layers of ``--quick``: one of each kind of stream (LOOP_WS, LOOP_CONV_WS, thin, packed depthwise, downsample).
QUICK = ("matmul 37x21x45 (ragged)", "conv 3x3 stride 2", "depthwise 3x3 32 ch", "thin conv 3->16 32x32 3x3",
         "downsample 1x1 stride 2 32->64 12x12")
ARCH = DEFAULT_CONFIG.arch("ws")


@dataclass(frozen=True)
class LoopCase:
    """One program: ``vendor`` (the library's calls) run with ``tiles`` (None: the library's own)."""

    label: str
    choice: str          # "mip" or "library"
    vendor: object       # gemmini.vendor.calls.VendorProgram
    tiles: tuple | None
    runs: bool           # what ``cosa run gemmini --style loops`` runs for this layer
    model_cycles: float | None


def layers(small: dict, quick: bool) -> dict:
    """label -> workload: ``small`` (gemmini_spike.SMALL) and ``EXTRA``, plus the ``REAL`` zoo layers unless
    ``quick`` (which keeps ``QUICK`` only)."""
    out = dict(small) | EXTRA
    if quick:
        return {k: out[k] for k in QUICK}
    return out | {name: workloads.load_one(name) for name in REAL}


def loop_cases(label: str, wl, *, time_limit: float) -> list[LoopCase]:
    """The MIP's and the library's programs for layer ``wl`` (module docstring)."""

    def chooser(problem, machine):
        return choose_loop_tiles(problem, machine, time_limit_s=time_limit, source=f"workload {wl.name}")

    mapping = schedule(wl, ARCH, scheduler="cosa", time_limit_s=time_limit, bound=False).mapping
    ls = tune_tiles(wl, mapping, ARCH, budget=0, chooser=chooser)
    program = generate(wl, mapping, ARCH, bias=True, scale="auto")
    kw = dict(dataflow=program.dataflow, bias=program.bias, relu=program.relu, scale=program.scale)
    library = from_workload(wl, **kw)
    cases = []
    chosen = next((t for t in ls.tried if t is not None), None)
    if chosen is not None:
        vendor = ls.vendor if ls.tiles is not None else (cosa_calls(wl, library, **kw) or library)
        cases.append(LoopCase(label, "mip", vendor, chosen, ls.tiles is not None, ls.tried[chosen]))
    cases.append(LoopCase(label, "library", library, None, ls.tiles is None, ls.library_cycles))
    return cases


def calls_text(vendor) -> str:
    """The library functions a program calls, with the count when more than one ('tiled_conv_auto x4')."""
    fns = [c.fn for c in vendor.calls]
    return ", ".join(f"{fn} x{fns.count(fn)}" if fns.count(fn) > 1 else fn for fn in dict.fromkeys(fns))


def run_case(case: LoopCase, workdir: Path, *, spike_timeout: float, seed: int = 0) -> dict:
    """Build ``case``'s program, run it on Spike (timed: wall seconds of the Spike run alone) and on our
    functional model; a Spike time-out or failure is a row, not an exception."""
    name = f"{case.vendor.name}_{case.choice}"
    t0 = time.perf_counter()
    elf = vendor_elf(case.vendor, workdir / f"{name}.elf", seed=seed, tiles=case.tiles)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        result = run_spike(elf, timeout_s=spike_timeout)
        verified, line, status = result.verified, check_line(result.output), "PASS" if result.verified else "FAIL"
    except SimulationError as err:
        timed_out = getattr(err, "field", "") == "timeout"
        verified, line, status = False, str(err).splitlines()[0], "TIMEOUT" if timed_out else "ERROR"
    spike_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = run_vendor(case.vendor, tiles=case.tiles, seed=seed)
    model_s = time.perf_counter() - t0
    return {"layer": case.label, "choice": case.choice, "tiles": list(case.tiles) if case.tiles else None,
            "calls": calls_text(case.vendor), "cli_runs": case.runs, "model_cycles": case.model_cycles,
            "spike": status, "verified": verified, "line": line, "spike_s": spike_s, "build_s": build_s,
            "our_model_verified": ours.verified, "our_model_mismatches": ours.mismatches,
            "commands": ours.instructions, "our_model_s": model_s}
