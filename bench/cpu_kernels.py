"""Generated CPU kernels (targets.cpu) against NumPy/OpenBLAS and a naive C loop, and the cost model's
ranking of mappings against measured time.

Kernels: GEMM 256..2048 (fp32, fp64), the ResNet-50 3x3 and 1x1 convolutions, MTTKRP; one thread and
all threads (``--cases``/``--threads`` pick some).  Ours: the code generated for the CoSA MIP's mapping on
this machine's arch (``cosa arch calibrate cpu``, or ``--arch``) as ``cosa run cpu`` schedules it
(``targets.cpu.plan.arch_for`` with the register file as the innermost level: accumulators in registers,
the innermost cache holding the vector operand's panel; cores split output dims, lanes the output's
contiguous dim; the nest ``targets.cpu.kernel_nest`` gives, a 1x1 convolution's pixels fused into one
row, run on the same arrays, a strided one's on the strided copy of its input that each call makes and
that its time includes; the vector dim may be tiled past its bound, the last tile cut:
``cosa.mip.ragged``).  "Cache model": the MIP's mapping on the arch without the register level (the L1 tile
holds A, B and C, as before the register level), same code generator.  NumPy: ``A @ B`` (GEMM), im2col +
``@`` (convolutions), unfolded tensor times the Khatri-Rao product (MTTKRP), its BLAS pinned to the same
thread count with threadpoolctl (the OpenBLAS kernel set it loaded is printed; run with
OPENBLAS_CORETYPE unset).  Naive: the loop nest ours runs (a 1x1 convolution's pixels fused, whose inner loop
gcc vectorises) in its dim order, compiled with the same flags, ``omp parallel for`` over its first output dim.  They are timed in interleaved rounds (``--repeat``
rounds; GFLOP/s from each one's fastest round, and the range of the per-round ratio ours/NumPy), so a
busy machine slows all of them alike.

TVM (``--tvm-trials 64,256``, the ``tvm`` extra; none by default): for each trial count, MetaSchedule tunes
the case once before the timing (``targets.cpu.tvm_peer.tune``: target ``llvm`` with this CPU as ``mcpu``
and ``num-cores`` 1, seed 0, a temporary work directory) and its best schedule's compiled function takes
part in the one-thread rounds: it is timed by the same interleaved fastest-of-rounds wall-clock timer as
ours and NumPy's (not TVM's ``time_evaluator``), on TVM copies of the same input arrays made once before
the rounds.  Columns: its GFLOP/s, its tuning seconds and ours/TVM (> 1: ours faster); "-" at more threads.

Rank study (``bench/cpu_rank.py``'s, which has its own three workloads): >= 30 random valid mappings of
a GEMM 512 and a 3x3 convolution, each built and timed on all threads; Kendall's tau between the cost
model's cycles and the measured seconds, and the rank of the MIP's mapping among them.

    python3 bench/cpu_kernels.py --quick
    python3 bench/cpu_kernels.py --cases gemm1024_32,res4b_branch2b --threads 1 --repeat 30 --no-rank
    python3 bench/cpu_kernels.py --results bench/RESULTS.md
    python3 bench/cpu_kernels.py --cases gemm1024_32,res4b_branch2b --threads 1 --no-rank --tvm-trials 64,256
"""

from __future__ import annotations

import argparse
import os
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
from targets.cpu.plan import C_TYPES, arch_for, output_separable, stored_shape  # noqa: E402
from targets.cpu.reference import random_inputs  # noqa: E402

from bench.cpu_rank import on_cores, rank_study, rank_table, register_arch  # noqa: E402

#: every distinct 3x3 and 1x1 convolution of ResNet-50 (batch 1), in the zoo's order
CONV3 = ("res2a_branch2b", "res3a_branch2b", "res3b_branch2b", "res4a_branch2b", "res4b_branch2b", "res5a_branch2b",
         "res5b_branch2b")
CONV1 = ("res2a_branch2a", "res2a_branch2c", "res2b_branch2a", "res3a_branch2a", "res3a_branch2c", "res3a_branch1",
         "res3b_branch2a", "res4a_branch2a", "res4a_branch2c", "res4a_branch1", "res4b_branch2a", "res5a_branch2a",
         "res5a_branch2c", "res5a_branch1", "res5b_branch2a")
QUICK = ("res2a_branch2b", "res4b_branch2b", "res2a_branch2a")


def typed(nest, dtype):
    return apply_dtype(nest, dtype, False, "bench", "dtype")


def cases(quick: bool) -> list:
    out = []
    for n in ((256, 1024) if quick else (256, 512, 1024, 2048)):
        for dt in ("float32", "float64"):
            out.append(typed(workloads.matmul(f"gemm{n}_{dt[-2:]}", M=n, N=n, K=n), dt))
    for name in QUICK if quick else CONV3 + CONV1:
        out.append(typed(workloads.load_one(f"resnet50/{name}"), "float32"))
    out.append(typed(workloads.einsum("ikl,kj,lj->ij", {"i": 256, "j": 32, "k": 64, "l": 64}, name="mttkrp"),
                     "float32"))
    return out


# --- baselines --------------------------------------------------------------------------------

def numpy_baseline(w, arrays):
    kind = w.op.get("kind")
    if kind == "matmul":
        a, b = arrays["A"], arrays["B"]
        return lambda: a @ b
    if kind == "conv2d":
        x, wt = arrays["Inputs"], arrays["Weights"]
        (sh, sw), (ph, pw) = w.op["stride"], w.op["padding"]
        d = w.dims
        k, c, r, s, p, q = d["K"], d["C"], d["R"], d["S"], d["P"], d["Q"]
        wm = wt.reshape(k, c * s * r)

        def im2col():
            xp = np.pad(x[0], ((0, 0), (ph, ph), (pw, pw)))
            st = xp.strides
            cols = np.lib.stride_tricks.as_strided(xp, (c, s, r, q, p), (st[0], st[1], st[2], st[1] * sh, st[2] * sw))
            return wm @ cols.reshape(c * s * r, q * p)
        return im2col
    x, b, cm = arrays["A"], arrays["B"], arrays["C"]
    i, k, l_ = x.shape

    def mttkrp():
        kr = (b[:, None, :] * cm[None, :, :]).reshape(k * l_, -1)
        return x.reshape(i, k * l_) @ kr
    return mttkrp


def naive_source(w, dtypes, shapes) -> str:
    """The loop nest in dim order, guards for padding, omp parallel for over the first output dim."""
    dims = list(w.dims)
    out = w.output
    ct = C_TYPES[dtypes[out.name]]
    args = ", ".join(f"{'' if t.is_output else 'const '}{C_TYPES[dtypes[t.name]]} *restrict t{k}"
                     for k, t in enumerate(w.tensors))
    lines = ["#include <string.h>", f"void naive({args}, int nthreads) {{",
             f"  memset(t{len(w.tensors) - 1}, 0, {np.prod(shapes[out.name])} * sizeof({ct}));"]
    par = next(d for d in dims if d in out.dims and output_separable(d, out, w.dims))
    order = [par] + [d for d in dims if d != par]
    lines.append("  #pragma omp parallel for num_threads(nthreads) schedule(static)")
    for d in order:
        lines.append(f"  for (long {d} = 0; {d} < {w.dims[d]}; {d}++)")

    def at(k, t):
        strides = [int(np.prod(shapes[t.name][a + 1:])) for a in range(len(t.indices))]
        return " + ".join(f"{s}L*({e})" for s, e in zip(strides, t.indices))
    terms, guards = [], []
    for k, t in enumerate(w.tensors):
        if t.is_output:
            continue
        terms.append(f"({ct})t{k}[{at(k, t)}]")
        for e, size in zip(t.indices, shapes[t.name]):
            lo, hi = e.value_range(w.dims)
            if lo < 0 or hi >= size:
                guards.append(f"(unsigned long)({e}) < {size}UL")
    body = f"t{len(w.tensors) - 1}[{at(0, out)}] += {' * '.join(terms)};"
    lines.append(f"    if ({' && '.join(guards)}) {body}" if guards else f"    {body}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def naive_kernel(w, kernel):
    import ctypes

    lib = ctypes.CDLL(str(cbuild.build(naive_source(w, kernel.plan.dtypes, kernel.plan.shapes))))
    fn = lib.naive
    fn.argtypes = [ctypes.c_void_p] * len(w.tensors) + [ctypes.c_int]
    return fn


# --- measurements -----------------------------------------------------------------------------

def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


#: Seconds of quiet before each timed call when several threads run.  OpenBLAS's worker threads spin for
#: about 2^28 cycles (~0.1 s here) after each call before they sleep, and libgomp's spin after a parallel
#: region: a kernel timed right after another library's call shares its cores with those spinners (our
#: GEMM 2048 on two threads ran 139 GFLOP/s right after NumPy and 192 after our own kernel).
SETTLE_S = 0.25

#: Seconds of untimed calls after that pause, before the timed one (at least one call): the library's
#: threads awake and the cores at their clock, as in back-to-back calls.  One untimed call (``--warm-s 0``)
#: was too short for a 0.2 ms kernel: GEMM 256 on two threads over one, ours 1.05-1.09x and NumPy's
#: 1.46-1.74x with it (Zen 4), 1.81x and 1.74x with 20 ms (bench/RESULTS.md, cpu_kernels_threads).
WARM_S = 0.02


def interleaved(calls: dict, repeat: int, threads: int, warm_s: float | None = None) -> dict:
    """name -> seconds of each of ``repeat`` rounds.  Every round times each call once, the order rotated
    by one each round so that no call always follows the same other.  On more than one thread each timed
    call comes after ``SETTLE_S`` of quiet (the previous library's threads parked) and ``warm_s`` (None:
    ``WARM_S``) of untimed calls of itself, at least one (its own threads awake, as in back-to-back calls of
    one library)."""
    warm_s = WARM_S if warm_s is None else warm_s
    names = list(calls)
    times = {n: [] for n in names}
    for r in range(repeat):
        for n in names[r % len(names):] + names[:r % len(names)]:
            if threads > 1:
                time.sleep(SETTLE_S)
                end = time.perf_counter() + warm_s
                calls[n]()
                while time.perf_counter() < end:
                    calls[n]()
            times[n].append(_timed(calls[n]))
    return times


def mip_mapping(w, arch, time_limit):
    """The MIP's mapping as ``cosa run cpu`` schedules it (ragged last tiles allowed)."""
    from cosa.scheduler import schedule

    return schedule(w, arch, time_limit_s=time_limit, bound=False, seed=0, ragged=True).mapping


def tile_text(kernel) -> str:
    """The micro-kernel's tile and register block, e.g. ``M256 N64 K128 / 4x4x16``."""
    ker = kernel.plan.kernel
    return " ".join(f"{d}{e}" for d, e in ker.extents.items() if e > 1) + f" / {ker.mr}x{ker.nv}x{ker.lanes}"


def tvm_kernels(w, arrays, ref, trials_list) -> dict:
    """trials -> (bound TVM call, its relative error against ``ref``, tuning seconds), tuned once each."""
    from targets.cpu import tvm_peer

    tvm_peer.one_thread_pool()
    out = {}
    scale = max(1.0, float(np.max(np.abs(ref))))
    for trials in trials_list:
        kernel = tvm_peer.tune(w, trials=trials, seed=0)
        call, result = kernel.bind(arrays)
        call()
        err = float(np.max(np.abs(result().reshape(ref.shape) - ref))) / scale
        out[trials] = (call, err, kernel.tuning_s)
    return out


def measure_case(w, base, threads_list, repeat, time_limit, naive_max_macs, tvm_trials=(), warm_s=None):
    from threadpoolctl import threadpool_limits

    kw = kernel_nest(w)  # the nest cosa run cpu maps: a 1x1 convolution's pixels fused into one row
    arch = register_arch(kw, base)
    t0 = time.perf_counter()
    mapping = mip_mapping(kw, arch, time_limit)
    mip_s = time.perf_counter() - t0
    kernel = compile_kernel(kw, mapping, arch)
    cache_arch = arch_for(kw, base)
    cache_kernel = compile_kernel(kw, mip_mapping(kw, cache_arch, time_limit), cache_arch)
    # the layer's stored arrays: our kernels copy a strided 1x1 convolution's input in each call
    arrays = random_inputs(kw, kernel.plan.dtypes, kernel.plan.input_shapes, 0)
    # the baselines take the same memory in the layer's own shapes
    shaped = {t.name: arrays[t.name].reshape(stored_shape(t, w.dims)) for t in w.inputs}
    out = kernel(arrays, threads=1)
    cout = cache_kernel(arrays, threads=1)
    ref = numpy_baseline(w, shaped)()
    scale = max(1.0, float(np.max(np.abs(ref))))
    err = max(float(np.max(np.abs(o.reshape(ref.shape) - ref))) / scale for o in (out, cout))
    tvms = tvm_kernels(w, shaped, ref, tvm_trials) if tvm_trials else {}
    err = max([err] + [e for _, e, _ in tvms.values()])
    naive = naive_kernel(kw, kernel) if w.macs <= naive_max_macs else None
    nout = np.empty_like(out)
    copies = kernel.prepared(arrays)  # the naive loop reads the strided copy, made once
    ptrs = [copies[t.name].ctypes.data for t in kw.inputs] + [nout.ctypes.data]
    rows = []
    for th in threads_list:
        tvm_calls = {f"tvm{t}": tvms[t][0] for t in tvms} if th == 1 else {}  # compiled for one core
        base_fn = numpy_baseline(w, shaped)
        with threadpool_limits(th):
            kernel(arrays, out, th), cache_kernel(arrays, cout, th), base_fn()  # warm-up round, not timed
            for call in tvm_calls.values():
                call()
            calls = {"ours": lambda: kernel(arrays, out, th), "cache": lambda: cache_kernel(arrays, cout, th),
                     "numpy": base_fn, **tvm_calls}
            times = interleaved(calls, repeat, th, warm_s)
            slow = [_timed(lambda: naive(*ptrs, th))] if naive is not None else []
        ours, cache, blas = times["ours"], times["cache"], times["numpy"]
        tvm_times = {t: times[f"tvm{t}"] for t in tvms if f"tvm{t}" in times}
        flops = 2 * w.macs
        t_ours, t_cache, t_blas = min(ours), min(cache), min(blas)
        t_naive = min(slow) if slow else None
        per_round = [b / o for b, o in zip(blas, ours)]
        rows.append({"case": w.name, "threads": th, "mip_s": mip_s, "ours_gflops": flops / t_ours / 1e9,
                     "cache_model_gflops": flops / t_cache / 1e9, "numpy_gflops": flops / t_blas / 1e9,
                     "naive_gflops": flops / t_naive / 1e9 if t_naive else None,
                     "ours_over_numpy": t_blas / t_ours, "ratio_range": (min(per_round), max(per_round)),
                     "ours_over_cache_model": t_cache / t_ours,
                     "ours_over_naive": t_naive / t_ours if t_naive else None, "rel_err": err,
                     "tile": tile_text(kernel), "cache_model_tile": tile_text(cache_kernel),
                     "times_s": {"ours": ours, "cache_model": cache, "numpy": blas,
                                 **{f"tvm{t}": v for t, v in tvm_times.items()}},
                     "tvm": {t: {"gflops": flops / min(v) / 1e9, "ours_over_tvm": min(v) / t_ours,
                                 "tuning_s": tvms[t][2]} for t, v in tvm_times.items()}})
    return rows


def _tvm_cells(row, trials, fmt) -> list[str]:
    got = row.get("tvm", {}).get(trials)
    if got is None:
        return ["-", "-", "-", "-"]
    return [fmt(got["gflops"], "{:.1f}"), fmt(got["tuning_s"], "{:.0f}"), fmt(got["ours_over_tvm"]),
            fmt(got["tuning_s"] / row["mip_s"], "{:.0f}")]


def openblas_kernels() -> str:
    """The kernel set NumPy's OpenBLAS loaded (threadpoolctl), and the OpenBLAS variables that steer it."""
    from threadpoolctl import threadpool_info

    arch = next((i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"), None)
    env = [f"{v}={os.environ[v]}" for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ]
    return f"{arch or 'no OpenBLAS'} ({', '.join(env) if env else 'OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset'})"


SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed tables (bench/results_section.py)
    {"table": 0, "column": "ours/numpy", "rows": {"threads": "1"}, "what": "Ours over NumPy, one thread",
     "stats": ["geomean", "min", "max", "above:1"]},
    {"table": 0, "column": "ours/numpy", "rows": {"threads": "2"}, "what": "Ours over NumPy, two threads",
     "stats": ["geomean", "min", "max", "above:1"]},
    {"table": 0, "column": "ours/cache model", "what": "Ours over the cache model's mapping",
     "stats": ["geomean", "min", "max"]},
    {"table": 0, "column": "ours/naive", "what": "Ours over the naive loop", "stats": ["geomean", "min"]},
]


#: The scaling table's summary, in sections that ran one thread and all (``--threads 1,all``).
SCALING = [
    {"title": "over one thread", "column": "ours", "what": "Ours on all threads over ours on one",
     "stats": ["min", "max"]},
    {"title": "over one thread", "column": "numpy", "what": "NumPy on all threads over NumPy on one",
     "stats": ["min", "max"]},
]


#: The TVM columns' summary of the section as recorded (``--tvm-trials 64,256``): ``tvm_summary((64, 256))``, the
#: section's summary being ``SUMMARY`` and these.
TVM_COLUMNS = [
    {"table": 0, "column": "ours/tvm64", "rows": {"threads": "1"}, "what": "Ours over TVM after 64 trials, one thread",
     "stats": ["geomean", "min", "max"]},
    {"table": 0, "column": "tvm64 tune/MIP", "rows": {"threads": "1"},
     "what": "TVM's tuning seconds (64 trials) over the MIP's", "stats": ["min", "max"]},
    {"table": 0, "column": "ours/tvm256", "rows": {"threads": "1"},
     "what": "Ours over TVM after 256 trials, one thread", "stats": ["geomean", "min", "max"]},
    {"table": 0, "column": "tvm256 tune/MIP", "rows": {"threads": "1"},
     "what": "TVM's tuning seconds (256 trials) over the MIP's", "stats": ["min", "max"]},
]


def tvm_summary(trials_list) -> list[dict]:
    """``SUMMARY``'s entries for the TVM columns."""
    return [entry for t in trials_list for entry in (
        {"table": 0, "column": f"ours/tvm{t}", "rows": {"threads": "1"},
         "what": f"Ours over TVM after {t} trials, one thread", "stats": ["geomean", "min", "max"]},
        {"table": 0, "column": f"tvm{t} tune/MIP", "rows": {"threads": "1"},
         "what": f"TVM's tuning seconds ({t} trials) over the MIP's", "stats": ["min", "max"]})]


def _trials(text: str | None) -> list[int]:
    if not text:
        return []
    out = []
    for part in text.split(","):
        if not part.strip().isdigit() or int(part) < 1:
            raise SystemExit(f"cpu_kernels: --tvm-trials: '{part.strip()}' is not a trial count >= 1")
        out.append(int(part))
    return list(dict.fromkeys(out))


def _threads(text: str, cores: int) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if part == "all":
            out.append(cores)
        elif part.isdigit() and int(part) >= 1:
            out.append(int(part))
        else:
            raise SystemExit(f"cpu_kernels: --threads: '{part}' is not a thread count >= 1 or 'all'")
    return list(dict.fromkeys(out))


def main(argv=None) -> int:
    from rich.console import Console
    from rich.table import Table

    from bench.results_section import run_stamp, save_outputs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="GEMM 256 and 1024, two 3x3 and one 1x1 conv")
    ap.add_argument("--cases", default=None, help="comma-separated case names to run (default: all)")
    ap.add_argument("--threads", default="1,all", help="comma-separated thread counts, 'all' = every core")
    ap.add_argument("--arch", default=None, help="arch YAML (default: cosa arch calibrate cpu --quick now)")
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds (GFLOP/s from the fastest)")
    ap.add_argument("--time-limit", type=float, default=20.0, help="MIP seconds per case")
    ap.add_argument("--samples", type=int, default=30, help="random mappings per rank study")
    ap.add_argument("--naive-max-macs", type=float, default=2.2e9, help="skip the naive loop above this")
    ap.add_argument("--no-rank", action="store_true", help="skip the rank study")
    ap.add_argument("--lane-gain", type=float, default=None,
                    help="costmodel.microkernel.LANE_GAIN for this run (how much better a strided output dim must "
                         "fill the vectors to take the lanes; default the module's)")
    ap.add_argument("--stage-bytes", type=int, default=None,
                    help="targets.cpu.emit_pack.STAGE_BYTES for this run (a transposing pack copy's staging buffer; "
                         "0: every transpose reads the source directly; default the module's)")
    ap.add_argument("--warm-s", type=float, default=WARM_S,
                    help=f"on several threads, seconds of untimed calls before each timed one (at least one "
                         f"call; default {WARM_S:g})")
    ap.add_argument("--tvm-trials", default=None, metavar="N,N",
                    help="also TVM MetaSchedule after these trial counts, one thread (the tvm extra; default none)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--results", default=None, help="record the tables in this results file")
    ap.add_argument("--section", default=None,
                    help="the results section's name (default cpu_kernels, or cpu_kernels_tvm with --tvm-trials)")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        raise SystemExit("cpu_kernels: --repeat must be >= 1")
    if not args.warm_s >= 0:
        raise SystemExit("cpu_kernels: --warm-s must be >= 0 seconds")
    if args.lane_gain is not None:
        if not args.lane_gain > 0:
            raise SystemExit("cpu_kernels: --lane-gain must be > 0")
        from costmodel import microkernel

        microkernel.LANE_GAIN = args.lane_gain  # read by every block() call: the MIP's, the plan's, the model's
    if args.stage_bytes is not None:
        if args.stage_bytes < 0:
            raise SystemExit("cpu_kernels: --stage-bytes must be >= 0")
        from targets.cpu import emit_pack

        emit_pack.STAGE_BYTES = args.stage_bytes  # read when each kernel's C is printed

    if args.arch:
        base = costmodel.load_arch(args.arch)
    else:
        from targets.cpu.calibrate import calibrate

        base = calibrate(quick=True)
    load_before = os.getloadavg()
    cores = os.cpu_count() or 1
    tvm_trials = _trials(args.tvm_trials)
    if tvm_trials:
        from targets.cpu.tvm_peer import require_tvm

        try:
            require_tvm("cpu_kernels --tvm-trials")
        except workloads.FrameworkError as err:
            raise SystemExit(f"cpu_kernels: {err}") from None
    threads_list = _threads(args.threads, cores)
    if len(threads_list) == 1:
        # the kernels run on that many cores: the model describes that many (as cpu_rank does); with more
        # modelled than running, the MIP splits the output over idle cores and sizes each core's caches for
        # its share
        base = on_cores(base, threads_list[0])
    selected = cases(args.quick)
    if args.cases:
        wanted = [c.strip() for c in args.cases.split(",")]
        unknown = sorted(set(wanted) - {w.name for w in selected})
        if unknown:
            raise SystemExit(f"cpu_kernels: --cases: unknown {unknown}; known {[w.name for w in selected]}")
        selected = [w for w in selected if w.name in wanted]
    console = Console(width=200 + 45 * len(tvm_trials), record=True)  # three columns per TVM trial count
    blas_kernels = openblas_kernels()
    console.print(f"arch {base.name}: {base.params.get('cores')} cores, {base.params.get('simd_lanes')} fp32 lanes, "
                  f"isa {cbuild.isa().name}, peak {base.params.get('peak_gflops_per_core', '?')} GFLOP/s/core; "
                  f"OpenBLAS kernels {blas_kernels}; {args.repeat} interleaved rounds, fastest of each")
    rows = []
    for w in selected:
        rows += measure_case(w, base, threads_list, args.repeat, args.time_limit, args.naive_max_macs, tvm_trials,
                             args.warm_s)
        console.print(f"  {w.name}: measured; micro-kernel tile / register block: ours {rows[-1]['tile']}, "
                      f"cache model {rows[-1]['cache_model_tile']}", style="dim")
    table = Table(title="Generated kernels vs NumPy (OpenBLAS) and a naive loop: GFLOP/s and ratios")
    for col in ("case", "threads", "MIP s", "ours GF/s", "cache model GF/s", "numpy GF/s", "naive GF/s", "ours/numpy",
                "per-round range", "ours/cache model", "ours/naive", "rel err",
                *[c for t in tvm_trials for c in (f"tvm{t} GF/s", f"tvm{t} tune s", f"ours/tvm{t}",
                                                       f"tvm{t} tune/MIP")]):
        table.add_column(col, justify="right" if col != "case" else "left")
    fmt = lambda v, f="{:.2f}": "-" if v is None else f.format(v)
    for r in rows:
        lo, hi = r["ratio_range"]
        table.add_row(r["case"], str(r["threads"]), fmt(r["mip_s"], "{:.1f}"), fmt(r["ours_gflops"], "{:.1f}"),
                      fmt(r["cache_model_gflops"], "{:.1f}"), fmt(r["numpy_gflops"], "{:.1f}"),
                      fmt(r["naive_gflops"], "{:.2f}"), fmt(r["ours_over_numpy"]), f"{lo:.2f}-{hi:.2f}",
                      fmt(r["ours_over_cache_model"]), fmt(r["ours_over_naive"], "{:.1f}"), f"{r['rel_err']:.1e}",
                      *[c for t in tvm_trials for c in _tvm_cells(r, t, fmt)])
    console.print(table)
    by = {(r["case"], r["threads"]): r for r in rows}
    scaled = cores > 1 and 1 in threads_list and cores in threads_list
    if scaled:
        scaling = Table(title=f"All threads ({cores}) over one thread")
        for col in ("case", "ours", "numpy"):
            scaling.add_column(col)
        for w in selected:
            one, all_ = by[(w.name, 1)], by[(w.name, cores)]
            scaling.add_row(w.name, f"{all_['ours_gflops'] / one['ours_gflops']:.2f}x",
                            f"{all_['numpy_gflops'] / one['numpy_gflops']:.2f}x")
        console.print(scaling)
    studies = []
    if not args.no_rank:
        gemm = typed(workloads.matmul("gemm512", M=512, N=512, K=512), "float32")
        conv = typed(workloads.load_one("resnet50/res4b_branch2b"), "float32")
        for w in (gemm, conv):
            studies.append(rank_study(w, register_arch(w, base), args.samples, args.time_limit, cores, 3, 0))
        console.print(rank_table(studies, "Cost model vs measurement over random valid mappings (all threads)"))
    load_after = os.getloadavg()
    date, machine = run_stamp()
    command = "python bench/cpu_kernels.py" + (" --quick" if args.quick else "") + \
        (f" --cases {args.cases}" if args.cases else "") + f" --threads {args.threads} --repeat {args.repeat}" + \
        (" --no-rank" if args.no_rank else "") + (f" --arch {args.arch}" if args.arch else "") + \
        (f" --tvm-trials {args.tvm_trials}" if tvm_trials else "") + \
        (f" --warm-s {args.warm_s:g}" if args.warm_s != WARM_S else "") + \
        (f" --lane-gain {args.lane_gain:g}" if args.lane_gain is not None else "") + \
        (f" --stage-bytes {args.stage_bytes}" if args.stage_bytes is not None else "")
    section = args.section or ("cpu_kernels_tvm" if tvm_trials else "cpu_kernels")
    title = "Generated CPU kernels" + (" beside TVM's MetaSchedule" if tvm_trials else "") + \
        (f", transposing copies staged in {args.stage_bytes} bytes" if args.stage_bytes else "") + \
        (", transposing copies unstaged" if args.stage_bytes == 0 else "")
    save_outputs(name=section, title=f"{title} (`bench/cpu_kernels.py`)", command=command, date=date, machine=machine,
                 console=console, data={"args": vars(args), "rows": rows, "rank": studies, "arch": base.params,
                                            "load_average": {"minutes": [1, 5, 15], "before": load_before, "after": load_after}},
                 json_path=args.json, results_path=args.results,
                 notes=f"Arch: {base.params}.  Ratios > 1 mean ours is faster.  Load average (1, 5, 15 min) "
                       f"before {tuple(round(x, 1) for x in load_before)}, after "
                       f"{tuple(round(x, 1) for x in load_after)} on {cores} cores: other jobs shared the machine.",
                 summary=SUMMARY + (SCALING if scaled else []) + tvm_summary(tvm_trials))
    return 0


if __name__ == "__main__":
    sys.exit(main())
