"""The cache root follows XDG, yields to COSA_CACHE_DIR, and entries are written whole."""

import multiprocessing as mp
from pathlib import Path

from workloads.cachedir import cache_dir, cache_root, write_atomic


def test_root_follows_xdg_and_the_override(tmp_path, monkeypatch):
    monkeypatch.delenv("COSA_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "cosa"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "cosa"
    monkeypatch.setenv("COSA_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir("cpu") == tmp_path / "mine" / "cpu" and (tmp_path / "mine" / "cpu").is_dir()


def _writer(path: str, byte: int) -> None:
    for _ in range(50):
        write_atomic(Path(path), bytes([byte]) * 200_000)


def test_concurrent_writers_leave_one_whole_entry(tmp_path):
    """Two processes rewriting one entry: a reader never sees a mix or a short file, and no temporaries stay."""
    path = tmp_path / "entry.bin"
    write_atomic(path, b"\0" * 200_000)
    procs = [mp.get_context("spawn").Process(target=_writer, args=(str(path), b)) for b in (1, 2)]
    for p in procs:
        p.start()
    seen = set()
    while any(p.is_alive() for p in procs):
        data = path.read_bytes()
        assert len(data) == 200_000 and len(set(data)) == 1
        seen.add(data[0])
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert path.read_bytes()[0] in (1, 2) and [f.name for f in tmp_path.iterdir()] == ["entry.bin"]
