"""The error family every package derives its own exception from.

Messages name the source (file or object), the field and the reason, so the
command line can print them as one line and exit 2 without a traceback.
"""

from __future__ import annotations


class FrameworkError(Exception):
    """Base of WorkloadError, MappingError, ArchError, SchedulingError, SimulationError.

    ``exit_code``: what the command line exits with: 2 for bad input (the
    default), 1 for a run that failed (a time-out with no schedule, a
    simulation that stopped); pass ``exit_code=1`` for the latter.
    """

    exit_code = 2

    def __init__(self, reason: str, *, source: str | None = None, field: str | None = None,
                 exit_code: int | None = None):
        self.reason = reason
        if exit_code is not None:
            self.exit_code = exit_code
        self.source = source
        self.field = field
        parts = []
        if source:
            parts.append(str(source))
        if field:
            parts.append(f"field '{field}'")
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {reason}" if prefix else reason)


class WorkloadError(FrameworkError, ValueError):
    """A loop nest, builder argument or workload file is malformed."""
