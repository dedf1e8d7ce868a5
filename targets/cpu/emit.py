"""Print a ``Plan`` (``targets.cpu.plan``) as C + OpenMP with a vectorised micro-kernel.

The kernel is ``void cosa_kernel(<one pointer per tensor, in workload order>, int nthreads)``; arrays
are C-contiguous in their stored shapes (``Plan.shapes``); the output is zeroed by the kernel (never
read: beta = 0) and then accumulated.  ``cosa_kernel_ab(<the same pointers>, double alpha, double beta,
int nthreads)`` computes ``out := alpha * nest + beta * out`` under ``targets.exceptions``' rules
(``entry.ab_entry``).  Vectors are GCC vector extensions of the machine's register width (``build.isa``);
gcc -O3 -march=native turns them into AVX/AVX-512/NEON loads, broadcasts and fused multiply-adds.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .entry import ab_entry
from .emit_pack import PackCopies, linear_text, unrolled_radices, row_major_strides
from .prelude import prelude, profile_counters
from .plan import C_TYPES, WORD_BYTES, Plan


UNROLL_K = 4
"""The micro-kernel's innermost reduction loop is unrolled this many times (when it runs at least twice that)."""
PREFETCH_STEPS = 16
"""How many steps of the innermost reduction loop ahead a packed panel is prefetched."""


def scratch_strides(shape: list[int], axis: int) -> list[int]:
    """Strides per axis of an array of ``shape`` stored row-major with ``axis`` moved innermost (the output
    scratch, ``Plan.out_scratch``)."""
    order = [a for a in range(len(shape)) if a != axis] + [axis]
    inner = row_major_strides([shape[a] for a in order])
    strides = [0] * len(shape)
    for a, s in zip(order, inner):
        strides[a] = s
    return strides


class _Printer:
    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, text: str = "") -> None:
        self.lines.append("    " * self.depth + text if text else "")

    def open(self, text: str) -> None:
        self(f"{text} {{" if text else "{")
        self.depth += 1

    def close(self, n: int = 1) -> None:
        for _ in range(n):
            self.depth -= 1
            self("}")


class _Emitter(PackCopies):
    def __init__(self, plan: Plan, vector_bytes: int, profile: bool = False):
        self.plan = plan
        self.profile = profile
        self.w = plan.workload
        self.dims = list(self.w.dims)
        self.tid = {t.name: k for k, t in enumerate(self.w.tensors)}
        self.ctype = C_TYPES[plan.compute_dtype]
        self.lanes = plan.kernel.lanes
        self.ker = plan.kernel  # the kernel tile being printed (a ragged dim's last one is cut)
        self.vector_bytes = vector_bytes
        self.p = _Printer()

    # --- profile counters (``profile=True``: ``targets.cpu.profile``) --------------------------
    def profile_begin(self, var: str) -> None:
        if self.profile:
            self.p(f"const unsigned long long {var} = cosa_ticks();")

    def profile_end(self, var: str, slot: int) -> None:
        if self.profile:
            self.p(f"__atomic_fetch_add(&cosa_prof[{slot}], cosa_ticks() - {var}, __ATOMIC_RELAXED);")

    # --- names and index arithmetic --------------------------------------------------------
    def dvar(self, d: str) -> str:
        return f"d{self.dims.index(d)}"

    def base_terms(self, below_level: int) -> dict:
        """dim -> {loop var: step} for the loops of levels < below_level."""
        out = {d: {} for d in self.dims}
        for lv in self.plan.loops:
            if lv.level < below_level:
                out[lv.dim][lv.var] = lv.step
        return out

    def layout(self, t) -> tuple[list[int], list[int]]:
        """(shape, strides) of ``t`` as the micro-kernel reads it: its pack box or its stored array.  In a
        panel-packed box (``Pack.panel``) the panel axis has stride 1 within its panel (``panel_offset``
        adds which panel) and the other axes move by whole rows of ``width`` words."""
        pack = self.plan.packs.get(t.name)
        shape = list(pack.box) if pack else list(self.plan.shapes[t.name])
        if t.is_output and self.plan.out_scratch is not None:
            return shape, scratch_strides(shape, self.plan.out_scratch)
        if pack is None or pack.panel is None:
            return shape, row_major_strides(shape)
        axis, width = pack.panel
        strides = [s * width for s in row_major_strides([1 if a == axis else n for a, n in enumerate(shape)])]
        strides[axis] = 1
        return shape, strides

    def panel_dim(self, t) -> str | None:
        """The dim that runs along the panel axis of ``t``'s pack (None: not panel-packed)."""
        pack = self.plan.packs.get(t.name)
        return None if pack is None or pack.panel is None else t.indices[pack.panel[0]].dims[0]

    def gstride(self, t, d: str) -> int:
        """Elements moved in ``t``'s layout when dim ``d`` moves by one (its radix along an axis its pack
        unrolls, ``Pack.unrolled``)."""
        _, strides = self.layout(t)
        pack = self.plan.packs.get(t.name)
        unrolled = pack.unrolled if pack is not None else {}
        return sum(s * (unrolled_radices(pack, a).get(d, 0) if a in unrolled else e.coef(d))
                   for a, (s, e) in enumerate(zip(strides, t.indices)))

    def position(self, t, a: int) -> tuple[dict, int]:
        """(terms, constant) of the C expression of the position along axis ``a`` of ``t``'s pack of the
        kernel tile's origin: its index there less the pack's (``pl``), or along an unrolled axis each
        dim's offset from the pack's first value of it times its radix."""
        k, e, pack = self.tid[t.name], t.indices[a], self.plan.packs[t.name]
        if a not in pack.unrolled:
            return {f"b_{self.dvar(d)}": c for d, c in e.terms} | {f"pl{k}[{pack.slots.index((a, None))}]": -1}, e.offset
        terms = {}
        for d, radix in unrolled_radices(pack, a).items():
            terms[f"b_{self.dvar(d)}"] = radix
            terms[f"pl{k}[{pack.slots.index((a, d))}]"] = -radix
        return terms, 0

    def prelude(self) -> None:
        prelude(self.p, self.ctype, self.lanes, self.plan.compute_dtype,
                sorted({self.plan.dtypes[t.name] for t in self.w.inputs}))

    # --- micro-kernel ------------------------------------------------------------------------
    def offset(self, t, local: dict) -> str:
        """C expression of ``t``'s element at local coordinates ``local`` (dim -> C text)."""
        k = self.tid[t.name]
        terms = {f"o{k}": 1}
        pd = self.panel_dim(t)
        if pd is not None:  # the panel of position q + x along the panel axis, and the place in it
            pack = self.plan.packs[t.name]
            width = pack.panel[1]
            start, _, step = local.get(pd, "0").rpartition(" + ")
            if start and step.isdigit() and int(step) < width:
                # a block's row or vector: blocks start on panel boundaries (``costmodel.packing.panel_axis``),
                # so the place in the panel is the constant; every row then has one base pointer in common
                terms[f"((q{k} + {start}) / {width})"] = self.panel_words(pack)
                terms[step] = 1
            else:
                x = f"q{k} + {local[pd]}" if local.get(pd, "0") != "0" else f"q{k}"
                terms[f"(({x}) / {width})"] = self.panel_words(pack)
                terms[f"(({x}) % {width})"] = 1
        for d, text in local.items():
            if d == pd:
                continue
            g = self.gstride(t, d)
            if g and text != "0":  # two dims may have the same text (row 8 of column 8): their strides add
                terms[f"({text})"] = terms.get(f"({text})", 0) + g
        return linear_text(terms)

    def step(self, t, d: str) -> int:
        """Words between ``t``'s elements at two consecutive positions of the block dim ``d`` within a
        block: 1 along its panel axis (a block lies in one panel, ``offset``), else ``gstride``."""
        return 1 if self.panel_dim(t) == d else self.gstride(t, d)

    def guard(self, t, local: dict) -> str:
        shape = self.plan.shapes[t.name]
        conds = []
        for a, e in enumerate(t.indices):
            terms = {f"b_{self.dvar(d)}": c for d, c in e.terms}
            for d, c in e.terms:
                if local.get(d, "0") != "0":
                    terms[f"({local[d]})"] = terms.get(f"({local[d]})", 0) + c
            conds.append(f"(unsigned long)({linear_text(terms, e.offset)}) < {shape[a]}UL")
        return " && ".join(conds) or "1"

    def read(self, t, local: dict, vector: bool, width: int = 0, base: str | None = None, delta: int = 0) -> str:
        """C expression of ``t`` at ``local``: a vector along j (``width`` valid lanes; 0 = all) or a scalar;
        ``base``: a pointer to ``t`` at the block's first row and vector, read ``delta`` words on (``block``)."""
        k, dt = self.tid[t.name], self.plan.dtypes[t.name]
        if base is None:
            at = f"t{k}[{self.offset(t, local)}]" if t.name not in self.plan.packs else f"pk{k}[{self.offset(t, local)}]"
        else:
            at = f"{base}[{delta}]"
        ptr = at.replace("[", " + ", 1)[:-1]
        j = self.plan.kernel.j
        if vector and j in t.dims:
            g = self.gstride(t, j)
            if width and not (g == 1 and t.name in self.plan.packs):
                if g == 1 and C_TYPES[dt] == self.ctype:
                    return f"ldt({ptr}, {width})"  # the first lanes of a unit-stride row (masked on AVX-512)
                return f"ldp_{dt}({ptr}, {g}, {width})"
            # a packed buffer has a vector of slack at its end: a partial vector is loaded whole, and its
            # extra lanes feed accumulator lanes that are never stored
            return f"ld_{dt}({ptr})" if g == 1 else f"ldg_{dt}({ptr}, {g})"
        value = f"({self.ctype}){at}"
        if t.name in self.plan.guarded:
            return f"({self.guard(t, local)} ? {value} : ({self.ctype})0)"
        return value

    def out_array(self) -> str:
        """The C array the micro-kernel accumulates in: the output, or its scratch (``Plan.out_scratch``)."""
        return "acc" if self.plan.out_scratch is not None else f"t{self.tid[self.w.output.name]}"

    def scratch_copy(self, parallel: bool) -> None:
        """The output from its scratch (``Plan.out_scratch``), in the output's order; ``parallel``: inside
        the parallel region, after every thread's last block (a barrier), its outermost axis split among
        the threads."""
        p, out = self.p, self.w.output
        shape = list(self.plan.shapes[out.name])
        dst, src = row_major_strides(shape), scratch_strides(shape, self.plan.out_scratch)
        p.open("")
        if parallel:
            p("#pragma omp barrier")
            p("#pragma omp for schedule(static)")
        for a, n in enumerate(shape):
            p.open(f"for (long x{a} = 0; x{a} < {n}; x{a}++)")
        at = lambda strides: linear_text({f"x{a}": st for a, st in enumerate(strides)})  # noqa: E731
        p(f"t{self.tid[out.name]}[{at(dst)}] = acc[{at(src)}];")
        p.close(len(shape) + 1)

    def prefetch(self, local: dict, d: str) -> None:
        """Software prefetch of each panel-packed input the micro-kernel streams along the innermost
        reduction dim ``d``: the panel holds the reduction dims in C order, so the words ahead are the next
        ones in memory; the line ``PREFETCH_STEPS`` steps of ``d`` ahead in bytes (a K panel) is fetched
        even where ``d`` itself runs only a few steps (a convolution's R inside C)."""
        if PREFETCH_STEPS <= 0:
            return
        for t in self.w.inputs:
            if self.panel_dim(t) is None or d not in t.dims:
                continue
            ahead = PREFETCH_STEPS * abs(self.gstride(t, d)) * WORD_BYTES[self.plan.dtypes[t.name]]
            self.p(f"__builtin_prefetch((const char *)(pk{self.tid[t.name]} + {self.offset(t, local)}) + {ahead}, 0, 3);")

    def block(self, li: str, mr: int, lj: str, nv: int, lanes: int, tail: int = 0) -> None:
        """One register block: rows li..li+mr-1 of dim i, nv vectors of ``lanes`` from lj along j, the last
        one with only ``tail`` valid lanes when ``tail`` > 0 (loaded and stored lane by lane)."""
        p, ker, out = self.p, self.ker, self.w.output
        vector = lanes > 1
        ty = "vc_t" if vector else self.ctype
        acc = self.out_array()
        base_local = {d: f"l_{self.dvar(d)}" for d in ker.outer}

        def local(ii, v, extra=None):
            loc = dict(base_local)
            if ker.i is not None:
                loc[ker.i] = f"{li} + {ii}"
            if ker.j is not None:
                loc[ker.j] = f"{lj} + {v * lanes}"
            loc.update(extra or {})
            return loc

        p.open("")
        g = self.gstride(out, ker.j) if vector else 1   # lanes along a strided output dim: gathered
        for ii in range(mr):
            for v in range(nv):
                at = self.offset(out, local(ii, v))
                if vector and g != 1:
                    p(f"vc_t c{ii}_{v} = ldgo({acc} + {at}, {g}, {tail if tail and v == nv - 1 else lanes});")
                elif vector and tail and v == nv - 1:
                    p(f"vc_t c{ii}_{v} = ldt({acc} + {at}, {tail});")
                elif vector:
                    p(f"vc_t c{ii}_{v}; memcpy(&c{ii}_{v}, {acc} + {at}, sizeof c{ii}_{v});")
                else:
                    p(f"{ty} c{ii}_{v} = {acc}[{at}];")
        red = {d: f"r_{self.dvar(d)}" for d in ker.reduction}
        for n, d in enumerate(ker.reduction):
            if n == len(ker.reduction) - 1 and ker.extents[d] >= 2 * UNROLL_K:
                p(f"#pragma GCC unroll {UNROLL_K}")
            p.open(f"for (long r_{self.dvar(d)} = 0; r_{self.dvar(d)} < {ker.extents[d]}; r_{self.dvar(d)}++)")
        if ker.reduction:
            self.prefetch(local(0, 0, red), ker.reduction[-1])
        # operands: hoist what does not depend on the row or the vector; an unguarded operand is read through
        # one pointer at the block's first row and vector, the others a constant number of words on (so
        # the compiler keeps one address register per operand, not one per row)
        names = {}
        for t in self.w.inputs:
            k = self.tid[t.name]
            dep_i = ker.i is not None and ker.i in t.dims
            dep_j = ker.j in t.dims
            base = None
            if t.name not in self.plan.guarded:
                base = f"op{k}"
                arr = f"pk{k}" if t.name in self.plan.packs else f"t{k}"
                p(f"const {C_TYPES[self.plan.dtypes[t.name]]} *{base} = {arr} + {self.offset(t, local(0, 0, red))};")
                row, col = self.step(t, ker.i) if dep_i else 0, self.step(t, ker.j) * lanes if dep_j else 0
            for ii in range(mr if dep_i else 1):
                for v in range(nv if dep_j else 1):
                    var = f"x{k}_{ii}_{v}"
                    is_vec = vector and dep_j
                    width = tail if tail and v == nv - 1 else 0
                    got = self.read(t, local(ii, v, red), vector, width) if base is None else \
                        self.read(t, {}, vector, width, base, ii * row + v * col)
                    p(f"{'vc_t' if is_vec else self.ctype} {var} = {got};")
                    if is_vec and (mr > 1 or dep_i):
                        p(f"KEEP({var});")
                    names[(t.name, ii, v)] = var
        for ii in range(mr):
            for v in range(nv):
                factors = []
                # operands shared by the rows first: their product is computed once per step, not per row
                for t in sorted(self.w.inputs, key=lambda t: ker.i is not None and ker.i in t.dims):
                    dep_i = ker.i is not None and ker.i in t.dims
                    factors.append(names[(t.name, ii if dep_i else 0, v if ker.j in t.dims else 0)])
                p(f"c{ii}_{v} += {' * '.join(factors)};")
        p.close(len(ker.reduction))
        for ii in range(mr):
            for v in range(nv):
                at = self.offset(out, local(ii, v))
                if vector and g != 1:
                    p(f"stgo({acc} + {at}, c{ii}_{v}, {g}, {tail if tail and v == nv - 1 else lanes});")
                elif vector and tail and v == nv - 1:
                    p(f"stt({acc} + {at}, c{ii}_{v}, {tail});")
                elif vector:
                    p(f"memcpy({acc} + {at}, &c{ii}_{v}, sizeof c{ii}_{v});")
                else:
                    p(f"{acc}[{at}] = c{ii}_{v};")
        p.close()

    def micro_kernel(self) -> None:
        p, ker = self.p, self.plan.kernel
        inner = self.plan.inner_level
        base = self.base_terms(inner)
        p(f"/* micro-kernel: the level-{inner} tile {ker.extents}; blocks of {ker.mr} x {ker.nv}x{ker.lanes} "
          f"(i={ker.i}, j={ker.j}) */")
        p.open("")
        for d in self.dims:
            p(f"const long b_{self.dvar(d)} = {linear_text(base[d])};")
        for t in self.w.tensors:
            k = self.tid[t.name]
            _, strides = self.layout(t)
            terms: dict = {}
            const = 0
            pack = self.plan.packs.get(t.name)
            if pack is not None and pack.panel is not None:
                p(f"const long q{k} = {linear_text(*self.position(t, pack.panel[0]))};")
            for a, (s, e) in enumerate(zip(strides, t.indices)):
                if pack is not None and pack.panel is not None and a == pack.panel[0]:
                    continue
                at, c0 = self.position(t, a) if pack else ({f"b_{self.dvar(d)}": c for d, c in e.terms}, e.offset)
                const += s * c0
                for v, c in at.items():
                    terms[v] = terms.get(v, 0) + s * c
            p(f"const long o{k} = {linear_text(terms, const)};")
        for d, padded in self.plan.ragged.items():  # the last tile of a ragged dim: cut to the bound
            full, bound = ker.extents[d], self.w.dims[d]
            p.open(f"if (b_{self.dvar(d)} + {full} <= {bound})")
            self.kernel_body(ker)
            p.close()
            p.open("else")
            self.kernel_body(replace(ker, extents={**ker.extents, d: full - (padded - bound)}))
            p.close()
        if not self.plan.ragged:
            self.kernel_body(ker)
        p.close()

    def kernel_body(self, ker) -> None:
        """The register blocks of one kernel tile of ``ker``'s extents (``self.ker`` while they print)."""
        p = self.p
        self.ker = ker
        for d in ker.outer:
            p.open(f"for (long l_{self.dvar(d)} = 0; l_{self.dvar(d)} < {ker.extents[d]}; l_{self.dvar(d)}++)")
        e_i = ker.extents[ker.i] if ker.i is not None else 1
        e_j = ker.extents[ker.j] if ker.j is not None else 1
        i_parts = [(ker.mr, e_i // ker.mr)] + ([(e_i % ker.mr, 1)] if e_i % ker.mr else [])
        nr = ker.nv * ker.lanes
        j_parts = [(ker.nv, ker.lanes, 0, e_j // nr, 0)]
        pos = (e_j // nr) * nr
        rest = e_j - pos
        if rest and ker.lanes > 1:  # the last block: full vectors, then one with the remaining lanes
            nv = -(-rest // ker.lanes)
            j_parts.append((nv, ker.lanes, pos, 1, rest - (nv - 1) * ker.lanes if rest % ker.lanes else 0))
        elif rest:
            j_parts.append((rest, 1, pos, 1, 0))
        i_start = 0
        for mr, count in i_parts:
            if count == 0:
                continue
            li = "li"
            if count > 1:
                p.open(f"for (long li = {i_start}; li < {i_start + mr * count}; li += {mr})")
            else:
                li = str(i_start)
            for nv, lanes, start, jcount, tail in j_parts:
                if jcount == 0:
                    continue
                if jcount > 1:
                    p.open(f"for (long lj = {start}; lj < {start + jcount * nv * lanes}; lj += {nv * lanes})")
                    self.block(li, mr, "lj", nv, lanes)
                    p.close()
                else:
                    self.block(li, mr, str(start), nv, lanes, tail)
            if count > 1:
                p.close()
            i_start += mr * count
        p.close(len(ker.outer))
        self.ker = self.plan.kernel

    # --- the kernel ----------------------------------------------------------------------------
    def kernel(self) -> str:
        p, plan, w = self.p, self.plan, self.w
        self.prelude()
        args = []
        for t in w.tensors:
            k = self.tid[t.name]
            const = "" if t.is_output else "const "
            args.append(f"{const}{C_TYPES[plan.dtypes[t.name]]} *restrict t{k}")
        p(f"/* {w.name}: " + "; ".join(f"t{self.tid[t.name]} = {t.name}{list(plan.shapes[t.name])} "
                                        f"{plan.dtypes[t.name]}" for t in w.tensors) + " */")
        for name, how in w.op.get("subsampled", {}).items():  # workloads.fusion.subsample
            steps = ", ".join(f"::{s}" if s > 1 else ":" for s in how["strides"])
            p(f"/* t{self.tid[name]}: the copy {name}[{steps}] of the stored {list(how['shape'])}, first "
              f"{list(how['copy_shape'])} */")
        if self.profile:
            profile_counters(p, 1 + len(plan.packs))
        p.open(f"void cosa_kernel({', '.join(args)}, int nthreads)")
        self.profile_begin("pt_call")
        out = w.output
        words = math.prod(plan.shapes[out.name])
        if plan.out_scratch is not None:  # lanes along a strided output dim: accumulated with that dim innermost
            size = -(-(words + self.lanes) * WORD_BYTES[plan.dtypes[out.name]] // 64) * 64
            p(f"{self.ctype} *acc = ({self.ctype} *)aligned_alloc(64, {size});")
        p(f"memset({self.out_array()}, 0, {words} * sizeof({self.ctype}));")
        parallel = any(lv.parallel for lv in plan.loops)
        if parallel:
            p("#pragma omp parallel num_threads(nthreads)")
        else:
            p("(void)nthreads;")
        p.open("")
        for name, pk in plan.packs.items():
            k, it = self.tid[name], C_TYPES[plan.dtypes[name]]
            size = -(-(pk.words + self.lanes) * WORD_BYTES[plan.dtypes[name]] // 64) * 64
            p(f"{it} *pk{k} = ({it} *)aligned_alloc(64, {size});")
            p(f"long pl{k}[{len(pk.slots)}]; for (int a = 0; a < {len(pk.slots)}; a++) pl{k}[a] = LONG_MIN;")
        opened = 0
        for level in range(plan.inner_level + 1):
            for name, pk in plan.packs.items():
                if pk.level == level:
                    self.pack(name, level)
            band = [lv for lv in plan.loops if lv.level == level]
            npar = sum(1 for lv in band if lv.parallel)
            for lv in band:
                if lv.parallel and lv is next(x for x in band if x.parallel):
                    # nowait: with a static schedule the same iterations go to the same thread in every
                    # instance of this loop, and an output element belongs to one iteration of the
                    # output-separable dims, so no thread waits for another before the region ends
                    p(f"#pragma omp for collapse({npar}) schedule(static) nowait")
                kind = "spatial" if lv.spatial else "temporal"
                p.open(f"for (long {lv.var} = 0; {lv.var} < {lv.factor}; {lv.var}++)"
                       f"  /* {plan.arch.levels[level].name} {kind} {lv.dim} */")
                opened += 1
        self.micro_kernel()
        p.close(opened)
        for name in plan.packs:
            p(f"free(pk{self.tid[name]});")
        if plan.out_scratch is not None and parallel:
            self.scratch_copy(True)
        p.close()
        if plan.out_scratch is not None:
            if not parallel:
                self.scratch_copy(False)
            p("free(acc);")
        self.profile_end("pt_call", 0)
        p.close()
        names = [f"t{self.tid[t.name]}" for t in w.tensors]
        params = [a.replace("restrict ", "") for a in args]
        out_words = str(math.prod(plan.shapes[out.name]))
        return "\n".join(p.lines) + "\n" + ab_entry(self.ctype, params, names, names[self.tid[out.name]], out_words)


def emit_c(plan: Plan, vector_bytes: int = 32, profile: bool = False) -> str:
    """C source of ``plan`` (see the module docstring for the calling convention); ``profile``: with
    counters of the time spent in the whole call and in each packing copy (``targets.cpu.profile``)."""
    return _Emitter(plan, vector_bytes, profile).kernel()
