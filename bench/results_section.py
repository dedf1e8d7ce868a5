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
