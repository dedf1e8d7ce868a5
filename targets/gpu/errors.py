"""The GPU back end's error: one line naming the source, field and reason."""

from __future__ import annotations

from targets import TargetError


class GpuError(TargetError):
    """A nest, mapping or arch the GPU back end cannot express (exit 2), or a failed build or run
    (``exit_code=1``)."""
