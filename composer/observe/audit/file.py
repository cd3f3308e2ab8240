"""The audit log in a JSON Lines file, appended to from the sink's thread and rotated.

The file is rotated before a line would take it past ``max_bytes`` (``turns.jsonl`` ->
``turns.jsonl.1`` -> ... -> ``.N``, the oldest deleted).

The path is opened ``O_NOFOLLOW | O_NONBLOCK`` and must be a regular file of this process's
user: a planted symlink, a FIFO (which would block ``open`` until a reader came), a device or
another user's file is refused, and the file is made 0600 (lines may hold text). A short write
(a nearly full disk) is cut back to the end of the last whole line, so a torn line never glues
onto the next one; ``written`` counts the lines that reached the file. A refusal or a failure
to open, write or rotate (a full disk, a missing folder, no permission) loses those lines,
counts them in ``failed``, and logs a warning (at most one a minute per kind of failure,
masked); the next batch tries again. ``audit_problem`` says, without opening anything, why
every line for a path would be lost (``composer validate``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, Unpack

from composer.observe.audit.base import AuditQueue, QueueOptions
from composer.observe.record import json_line, weight

__all__ = ["AuditLog", "audit_problem"]

_OPEN_FLAGS = (
    os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
)  # read: to see whether the file ends mid-line


class AuditLog(AuditQueue):
    """Appends one JSON line per turn to ``path`` from a thread of its own, rotating it."""

    kind = "file"

    def __init__(
        self,
        path: Path,
        *,
        max_bytes: int,
        backups: int,
        encode: Callable[[Any], bytes] = json_line,
        weigh: Callable[[Any], int] = weight,
        **queue: Unpack[QueueOptions],
    ) -> None:
        super().__init__(str(path), path, weigh=weigh, **queue)
        self.path = path
        self._encode = encode
        self.max_bytes = max_bytes
        self.backups = backups
        self._fd: int | None = None
        self._size = 0

    def _make(self, snapshot: Any) -> tuple[bytes, int]:
        line = self._encode(snapshot)
        return line, len(line)

    def _write(self, lines: list[bytes]) -> None:
        """Append ``lines``, rotating first wherever the next would pass ``max_bytes``."""
        before = self.written
        try:
            self._open()
            chunk: list[bytes] = []
            size = 0
            for line in lines:
                held = self._size + size  # a line longer than max_bytes still goes, alone
                if held and held + len(line) > self.max_bytes:
                    self._append(chunk)
                    chunk, size = [], 0
                    self._close_fd()
                    self._rotate()
                    self._open()
                chunk.append(line)
                size += len(line)
            self._append(chunk)
        except OSError as e:
            self._close_fd()
            lost = len(lines) - (self.written - before)
            kind = errno.errorcode.get(e.errno or 0, type(e).__name__)
            self._lost(kind, lost, str(e.strerror or e))

    def _append(self, lines: list[bytes]) -> None:
        """Write ``lines`` and count them written; a short write is continued, and on an error
        the file is cut back to the end of the last whole line, which alone are counted."""
        assert self._fd is not None
        data = b"".join(lines)
        view = memoryview(data)
        start, sent = self._size, 0
        try:
            while sent < len(data):
                sent += os.write(self._fd, view[sent:])
        except OSError:
            whole = data.rfind(b"\n", 0, sent) + 1
            if whole < sent:
                with contextlib.suppress(OSError):  # if not, the next open ends the torn line
                    os.ftruncate(self._fd, start + whole)
            self._size = start + whole
            self._count("written", data.count(b"\n", 0, whole))
            raise
        finally:
            view.release()
        self._size = start + sent
        self._written(len(lines))

    def _open(self) -> None:
        """Open the path for appending, or raise: refused unless it is a regular file of this
        process's user (a FIFO's ``open`` would block, a symlink or another user's file
        would take the lines elsewhere); made 0600; a torn last line is ended first."""
        if self._fd is not None:
            return
        try:
            fd = os.open(self.path, _OPEN_FLAGS, 0o600)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise OSError(e.errno, "a symbolic link: refused") from None
            if e.errno == errno.ENXIO:  # a socket (or, where O_RDWR waits, a FIFO)
                raise OSError(e.errno, "not a regular file: refused") from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(errno.EINVAL, "not a regular file: refused")
            if info.st_uid != os.geteuid():
                raise OSError(errno.EPERM, f"owned by uid {info.st_uid}, not this user: refused")
            if stat.S_IMODE(info.st_mode) != 0o600:
                os.fchmod(fd, 0o600)
            if info.st_size and os.pread(fd, 1, info.st_size - 1) != b"\n":
                os.write(fd, b"\n")  # a line torn by a crash stays one bad line, alone
            self._size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _rotate(self) -> None:
        base = str(self.path)
        for n in range(self.backups - 1, 0, -1):
            if os.path.exists(f"{base}.{n}"):
                os.replace(f"{base}.{n}", f"{base}.{n + 1}")
        os.replace(base, f"{base}.1")

    def _close_fd(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)

    def _finish(self) -> None:
        self._close_fd()

    def __repr__(self) -> str:
        return f"<AuditLog {self.path.name} written={self.written} failed={self.failed}>"


def audit_problem(path: Path) -> str | None:
    """Why every line for ``path`` would be lost, found without opening or making anything (for
    ``composer validate``): a folder that is missing or this user cannot write in (the file
    is made, and rotated, there), or a file the writer refuses or cannot write. None when
    the writer can use it.
    """
    folder = path.parent
    if not folder.is_dir():
        if not folder.exists():
            return f"no such folder for the audit file: {folder}"
        return f"not a folder: {folder}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"folder not writable by this user (the file is made and rotated there): {folder}"
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"{path}: {e.strerror or e}"
    if stat.S_ISLNK(info.st_mode):
        return f"a symbolic link, which the writer refuses: {path}"
    if not stat.S_ISREG(info.st_mode):
        return f"not a regular file, which the writer refuses: {path}"
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not this user, which the writer refuses: {path}"
    if not os.access(path, os.W_OK):
        return f"not writable by this user: {path}"
    return None
