"""Software pipelining of a plan's command program (see ``codegen.build``).

Gemmini's core issues commands in program order into small per-unit queues
(load 8, execute 8, store 2 entries): while it stalls on a full load queue,
only the computes already in the execute queue overlap the loads.  A program
that moves a tile in as one burst and then computes on it therefore takes
about load + compute cycles.  With double-buffered tiles, the pipelined
program instead issues, spread evenly among the computes of the current
tile (a proportional number of rows before each compute),

* the mvins of the NEXT input and weight tiles (the next iteration of the
  level-0 loops that change the tile, computed as expressions of the loop
  variables) into the other half of the scratchpad,
* the mvouts of the PREVIOUS accumulator tile (deferred: with two store queue
  entries, a burst of mvouts would block the issue of the next computes),
  from the other half of the accumulator, in the first half of the current
  tile's computes, and
* the bias broadcast into the NEXT accumulator tile, in the second half
  (after the previous tile's mvouts have been issued from those rows);
  partial sums are moved back in at the tile's start, as before, so that
  their main-memory copy was written a whole tile earlier,

so the load, execute and store queues all stay fed and the program takes
about max(load, compute) cycles, as Gemmini's loop unrollers (LoopMatmul,
LoopConv) do.  The first tile's moves form a prologue, the last accumulator
tile's mvouts an epilogue.  The data hazards between the halves are the
hardware's (it orders commands of different units that touch the same rows);
the functional model runs the commands in program order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from .ir import Assign, Cmd, Comment, Const, Expr, For, If, Var, all_of, cmp, loop, negate, select, when


@dataclass(frozen=True)
class Stream:
    """A run of moves as nested loops: ``axes`` (var, extent, step), outer to inner; ``body(idx)`` the commands
    of one point (``idx``: var -> value).  A unit is one point of the axes."""

    axes: tuple
    body: Callable[[dict], list]

    @property
    def units(self) -> int:
        return math.prod(-(-ext // step) for _, ext, step in self.axes)

    def emit_all(self) -> list:
        """Every point, as nested loops (single-iteration loops inlined)."""
        def nest(k, idx):
            if k == len(self.axes):
                return self.body(idx)
            var, ext, step = self.axes[k]
            return loop(var, ext, lambda v: nest(k + 1, {**idx, var: v}), step)
        return nest(0, {})

    def emit_units(self, uvar: str, lo: Expr, hi: Expr) -> list:
        """Units ``lo`` .. ``hi`` - 1 (in loop order), as one loop over the flat unit index ``uvar``."""
        idx, assigns, radix = {}, [], 1
        for var, ext, step in reversed(self.axes):
            n = -(-ext // step)
            if n == 1:
                idx[var] = Const(0)
                continue
            digit = Var(uvar) // radix if radix > 1 else Var(uvar)
            if radix * n < self.units:
                digit = digit % n
            assigns.insert(0, Assign(var, digit * step))
            idx[var] = Var(var)
            radix *= n
        return [For(uvar, hi, tuple(assigns + self.body(idx)), 1, lo)]


def next_tile(loops, pos: int, prefix: str) -> tuple:
    """The next iteration of the odometer of ``loops[:pos]`` (outer to inner): (assignments of
    ``prefix + var``, var -> Var substitution, name of the 0/1 variable "there is a next tile")."""
    out, sub = [], {}
    for i in range(pos):
        lp = loops[i]
        v = Var(lp.var)
        carry = all_of([cmp("==", Var(loops[j].var), loops[j].count - 1) for j in range(i + 1, pos)])
        out.append(Assign(prefix + lp.var, select(carry, select(cmp("==", v, lp.count - 1), 0, v + 1), v)))
        sub[lp.var] = Var(prefix + lp.var)
    more = prefix + "more"
    out.append(Assign(more, negate(all_of([cmp("==", Var(lp.var), lp.count - 1) for lp in loops[:pos]]))))
    return out, sub, more


@dataclass(frozen=True)
class Hook:
    """Moves spread over the computes of the loops ``loops[pos:]``: ``chunk(lo, hi)`` builds the moves of
    units lo .. hi - 1 (of ``units``); ``part``: all computes, or the first or second half of them."""

    pos: int
    units: int
    guard: Expr
    chunk: Callable[[Expr, Expr], list]
    part: str = "all"


def interleave(builder, cidx: Expr) -> list:
    """The moves to issue before the compute ``cidx`` (index within its array block) of every hook: each
    hook's tile (the loops ``loops[pos:]``) numbers its computes ``q<pos>``, and compute q issues units
    q * units // computes .. (q + 1) * units // computes - 1."""
    out, numbered = [], set()
    loops, cb = builder.loops, builder.computes_per_block()
    for h in builder.hooks:
        q: Expr = cidx
        total = cb
        for lp in reversed(loops[h.pos:]):
            q = q + Var(lp.var) * total
            total *= lp.count
        if h.pos not in numbered:
            out.append(Assign(f"q{h.pos}", q))
            numbered.add(h.pos)
        q = Var(f"q{h.pos}")
        first = max(1, total // 2)
        conds = [h.guard]
        if h.part == "first":
            span = first
            conds.append(cmp("<", q, first))
        elif h.part == "second":
            span = total - first
            q = q - first
            conds.append(cmp("<=", 0, q))
        else:
            span = total
        lo, hi = q * h.units // span, (q + 1) * h.units // span
        out += when(all_of(conds + [cmp("<", lo, hi)]), h.chunk(lo, hi))
    return out


def pipelined_nest(b) -> list:
    """The loops of ``b`` (a ``codegen.build._Builder``) with the moves of the next and previous tiles among
    the computes; see the module docstring."""
    loops, n = b.loops, len(b.loops)
    pre = {i: [] for i in range(n + 1)}
    post = {i: [] for i in range(n + 1)}
    prologue, epilogue = [], []
    zero = {lp.var: Const(0) for lp in loops}
    b.hooks = []
    for name, pos, slot, make, bases in (("input", b.pos_a, "a_slot", b.input_stream, b.p.a_bases),
                                         ("weight", b.pos_b, "b_slot", b.weight_stream, b.p.b_bases)):
        if pos == 0 or len(bases) == 1:  # one tile for the whole program, or single buffered
            pre[pos] += b.load_inputs() if name == "input" else b.load_weights()
            continue
        with b.view(zero, {slot: Const(0)}):
            prologue += [Comment(f"first {name} tile -> scratchpad")] + make().emit_all()
        prefix = "n" + slot[0] + "_"
        assigns, sub, more = next_tile(loops, pos, prefix)
        pre[pos] += [Comment(f"{name} tile (moved in during the previous one); the next one follows among "
                             "the computes"), Assign(slot, 1 - Var(slot))] + assigns
        stream_view = (sub, {slot: 1 - Var(slot)})

        def chunk(lo, hi, make=make, stream_view=stream_view, uvar="p" + slot[0]):
            with b.view(*stream_view):
                return make().emit_units(uvar, lo, hi)
        b.hooks.append(Hook(pos, make().units, Var(more), chunk))
    acc_pipe = b.pos_acc > 0 and len(b.p.acc_bases) > 1
    if not acc_pipe:
        pre[b.pos_acc] += b.open_acc()
        post[b.pos_acc] += b.close_acc()
    else:
        per_tile = b.computes_per_block() * math.prod(lp.count for lp in loops[b.pos_acc:])
        early_bias = b.bias and per_tile >= 2
        acc_loops = loops[:b.pos_acc]
        prev = {lp.var: Var("pv_" + lp.var) for lp in acc_loops}
        open_now = b.open_acc(toggle=False, bias=not early_bias)
        if early_bias:
            with b.view(zero, {"acc_slot": Const(0)}):
                prologue += [Comment("first accumulator tile: bias")] + b.bias_stream().emit_all()
            assigns, sub, more = next_tile(loops, b.pos_acc, "nc_")
            with b.view(sub):
                next_first = b.first_visit()

            def bias_chunk(lo, hi, sub=sub):
                with b.view(sub, {"acc_slot": 1 - Var("acc_slot")}):
                    return b.bias_stream().emit_units("pi", lo, hi)
            b.hooks.append(Hook(b.pos_acc, b.bias_stream().units, all_of([Var(more), next_first]), bias_chunk,
                                "second"))
            open_now = assigns + open_now
        pre[b.pos_acc] += [Comment("accumulator tile (the previous one is moved out among its computes)"),
                           Assign("acc_slot", 1 - Var("acc_slot"))] + open_now
        post[b.pos_acc] += [Assign(v.name, Var(k)) for k, v in prev.items()]
        post[b.pos_acc] += [Assign("pv_slot", Var("acc_slot")), Assign("pend", Const(1))]
        prologue.append(Assign("pend", Const(0)))

        def close_chunk(lo, hi):
            with b.view(prev, {"acc_slot": Var("pv_slot")}):
                return b.close_acc(lambda s: s.emit_units("po", lo, hi))
        b.hooks.append(Hook(b.pos_acc, b.out_units(), Var("pend"), close_chunk, "first"))
        with b.view(prev, {"acc_slot": Var("pv_slot")}):
            epilogue = [Comment("last accumulator tile -> output")] + b.close_acc()

    def nest(depth):
        body = list(pre[depth])
        if depth == n:
            body += b.block()
        else:
            lp = loops[depth]
            body.append(For(lp.var, Const(lp.count), tuple(nest(depth + 1))))
        body += post[depth]
        return body

    return prune_assigns(prologue + nest(0) + epilogue)


def _reads(e, out: set) -> None:
    """Add the variables expression ``e`` reads to ``out``."""
    if isinstance(e, Var):
        out.add(e.name)
    elif isinstance(e, Expr):
        for v in vars(e).values():
            _reads(v, out)


def _walk(stmts, fn) -> None:
    for s in stmts:
        fn(s)
        if isinstance(s, For):
            _walk(s.body, fn)
        elif isinstance(s, If):
            _walk(s.then, fn)
            _walk(s.other, fn)


def prune_assigns(stmts: list) -> list:
    """``stmts`` without the assignments of variables that nothing reads (so C compilers do not warn)."""
    read: set = set()

    def collect(s):
        values = (s.stop, s.start) if isinstance(s, For) else (s.cond,) if isinstance(s, If) else \
            (s.value,) if isinstance(s, Assign) else s.args if isinstance(s, Cmd) else ()
        for v in values:
            _reads(v, read)
    _walk(stmts, collect)

    def keep(body):
        out = []
        for s in body:
            if isinstance(s, Assign) and s.var not in read:
                continue
            if isinstance(s, For):
                s = For(s.var, s.stop, tuple(keep(s.body)), s.step, s.start)
            elif isinstance(s, If):
                s = If(s.cond, tuple(keep(s.then)), tuple(keep(s.other)))
            out.append(s)
        return out
    return keep(stmts)
