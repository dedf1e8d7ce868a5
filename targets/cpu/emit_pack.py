"""The packing copies of a CPU kernel's C: each input's tile copied into its private buffer (``Pack``:
a box row by row, a panel-packed box panel by panel, or, where the panel axis is not the source's
contiguous one, a blocked transpose), and the C text helpers the emitter shares.  ``PackCopies`` is the
part of ``emit._Emitter`` that prints them."""

from __future__ import annotations

import math

from costmodel.packing import transposed_run

from .plan import C_TYPES, WORD_BYTES
from .prelude import transpose_block


STAGE_BYTES = 24 * 1024
"""Bytes of the staging buffer of a transposing pack copy (``PackCopies.pack_transposed``): rows of the source
are copied whole into it, ``STAGE_BYTES`` at most, and transposed from there.  0: transpose from the source."""

STAGE_ROWS_PER_OFFSET = 8
"""A transposing copy stages its rows when at least this many rows of one square fall on the same offset in
a 4 KiB page (an L1 cache of 8 ways, AMD Zen's, then holds no more of them): rows 18 KB apart (res5b_branch2b's
weights) fall on two offsets, 8 rows of 16 on each, and so do rows 2 KB apart; rows 4 KB apart all on one.
Rows whose offsets spread (512 B, 2304 B, 4.6 KB and 9 KB apart: 8, 16, 8 and 4 offsets) are transposed from
the source: staged, those 4.6 and 9 KB apart ran at 0.96-1.01x the direct copy (an interleaved A/B in one
process, Zen 4), and the 1x1 rank study's, 512 B apart, moved its measured times (``bench/cpu_rank.py``: tau
0.56 to 0.43 with every transpose staged, at 2fc8dea)."""


def aliased_rows(stride_bytes: int, side: int) -> int:
    """Rows of a ``side``-row square, ``stride_bytes`` apart, on the most crowded 4 KiB page offset."""
    offsets = 4096 // math.gcd(stride_bytes % 4096 or 4096, 4096)
    return -(-side // min(side, offsets))


def row_major_strides(shape) -> list[int]:
    out, acc = [], 1
    for size in reversed(shape):
        out.append(acc)
        acc *= size
    return out[::-1]


def unrolled_radices(pack, axis: int) -> dict:
    """{dim: positions one step of it moves} along an unrolled axis of ``pack`` (``Pack.unrolled``)."""
    out, step = {}, 1
    for d, extent in reversed(pack.unrolled[axis]):
        out[d] = step
        step *= extent
    return out


def _transposed_run(pk, shape) -> int:
    """``costmodel.packing.transposed_run`` of a panel pack (0: not a blocked transpose)."""
    return transposed_run(pk.box, shape, pk.panel[0], pk.unrolled, pk.guard)


def _copy_run(p, s0: str, count: int, size: int, ok: str, source) -> None:
    """Print the guarded copy of one run: ``dst[w]`` for w in [0, count) takes the element at index
    ``s0 + w`` of an axis of ``size`` (C text ``source(w)``), zero outside [0, size) or when ``ok`` is
    false; the bounds are worked out once per run, not tested per element."""
    p(f"long w0 = ({s0}) < 0 ? -({s0}) : 0, w1 = {size} - ({s0});")
    p(f"if (w1 > {count}) w1 = {count};")
    p(f"if (!({ok}) || w1 < w0) w0 = w1 = {count};")
    p("for (long w = 0; w < w0; w++) dst[w] = 0;")
    p(f"for (long w = w0; w < w1; w++) dst[w] = {source('w')};")
    p(f"for (long w = w1; w < {count}; w++) dst[w] = 0;")


def linear_text(terms: dict, const: int = 0) -> str:
    """C text of const + sum coef * var (terms: var -> coef), without zero terms."""
    parts = [f"{c}*{v}" if c != 1 else v for v, c in terms.items() if c]
    if const or not parts:
        parts.append(str(const))
    return " + ".join(parts)


class PackCopies:
    """The packing methods of ``emit._Emitter`` (which sets ``p``, ``w``, ``plan``, ``tid`` and
    ``base_terms``)."""

    def panel_words(self, pack) -> int:
        """Words of one panel of a panel-packed box."""
        axis, width = pack.panel
        return width * math.prod(n for a, n in enumerate(pack.box) if a != axis)

    def source_index(self, pack, t, a: int, x: str) -> str:
        """C expression of the index along axis ``a`` of ``t`` that box position ``x`` holds: the pack's
        origin plus ``x``, or along an unrolled axis each dim's first value plus its digit of ``x``."""
        k = self.tid[t.name]
        if a not in pack.unrolled:
            return f"(lo{k}_{pack.slots.index((a, None))} + {x})"
        e, parts = t.indices[a], []
        radices = unrolled_radices(pack, a)
        for n, (d, extent) in enumerate(pack.unrolled[a]):
            digit = f"({x})" if radices[d] == 1 else f"(({x}) / {radices[d]})"
            digit = digit if n == 0 else f"({digit} % {extent})"
            parts.append(f"{e.coef(d)}*(lo{k}_{pack.slots.index((a, d))} + {digit})")
        return "(" + " + ".join(parts + [str(e.offset)]) + ")"

    # --- prelude ---------------------------------------------------------------------------
    # --- packing -----------------------------------------------------------------------------
    def pack(self, name: str, level: int) -> None:
        p, t, pk = self.p, self.w.tensor(name), self.plan.packs[name]
        k, it = self.tid[name], C_TYPES[self.plan.dtypes[name]]
        shape = self.plan.shapes[name]
        src_strides = row_major_strides(shape)
        base = self.base_terms(level)
        n = len(t.indices)
        p(f"/* pack {name}: box {'x'.join(map(str, pk.box))} at level {level} ({self.plan.arch.levels[level].name}) */")
        p.open("")
        for slot, (a, dim) in enumerate(pk.slots):
            e = t.indices[a]
            terms: dict = {}
            for d, c in (e.terms if dim is None else [(dim, 1)]):
                for v, s in base[d].items():
                    terms[v] = terms.get(v, 0) + c * s
            p(f"const long lo{k}_{slot} = {linear_text(terms, e.offset if dim is None else 0)};")
        changed = " || ".join(f"lo{k}_{slot} != pl{k}[{slot}]" for slot in range(len(pk.slots)))
        p.open(f"if ({changed})")
        for slot in range(len(pk.slots)):
            p(f"pl{k}[{slot}] = lo{k}_{slot};")
        self.profile_begin(f"pt{k}")
        p.open("")
        if pk.panel is not None:
            self.pack_panels(pk, k, it, shape, src_strides)
            p.close()
            self.profile_end(f"pt{k}", 1 + list(self.plan.packs).index(name))
            p.close(2)
            return
        row = []
        for a in range(n - 1):
            p.open(f"for (long a{a} = 0; a{a} < {pk.box[a]}; a{a}++)")
            row.append(f"a{a}*{row_major_strides(pk.box)[a]}")
        dst = f"pk{k} + " + (" + ".join(row) if row else "0")
        at = {a: self.source_index(pk, t, a, f"a{a}") for a in range(n - 1)}
        src = " + ".join(f"{at[a]}*{src_strides[a]}" for a in range(n - 1)) or "0"
        last, e_last = n - 1, pk.box[-1]
        if pk.guard and last not in pk.unrolled:
            ok = " && ".join(f"{at[a]} >= 0 && {at[a]} < {shape[a]}" for a in range(n - 1)) or "1"
            p(f"{it} *dst = {dst};")
            s0 = f"lo{k}_{pk.slots.index((last, None))}"
            _copy_run(p, s0, e_last, shape[last], ok, lambda w: f"t{k}[{src} + {s0} + {w}]")
        elif last in pk.unrolled:
            ok = " && ".join(f"{at[a]} >= 0 && {at[a]} < {shape[a]}" for a in range(n - 1)) or "1"
            p(f"{it} *dst = {dst};")
            if pk.guard:
                p(f"const int ok = {ok};")
            self.unrolled_row(pk, t, last, shape[last], "ok" if pk.guard else None, lambda s: f"t{k}[{src} + {s}]")
        else:
            p(f"memcpy({dst}, t{k} + {src} + lo{k}_{pk.slots.index((last, None))}, {e_last} * sizeof({it}));")
        p.close(n - 1)
        p.close()
        self.profile_end(f"pt{k}", 1 + list(self.plan.packs).index(name))
        p.close(2)

    def unrolled_row(self, pk, t, a: int, size: int, ok: str | None, read) -> None:
        """The copy of one row of ``t``'s unrolled axis ``a`` (``Pack.unrolled``, e.g. ``2*P + R`` as R x P
        positions) into ``dst``: a loop per outer digit, then a run along the innermost (strided) dim at its
        stride, with no division per word; guarded (``ok``: the row's other axes are inside the tensor),
        the run's in-bounds part [w0, w1) is worked out once and the rest zero-filled.  ``read(s)``: C text
        of the source word at index ``s`` along the axis."""
        p, k, e = self.p, self.tid[t.name], t.indices[a]
        digits, radices = pk.unrolled[a], unrolled_radices(pk, a)
        for n, (d, extent) in enumerate(digits[:-1]):
            p.open(f"for (long u{n} = 0; u{n} < {extent}; u{n}++)")
        inner, count = digits[-1]
        c = e.coef(inner)
        start = [f"{e.coef(d)}*(lo{k}_{pk.slots.index((a, d))} + u{n})" for n, (d, _) in enumerate(digits[:-1])]
        start += [f"{c}*lo{k}_{pk.slots.index((a, inner))}", str(e.offset)]
        p.open("")
        p(f"const long s0 = {' + '.join(start)};")
        p(f"{C_TYPES[self.plan.dtypes[t.name]]} *row = dst + {linear_text({f'u{n}': radices[d] for n, (d, _) in enumerate(digits[:-1])})};")
        if ok is None:
            p(f"for (long w = 0; w < {count}; w++) row[w] = {read(f's0 + {c}*w')};")
        else:
            p(f"long w0 = s0 < 0 ? (-s0 + {c - 1}) / {c} : 0, w1 = {size} - s0 <= 0 ? 0 : ({size} - s0 + {c - 1}) / {c};")
            p(f"if (w1 > {count}) w1 = {count};")
            p(f"if (!({ok}) || w1 < w0) w0 = w1 = {count};")
            p("for (long w = 0; w < w0; w++) row[w] = 0;")
            p(f"for (long w = w0; w < w1; w++) row[w] = {read(f's0 + {c}*w')};")
            p(f"for (long w = w1; w < {count}; w++) row[w] = 0;")
        p.close(len(digits))

    def pack_panels(self, pk, k: int, it: str, shape, src_strides) -> None:
        """The copy into a panel-packed box (``Pack.panel``): panel by panel, the other axes in C order,
        ``width`` positions of the panel axis innermost (contiguous in the source when that is its last
        axis); positions outside the stored tensor read as zero when the pack is guarded."""
        p = self.p
        axis, width = pk.panel
        n = len(pk.box)
        merged = _transposed_run(pk, shape)
        if merged:
            self.pack_transposed(pk, k, shape, src_strides, merged)
            return
        others = [a for a in range(n) if a != axis]
        p.open(f"for (long pn = 0; pn < {pk.box[axis] // width}; pn++)")
        dst = [f"pn*{self.panel_words(pk)}"]
        ostr = [s * width for s in row_major_strides([1 if a == axis else pk.box[a] for a in range(n)])]
        for a in others:
            p.open(f"for (long a{a} = 0; a{a} < {pk.box[a]}; a{a}++)")
            dst.append(f"a{a}*{ostr[a]}")
        p(f"{it} *dst = pk{k} + {' + '.join(dst)};")
        p(f"const long a{axis}0 = pn*{width};")
        t = self.w.tensor(pk.tensor)
        coord = {a: self.source_index(pk, t, a, f"a{a}") for a in others} | \
            {axis: self.source_index(pk, t, axis, f"a{axis}0 + w")}
        if pk.guard and axis not in pk.unrolled:  # the panel's run along its axis: zeros, the data, zeros
            ok = " && ".join(f"{coord[a]} >= 0 && {coord[a]} < {shape[a]}" for a in others) or "1"
            s0 = self.source_index(pk, t, axis, f"a{axis}0")
            rest = "".join(f"{coord[a]}*{src_strides[a]} + " for a in others)
            _copy_run(p, s0, width, shape[axis], ok, lambda w: f"t{k}[{rest}({s0} + {w})*{src_strides[axis]}]")
            p.close(len(others) + 1)
            return
        p.open(f"for (long w = 0; w < {width}; w++)")
        src = " + ".join(f"{coord[a]}*{src_strides[a]}" for a in range(n))
        if pk.guard:
            ok = " && ".join(f"{coord[a]} >= 0 && {coord[a]} < {shape[a]}" for a in range(n))
            p(f"dst[w] = ({ok}) ? t{k}[{src}] : 0;")
        else:
            p(f"dst[w] = t{k}[{src}];")
        p.close(len(others) + 2)

    def pack_transposed(self, pk, k: int, shape, src_strides, merged: int) -> None:
        """The copy into a panel-packed box whose panel axis is not the source's contiguous one (weights
        K x C x R x S into panels of K innermost), as a blocked transpose: the last ``merged`` axes read as
        one contiguous run of x words (``_transposed_run``), and per panel ``width`` rows of it, one
        ``transpose_block`` square at a time, by ``trp_`` (a register transpose where the machine has
        one).  A copy element by element walked ``width`` rows a whole source row apart at once and took
        half of a 7 x 7 3x3 convolution's time.

        Where the rows alias in the L1 cache (``STAGE_ROWS_PER_OFFSET``), they are read whole first: per
        chunk of the run (``STAGE_BYTES`` of rows at most), each row's part is copied into a staging buffer
        with ``memcpy`` and transposed from there, while the next chunk's lines (or the next panel's) are
        prefetched into the L2 cache.  Transposed straight from the source, a square read ``side`` rows one
        line each, a source row apart (18 KB on res5b_branch2b's weights, 512 x 512 x 3 x 3), and that copy
        took 2.5-6.7 M time-stamp ticks of a 7.6-14 M call, varying with where the weights lay (the kernel's
        own counters, ``targets.cpu.profile``, over 10 copies of the weights in one process); staged and
        prefetched, 2.3-2.7 M of 7.6-8.5 M.  ``bench/cpu_kernels.py --stage-bytes 0`` against the default
        (bench/RESULTS.md, cpu_kernels_unstaged and cpu_kernels_staged, Zen 4, one core): res5a_branch2b
        0.97x and 1.13x NumPy, res5b_branch2b 0.87x and 1.11x."""
        p, t, dt = self.p, self.w.tensor(pk.tensor), self.plan.dtypes[pk.tensor]
        axis, width = pk.panel
        n = len(pk.box)
        run, side = math.prod(pk.box[n - merged:]), transpose_block(dt)
        ostr = [s * width for s in row_major_strides([1 if a == axis else pk.box[a] for a in range(n)])]
        panels = pk.box[axis] // width
        p.open(f"for (long pn = 0; pn < {panels}; pn++)")
        dst = [f"pn*{self.panel_words(pk)}"]
        for a in range(n - merged):
            if a != axis:
                p.open(f"for (long a{a} = 0; a{a} < {pk.box[a]}; a{a}++)")
                dst.append(f"a{a}*{ostr[a]}")
        at = {a: f"a{a}" for a in range(n - merged)} | {axis: f"pn*{width}"} | {a: "0" for a in range(n - merged, n)}
        src = " + ".join(f"{self.source_index(pk, t, a, at[a])}*{src_strides[a]}" for a in range(n))
        out = f"pk{k} + {' + '.join(dst)}"
        rows = str(side) if width % side == 0 else f"(int)({width} - w < {side} ? {width} - w : {side})"
        chunk = (STAGE_BYTES // (width * WORD_BYTES[dt])) // side * side
        if chunk <= 0 or aliased_rows(src_strides[axis] * WORD_BYTES[dt], side) < STAGE_ROWS_PER_OFFSET:
            # rows too many to stage, or too few of them alias in the L1 cache: transpose from the source
            p.open(f"for (long x = 0; x < {run}; x += {side})")
            p.open(f"for (long w = 0; w < {width}; w += {side})")
            cols = str(side) if run % side == 0 else f"(int)({run} - x < {side} ? {run} - x : {side})"
            p(f"trp_{dt}(t{k} + {src} + x + w*{src_strides[axis]}, {src_strides[axis]}, {out} + x*{width} + w, "
              f"{width}, {rows}, {cols});")
            p.close(n - merged + 2)
            return
        chunk = min(chunk, -(-run // side) * side)
        ct, line = C_TYPES[dt], 64 // WORD_BYTES[dt]
        nxt = at | {axis: f"(pn + 1)*{width}"}
        src_next = " + ".join(f"{self.source_index(pk, t, a, nxt[a])}*{src_strides[a]}" for a in range(n))
        p(f"{ct} stage[{width * chunk}] __attribute__((aligned(64)));")
        p.open(f"for (long x0 = 0; x0 < {run}; x0 += {chunk})")
        p(f"const long xn = {run} - x0 < {chunk} ? {run} - x0 : {chunk};")
        # the lines the next chunk reads: this panel's rows further on, or the next panel's first chunk
        p(f"const {ct} *ahead = x0 + {chunk} < {run} ? t{k} + {src} + x0 + {chunk} : "
          f"(pn + 1 < {panels} ? t{k} + {src_next} : 0);")
        p(f"const long an = x0 + {chunk} < {run} ? ({run} - x0 - {chunk} < {chunk} ? {run} - x0 - {chunk} : {chunk}) : "
          f"({run} < {chunk} ? {run} : {chunk});")
        p.open("if (ahead)")
        p(f"for (long w = 0; w < {width}; w++) for (long x = 0; x < an + {line - 1}; x += {line}) "
          f"__builtin_prefetch((const char *)(ahead + w*{src_strides[axis]} + x), 0, 2);")
        p.close()
        p(f"for (long w = 0; w < {width}; w++) memcpy(stage + w*{chunk}, t{k} + {src} + x0 + w*{src_strides[axis]}, "
          f"xn * sizeof({ct}));")
        p.open(f"for (long x = 0; x < xn; x += {side})")
        p.open(f"for (long w = 0; w < {width}; w += {side})")
        p(f"trp_{dt}(stage + x + w*{chunk}, {chunk}, {out} + (x0 + x)*{width} + w, {width}, {rows}, "
          f"(int)(xn - x < {side} ? xn - x : {side}));")
        p.close(3 + n - merged)  # the transposes', the chunks', the panels' and the other axes' loops
