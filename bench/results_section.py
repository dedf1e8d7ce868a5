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
