"""Run a Python entry point on P MPI ranks under mpiexec, with a watchdog.

``launch("pkg.module:function", ranks=4, args={...}, timeout_s=60)`` starts
``mpiexec -n 4 python -m targets.mpi.worker``; every rank calls ``function(ranks, **args)`` with a
counting ``Ranks`` wrapper (``targets.mpi.ranks``) and returns a JSON-serialisable value; ``launch``
returns the list of those values in rank order.

Failure is one line naming the rank, never a hang:

* an exception in any rank: that rank writes ``rank R: Type: message`` to its status file and calls
  ``MPI_Abort``, which ends every rank; ``launch`` raises ``MpiError`` with that line;
* a rank that dies without a word (killed, ``os._exit``): the watchdog sees its process gone (mpiexec
  runs with ``-disable-auto-cleanup`` so the survivors keep waiting), ends the job and names the rank;
* a hang: after ``timeout_s`` the launcher kills mpiexec and its ranks (their process group) and names
  the ranks that did not finish, with the phase each was in.

Each rank keeps a status file in a temporary folder (``running``, ``phase NAME``, ``returned``, ``done``,
``error LINE``); the arguments and the results travel as JSON files there too.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from .. import TargetError

MPI_HINT = "pip install mpi4py mpich"
_LAUNCHER_ENV = ("PMI_", "OMPI_", "MPI_", "MV2_", "HYDRA_", "PMIX_")


class MpiError(TargetError):
    """A distributed run that failed (exit 1) or cannot start (MPI missing: exit 2)."""


def mpiexec_path() -> str:
    """mpiexec of the mpich wheel (next to this Python's scripts), else the one on PATH."""
    candidates = [Path(sysconfig.get_path("scripts")) / "mpiexec"]
    try:
        candidates.append(Path(sysconfig.get_path("scripts", f"{os.name}_user")) / "mpiexec")
    except KeyError:
        pass
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which("mpiexec")
    if not found:
        raise MpiError(f"mpiexec not found: {MPI_HINT}", field="mpiexec")
    return found


def require_mpi4py() -> None:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise MpiError(f"mpi4py is not installed: {MPI_HINT}", field="mpi4py") from None


def under_mpiexec() -> bool:
    """True when this process is one rank of a running mpiexec job with more than one rank."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE"):
        try:
            if int(os.environ.get(var, "1")) > 1:
                return True
        except ValueError:
            continue
    return False


def _status(folder: Path, ranks: int) -> dict[int, str]:
    out = {}
    for r in range(ranks):
        f = folder / f"rank{r}.status"
        out[r] = f.read_text().strip() if f.exists() else ""
    return out


def _failure(folder: Path, ranks: int, why: str, dead: int | None = None) -> str:
    """One line: the first rank that raised, else the ranks that did not finish and where they were."""
    status = _status(folder, ranks)
    errors = [s[len("error "):] for r, s in sorted(status.items()) if s.startswith("error ")]
    if errors:
        return errors[0]
    if dead is not None:
        return f"rank {dead} died: its process ended without an error or a result"
    stuck = []
    waiting = all(s in ("done", "returned") for s in status.values())
    for r, s in sorted(status.items()):
        if s == "done" or (s == "returned" and not waiting):
            continue
        where = f" (in phase '{s[len('phase '):]}')" if s.startswith("phase ") else \
            " (never started)" if not s else ""
        stuck.append(f"rank {r}{where}")
    return f"{why}: {', '.join(stuck) or 'every rank finished'} did not finish"


def _alive(pid: int) -> bool:
    """True while process ``pid`` runs (a zombie, dead but not yet reaped by its proxy, is not alive)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return state not in ("Z", "X")


def _watch(proc, folder: Path, ranks: int, timeout_s: float) -> str | None:
    """Wait for mpiexec; None when it exits by itself, else the one line saying why it must be ended."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            proc.wait(timeout=0.05)
            return None
        except subprocess.TimeoutExpired:
            pass
        for r in range(ranks):
            pid_file = folder / f"rank{r}.pid"
            if not pid_file.exists():
                continue
            status = (folder / f"rank{r}.status")
            state = status.read_text().strip() if status.exists() else ""
            if state in ("done",) or state.startswith("error "):
                continue
            try:
                pid = int(pid_file.read_text())
            except ValueError:
                continue
            if not _alive(pid):
                try:
                    proc.wait(timeout=0.5)  # an MPI_Abort in progress: let its line land first
                except subprocess.TimeoutExpired:
                    pass
                state = status.read_text().strip() if status.exists() else ""
                if state == "done":
                    continue
                return _failure(folder, ranks, "mpiexec ended", dead=None if state.startswith("error ") else r)
        if time.monotonic() > deadline:
            return _failure(folder, ranks, f"timed out after {timeout_s:g} s")


def launch(entry: str, ranks: int, args: dict | None = None, timeout_s: float = 60.0,
           extra_env: dict | None = None, prefix: list | tuple = (), mpiexec_args: list | tuple = ()) -> list:
    """Run ``entry`` (``module:function``) on ``ranks`` MPI ranks; its return values in rank order.

    ``prefix``: a command mpiexec runs under (e.g. ``ip netns exec NS``); ``mpiexec_args``: options put
    before ``-n`` (e.g. hydra's ``-launcher``, ``-hosts``, ``-iface``: ranks on other hosts or namespaces,
    which must share this machine's process table and file system: the watchdog reads their pids)."""
    require_mpi4py()
    if not isinstance(ranks, int) or ranks < 1:
        raise MpiError(f"must be a positive integer, got {ranks!r}", field="ranks")
    exe = mpiexec_path()
    env = {k: v for k, v in os.environ.items() if not k.startswith(_LAUNCHER_ENV)}
    env["HYDRA_LAUNCHER"] = "fork"  # start the ranks on this machine, never through ssh
    env.setdefault("OMP_NUM_THREADS", "1")
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join([str(root)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    extra = dict(extra_env or {})
    if "PYTHONPATH" in extra:  # the caller's folders first, then the project's
        env["PYTHONPATH"] = os.pathsep.join([extra.pop("PYTHONPATH"), env["PYTHONPATH"]])
    env.update(extra)
    with tempfile.TemporaryDirectory(prefix="cosa-mpi-") as tmp:
        folder = Path(tmp)
        (folder / "args.json").write_text(json.dumps(args or {}))
        # no auto clean-up: a rank that dies leaves the others waiting, so the watchdog can name it
        cmd = [*prefix, exe, "-disable-auto-cleanup", *mpiexec_args, "-n", str(ranks), sys.executable, "-m", "targets.mpi.worker", entry, str(folder)]
        # with ranks on other hosts, hydra may write to a proxy's closed socket at the end: ignore SIGPIPE
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, restore_signals=not mpiexec_args)
        try:
            why = _watch(proc, folder, ranks, timeout_s)
        except BaseException:  # the command's deadline or Ctrl-C: mpiexec and its ranks go too
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # it had ended
                pass
            proc.communicate()
            raise
        if why is not None:  # a rank died or the time ran out: end mpiexec and every rank now
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise MpiError(why, exit_code=1)
        out, err = proc.communicate()
        results = folder / "results.json"
        whole = results.exists() and all(s == "done" for s in _status(folder, ranks).values())
        if proc.returncode != 0 and mpiexec_args and whole:
            pass  # hydra's teardown of proxies on other hosts may fail after every rank finished: results whole
        elif proc.returncode != 0 or not results.exists():
            line = _failure(folder, ranks, f"mpiexec exited with status {proc.returncode}")
            if "did not finish" in line and "every rank finished" in line:
                tail = (err or out).strip().splitlines()
                line += f" ({tail[-1][:200]})" if tail else ""
            raise MpiError(line, exit_code=1)
        return json.loads(results.read_text())
