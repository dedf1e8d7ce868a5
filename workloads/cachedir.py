"""Where the framework keeps what it computed once and reuses across processes, and how it writes there.

The root is ``$COSA_CACHE_DIR`` when that variable is set, else ``$XDG_CACHE_HOME/cosa`` or
``~/.cache/cosa`` (the XDG base directory rules).  Each user of the cache takes one sub-directory: the
CPU target's shared objects (``cpu``), the GPU target's PTX and cubins (``gpu``), the scheduler's
mappings (``schedules``).  Entries are named by a hash of everything that decides their content, so an
entry never goes stale; several processes (MPI ranks) may write the same entry at once: each writes a
file of its own and renames it into place (``write_atomic``), so a reader sees a whole entry or none.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_root() -> Path:
    """The cache's root directory (see the module docstring); not created."""
    root = os.environ.get("COSA_CACHE_DIR")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cosa"


def cache_dir(name: str) -> Path:
    """The sub-directory ``name`` of the cache root, created if missing."""
    path = cache_root() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same directory and an atomic rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def temporary_path(path: Path) -> Path:
    """A fresh name beside ``path`` for a file another program writes before ``os.replace`` moves it in."""
    fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=f".{Path(path).stem}.", suffix=Path(path).suffix)
    os.close(fd)
    return Path(tmp)
