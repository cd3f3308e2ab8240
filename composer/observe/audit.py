"""The audit log's writers: a bounded queue and one thread per sink, so a turn never waits on it.

``AuditQueue`` is the queue and thread every sink shares; ``AuditLog`` appends to a file (below),
``StdoutAuditLog`` writes to standard output, and ``composer.observe.audit_postgres`` to a table.

A turn appends its snapshot (``record.snapshot``) to the queue (``put`` never blocks: when the
queue is full, in lines or in bytes, the line is dropped and counted) and, if the writer
sleeps, wakes it. The writer then lingers ``LINGER_S`` so that the lines of many turns are
made and written together: it wakes a few times a second under load, not once per turn, and so
takes the interpreter from the turns as little as it can. It makes the snapshots' JSON lines,
about ``BATCH_BYTES`` at a time, appends them to the file, and rotates the file before a line
would take it past ``max_bytes`` (``turns.jsonl`` -> ``turns.jsonl.1`` -> ... -> ``.N``, the
oldest deleted).

The path is opened ``O_NOFOLLOW | O_NONBLOCK`` and must be a regular file of this process's
user: a planted symlink, a FIFO (which would block ``open`` until a reader came), a device or
another user's file is refused, and the file is made 0600 (lines may hold text). A short write
(a nearly full disk) is cut back to the end of the last whole line, so a torn line never glues
onto the next one; ``written`` counts the lines that reached the file. A refusal or a failure
to open, write or rotate (a full disk, a missing folder, no permission) loses those lines,
counts them in ``failed``, and logs a warning (at most one a minute per kind of failure,
masked); the next batch tries again. Nothing here raises into a turn.

One sink serves one path (one DSN and schema, standard output) in this process, whatever number
of loaded manifests write to it (``open_audit_log`` counts its users), so a reload never puts
two writers on one file.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import logging
import os
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar, cast

__all__ = [
    "BATCH_BYTES",
    "LINGER_S",
    "QUEUE_BYTES",
    "AuditLog",
    "AuditQueue",
    "StdoutAuditLog",
    "audit_problem",
    "open_audit_log",
    "release_audit_log",
]

from composer.observe.record import MAX_LINE_BYTES, json_line, weight

logger = logging.getLogger(__name__)

LINGER_S = 0.05
"""How long the writer waits, once woken, for more lines to write together."""

QUEUE_BYTES = 64 * 1024 * 1024
"""What the queued snapshots may hold in all (their texts, with keep_text), past which a turn's
line is dropped: the queue's ``queue_size`` lines alone would let 10,000 long turns pile up."""

BATCH_BYTES = 1024 * 1024
"""About how much the writer makes into lines before it writes them."""

_OPEN_FLAGS = (
    os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
)  # read: to see whether the file ends mid-line

_WARN_EVERY_S = 60.0
_YIELD_S = 0.0005  # the longest the writer makes lines before it lets a turn run


class AuditQueue:
    """A sink's bounded queue and writer thread: ``put`` on the turn's path, ``_write`` of
    whole batches on the thread (each sink says how it writes a batch and what it closes).

    ``written``, ``dropped`` (queue full, or the log closed) and ``failed`` (lost to an I/O
    error) count lines; ``on_count(kind, n)`` is told of each change (for metrics).
    ``label`` names the sink in warnings (masked: a file's path, a DSN's host and database);
    ``key`` is what ``open_audit_log`` shares it by.
    """

    kind = "queue"
    """What ``status`` reports the sink as (``file``, ``postgres``, ``stdout``)."""

    def __init__(
        self,
        label: str,
        key: Hashable,
        *,
        queue_size: int,
        queue_bytes: int = QUEUE_BYTES,
        redact: Callable[[str], str] | None = None,
        on_count: Callable[[str, int], None] | None = None,
        weigh: Callable[[Any], int] = weight,
    ) -> None:
        self.label = label
        self.key = key
        self._weigh = weigh
        self.written = 0
        self.dropped = 0
        self.failed = 0
        self.on_count = on_count
        self._redact = redact
        self._capacity = queue_size
        self._capacity_bytes = queue_bytes
        self._pending: deque[tuple[int, Any]] = deque()  # (weight, snapshot)
        self._held = 0  # the weights of the queued snapshots
        self._held_lock = threading.Lock()  # turns of several threads may put at once
        self._wake = threading.Event()
        self._busy = False  # the writer holds lines it took from the queue
        self._closed = False
        self._lock = threading.Lock()  # starting and stopping the thread
        self._thread: threading.Thread | None = None
        self._warned: dict[str, float] = {}
        self.last_error: str | None = None
        """The last failure's message (masked), None once a batch is written again."""

    # -- the turn's side

    def put(self, snapshot: Any) -> None:
        """Queue one turn's line; never blocks, never raises."""
        if self._closed:
            self._count("dropped", 1)
            return
        try:
            size = self._weigh(snapshot)
        except Exception:
            size = 0
        with self._held_lock:
            full = len(self._pending) >= self._capacity or self._held + size > self._capacity_bytes
            if not full:
                self._held += size
                self._pending.append((size, snapshot))
        if full:
            self._count("dropped", 1)
            self._warn("full", f"audit log {self.label}: queue full, a turn's line was dropped")
            return
        if not self._wake.is_set():
            if self._thread is None:
                self._start()
            self._wake.set()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name=f"composer-audit:{self.kind}", daemon=True
                )
                self._thread.start()

    # -- the writer thread

    def _run(self) -> None:
        while True:
            self._wake.wait()
            if not self._closed:
                time.sleep(LINGER_S)
            self._wake.clear()  # a put after this wakes the next round
            self._busy = True
            while self._pending:
                self._pause()
                self._write_batch()
            self._busy = False
            if self._closed and not self._pending:
                break
        self._finish()

    def _write_batch(self) -> None:
        """Make the lines of queued snapshots, up to about ``BATCH_BYTES``, and write them."""
        lines: list[Any] = []
        size = 0
        offered = time.perf_counter()
        while self._pending and size < BATCH_BYTES:
            held, snapshot = self._pending.popleft()
            with self._held_lock:
                self._held -= held
            try:
                line, made = self._make(snapshot)
                if made > MAX_LINE_BYTES:  # no reader would read it: lost here, and said so
                    raise ValueError(f"{made:,} bytes, past the {MAX_LINE_BYTES:,} a reader reads")
                lines.append(line)
                size += made
            except Exception as e:  # a snapshot that cannot be written is one lost line
                self._count("failed", 1)
                self._warn("encode", f"audit log {self.label}: a line could not be made: {e!r}")
            del snapshot
            if time.perf_counter() - offered > _YIELD_S:
                time.sleep(0)  # offer the interpreter back: a waiting turn goes first
                offered = time.perf_counter()
        if lines:
            self._write(lines)

    def _make(self, snapshot: Any) -> tuple[Any, int]:
        """What ``_write`` takes for one snapshot, and its size in bytes."""
        line = json_line(snapshot)
        return line, len(line)

    def _write(self, lines: list[Any]) -> None:
        """Write one batch; count each line ``written`` or ``failed``; never raise."""
        raise NotImplementedError

    def _pause(self) -> None:
        """Wait before the next batch, if the sink asks (a server that just failed)."""

    def _finish(self) -> None:
        """Release what the writer holds (a file, a connection) when the thread ends."""

    def _lost(self, kind: str, lost: int, message: str) -> None:
        """``lost`` lines of a batch failed: counted, remembered and warned (once a minute per
        ``kind``)."""
        self._count("failed", lost)
        self.last_error = self._redact(message) if self._redact else message
        self._warn(
            kind,
            f"audit log {self.label}: {lost} {'line' if lost == 1 else 'lines'} lost: {message}",
        )

    # -- counting and warning

    def _count(self, kind: str, n: int) -> None:
        if not n:
            return
        setattr(self, kind, getattr(self, kind) + n)
        if self.on_count is not None:
            try:
                self.on_count(kind, n)
            except Exception:
                logger.debug("audit counter hook failed", exc_info=True)

    def _warn(self, kind: str, message: str) -> None:
        now = time.monotonic()
        last = self._warned.get(kind)
        if last is not None and now - last < _WARN_EVERY_S:
            return
        self._warned[kind] = now
        logger.warning("%s", self._redact(message) if self._redact else message)

    # -- lifecycle

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued line is written or lost; whether that happened in time."""
        if self._thread is None:
            return True
        deadline = time.monotonic() + timeout
        while self._pending or self._busy:
            if time.monotonic() > deadline or not self._thread.is_alive():
                return False
            time.sleep(0.002)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then stop the thread and close the file. Later lines are
        dropped (counted)."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is None:
            return
        self._wake.set()
        thread.join(timeout)  # a thread stuck on a disk is a daemon: it does not hold the exit

    def status(self) -> dict[str, Any]:
        """What a readiness probe shows of the sink: its kind and label (masked), whether its
        last batch was written (None: none tried yet), the counts, the last error (masked)."""
        label = self._redact(self.label) if self._redact else self.label
        writing = None if self.written + self.failed == 0 else self.last_error is None
        return {
            "kind": self.kind,
            "where": label,
            "writing": writing,
            "written": self.written,
            "dropped": self.dropped,
            "failed": self.failed,
            "last_error": self.last_error,
        }

    def _written(self, n: int) -> None:
        """``n`` lines reached the sink: counted, and the sink is writing again."""
        self._count("written", n)
        self.last_error = None


class AuditLog(AuditQueue):
    """Appends one JSON line per turn to ``path`` from a thread of its own, rotating it."""

    kind = "file"

    def __init__(
        self,
        path: Path,
        *,
        max_bytes: int,
        backups: int,
        queue_size: int,
        queue_bytes: int = QUEUE_BYTES,
        redact: Callable[[str], str] | None = None,
        on_count: Callable[[str, int], None] | None = None,
        encode: Callable[[Any], bytes] = json_line,
        weigh: Callable[[Any], int] = weight,
    ) -> None:
        super().__init__(
            str(path),
            path,
            queue_size=queue_size,
            queue_bytes=queue_bytes,
            redact=redact,
            on_count=on_count,
            weigh=weigh,
        )
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


class StdoutAuditLog(AuditQueue):
    """Writes one JSON line per turn to standard output (``sys.stdout`` when the batch is
    written), for a log shipper: a reader that stalls holds the writer, never a turn."""

    kind = "stdout"

    def __init__(
        self,
        key: Hashable = "stdout",
        *,
        queue_size: int,
        queue_bytes: int = QUEUE_BYTES,
        redact: Callable[[str], str] | None = None,
        on_count: Callable[[str, int], None] | None = None,
    ) -> None:
        super().__init__(
            "standard output",
            key,
            queue_size=queue_size,
            queue_bytes=queue_bytes,
            redact=redact,
            on_count=on_count,
        )

    def _write(self, lines: list[bytes]) -> None:
        try:
            stream = sys.stdout
            stream.write(b"".join(lines).decode("ascii"))  # whole lines, one write
            stream.flush()
        except (OSError, ValueError, AttributeError) as e:  # closed, a broken pipe, None
            self._lost(type(e).__name__, len(lines), str(e) or type(e).__name__)
            return
        self._written(len(lines))


_OPEN: dict[Hashable, tuple[AuditQueue, int]] = {}
_OPEN_LOCK = threading.Lock()

_Sink = TypeVar("_Sink", bound=AuditQueue)


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


def open_audit_log(key: Any, make: Callable[[Any], _Sink]) -> _Sink:
    """The one sink of ``key`` in this process (a file's path, a table's DSN and schema,
    ``"stdout"``): ``make(key)`` the first time (a path made absolute), then the same sink;
    ``release`` it after use."""
    if isinstance(key, Path):
        key = Path(os.path.abspath(key))
    with _OPEN_LOCK:
        log, users = _OPEN.get(key, (None, 0))
        if log is None:
            log = make(key)
            atexit.unregister(_close_all)  # registered once, however many logs
            atexit.register(_close_all)
        _OPEN[key] = (log, users + 1)
        return cast(_Sink, log)


def release_audit_log(log: AuditQueue) -> None:
    """One user fewer; the last one closes the log (queued lines are written first)."""
    with _OPEN_LOCK:
        log_, users = _OPEN.get(log.key, (None, 0))
        if log_ is not log:
            return
        if users > 1:
            _OPEN[log.key] = (log, users - 1)
            return
        del _OPEN[log.key]
    log.close()


def _close_all() -> None:
    """At exit, write what is queued in every log still open (its thread is a daemon, which
    the interpreter would otherwise stop mid-queue)."""
    with _OPEN_LOCK:
        logs = [log for log, _ in _OPEN.values()]
        _OPEN.clear()
    for log in logs:
        log.close()
