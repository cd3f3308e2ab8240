"""One way for tests to run a child Python with the network unplugged.

``BLOCK_SOCKETS`` is prepended to a child's script, or installed as ``sitecustomize`` through
``blocked_pythonpath``, so that every connect and DNS lookup raises before composer is imported.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["BLOCK_SOCKETS", "blocked_pythonpath"]

BLOCK_SOCKETS = """
import socket

def _blocked(*args, **kwargs):
    raise OSError("network access blocked by the test")

socket.socket.connect = _blocked
socket.socket.connect_ex = _blocked
socket.create_connection = _blocked
socket.getaddrinfo = _blocked
socket.composer_test_blocked = True
"""


def blocked_pythonpath(folder: Path, pythonpath: str | None = None) -> str:
    """A PYTHONPATH whose ``sitecustomize`` (written into ``folder``) blocks every socket."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(BLOCK_SOCKETS, encoding="utf-8")
    return os.pathsep.join(filter(None, [str(folder), pythonpath]))
