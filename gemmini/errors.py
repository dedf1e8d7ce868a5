"""The Gemmini back end's error family.

``SimulationError`` is the family's root (the name DESIGN.md gives the back
end); ``IsaError`` marks a malformed command (a field out of range, an unknown
funct), ``CodegenError`` a mapping or workload the code generator cannot emit.
A simulator error found while executing a command stream carries ``index``,
the position of the offending command in the stream.
"""

from __future__ import annotations

from workloads import FrameworkError


class SimulationError(FrameworkError, ValueError):
    """A Gemmini command, program or simulation failed (root of the family).

    ``index``: position of the offending command in its stream (None when the
    error is not tied to one command).  The command line exits 1 (a failed run).
    """

    exit_code = 1

    def __init__(self, reason: str, *, source: str | None = None, field: str | None = None,
                 index: int | None = None):
        self.index = index
        if index is not None:
            source = f"{source} command {index}" if source else f"command {index}"
        super().__init__(reason, source=source, field=field)


class IsaError(SimulationError):
    """A command field is out of range or a command cannot be encoded/decoded."""


class CodegenError(SimulationError):
    """A workload, mapping or configuration the code generator cannot turn into a program (bad input: exit 2)."""

    exit_code = 2
