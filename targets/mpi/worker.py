"""One rank of a ``targets.mpi.launch`` job: ``python -m targets.mpi.worker module:function FOLDER``.

Calls ``function(Ranks(), **args)`` (args from ``FOLDER/args.json``), gathers every rank's return value
at rank 0, which writes ``FOLDER/results.json``.  Status file ``FOLDER/rankR.status``: ``running``,
``phase NAME`` while a counted phase is open, ``returned`` (waiting for the others), ``done``, or ``error rank R: Type: message``; on an
exception the rank prints that line to stderr and calls ``MPI_Abort`` so that no other rank waits.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path


def _resolve(entry: str):
    module, _, name = entry.partition(":")
    if not name:
        raise ValueError(f"entry point {entry!r} is not module:function")
    return getattr(importlib.import_module(module), name)


def main(argv: list[str]) -> int:
    from mpi4py import MPI

    from .ranks import Ranks

    entry, folder = argv[0], Path(argv[1])
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    status = folder / f"rank{rank}.status"
    status.write_text("running")
    (folder / f"rank{rank}.pid").write_text(str(os.getpid()))
    ranks = Ranks(comm)
    ranks.ledger.on_phase = lambda name: status.write_text(f"phase {name}")
    try:
        args = json.loads((folder / "args.json").read_text())
        value = _resolve(entry)(ranks, **args)
        ranks.ledger.on_phase = None
        status.write_text("returned")
        values = comm.gather(value, root=0)
        if rank == 0:
            (folder / "results.json").write_text(json.dumps(values))
        comm.Barrier()
    except BaseException as exc:  # noqa: BLE001 - any failure must end every rank now
        line = f"rank {rank}: {type(exc).__name__}: {exc}".splitlines()[0]
        status.write_text(f"error {line}")
        print(line, file=sys.stderr, flush=True)
        comm.Abort(1)
        return 1
    status.write_text("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
