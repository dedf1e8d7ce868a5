"""The shared results file: each benchmark owns one marked section of ``bench/RESULTS.md``.

A section is written only by :func:`save_outputs` and reads, in order: the header (date, machine with its
CPU model and cores, package versions, the exact command), the script's notes (what the columns mean; no
figures typed by hand), a summary rendered by :func:`summarize` from the section's own tables, and the
benchmark's console output (its tables and the summary lines its code prints).  Next to the results file,
``results/<name>.json`` (the sidecar) keeps the run's numbers at full precision, the header and the
summary's specification, so the summary can be rendered again from the tables at any time
(``python bench/results_section.py check``; ``tests/bench/test_results_md.py`` runs the same check).

A summary spec is a dict: ``{"table": i, "column": "vendor/cosa", "stats": ["geomean", "min", "max",
"below:1"]}``; ``table`` indexes the tables of the section's console output in order, ``what`` (optional)
names the quantity in words.  Stats: geomean, mean, median, min, max, sum, below:T / above:T (how many
rows, and which), equal:TEXT (rows whose cell is TEXT); absmedian, absmax, ... over absolute values.
``title`` (a substring of the table's title line) may select the table instead of ``table``, or
``"each": true`` every table with the column; ``rows``
(``{"program": "cosa"}``) keeps the rows whose cells in those columns are those texts.  Rows labelled
geomean / total / sum / mean / median are aggregates and are left out.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

SIDECAR_DIR = "results"
AGGREGATE_LABELS = ("geomean", "total", "sum", "mean", "median", "all")


# ----------------------------------------------------------------------------------------------- sections

def markers(name: str) -> tuple[str, str]:
    """The HTML comments that delimit benchmark ``name``'s section."""
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def write_section(path: Path, name: str, section: str) -> None:
    """Replace benchmark ``name``'s section (``section`` includes its markers); other sections stay."""
    start, end = markers(name)
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    if start in old and end in old:
        head, rest = old.split(start, 1)
        new = head + section + rest.split(end, 1)[1].lstrip("\n")
    else:
        new = old.rstrip("\n") + "\n\n" + section
    path.write_text(new)


def sections(text: str) -> dict[str, str]:
    """Every marked section of a results file: name -> the text between its markers."""
    return {m.group(1): m.group(2) for m in
            re.finditer(r"<!-- (\w+):start -->\n(.*?)<!-- \1:end -->", text, flags=re.S)}


def outside_sections(text: str) -> str:
    """The results file's text that belongs to no section (should be its title only)."""
    return re.sub(r"<!-- (\w+):start -->\n.*?<!-- \1:end -->", "", text, flags=re.S)


@dataclass
class Parts:
    """A section split into its header lines, notes, summary and console output."""
    title: str
    header: list[str]
    notes: str
    summary: str
    console: str


def split_section(body: str) -> Parts:
    """Split a section's text (between its markers) into :class:`Parts`."""
    console = ""
    m = re.search(r"^```\n(.*?)^```\n?", body, flags=re.S | re.M)
    if m:
        console, body = m.group(1), body[:m.start()] + body[m.end():]
    title, header, notes, summary = "", [], [], ""
    for para in re.split(r"\n\s*\n", body.strip()):
        para = para.strip()
        if para.startswith("## "):
            title = para[3:]
        elif para.startswith(("Date: ", "Versions: ", "Command: ")):
            header.append(para)
        elif para.startswith("Summary"):
            summary = para
        elif para:
            notes.append(para)
    return Parts(title, header, "\n\n".join(notes), summary, console)


# ------------------------------------------------------------------------------------------------ header

def run_stamp() -> tuple[str, str]:
    """(date, machine) for a benchmark's header: UTC minute; OS, architecture, CPU model, cores, Python."""
    import datetime
    import os
    import platform

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cpu = platform.processor() or ""
    try:  # the model name, and the family and model numbers that tell a generic name's generations apart
        info = dict(line.split(":", 1) for line in Path("/proc/cpuinfo").read_text().split("\n\n")[0].splitlines()
                    if ":" in line)
        info = {k.strip(): v.strip() for k, v in info.items()}
        if info.get("model name"):
            cpu = info["model name"]
            if info.get("cpu family") and info.get("model"):
                cpu += f" (family {info['cpu family']}, model {info['model']})"
    except OSError:
        pass
    cpu = f"{cpu}, " if cpu else ""
    machine = (f"{platform.system()} {platform.machine()}, {cpu}{os.cpu_count()} cores, "
               f"Python {platform.python_version()}")
    return date, machine


def versions(packages=("numpy", "scipy", "highspy", "rich")) -> str:
    """'commit abc1234, numpy 1.26.4, scipy 1.11.4, ...': the project's commit ('+ changes' when the work tree
    differs from it) and the installed ``packages`` (those not installed left out)."""
    import subprocess
    from importlib import metadata

    out = []
    try:
        root = Path(__file__).resolve().parents[1]
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        if head:
            out.append(f"commit {head}" + (" + changes" if dirty else ""))
    except (OSError, subprocess.SubprocessError):
        pass
    for p in packages:
        try:
            out.append(f"{p} {metadata.version(p)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(out)


# ------------------------------------------------------------------------------------------------ tables

@dataclass
class Table:
    """One table of a section as printed: its title line (may be empty), column names and cell texts."""
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def column(self, name: str) -> int:
        if name not in self.columns:
            raise KeyError(f"no column {name!r} in table {self.title!r} (columns: {self.columns})")
        return self.columns.index(name)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]


def _unique(names: list[str]) -> list[str]:
    out = []
    for n in names:
        out.append(n if n not in out else f"{n} #{sum(1 for o in out if o == n or o.startswith(n + ' #')) + 1}")
    return out


def parse_tables(text: str) -> list[Table]:
    """The box-drawn (rich) and Markdown tables of ``text``, in order.  A box row whose cells are mostly
    empty continues the row above (a wrapped cell)."""
    lines = text.splitlines()
    tables: list[Table] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("┏"):
            title_lines, j = [], i - 1  # rich pads a (wrapped) title's lines to the table's width
            while j >= 0 and len(title_lines) < 4 and lines[j].strip() and len(lines[j]) == len(lines[i]) \
                    and not lines[j].strip().startswith(("└", "│", "┃")):
                title_lines.insert(0, lines[j].strip())
                j -= 1
            title = " ".join(title_lines)
            heads: list[list[str]] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(("┡", "└")):
                heads.append(_cells(lines[i]))
                i += 1
            columns = _unique([" ".join(h[c] for h in heads if c < len(h) and h[c]).strip()
                               for c in range(len(heads[0]) if heads else 0)])
            table = Table(title, columns)
            while i < len(lines) and not lines[i].strip().startswith("└"):
                s = lines[i].strip()
                if s.startswith("│"):
                    cells = _cells(s)
                    filled = sum(1 for c in cells if c)
                    if table.rows and len(cells) > 1 and filled <= max(1, len(cells) // 4):
                        prev = table.rows[-1]
                        table.rows[-1] = [f"{p} {c}".strip() if c else p for p, c in zip(prev, cells)]
                    else:
                        table.rows.append(cells)
                i += 1
            tables.append(table)
        elif line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|$", lines[i + 1].strip()):
            title = lines[i - 1].strip() if i else ""
            table = Table(title, _unique([c.strip() for c in line.strip("|").split("|")]))
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                table.rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            tables.append(table)
            continue
        i += 1
    return tables


_CELL_NUMBER = re.compile(r"([+-]?)(\d[\d,]*)(\.\d+)?(e[+-]?\d+)?\s*(?:x|%|s)?(?:\s+SLOWER)?", re.I)


def cell_number(cell: str) -> tuple[float, float] | None:
    """(value, half a unit of its last printed digit) of a numeric cell ('1,311,744', '81.6%', '-13%',
    '0.70 SLOWER', '1.07x', '7.4e-07'); None for text, '-' and 'n/a'."""
    m = _CELL_NUMBER.fullmatch(cell.strip())
    if not m:
        return None
    sign, whole, frac, exp = m.groups()
    value = float(f"{sign}{whole.replace(',', '')}{frac or ''}{exp or ''}")
    half = 0.5 * 10.0 ** -(len(frac) - 1 if frac else 0)
    if exp:
        if abs(int(exp[1:])) > 300:  # '5e867' of a commit hash like 5e867e2: a name, not a figure
            return None
        half *= 10.0 ** int(exp[1:])
    return value, half


# ----------------------------------------------------------------------------------------------- summary

def _data_rows(table: Table, column: int, label_columns: list[str] = ()) -> list[tuple[str, str, tuple | None]]:
    """(label, cell text, number) of the rows that are not aggregates.  The label is the first cell (the
    one above when empty, as in a row group), or the ``label_columns`` cells; a number is named by its column."""
    out, carried = [], [""] * len(table.columns)
    picks = [table.column(c) for c in label_columns] or [0]
    for row in table.rows:
        if row[0].lower().startswith(AGGREGATE_LABELS):
            continue
        carried = [c or (old if i == 0 else "") for i, (c, old) in enumerate(zip(row, carried))]
        label = " ".join(f"{table.columns[i]}={carried[i]}" if cell_number(carried[i]) else carried[i]
                         for i in picks if carried[i])
        cell = row[column] if column < len(row) else ""
        out.append((label, cell, cell_number(cell)))
    return out


def _geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


STATS = {"geomean": _geomean, "mean": statistics.fmean, "median": statistics.median, "min": min, "max": max,
         "sum": math.fsum}


def _fmt(value: float, decimals: int) -> str:
    return f"{value:,.{max(decimals, 0)}f}" if decimals > 0 or abs(value) >= 100 else f"{value:,.1f}"


def _unit(cells: list[str]) -> str:
    """'%' or 'x' when the column's numbers carry it."""
    ends = {c.strip()[-1:] for c in cells if cell_number(c) is not None}
    return ends.pop() if len(ends) == 1 and ends <= {"%", "x"} else ""


def _short(title: str) -> str:
    """A table's title up to its first colon, without an unclosed parenthesis."""
    head = title.split(": ")[0].rstrip(". ")
    return head[:head.rindex("(")].rstrip() if head.count("(") > head.count(")") else head


def find_table(tables: list[Table], spec: dict) -> Table | None:
    """The spec's table: ``title`` (a substring of the title line) or ``table`` (an index); None if absent."""
    if "title" in spec:
        return next((t for t in tables if spec["title"] in t.title), None)
    return tables[spec["table"]] if spec.get("table", 0) < len(tables) else None


def summarize_one(tables: list[Table], spec: dict) -> str:
    """One sentence of a section's summary, computed from the printed cells of one table column (of the
    rows whose cells equal ``spec["rows"]``'s, if given); empty if the section has no such table."""
    table = find_table(tables, spec)
    if table is None:
        return ""
    col = table.column(spec["column"])
    rows = _data_rows(table, col, spec.get("label", ()))
    for name, want in spec.get("rows", {}).items():
        keep = [row[table.column(name)] == want for row in table.rows
                if not row[0].lower().startswith(AGGREGATE_LABELS)]
        rows = [r for r, k in zip(rows, keep) if k]
    numeric = [(label, cell, num[0], num[1]) for label, cell, num in rows if num is not None]
    decimals = max((-round(math.log10(2 * h)) for *_, h in numeric), default=0)
    unit = _unit([cell for _, cell, _ in rows])
    parts = []
    for stat in spec["stats"]:
        name, _, arg = stat.partition(":")
        absolute = name.startswith("abs")
        base = name[3:] if absolute else name
        if base in STATS:
            quads = [(lbl, cell, abs(v) if absolute else v) for lbl, cell, v, _ in numeric]
            if base == "geomean":
                quads = [q for q in quads if q[2] > 0]
            if not quads:
                continue
            value = STATS[base]([v for *_, v in quads])
            shown = f"|{base}|" if absolute else base
            if base in ("min", "max"):
                cell = next(c for _, c, v in quads if v == value).replace(" SLOWER", "").lstrip("+")
                cell = cell.lstrip("-") if absolute else cell
                labels = ", ".join(lbl for lbl, _, v in quads if v == value)
                parts.append(f"{shown} {cell} ({labels})")
            else:
                extra = 1 if base in ("geomean", "mean", "median") else 0
                parts.append(f"{shown} {_fmt(value, decimals + extra)}{unit}")
        elif name in ("below", "above"):
            t = float(arg)
            hits = [lbl for lbl, _, v, _ in numeric if (v < t if name == "below" else v > t)]
            parts.append(f"{name} {arg} on {len(hits)} of {len(numeric)}" + (f" ({', '.join(hits)})" if hits else ""))
        elif name == "equal":
            hits = [lbl for lbl, cell, _ in rows if cell == arg]
            parts.append(f"{arg} on {len(hits)} of {len(rows)}")
        else:
            raise ValueError(f"summary spec: unknown stat {stat!r}")
    if not parts:
        return ""
    what = spec.get("what", f"`{spec['column']}`")
    count = f"{len(rows)} row{'s' if len(rows) != 1 else ''}"
    if len(numeric) != len(rows) and any(not s.startswith("equal") for s in spec["stats"]):
        count += f", {len(numeric)} with a number"
    return f"{what} ({count}): " + "; ".join(parts) + "."


def _expand(tables: list[Table], spec: dict) -> list[dict]:
    """A spec with ``"each": true`` stands for one spec per table that has its column (named by its title)."""
    if not spec.get("each"):
        return [spec]
    out = []
    for i, t in enumerate(tables):
        if spec["column"] in t.columns:
            what = spec.get("what", f"`{spec['column']}`")
            out.append({k: v for k, v in spec.items() if k not in ("each", "title")}
                       | {"table": i, "what": f"{_short(t.title)}: {what}" if t.title else what})
    return out


def summarize(tables: list[Table], specs: list[dict]) -> str:
    """The summary paragraph of a section: one sentence per spec, computed from ``tables``."""
    specs = [e for s in specs for e in _expand(tables, s)]
    sentences = [t for t in (summarize_one(tables, s) for s in specs) if t]
    return "Summary (computed from the tables below): " + "  ".join(sentences) if sentences else ""


# -------------------------------------------------------------------------------------------------- write

def section_text(name: str, title: str, *, date: str, machine: str, command: str, console_text: str,
                 notes: str = "", summary: list[dict] = (), versions_text: str = "") -> str:
    """A complete section, markers included."""
    start, end = markers(name)
    parts = [f"{start}\n## {title}",
             f"Date: {date}.  Machine: {machine} (shared with other jobs while it ran)."]
    if versions_text:
        parts.append(f"Versions: {versions_text}.")
    parts.append(f"Command: `{command.strip()}`")
    if notes:
        parts.append(notes.strip())
    text = summarize(parse_tables(console_text), list(summary))
    if text:
        parts.append(text)
    return "\n\n".join(parts) + f"\n\n```\n{console_text.rstrip()}\n```\n{end}\n"


def dumps(obj) -> str:
    """JSON with one line per list of numbers or strings (a table row, a series), the rest indented."""
    text = json.dumps(obj, indent=1, default=str)
    return re.sub(r"\[\n\s*([^\[\]{}]*?)\n\s*\]", lambda m: "[" + re.sub(r"\n\s*", " ", m.group(1)) + "]", text) + "\n"


def sidecar_path(results_path: Path, name: str) -> Path:
    return Path(results_path).parent / SIDECAR_DIR / f"{name}.json"


def save_outputs(*, name: str, title: str, command: str, date: str, machine: str, console, data: dict,
                 json_path: str | None, results_path: str | None, notes: str = "", summary: list[dict] = (),
                 packages=("numpy", "scipy", "highspy", "rich")) -> None:
    """Write a benchmark's numbers as JSON (``data`` plus date and machine) and/or its section of the
    results file (header, ``notes``, the summary computed by ``summary`` specs from the printed tables, the
    console output) with the sidecar ``results/<name>.json`` beside the results file."""
    ver = versions(packages)
    if json_path:
        Path(json_path).write_text(json.dumps({"date": date, "machine": machine, **data}, indent=1, default=str))
    if results_path:
        heading = title if "`" in title else f"{title} (`bench/{name}.py`)"
        console_text = console.export_text() if hasattr(console, "export_text") else str(console)
        section = section_text(name, heading, date=date, machine=machine, command=command,
                               console_text=console_text, notes=notes, summary=summary, versions_text=ver)
        write_section(Path(results_path), name, section)
        side = sidecar_path(Path(results_path), name)
        side.parent.mkdir(exist_ok=True)
        side.write_text(dumps({"date": date, "machine": machine, "versions": ver, "command": command,
                               "summary": list(summary), "data": data}))


# ------------------------------------------------------------------------------------------------- check

_PROSE_NUMBER = re.compile(r"(?<![\w.@/<>#-])(\d+(?:,\d{3})*(?:\.\d+)?(?:e[+-]?\d+)?)(?:x|%)?(?![\w@]|\.\d|-?>|/\d)",
                           re.I)


def prose_numbers(text: str) -> list[tuple[str, float, float]]:
    """(text, value, half a unit of its last digit) of every figure in prose: code spans, identifiers
    (res2a_branch2b, 3x3, x86_64, f13847e), multi-dot versions and arrows (64->64, @14) are not figures."""
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"(\d)-(\d)", r"\1 to \2", text)
    out = []
    for m in _PROSE_NUMBER.finditer(text):
        num = cell_number(m.group(1))
        if num is not None:
            out.append((m.group(0), *num))
    return out


def _leaves(obj) -> list[float]:
    if isinstance(obj, bool):
        return []
    if isinstance(obj, (int, float)):
        return [float(obj)] if math.isfinite(obj) else []
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _leaves(v)]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in _leaves(v)]
    return []


def allowed_figures(tables: list[Table], texts: list[str], data=None) -> list[tuple[float, float]]:
    """(value, half a unit of its last printed digit) of what a prose figure may quote: every number printed
    in ``texts`` (console output, header) and in ``data`` (the sidecar, exact), and, per table column
    (signed and absolute), the min, max, sum, mean, median and geomean of its printed cells (exact), over
    all rows and over the rows sharing a cell of another column, and the counts of rows."""
    allowed: list[tuple[float, float]] = []
    for text in texts:
        for tok in re.findall(r"\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?", text):
            num = cell_number(tok)
            if num:
                allowed.append(num)
    allowed += [(v, 0.0) for v in _leaves(data)]
    most_rows = 0
    for table in tables:
        most_rows = max(most_rows, len(table.rows))
        body = [r for r in table.rows if not r[0].lower().startswith(AGGREGATE_LABELS)]
        groups = [[True] * len(body)]  # all rows, and the rows sharing a cell of any one column
        for g in range(1, len(table.columns)):
            cells = [r[g] if g < len(r) else "" for r in body]
            if len(set(cells)) < len(cells):
                groups += [[c == key for c in cells] for key in set(cells)]
        for c in range(1, len(table.columns)):
            numbers = [n for _, _, n in _data_rows(table, c)]
            for keep in groups:
                values = [n[0] for n, k in zip(numbers, keep) if k and n is not None]
                for vals in (values, [abs(v) for v in values]) if values else ():
                    for name, f in STATS.items():
                        if name != "geomean" or min(vals) > 0:
                            allowed.append((f(vals), 0.0))
    allowed += [(float(n), 0.0) for n in range(most_rows + 1)]
    return allowed


def figure_allowed(value: float, half: float, allowed: list[tuple[float, float]]) -> bool:
    """Whether the printed figure (value, half a unit of its last digit) quotes one of ``allowed``: a source
    printed at least as precisely that rounds to it (the sign is not compared: prose says 'cosa is 13%
    under' for a -13% cell)."""
    v = abs(value)
    eps = 1e-9 * max(1.0, v)
    return any(h <= half + eps and abs(v - abs(a)) <= half - h + eps for a, h in allowed)


def check_section(name: str, body: str, sidecar: dict | None) -> list[str]:
    """Problems of one section: its summary differs from the one its tables give, or a figure of its
    notes or summary is not in its tables, console output, header or sidecar (nor derived from them)."""
    parts = split_section(body)
    tables = parse_tables(parts.console)
    problems = []
    if sidecar is None:
        return [f"{name}: no sidecar {SIDECAR_DIR}/{name}.json"]
    if sidecar.get("date") and not any(h.startswith(f"Date: {sidecar['date']}") for h in parts.header):
        problems.append(f"{name}: the sidecar's date {sidecar['date']!r} is not the section's")
    specs = sidecar.get("summary") or []
    if not specs:
        problems.append(f"{name}: the sidecar has no summary spec")
    try:
        expected = summarize(tables, specs)
    except (KeyError, IndexError, ValueError) as exc:
        return problems + [f"{name}: summary spec does not fit the tables: {exc}"]
    if expected != parts.summary:
        problems.append(f"{name}: summary is not the one its tables give:\n  file: {parts.summary}\n"
                        f"  tables: {expected}")
    allowed = allowed_figures(tables, [parts.console, *parts.header], sidecar.get("data"))
    for text, value, half in prose_numbers(parts.notes + "\n" + parts.summary):
        if not figure_allowed(value, half, allowed):
            problems.append(f"{name}: prose figure {text!r} is in none of its tables (nor their min, max, sum, "
                            "mean, median, geomean, a count of rows, the console output, header or sidecar)")
    return problems


def check_file(path: Path) -> list[str]:
    """Problems of a whole results file (see :func:`check_section`), and any text outside the sections."""
    path = Path(path)
    text = path.read_text()
    problems = []
    for line in outside_sections(text).splitlines():
        if line.strip() and not line.startswith("# "):
            problems.append(f"text outside any benchmark's section: {line[:80]!r}")
    for name, body in sections(text).items():
        side = sidecar_path(path, name)
        problems += check_section(name, body, json.loads(side.read_text()) if side.exists() else None)
    return problems


def summary_spec(script: Path, constant: str = "SUMMARY") -> list[dict]:
    """The summary spec a script declares as a literal module constant (read without importing it)."""
    import ast

    for node in ast.parse(Path(script).read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == constant for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(f"{script}: no constant {constant}")


def regenerate(path: Path, name: str, specs: list[dict]) -> None:
    """Render section ``name``'s summary again from the tables it already prints (without running the
    benchmark) and write its sidecar; the run's full-precision numbers are not known, so the sidecar's data
    are the parsed tables."""
    path = Path(path)
    body = sections(path.read_text())[name]
    parts = split_section(body)
    tables = parse_tables(parts.console)
    start, end = markers(name)
    blocks = [f"{start}\n## {parts.title}", *parts.header]
    if parts.notes:
        blocks.append(parts.notes)
    text = summarize(tables, specs)
    if text:
        blocks.append(text)
    section = "\n\n".join(blocks) + f"\n\n```\n{parts.console.rstrip()}\n```\n{end}\n"
    write_section(path, name, section)
    head = {p.split(":", 1)[0]: p.split(":", 1)[1].strip() for p in parts.header}
    side = sidecar_path(path, name)
    side.parent.mkdir(exist_ok=True)
    old = json.loads(side.read_text()) if side.exists() else {}
    data = old.get("data") or {"source": "the printed tables (the run's JSON was not kept)"}
    if "source" in data:  # a sidecar made from the printed tables: they are its data
        data["tables"] = [t.__dict__ for t in tables]
    side.write_text(dumps({**old, "date": head.get("Date", "").split(".")[0],
                           "command": head.get("Command", "").strip("`"), "versions": head.get("Versions", ""),
                           "summary": specs, "data": data}))


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="check the results file, or re-render a section's summary")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="every prose figure is in its section's tables; summaries are current")
    c.add_argument("results", nargs="?", default=str(Path(__file__).with_name("RESULTS.md")))
    r = sub.add_parser("regenerate", help="re-render a section's summary from its printed tables")
    r.add_argument("name")
    r.add_argument("--results", default=str(Path(__file__).with_name("RESULTS.md")))
    r.add_argument("--script", default=None, help="the script declaring the spec (bench/NAME.py)")
    r.add_argument("--constant", default="SUMMARY")
    args = ap.parse_args(argv)
    if args.cmd == "check":
        problems = check_file(Path(args.results))
        for p in problems:
            print(p)
        return 1 if problems else 0
    script = Path(args.script) if args.script else Path(__file__).with_name(f"{args.name}.py")
    regenerate(Path(args.results), args.name, summary_spec(script, args.constant))
    return 0


if __name__ == "__main__":
    sys.exit(main())
