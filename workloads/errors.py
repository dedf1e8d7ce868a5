"""The error family every package derives its own exception from.

Messages name the source (file or object), the field and the reason, so the
command line can print them as one line and exit 2 without a traceback.
"""

from __future__ import annotations


class FrameworkError(Exception):
    """Base of WorkloadError, MappingError, ArchError, SchedulingError, SimulationError."""

    def __init__(self, reason: str, *, source: str | None = None, field: str | None = None):
        self.reason = reason
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
