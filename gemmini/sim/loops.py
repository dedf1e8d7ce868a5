"""Gemmini's loop unrollers, cycle by cycle: the order in which LOOP_WS and LOOP_CONV_WS commands reach the queues.

``Unroller`` models the front end of Gemmini (ucb-bar/gemmini ``LoopConv`` then
``LoopMatmul``, as in its Controller) on a command stream: configuration words
are held in the slot being configured; a start word marks the slot configured;
each sub-unroller (see ``loop_units``) takes the oldest configured loop it has
not run yet, so up to two loops are in flight (the head and the tail); a loop
is retired when all its sub-unrollers are done, and a command that is not a
loop command passes only while no loop is configured.  One command leaves per
cycle, chosen by Gemmini's arbiters:

* LOOP_WS: stC, then ex, then ldD, then ldA/ldB (A/B: the head loop's loads
  first; on one loop, the one whose K iterator is behind, B when B is at its
  start).  ex issues a (k, j, i) step only when ldA has issued past (k, i) and
  ldB past (k, j) (ldB's test compares ldA's k, as the Scala does) and ldD is
  done; stC moves block (i, j) only once ex is on its last k and past (i, j).
* LOOP_CONV_WS: st, ex, ld_bias, ld_weights, ld_input; each sub-unroller
  feeds its commands through a 2-stage pipeline; ex starts only when its
  loop's loads are all issued, st when its ex is; the next loop's loads wait
  while ex waits for the current loop's.
* A sub-unroller whose queue is full (``busy(kind, cycle)``, from the timing
  model's queues; never by default) holds its command, so the others' go first.
* Addresses: the loops alternate between the two halves of the scratchpad, and
  each loop that stores C moves the accumulator rows of the next one to the
  other half (see ``loop_units``).

Differences from the hardware: the core hands over one command per cycle and
the unroller's input queue never runs dry; a queue's occupancy is what the
caller's ``busy`` says (the timing model's entries, preloads merged into
their computes), not Gemmini's reservation-station counters; a sub-unroller
whose main-memory address is 0 finishes at once (Gemmini spends one cycle);
a sub-unroller that finishes is marked done, and may take the next loop, in
the same cycle (Gemmini's registers take a cycle or two), so the order can
differ from the hardware's by a command or two at loop boundaries.
LOOP_CONV_WS words are decoded in the config's ``loop_conv_layout``
(``isa_loops``): gemmini.h 180c468's rectangular encoding (in_row_dim /
in_col_dim, out_row_dim / out_col_dim), which Gemmini's Scala decodes from
its commit 16a9d3f on, or Gemmini f13847e's square-image one (one in_dim,
out_dim, pool_out_dim; other positions for stride, padding, the pool fields
and plpad / dpad); the addressing is the same for square images.
Not modelled (a ``SimulationError`` naming the loop instruction): LOOP_WS
resadd and layernorm/softmax stores; LOOP_CONV_WS transposed or rotated
operands and input dilation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from .. import isa, isa_loops as L
from ..config import DEFAULT_CONFIG, GemminiConfig
from ..errors import IsaError, SimulationError
from .loop_units import Entry, conv_units, ws_units

SOURCE = "gemmini loop unroller"
WS_UNITS = ("stC", "ex", "ldD", "ldA", "ldB")          # arbiter priority (ldA/ldB share the last input)
CONV_UNITS = ("st", "ex", "ld_bias", "ld_weights", "ld_input")
_CONV_LOADS = ("ld_bias", "ld_input", "ld_weights")


@dataclass(frozen=True)
class Issued:
    """A command as it leaves the unroller: ``origin`` is the index of the stream command that caused it
    (the loop's start word, or the command itself), ``cycle`` the unroller cycle, ``from_loop`` whether a
    loop unroller issued it."""

    cmd: isa.Command
    origin: int
    cycle: int
    from_loop: bool


@dataclass
class _Unit:
    name: str
    latency: int
    entries: list = field(default_factory=list)
    pos: int = 0
    loop_id: int = 0
    origin: int = 0
    pipe: list = field(default_factory=list)

    def __post_init__(self):
        self.pipe = [None] * self.latency

    @property
    def active(self) -> bool:  # the Scala's state =/= idle
        return self.pos < len(self.entries)

    @property
    def idle(self) -> bool:
        return not self.active and all(p is None for p in self.pipe)

    def tag(self, size: int) -> tuple:
        """The iterator registers: the next entry's, or zeros once the unit has wrapped."""
        return self.entries[self.pos].tag if self.active else (0,) * size


@dataclass
class _Slot:
    fields: dict = field(default_factory=dict)
    configured: bool = False
    running: bool = False
    origin: int = 0
    started: set = field(default_factory=set)
    completed: set = field(default_factory=set)
    units: dict | None = None

    def reset(self):
        self.configured = self.running = False
        self.started, self.completed, self.units = set(), set(), None


class _LoopFsm:
    """One of Gemmini's two loop unrollers (LoopMatmul or LoopConv)."""

    def __init__(self, kind: str, cfg: GemminiConfig):
        self.kind, self.cfg = kind, cfg
        self.names = WS_UNITS if kind == "ws" else CONV_UNITS
        self.functs = L.WS_FUNCTS if kind == "ws" else L.CONV_FUNCTS
        self.start_funct = L.LOOP_WS if kind == "ws" else L.LOOP_CONV_WS
        self.units = {n: _Unit(n, 0 if kind == "ws" else 2) for n in self.names}
        self.slots = [_Slot(), _Slot()]
        self.head = 0
        self.acc_starts = {"d": 0, "c": 0, "st": 0}  # ldD / ld_bias, ex, stC / st accumulator rows
        self.moves = 0  # state changes so far (a cycle without one repeats until a queue frees)

    # --- configuration --------------------------------------------------------------
    @property
    def configured(self) -> bool:
        return any(s.configured for s in self.slots)

    def config_slot(self) -> _Slot:
        return self.slots[self.head ^ 1] if self.slots[self.head].configured else self.slots[self.head]

    def take(self, cmd: isa.Command, origin: int) -> bool:
        """Consume a loop word into the slot being configured (False: that slot is still busy)."""
        slot = self.config_slot()
        if slot.configured:
            return False
        slot.fields.update(L.decode_word(cmd.funct, cmd.rs1, cmd.rs2, self.cfg.loop_conv_layout))
        if cmd.funct == self.start_funct:
            _refuse_unmodelled(self.kind, slot.fields, origin)
            slot.configured, slot.origin = True, origin
        self.moves += 1
        return True

    # --- one cycle ------------------------------------------------------------------
    def _hazard_ok(self, u: _Unit) -> bool:
        units, slots = self.units, self.slots
        if self.kind == "conv":
            if u.name == "ex":
                return all(units[n].loop_id != u.loop_id or units[n].idle for n in _CONV_LOADS)
            if u.name == "st":
                return units["ex"].loop_id != u.loop_id or units["ex"].idle
            ex = units["ex"]
            ex_slot = slots[ex.loop_id]
            waiting = "ex" in ex_slot.started and "ex" not in ex_slot.completed and \
                not all(n in ex_slot.completed for n in _CONV_LOADS)
            return not (waiting and u.loop_id != ex.loop_id)
        if u.name == "ex":
            k, j, i = u.tag(3)
            la, lb, ld = units["ldA"], units["ldB"], units["ldD"]
            ia, ka = la.tag(2)  # ldA tags (i, k), ldB (k, j)
            kb, jb = lb.tag(2)
            a_ok = la.loop_id != u.loop_id or la.idle or ka > k or (ka == k and ia > i)
            b_ok = lb.loop_id != u.loop_id or lb.idle or kb > k or (ka == k and jb > j)
            return a_ok and b_ok and (ld.loop_id != u.loop_id or ld.idle)
        if u.name == "stC":
            ex = units["ex"]
            if ex.loop_id != u.loop_id or ex.idle:
                return True
            i, j, blocks = u.tag(3)
            ek, ej, ei = ex.tag(3)
            return ek == slots[u.loop_id].fields["K"] - 1 and (ej >= j + blocks or (ej == j + blocks - 1 and ei > i))
        return True

    def _ab_choice(self) -> str:
        a, b = self.units["ldA"], self.units["ldB"]
        if a.loop_id != b.loop_id:
            return "ldA" if a.loop_id == self.head else "ldB"
        if a.idle:
            return "ldB"
        if b.idle:
            return "ldA"
        (_, ka), (kb, jb) = a.tag(2), b.tag(2)
        return "ldB" if ka > kb or (kb == 0 and jb == 0) else "ldA"

    def cycle(self, blocked: Callable[[str], bool]) -> tuple[Entry, int] | None:
        """Advance one cycle; (the command that leaves, its loop's origin) or None.  ``blocked(kind)``: that
        queue is full."""
        units = self.units
        if self.kind == "ws":
            ab = self._ab_choice()
            order = [n for n in self.names if n not in ("ldA", "ldB")] + [ab]
            chosen = None
            for n in order:
                u = units[n]
                if u.active and not blocked(u.entries[u.pos].kind) and self._hazard_ok(u):
                    chosen = u
                    break
            out = None
            if chosen is not None:
                out = (chosen.entries[chosen.pos], chosen.origin)
                chosen.pos += 1
                self.moves += 1
        else:
            out = self._conv_pipes(blocked)
        self._requests()
        return out

    def _conv_pipes(self, blocked) -> Entry | None:
        units = [self.units[n] for n in self.names]
        in_valid = {u.name: u.active and self._hazard_ok(u) for u in units}
        higher_valid, out = False, None
        for u in units:  # arbiter priority order
            s0, s1 = u.pipe
            ready = not higher_valid and (s1 is None or not blocked(s1[0].kind))
            fires = s1 is not None and ready
            if s1 is not None and not blocked(s1[0].kind):
                higher_valid = True
            if fires:
                out = s1
            stall1 = s1 is not None and not fires
            stall0 = s0 is not None and stall1
            fire_in = in_valid[u.name] and not stall0
            new_s1 = s1 if stall1 else s0
            new_s0 = (u.entries[u.pos], u.origin) if fire_in else (s0 if stall0 else None)
            if fire_in:
                u.pos += 1
            if fire_in or fires or new_s1 is not s1 or new_s0 is not s0:
                self.moves += 1
            u.pipe = [new_s0, new_s1]
        return out

    def _requests(self) -> None:
        """Register updates: finished sub-unrollers are marked, the head loop retires, idle sub-unrollers take
        the oldest configured loop they have not run."""
        slots, units = self.slots, self.units
        for n in self.names:
            u = units[n]
            slot = slots[u.loop_id]
            if u.idle and slot.running and n in slot.started and n not in slot.completed:
                slot.completed.add(n)
                self.moves += 1
        head = slots[self.head]
        if head.running and len(head.completed) == len(self.names):
            head.reset()
            self.head ^= 1
            self.moves += 1
        loads = ("ldA", "ldB", "ldD") if self.kind == "ws" else _CONV_LOADS
        for n in self.names:
            u = units[n]
            sid = self.head ^ 1 if n in slots[self.head].started else self.head
            slot = slots[sid]
            ok = n not in slot.started and slot.configured and u.idle
            if n == "ex":
                ok = ok and all(x in slot.started for x in loads)
            elif n in ("stC", "st"):
                ok = ok and "ex" in slot.started
            if not ok:
                continue
            slot.units = slot.units or self._expand(slot, sid)
            u.entries, u.pos, u.loop_id, u.origin = slot.units[n], 0, sid, slot.origin
            slot.started.add(n)
            slot.running = True
            self.moves += 1

    def _expand(self, slot: _Slot, sid: int) -> dict:
        """Every sub-unroller's commands for ``slot``; the accumulator halves move on as each one starts."""
        f, cfg, half = slot.fields, self.cfg, self.cfg.acc_rows // 2
        out_addr = f.get("C" if self.kind == "ws" else "output", 0)
        starts = dict(self.acc_starts)
        if out_addr:
            self.acc_starts = {k: (v + half) % cfg.acc_rows for k, v in self.acc_starts.items()}
        build = ws_units if self.kind == "ws" else conv_units
        full = {name: f.get(name, 0) for name, *_ in
                (x for funct in self.functs for x in L.LAYOUTS[funct])}
        try:
            return build(full, sid, starts["d"], starts["c"], starts["st"], cfg, slot.origin)
        except IsaError as exc:
            raise SimulationError(f"the unrolled command is illegal: {exc.reason}", source=SOURCE,
                                  field=exc.field, index=slot.origin) from None

    def busy(self) -> bool:
        return self.configured or any(not u.idle for u in self.units.values())


def _refuse_unmodelled(kind: str, f: dict, origin: int) -> None:
    if kind == "ws":
        checks = [("is_resadd", f.get("is_resadd"), "resadd"),
                  ("act", f.get("act", 0) >= 2, "layernorm / softmax stores")]
    else:
        checks = [(name, f.get(name), name.replace("_", " ")) for name in
                  ("wrot180", "trans_output_1203", "trans_weight_1203", "trans_weight_0132", "trans_input_3120",
                   "input_dilated")]
    for name, bad, what in checks:
        if bad:
            raise SimulationError(f"{what} is not modelled", source=SOURCE, field=name, index=origin)


class Unroller:
    """LoopConv followed by LoopMatmul on one command stream (see the module docstring).

    ``run(commands)`` yields ``Issued`` commands; ``busy(kind, cycle)`` says whether the load, execute or
    store queue is full at ``cycle`` (default: never) and ``now()`` the earliest cycle the next command
    may leave (the caller's clock; default: the unroller's own)."""

    def __init__(self, config: GemminiConfig | None = None):
        self.cfg = config or DEFAULT_CONFIG
        self.conv = _LoopFsm("conv", self.cfg)
        self.ws = _LoopFsm("ws", self.cfg)
        self.cycle = 0

    def run(self, commands: Iterable, busy: Callable[[str, int], bool] | None = None,
            now: Callable[[], int] | None = None, start: int = 0,
            wake: Callable[[int], int] | None = None) -> Iterator[Issued]:
        """Yield what leaves the unroller for ``commands`` (numbered from ``start``); the state (held loop
        words, the halves in use) carries over to the next call.  ``wake(t)``: the next cycle after ``t`` at
        which a queue frees (a cycle in which nothing moves is skipped to it)."""
        pending = list(enumerate(isa.decode_stream(commands), start))
        pending.reverse()
        between: list[Issued] = []  # LoopConv's output waiting at LoopMatmul's input (a 2-entry queue)
        while pending or between or self.conv.busy() or self.ws.busy():
            if now is not None:
                self.cycle = max(self.cycle, now())
            t = self.cycle

            def blocked(kind, t=t):
                return busy is not None and busy(kind, t)

            before = (self.ws.moves, self.conv.moves, len(pending), len(between))

            # LoopMatmul: its loop words, a passing command, or an unrolled one
            item = between[0] if between else None
            if item is None and pending and not self.conv.configured and pending[-1][1].funct not in self.conv.functs:
                item = Issued(pending[-1][1], pending[-1][0], t, False)
            emitted = None
            if item is not None and item.cmd.funct in self.ws.functs:
                if self.ws.take(item.cmd, item.origin):
                    self._pop(item, between, pending)
            elif item is not None and not self.ws.configured:
                self._pop(item, between, pending)
                emitted = Issued(item.cmd, item.origin, t, item.from_loop)
            if emitted is None and self.ws.busy():
                out = self.ws.cycle(blocked)
                if out is not None:
                    emitted = Issued(out[0].cmd, out[1], t, True)
            # LoopConv: its loop words, or its unrolled commands into LoopMatmul's input
            if pending and pending[-1][1].funct in self.conv.functs and self.conv.take(pending[-1][1], pending[-1][0]):
                pending.pop()
            if self.conv.busy():
                out = self.conv.cycle(blocked if len(between) < 2 else (lambda kind: True))
                if out is not None:
                    between.append(Issued(out[0].cmd, out[1], t, True))
            self.cycle += 1
            if emitted is None and wake is not None and \
                    before == (self.ws.moves, self.conv.moves, len(pending), len(between)):
                self.cycle = max(self.cycle, wake(t))  # nothing moved: wait for a queue to free
            if emitted is not None:
                yield emitted

    @staticmethod
    def _pop(item: Issued, between: list, pending: list) -> None:
        if between and between[0] is item:
            between.pop(0)
        else:
            pending.pop()


def expand(commands: Iterable, config: GemminiConfig | None = None) -> list[Issued]:
    """The stream with every loop instruction replaced by what the unrollers issue (queues never full)."""
    return list(Unroller(config).run(commands))


def has_loops(commands: Iterable) -> bool:
    """Whether a (decoded) stream contains a loop command."""
    return any(cmd.funct in L.LOOP_FUNCTS for cmd in commands)


def issue_order(cmds, cfg: GemminiConfig, origins: list | None, busy, now, wake):
    """(command, earliest issue cycle) in the order the front end hands them to the queues, for the timing
    model: ``origins`` is None for a stream without loop instructions (the commands as they are), else a list
    this fills with each issued command's index in ``cmds``; ``busy``, ``now``, ``wake`` as in ``Unroller.run``."""
    if origins is None:
        for cmd in cmds:
            yield cmd, 0
        return
    for item in Unroller(cfg).run(cmds, busy=busy, now=now, wake=wake):
        origins.append(item.origin)
        yield item.cmd, item.cycle
