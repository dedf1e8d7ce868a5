"""The shared results file: each benchmark owns one marked section of ``bench/RESULTS.md``."""

from __future__ import annotations

from pathlib import Path


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


def run_stamp() -> tuple[str, str]:
    """(date, machine) for a benchmark's header: UTC minute, OS, architecture, cores, Python."""
    import datetime
    import os
    import platform

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return date, machine


def save_outputs(*, name: str, title: str, command: str, date: str, machine: str, console, data: dict,
                 json_path: str | None, results_path: str | None, notes: str = "") -> None:
    """Write a benchmark's numbers as JSON (``data`` plus date and machine) and/or its printed tables as
    its section of the results file, with the date, the machine and the command that reproduces them."""
    import json

    if json_path:
        Path(json_path).write_text(json.dumps({"date": date, "machine": machine, **data}, indent=1, default=str))
    if results_path:
        start, end = markers(name)
        notes = f"{notes}\n" if notes else ""
        section = (f"{start}\n## {title} (`bench/{name}.py`)\n\n"
                   f"Date: {date}.  Machine: {machine} (shared with other jobs while it ran).\n\n"
                   f"Command: `{command.strip()}`\n\n{notes}```\n{console.export_text()}```\n{end}\n")
        write_section(Path(results_path), name, section)
