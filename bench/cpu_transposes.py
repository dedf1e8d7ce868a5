"""What a transposing packing copy costs per panel width, measured, beside what the cost model charges.

A panel pack whose panel axis is not the source's contiguous one (a GEMM's A panels, a convolution's weights
in K-innermost panels) is a blocked transpose: the generated code passes ``side`` rows of the source at a
time through the vector registers (``trp_float32``, ``targets.cpu.prelude.transposer``).  For each panel
width, ``panel_pack`` (the probe ``cosa arch calibrate cpu`` times, the same ``trp_float32``) copies 32 Ki
words from an L2-resident source 16 times, the best of ``--tries``, in cycles of the clock the FMA probe
runs at (``frequency_hz`` of the arch, as calibrate measures it).  Beside it, the cost model's cycles per
word: ``pack_cycles_per_word`` x the words it charges per word copied (``costmodel.packing
.transposed_copy_words``: whole 16-word register columns, a 4-row panel's full blocks at their words), and
what it charged before that rule (its words alone).  Ratios are to the 16-row panel, so the clock cancels.

    python3 bench/cpu_transposes.py
    python3 bench/cpu_transposes.py --results bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WIDTHS = (2, 4, 8, 16, 32)
WORDS, REPS, LEAD = 32768, 16, 264  # words per copy, copies per try, words between two source rows

SUMMARY = [  # the section's summary in bench/RESULTS.md, computed from the printed table
    {"table": 0, "column": "measured / 16 rows", "what": "Cycles per word over the 16-row panel's, measured",
     "stats": ["min", "max"]},
    {"table": 0, "column": "model / 16 rows", "what": "The same in the cost model", "stats": ["min", "max"]},
]


def charged_per_word(width: int) -> float:
    """The words the cost model charges per word of a ``width``-row transposed panel copy of panel_pack's shape."""
    from targets.cpu.calibrate import transposed_probe_words

    return transposed_probe_words(WORDS, width) / WORDS


def measure(widths, tries: int, hz: float) -> dict:
    """width -> measured cycles per word of panel_pack across the source rows (the transposing copy)."""
    import numpy as np

    from targets.cpu.calibrate import _best, _probes

    lib, _ = _probes()
    src = np.ones(WORDS * 4, dtype=np.float32)
    dst = np.zeros(WORDS, dtype=np.float32)
    out = {}
    for width in widths:
        call = lambda: lib.panel_pack(dst.ctypes.data, src.ctypes.data, WORDS, width, LEAD, 1, REPS)  # noqa: E731
        call()
        out[width] = _best(call, tries) * hz / (WORDS * REPS)
    return out


def table(rows: list):
    from rich.table import Table

    t = Table(title="Transposing copies per panel width: cycles per word, measured and in the cost model")
    for col in ("rows per panel", "measured cycles/word", "measured / 16 rows", "model cycles/word",
                "model / 16 rows", "model before / 16 rows"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(str(r["width"]), f"{r['measured']:.3f}", f"{r['measured_rel']:.2f}", f"{r['model']:.3f}",
                  f"{r['model_rel']:.2f}", f"{r['before_rel']:.2f}")
    return t


def main(argv=None) -> int:
    from rich.console import Console

    from bench.results_section import run_stamp, save_outputs
    from targets.cpu.calibrate import calibrate

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tries", type=int, default=20, help="timed tries per width; the fastest is kept")
    ap.add_argument("--json", default=None)
    ap.add_argument("--results", default=None, help="record the table in this results file")
    args = ap.parse_args(argv)
    if args.tries < 1:
        raise SystemExit("cpu_transposes: --tries must be >= 1")
    load = os.getloadavg()
    arch = calibrate(quick=True)
    hz, per_word = arch.params["frequency_hz"], arch.params["pack_cycles_per_word"]
    got = measure(WIDTHS, args.tries, hz)
    rows = [{"width": w, "measured": got[w], "model": per_word * charged_per_word(w), "before": per_word}
            for w in WIDTHS]
    ref = next(x for x in rows if x["width"] == 16)
    for r in rows:
        r.update(measured_rel=r["measured"] / ref["measured"], model_rel=r["model"] / ref["model"],
                 before_rel=r["before"] / ref["before"])
    console = Console(width=160, record=True)
    console.print(f"arch {arch.name}: pack_cycles_per_word {per_word}, clock {hz / 1e9:.2f} GHz (the FMA probe's); "
                  f"{WORDS} words copied {REPS} times per try, source rows {LEAD} words apart, fastest of "
                  f"{args.tries}; float32")
    console.print(table(rows))
    date, machine = run_stamp()
    save_outputs(name="cpu_transposes", title="Transposing packing copies per panel width (`bench/cpu_transposes.py`)",
                 command=f"python bench/cpu_transposes.py --tries {args.tries}", date=date, machine=machine,
                 console=console, data={"args": vars(args), "rows": rows, "arch": arch.params,
                       "load_average": {"minutes": [1, 5, 15], "before": load}},
                 json_path=args.json, results_path=args.results,
                 notes="Measured: the probe's wall time in cycles of the FMA probe's clock.  Model: "
                       "`pack_cycles_per_word` times the words `costmodel.packing.transposed_copy_words` charges "
                       "per word copied; 'model before': its words alone, as priced until c4805b6.  "
                       f"Load average (1, 5, 15 min) before the run {tuple(round(x, 1) for x in load)}.",
                 summary=SUMMARY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
