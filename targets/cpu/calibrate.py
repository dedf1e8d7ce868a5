"""``cosa arch calibrate cpu``: this machine as a CPU Arch, measured.

Caches (size, line, which cores share them) from sysfs (``lscpu -C`` when sysfs has none), cores from
the affinity mask, SIMD width from the compiler's ``-march=native`` macros, peak FLOP/s per core from
a probe of independent vector FMA chains, the cycles per word of the code generator's packing copies
(``pack_cycles_per_word``), and read/write bandwidth per level from a STREAM-like probe
(sum / fill of a buffer that fits the level, repeated; private levels with one thread, the shared
cache and DRAM with all cores).  The result has the ``cpu`` preset's shape (DRAM, a shared cache
fanning out to the cores, private caches, the L1 fanning out to the lanes) with measured numbers.
Every per-cycle number is per cycle of the clock the FMA probe ran at (``frequency_hz``: its FLOP/s over
the FMA pipes' FLOPs per cycle, the pipes counted at the clock a chain of dependent integer adds
measures), the cycles the cost model counts the micro-kernel's issue in; the clock the kernel reports,
often the base clock while a busy core runs boosted, is kept as ``reported_frequency_hz``.  (Bandwidths
per cycle of the reported clock made every transfer and copy look 1.3x cheaper beside the FMAs on this
2-core AMD EPYC: 2.6 GHz reported, 3.4 GHz under the FMA probe.)
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from .. import TargetError
from .build import build, isa, open_library
from .prelude import transposer

_PROBE = r"""
#include <stddef.h>
#include <string.h>
typedef float v_t __attribute__((vector_size(%(vb)d), aligned(4)));  /* NumPy buffers need not be aligned */
#define L %(lanes)d
double fma_probe(long iters) {
    v_t a[12], b, c;
    for (int k = 0; k < L; k++) b[k] = 0.999999f, c[k] = 1e-7f;
    for (int j = 0; j < 12; j++) for (int k = 0; k < L; k++) a[j][k] = (float)j;
    for (long i = 0; i < iters; i++) {
        #pragma GCC unroll 12
        for (int j = 0; j < 12; j++) a[j] = a[j] * b + c;
    }
    double s = 0; for (int j = 0; j < 12; j++) for (int k = 0; k < L; k++) s += a[j][k];
    return s;
}
/* a chain of dependent integer adds, 16 per iteration: one cycle each on every core this runs on (the empty
   asm keeps gcc from folding them into one add); the loop's own counter runs beside it */
long clock_probe(long iters) {
    long x = 0;
    for (long i = 0; i < iters; i++) {
        #pragma GCC unroll 16
        for (int j = 0; j < 16; j++) { x += j + 1; __asm__ volatile("" : "+r"(x)); }
    }
    return x;
}
double fma_chain_probe(long iters) {
    v_t a, b, c;
    for (int k = 0; k < L; k++) a[k] = 1.0f, b[k] = 0.999999f, c[k] = 1e-7f;
    for (long i = 0; i < iters; i++) {
        #pragma GCC unroll 12
        for (int j = 0; j < 12; j++) a = a * b + c;
    }
    double s = 0; for (int k = 0; k < L; k++) s += a[k];
    return s;
}
double read_probe(const float *buf, long n, long reps, int nthreads) {
    double total = 0;
    #pragma omp parallel num_threads(nthreads) reduction(+:total)
    for (long r = 0; r < reps; r++) {
        /* 8 sums: the adds' latency (3-4 cycles) must not bound two loads per cycle */
        v_t s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
        #pragma omp for schedule(static) nowait
        for (long i = 0; i < n; i += 8 * L) {
            s0 += *(const v_t *)(buf + i); s1 += *(const v_t *)(buf + i + L);
            s2 += *(const v_t *)(buf + i + 2 * L); s3 += *(const v_t *)(buf + i + 3 * L);
            s4 += *(const v_t *)(buf + i + 4 * L); s5 += *(const v_t *)(buf + i + 5 * L);
            s6 += *(const v_t *)(buf + i + 6 * L); s7 += *(const v_t *)(buf + i + 7 * L);
        }
        v_t s = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
        for (int k = 0; k < L; k++) total += s[k];
    }
    return total;
}
%(transposer)s
/* the packing copies of targets.cpu.emit: a box copied row by row (memcpy of runs of `run` words), and
   panels of `width` positions innermost, read along the source rows (contiguous) or across them (a
   blocked transpose by trp_float32, as emit's pack_transposed copies) */
void rows_pack(float *restrict dst, const float *restrict src, long words, long run, long ld, long reps) {
    for (long k = 0; k < reps; k++)
        for (long r = 0; r < words / run; r++) memcpy(dst + r * run, src + r * ld, run * sizeof(float));
}
void panel_pack(float *restrict dst, const float *restrict src, long words, long width, long ld, int across,
                long reps) {
    long len = 256, panels = words / (len * width);
    for (long k = 0; k < reps; k++)
        for (long pn = 0; pn < panels; pn++)
            if (across) {
                for (long a = 0; a < len; a += 16)
                    for (long w = 0; w < width; w += 16)
                        trp_float32(src + (pn * width + w) * ld + a, ld, dst + pn * len * width + a * width + w, width,
                                    width - w < 16 ? width - w : 16, 16);
            } else {
                for (long a = 0; a < len; a++) {
                    float *d = dst + pn * len * width + a * width;
                    for (long w = 0; w < width; w++) d[w] = src[a * ld + pn * width + w];
                }
            }
}
void write_probe(float *buf, long n, long reps, int nthreads) {
    #pragma omp parallel num_threads(nthreads)
    for (long r = 0; r < reps; r++) {
        v_t v = {0}; v += (float)r;
        /* nowait: a barrier at every repetition cost more than an L1-sized buffer's stores */
        #pragma omp for schedule(static) nowait
        for (long i = 0; i < n; i += L) *(v_t *)(buf + i) = v;
    }
}
"""


def caches() -> list[dict]:
    """Data and unified caches of cpu0: level, size_bytes, line_bytes, shared_by (cores), innermost first."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    out = []
    for index in sorted(root.glob("index*")) if root.exists() else []:
        read = lambda f: (index / f).read_text().strip() if (index / f).exists() else ""
        if read("type") not in ("Data", "Unified"):
            continue
        size = read("size")
        m = re.match(r"(\d+)([KMG]?)", size)
        if not m:
            continue
        size_bytes = int(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2)]
        shared = 0
        for part in read("shared_cpu_list").split(","):
            a, _, b = part.partition("-")
            if a:
                shared += int(b or a) - int(a) + 1
        out.append({"level": int(read("level") or 0), "size_bytes": size_bytes,
                    "line_bytes": int(read("coherency_line_size") or 64), "shared_by": max(shared, 1)})
    if not out:
        out = _lscpu_caches()
    return sorted(out, key=lambda c: c["level"])


def _lscpu_caches() -> list[dict]:
    try:
        text = subprocess.run(["lscpu", "-C", "--bytes"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise TargetError("no cache sizes in sysfs and no lscpu (Debian package 'util-linux')", exit_code=1) from None
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) >= 7 and f[3] in ("Data", "Unified"):
            ways_total = int(f[2]) // max(int(f[1]), 1)
            out.append({"level": int(f[4]), "size_bytes": ways_total, "line_bytes": int(f[7]) if len(f) > 7 else 64,
                        "shared_by": 1})
    return out


def frequency_hz() -> float:
    """The clock the kernel reports (``cpu MHz`` of /proc/cpuinfo, sysfs max), else 3 GHz."""
    try:
        mhz = [float(m) for m in re.findall(r"cpu MHz\s*:\s*([\d.]+)", Path("/proc/cpuinfo").read_text())]
        if mhz:
            return max(mhz) * 1e6
    except OSError:
        pass
    path = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    return int(path.read_text()) * 1e3 if path.exists() else 3e9


def _probes():
    info = isa()
    lanes = info.vector_bytes // 4
    lines = []
    transposer(lambda text="": lines.append(text), "float32")
    lib = open_library(build(_PROBE % {"vb": info.vector_bytes, "lanes": lanes, "transposer": "\n".join(lines)}))
    lib.fma_probe.argtypes, lib.fma_probe.restype = [ctypes.c_long], ctypes.c_double
    lib.fma_chain_probe.argtypes, lib.fma_chain_probe.restype = [ctypes.c_long], ctypes.c_double
    lib.clock_probe.argtypes, lib.clock_probe.restype = [ctypes.c_long], ctypes.c_long
    lib.read_probe.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_int]
    lib.read_probe.restype = ctypes.c_double
    lib.write_probe.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_int]
    lib.write_probe.restype = None
    lib.rows_pack.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_long] * 4
    lib.rows_pack.restype = None
    lib.panel_pack.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_long] * 3 + [ctypes.c_int, ctypes.c_long]
    lib.panel_pack.restype = None
    return lib, lanes


def _best(fn, tries: int) -> float:
    best = float("inf")
    for _ in range(tries):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def peak_flops(lib, lanes: int, quick: bool = False) -> float:
    """FLOP/s of one core on vector FMAs (2 FLOPs each, 12 independent chains)."""
    iters = 2_000_000 if quick else 10_000_000
    seconds = _best(lambda: lib.fma_probe(iters), 2 if quick else 3)
    return iters * 12 * lanes * 2 / seconds


def core_clock_hz(lib, quick: bool = False) -> float:
    """Cycles per second a core runs at while busy: a chain of dependent integer adds (one cycle each), the
    best of a few tries.  The clock the kernel reports is often the base clock, while a busy core runs
    boosted (this 2-core AMD EPYC: 2.6 GHz reported, 3.4-3.7 GHz measured)."""
    iters = 5_000_000 if quick else 20_000_000
    return iters * 16 / _best(lambda: lib.clock_probe(iters), 3 if quick else 5)


def fma_chains(lib, quick: bool = False) -> int:
    """Independent FMA chains that reach the peak (FMA latency x pipes): the FMA rate of 12 independent
    chains over that of one dependent chain, each the best of rounds that alternate the two probes (so
    a machine busy with other jobs slows both alike; timed apart, a busy moment skews the ratio)."""
    iters = 100_000  # short runs (a few ms), many rounds: the best of each is one undisturbed by other jobs
    one, many = float("inf"), float("inf")
    for _ in range(10 if quick else 30):
        one = min(one, _best(lambda: lib.fma_chain_probe(iters), 1))
        many = min(many, _best(lambda: lib.fma_probe(iters), 1))
    return max(1, round(one / many))  # both run iters x 12 FMAs


def bandwidth(lib, size_bytes: int, threads: int, quick: bool = False) -> tuple[float, float]:
    """(read, write) bytes/s over a buffer of ``size_bytes``, repeated to about 64 MiB (128 MiB) per try."""
    import numpy as np

    n = max(1024, size_bytes // 4 // 1024 * 1024)
    raw = np.ones(n + 16, dtype=np.float32)  # a 64-byte aligned view, as the kernels' packed buffers are
    buf = raw[(-raw.ctypes.data % 64) // 4:][:n]
    reps = max(1, (64 if quick else 128) * 2**20 // (n * 4))
    lib.read_probe(buf.ctypes.data, n, 1, threads)
    tries = 3 if quick else 5
    read_s = _best(lambda: lib.read_probe(buf.ctypes.data, n, reps, threads), tries)
    write_s = _best(lambda: lib.write_probe(buf.ctypes.data, n, reps, threads), tries)
    return n * 4 * reps / read_s, n * 4 * reps / write_s


#: The copies ``pack_cycles_per_word`` averages: rows of 14, 56 and 256 words (a small image's, a
#: larger one's and a GEMM's rows), panels of 16, 32, 64 words read along the source rows (B panels)
#: and of 4, 8, 16 read across them (A panels).
PACK_SHAPES = [("rows", 14), ("rows", 56), ("rows", 256), ("along", 16), ("along", 32), ("along", 64),
               ("across", 4), ("across", 8), ("across", 16)]


PANEL_RUN = 256
"""Words of the contiguous run each panel's rows take in ``panel_pack``'s copies (its ``len``)."""


def transposed_probe_words(words: int, width: int) -> float:
    """The words the cost model charges for ``panel_pack`` copying ``words`` words across the source rows into
    ``width``-row panels, a blocked transpose of float32 (``costmodel.packing.transposed_copy_words``)."""
    from costmodel.packing import SQUARE_WORDS, transposed_copy_words

    return transposed_copy_words((words // PANEL_RUN, PANEL_RUN), 0, width, 1, SQUARE_WORDS["float32"])


def pack_cycles_per_word(lib, hz: float, quick: bool = False) -> float:
    """Cycles per word of the code generator's packing copies (``costmodel.packing``): the mean over
    ``PACK_SHAPES`` of 32 Ki words copied 16 times from an L2-resident source, the best of several tries,
    each over the words the cost model charges for it (a transpose's whole register squares,
    ``costmodel.packing.transposed_copy_words``: an 8-row panel's copy as 16 rows)."""
    import numpy as np

    words, reps = 32768, 16
    src = np.ones(words * 4, dtype=np.float32)  # rows 264 (across) or 512 words (along, rows) apart
    dst = np.zeros(words, dtype=np.float32)
    costs = []
    for kind, size in PACK_SHAPES:
        if kind == "rows":
            args = (lib.rows_pack, size, size + 8)
        else:
            args = (lib.panel_pack, size, 264 if kind == "across" else 512, int(kind == "across"))
        call = lambda: args[0](dst.ctypes.data, src.ctypes.data, words, *args[1:], reps)  # noqa: E731
        call()
        charged = transposed_probe_words(words, size) if kind == "across" else words
        costs.append(_best(call, 5 if quick else 20) * hz / (charged * reps))
    return round(sum(costs) / len(costs), 3)


def shared_bandwidth(lib, size_bytes: int, cores: int, quick: bool = False) -> tuple[float, float]:
    """(read, write) bytes/s of a level the cores share: the better of all ``cores`` together and one
    core alone, each way.  One core alone is a lower bound on what the level serves; the all-core
    probe waits at every repetition for its slowest thread, so a core busy with another job drags it
    below that (measured on a 2-core machine under load: L3 at 11 GB/s read, 3.4 GB/s write with both
    cores, 77 and 68 GB/s with one)."""
    together = bandwidth(lib, size_bytes, cores, quick)
    if cores == 1:
        return together
    alone = bandwidth(lib, size_bytes, 1, quick)
    return max(together[0], alone[0]), max(together[1], alone[1])


def calibrate(quick: bool = False):
    """A measured CPU Arch (named ``cpu-calibrated``); ``params`` keep the raw measurements."""
    from costmodel.presets import cpu

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    found = {c["level"]: c for c in caches()}
    if not {1, 2} <= set(found):
        raise TargetError(f"found cache levels {sorted(found)}; calibration needs at least L1 and L2", exit_code=1)
    l1, l2 = found[1], found[2]
    l3 = found.get(3, {"level": 3, "size_bytes": l2["size_bytes"] * cores, "line_bytes": l2["line_bytes"],
                       "shared_by": cores})
    lib, lanes = _probes()
    reported = frequency_hz()
    flops = peak_flops(lib, lanes, quick)
    # vector FMAs per cycle: whole pipes at the clock a busy core runs at; then the clock the FMA probe ran at,
    # in whose cycles the cost model counts the micro-kernel's issue, and so every bandwidth and copy too
    fma_per_cycle = max(1, round(flops / (2 * lanes * core_clock_hz(lib, quick))))
    hz = flops / (2 * lanes * fma_per_cycle)
    chains = fma_chains(lib, quick)
    pack = pack_cycles_per_word(lib, hz, quick)
    bw = {
        "L1": bandwidth(lib, l1["size_bytes"] // 2, 1, quick),
        "L2": bandwidth(lib, l2["size_bytes"] // 2, 1, quick),
        "L3": shared_bandwidth(lib, l3["size_bytes"] // 2, cores, quick),
        "DRAM": shared_bandwidth(lib, 4 * l3["size_bytes"], cores, quick),
    }
    # load ports: vector loads per cycle the L1 read probe sustains, whole ports as fma_per_cycle
    loads = max(1, round(bw["L1"][0] / hz / (4 * lanes)))
    arch = cpu(cores=cores, simd_lanes=lanes, fma_per_cycle=fma_per_cycle, l1_kib=l1["size_bytes"] // 1024,
               l2_kib=l2["size_bytes"] // 1024, l3_mib=max(1, l3["size_bytes"] // 2**20))
    levels = []
    for lv in arch.levels:
        read, write = bw[lv.name]
        levels.append(replace(lv, read_bandwidth=round(read / hz, 2), write_bandwidth=round(write / hz, 2)))
    params = {**arch.params, "fma_chains": chains, "loads_per_cycle": loads, "pack_cycles_per_word": pack, "isa": isa().name, "line_bytes": l1["line_bytes"], "frequency_hz": hz,
              "reported_frequency_hz": reported,
              "peak_gflops_per_core": round(flops / 1e9, 2),
              "bandwidth_gb_s": {k: {"read": round(r / 1e9, 2), "write": round(w / 1e9, 2)} for k, (r, w) in bw.items()}}
    return replace(arch, name="cpu-calibrated", levels=tuple(levels), frequency_hz=hz, params=params,
                   source="measured by cosa arch calibrate cpu (sysfs caches, FMA and STREAM-like probes)")
