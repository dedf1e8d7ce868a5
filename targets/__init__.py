"""Code generation targets beyond Gemmini: ``targets.cpu`` (C + OpenMP) and ``targets.gpu``.

Every target refuses what it cannot express with a ``TargetError`` (bad input,
exit 2 on the command line) before compiling; a compiler that fails or is
missing raises a ``TargetError`` with ``exit_code`` 1 naming the log or the
Debian package.
"""

from workloads import FrameworkError


class TargetError(FrameworkError, ValueError):
    """A workload, mapping or architecture a target cannot run, or a build that failed."""


__all__ = ["TargetError"]
