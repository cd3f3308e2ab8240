"""A ``composer`` command line whose process takes Ctrl-C, however the tests were started.

A shell starts a background job (``make test &``, a CI runner's detached step) with SIGINT
ignored, every child inherits that, and Python then installs no KeyboardInterrupt handler:
a test that interrupts ``composer`` would wait forever. The child restores SIGINT's default
before it becomes ``python -m composer`` (exec keeps a default disposition), so Python
installs its handler as it does in a terminal.
"""

from __future__ import annotations

import sys

__all__ = ["composer_command"]

_RESTORE_AND_EXEC = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'composer', *sys.argv[1:]])"
)


def composer_command(*args: str) -> list[str]:
    """``python -m composer ARGS``, started so that SIGINT interrupts it."""
    return [sys.executable, "-c", _RESTORE_AND_EXEC, *args]
