"""A tiny loop IR for Gemmini programs, printed both as Python (expanded to a command stream) and as C.

The code generator describes a program once, as nested loops, conditions,
integer assignments and commands whose fields are integer expressions.  Two
printers turn that one description into

* Python source that is executed to expand the full command stream (each
  command built by the encoders of ``gemmini.isa``), and
* C source over ``gemmini_cosa.h`` that issues the same commands in loops,

so the C program and the Python stream agree by construction (and a test
checks it by compiling the C with a logging hook).

All integer values are non-negative where they are divided, so C's ``/`` and
``%`` agree with Python's ``//`` and ``%``.  C locals are ``int64_t``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union

# --- expressions ---------------------------------------------------------------


class Expr:
    """An integer expression (operator overloading builds the tree, folding constants)."""

    def __add__(self, other):
        return _bin("+", self, other)

    def __radd__(self, other):
        return _bin("+", other, self)

    def __sub__(self, other):
        return _bin("-", self, other)

    def __rsub__(self, other):
        return _bin("-", other, self)

    def __mul__(self, other):
        return _bin("*", self, other)

    def __rmul__(self, other):
        return _bin("*", other, self)

    def __floordiv__(self, other):
        return _bin("/", self, other)

    def __mod__(self, other):
        return _bin("%", self, other)


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: int


@dataclass(frozen=True, eq=False)
class Var(Expr):
    name: str


@dataclass(frozen=True, eq=False)
class Bin(Expr):
    """Binary operation: + - * / % (integer), < <= == != (0/1), && || (0/1)."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """min / max of two expressions."""

    fn: str
    left: Expr
    right: Expr


@dataclass(frozen=True, eq=False)
class Select(Expr):
    """cond ? then : other (only the chosen branch is evaluated)."""

    cond: Expr
    then: Expr
    other: Expr


@dataclass(frozen=True, eq=False)
class SpAddr(Expr):
    """Scratchpad local address of ``row``."""

    row: Expr


@dataclass(frozen=True, eq=False)
class AccAddr(Expr):
    """Accumulator local address of ``row`` (``accumulate``: an expression, 0/1; ``full``: 32-bit read)."""

    row: Expr
    accumulate: Expr
    full: bool = False


@dataclass(frozen=True, eq=False)
class Garbage(Expr):
    """The garbage local address."""


@dataclass(frozen=True, eq=False)
class DramAddr(Expr):
    """Main-memory address: buffer ``buffer`` plus ``offset`` bytes."""

    buffer: str
    offset: Expr


ExprLike = Union[Expr, int]


def lit(value: ExprLike) -> Expr:
    return value if isinstance(value, Expr) else Const(int(value))


def _bin(op: str, a: ExprLike, b: ExprLike) -> Expr:
    a, b = lit(a), lit(b)
    if isinstance(a, Const) and isinstance(b, Const):
        x, y = a.value, b.value
        if op == "+":
            return Const(x + y)
        if op == "-":
            return Const(x - y)
        if op == "*":
            return Const(x * y)
        if op == "/" and y > 0 and x >= 0:
            return Const(x // y)
        if op == "%" and y > 0 and x >= 0:
            return Const(x % y)
    if op == "+":
        if isinstance(a, Const) and a.value == 0:
            return b
        if isinstance(b, Const) and b.value == 0:
            return a
    if op == "-" and isinstance(b, Const) and b.value == 0:
        return a
    if op == "*":
        for u, v in ((a, b), (b, a)):
            if isinstance(u, Const) and u.value == 0:
                return Const(0)
            if isinstance(u, Const) and u.value == 1:
                return v
    if op == "/" and isinstance(b, Const) and b.value == 1:
        return a
    if op == "%" and isinstance(b, Const) and b.value == 1:
        return Const(0)
    return Bin(op, a, b)


def emin(a: ExprLike, b: ExprLike) -> Expr:
    a, b = lit(a), lit(b)
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(min(a.value, b.value))
    return Call("min", a, b)


def emax(a: ExprLike, b: ExprLike) -> Expr:
    a, b = lit(a), lit(b)
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(max(a.value, b.value))
    return Call("max", a, b)


def cmp(op: str, a: ExprLike, b: ExprLike) -> Expr:
    a, b = lit(a), lit(b)
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(int({"<": a.value < b.value, "<=": a.value <= b.value, "==": a.value == b.value,
                          "!=": a.value != b.value}[op]))
    return Bin(op, a, b)


def all_of(conds: Sequence[ExprLike]) -> Expr:
    """Logical and of 0/1 expressions (1 when empty)."""
    out: Expr = Const(1)
    for c in conds:
        c = lit(c)
        if isinstance(c, Const):
            if c.value == 0:
                return Const(0)
            continue
        out = c if isinstance(out, Const) else Bin("&&", out, c)
    return out


def negate(cond: ExprLike) -> Expr:
    c = lit(cond)
    if isinstance(c, Const):
        return Const(0 if c.value else 1)
    return Bin("==", c, Const(0))


def select(cond: ExprLike, then: ExprLike, other: ExprLike) -> Expr:
    c = lit(cond)
    if isinstance(c, Const):
        return lit(then) if c.value else lit(other)
    return Select(c, lit(then), lit(other))


# --- statements ----------------------------------------------------------------


@dataclass(frozen=True)
class For:
    """for var in range(start, stop, step): body."""

    var: str
    stop: Expr
    body: tuple
    step: int = 1
    start: Expr = Const(0)


@dataclass(frozen=True)
class If:
    cond: Expr
    then: tuple
    other: tuple = ()


@dataclass(frozen=True)
class Assign:
    var: str
    value: Expr


@dataclass(frozen=True)
class Cmd:
    """One command; ``op`` names an encoder of ``gemmini.isa`` (and the header's ``gemmini_cosa_<op>``),
    ``args`` are its positional arguments (integer expressions, or floats for scales)."""

    op: str
    args: tuple


@dataclass(frozen=True)
class Comment:
    text: str


Stmt = Union[For, If, Assign, Cmd, Comment]


def loop(var: str, stop: ExprLike, body_fn, step: int = 1) -> list:
    """A For over ``range(0, stop, step)``; a single-iteration loop is inlined with var = 0."""
    stop = lit(stop)
    if isinstance(stop, Const) and stop.value <= 0:
        return []
    if isinstance(stop, Const) and stop.value <= step:
        return list(body_fn(Const(0)))
    return [For(var, stop, tuple(body_fn(Var(var))), step)]


def when(cond: ExprLike, then: Sequence, other: Sequence = ()) -> list:
    c = lit(cond)
    if isinstance(c, Const):
        return list(then) if c.value else list(other)
    if not then and not other:
        return []
    if not then:
        return [If(negate(c), tuple(other))]
    return [If(c, tuple(then), tuple(other))]


# --- printers --------------------------------------------------------------------

_PY_OPS = {"/": "//", "&&": "and", "||": "or"}


def py_expr(e) -> str:
    if isinstance(e, float):
        return repr(e)
    e = lit(e)
    if isinstance(e, Const):
        return str(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Bin):
        op = _PY_OPS.get(e.op, e.op)
        text = f"({py_expr(e.left)} {op} {py_expr(e.right)})"
        return f"int{text}" if e.op in ("<", "<=", "==", "!=", "&&", "||") else text
    if isinstance(e, Call):
        return f"{e.fn}({py_expr(e.left)}, {py_expr(e.right)})"
    if isinstance(e, Select):
        return f"({py_expr(e.then)} if {py_expr(e.cond)} else {py_expr(e.other)})"
    if isinstance(e, SpAddr):
        return f"_sp({py_expr(e.row)})"
    if isinstance(e, AccAddr):
        return f"_acc({py_expr(e.row)}, {py_expr(e.accumulate)}, {bool(e.full)})"
    if isinstance(e, Garbage):
        return "_GARBAGE"
    if isinstance(e, DramAddr):
        return f"(_base[{e.buffer!r}] + {py_expr(e.offset)})"
    raise TypeError(f"not an expression: {e!r}")


def py_source(stmts: Sequence[Stmt], name: str = "_program") -> str:
    """Python source of ``def name(_emit, _enc, _base, _sp, _acc, _GARBAGE)`` that emits every command."""
    lines = [f"def {name}(_emit, _enc, _base, _sp, _acc, _GARBAGE):"]

    def block(body, depth):
        pad = "    " * depth
        wrote = False
        for s in body:
            if isinstance(s, For):
                lines.append(f"{pad}for {s.var} in range({py_expr(s.start)}, {py_expr(s.stop)}, {s.step}):")
                block(s.body, depth + 1)
            elif isinstance(s, If):
                lines.append(f"{pad}if {py_expr(s.cond)}:")
                block(s.then, depth + 1)
                if s.other:
                    lines.append(f"{pad}else:")
                    block(s.other, depth + 1)
            elif isinstance(s, Assign):
                lines.append(f"{pad}{s.var} = {py_expr(s.value)}")
            elif isinstance(s, Cmd):
                args = ", ".join(py_expr(a) for a in s.args)
                lines.append(f"{pad}_emit(_enc.{s.op}({args}))")
            elif isinstance(s, Comment):
                lines.append(f"{pad}# {s.text}")
                continue
            wrote = True
        if not wrote:
            lines.append(f"{pad}pass")

    block(stmts, 1)
    return "\n".join(lines) + "\n"


def c_expr(e, buffers: dict[str, str]) -> str:
    if isinstance(e, float):
        return f"{e!r}f" if "e" in repr(e) or "." in repr(e) else f"{e!r}.0f"
    e = lit(e)
    if isinstance(e, Const):
        return f"{e.value}" if -(1 << 31) < e.value < (1 << 31) else f"INT64_C({e.value})"
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Bin):
        return f"({c_expr(e.left, buffers)} {e.op} {c_expr(e.right, buffers)})"
    if isinstance(e, Call):
        a, b = c_expr(e.left, buffers), c_expr(e.right, buffers)
        return f"GC_{e.fn.upper()}({a}, {b})"
    if isinstance(e, Select):
        return f"({c_expr(e.cond, buffers)} ? {c_expr(e.then, buffers)} : {c_expr(e.other, buffers)})"
    if isinstance(e, SpAddr):
        return f"gemmini_cosa_sp((uint32_t){c_expr(e.row, buffers)})"
    if isinstance(e, AccAddr):
        return (f"gemmini_cosa_acc((uint32_t){c_expr(e.row, buffers)}, (int){c_expr(e.accumulate, buffers)}, "
                f"{int(e.full)})")
    if isinstance(e, Garbage):
        return "GEMMINI_COSA_GARBAGE"
    if isinstance(e, DramAddr):
        return f"(GEMMINI_COSA_PTR({buffers[e.buffer]}) + (uint64_t){c_expr(e.offset, buffers)})"
    raise TypeError(f"not an expression: {e!r}")


def assigned_vars(stmts: Sequence[Stmt]) -> list[str]:
    out: list[str] = []

    def walk(body):
        for s in body:
            if isinstance(s, Assign) and s.var not in out:
                out.append(s.var)
            elif isinstance(s, For):
                walk(s.body)
            elif isinstance(s, If):
                walk(s.then)
                walk(s.other)

    walk(stmts)
    return out


def c_body(stmts: Sequence[Stmt], buffers: dict[str, str], indent: int = 1) -> str:
    """C statements for ``stmts`` (locals from Assign are declared first, as int64_t)."""
    lines: list[str] = []
    pad0 = "  " * indent
    for var in assigned_vars(stmts):
        lines.append(f"{pad0}int64_t {var} = 0;")

    def block(body, depth):
        pad = "  " * depth
        for s in body:
            if isinstance(s, For):
                lines.append(f"{pad}for (int64_t {s.var} = {c_expr(s.start, buffers)}; {s.var} < "
                             f"{c_expr(s.stop, buffers)}; {s.var} += {s.step}) {{")
                block(s.body, depth + 1)
                lines.append(f"{pad}}}")
            elif isinstance(s, If):
                lines.append(f"{pad}if ({c_expr(s.cond, buffers)}) {{")
                block(s.then, depth + 1)
                if s.other:
                    lines.append(f"{pad}}} else {{")
                    block(s.other, depth + 1)
                lines.append(f"{pad}}}")
            elif isinstance(s, Assign):
                lines.append(f"{pad}{s.var} = {c_expr(s.value, buffers)};")
            elif isinstance(s, Cmd):
                args = ", ".join(c_expr(a, buffers) for a in s.args)
                lines.append(f"{pad}gemmini_cosa_{s.op}({args});")
            elif isinstance(s, Comment):
                lines.append(f"{pad}/* {s.text} */")

    block(stmts, indent)
    return "\n".join(lines)


def count_stmts(stmts: Sequence[Stmt]) -> int:
    """Statements in the (unexpanded) program: a size measure of the emitted C."""
    n = 0
    for s in stmts:
        n += 1
        if isinstance(s, For):
            n += count_stmts(s.body)
        elif isinstance(s, If):
            n += count_stmts(s.then) + count_stmts(s.other)
    return n
