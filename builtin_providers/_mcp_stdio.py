"""The ``mcp`` provider's stdio transport: the server as a child process, held to bounds.

The SDK's ``stdio_client`` reads stdout without a limit (a line that never ends grows, and
is re-joined, for as long as the server writes), passes the child's stderr to ours raw, and
leaves the child running when composer is killed. Here instead:

* one JSON-RPC message is one stdout line of at most ``max_line_bytes``; a longer one breaks
  the link (``fault``), and the server is stopped at once;
* stderr is read by composer: each line escaped (no terminal sequence, no forged log line),
  prefixed with the provider's name and logged, at most ``_BURST`` lines at once and
  ``_RATE`` a second after; the last line is kept to say why a server exited;
* the child leads its own process group, so stopping it stops what it started: stdin is
  closed, then the group gets SIGTERM, then SIGKILL, within ``_GRACE_S + _TERM_S`` seconds;
* on Linux the child gets SIGKILL when the thread that started it dies (``PR_SET_PDEATHSIG``),
  so a composer killed with SIGKILL leaves no server behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

from builtin_providers._mcp_link import describe

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.client._transport import TransportStreams

__all__ = ["StdioLink"]

logger = logging.getLogger(__name__)

_GRACE_S = 0.5
"""How long a server may take to exit on its own once its stdin is closed (the MCP spec's
first step), before SIGTERM."""
_TERM_S = 1.0
"""How long after SIGTERM before SIGKILL."""
_EXIT_WAIT_S = 1.0
"""How long a server whose stdout ended is given to exit, so an error can name its code."""
_POLL_S = 0.01
_BURST = 20
"""Stderr lines logged at once before the rate limit applies."""
_RATE = 2.0
"""Stderr lines logged a second once the burst is spent."""
_STDERR_CHARS = 500
"""The longest stderr line logged (the rest is cut)."""
_PR_SET_PDEATHSIG = 1


class StdioLink:
    """A server started as ``command args`` in its own process group, over stdin/stdout."""

    def __init__(
        self,
        command: str,
        args: list[str],
        env: dict[str, str],
        cwd: Path | None,
        *,
        label: str,
        max_line_bytes: int,
    ) -> None:
        self.command, self.args, self.env, self.cwd = command, args, env, cwd
        self.label = label
        self.max_line_bytes = max_line_bytes
        self.fault: str | None = None
        self.on_end: Callable[[], None] | None = None
        self.process: asyncio.subprocess.Process | None = None
        self._stderr = _StderrLog(label)
        self._stderr_done = asyncio.Event()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @contextlib.asynccontextmanager
    async def transport(self) -> AsyncIterator[TransportStreams]:
        process = await self._spawn()
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        tasks = [
            asyncio.create_task(self._read(process, read_writer)),
            asyncio.create_task(self._write(process, write_reader)),
            asyncio.create_task(self._log_stderr(process)),
        ]
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await self._stop(process)
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()

    def explain(self, error: BaseException) -> str:
        """The bound broken, else how the process ended and its last stderr line, else the
        error inside the SDK's task groups."""
        if self.fault is not None:
            return self.fault
        if self.process is None:
            if isinstance(error, OSError):
                what = error.filename or self.command
                return f"cannot run {what!r}: {error.strerror or type(error).__name__}"
            return describe(error)
        code = self.process.returncode
        if code is None:
            return describe(error)
        if code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        last = self._stderr.last
        tail = f"; its last stderr line: {last}" if last else " (it wrote nothing on stderr)"
        return f"the server process {how}{tail}"

    async def _spawn(self) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            self.command,
            *self.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=get_default_environment() | self.env,
            cwd=self.cwd,
            start_new_session=True,  # its own process group: stopped as one
            preexec_fn=_die_with_parent(),
            limit=self.max_line_bytes,
        )
        self.process = process
        return process

    async def _read(
        self, process: asyncio.subprocess.Process, writer: MemoryObjectSendStream[Any]
    ) -> None:
        """One message per stdout line, to the session; at the end (EOF, a line too long),
        the session sees its read stream close."""
        assert process.stdout is not None
        try:
            async with writer:
                while True:
                    try:
                        line = await process.stdout.readline()
                    except ValueError:  # asyncio's LimitOverrunError, as readline raises it
                        self.fault = (
                            f"the server sent a message over {self.max_line_bytes} bytes "
                            "(max_response_bytes)"
                        )
                        _signal_group(process, signal.SIGKILL)  # it is of no more use
                        return
                    if not line:
                        await _exited(process, _EXIT_WAIT_S)
                        with contextlib.suppress(TimeoutError):
                            async with asyncio.timeout(_EXIT_WAIT_S):
                                await self._stderr_done.wait()
                        return
                    if line.strip():
                        await writer.send(_parse(line))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            if self.on_end is not None:
                self.on_end()

    async def _write(
        self, process: asyncio.subprocess.Process, reader: MemoryObjectReceiveStream[Any]
    ) -> None:
        assert process.stdin is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with reader:
                async for message in reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    process.stdin.write(data.encode() + b"\n")
                    await process.stdin.drain()

    async def _log_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        try:
            while True:
                try:
                    line = await process.stderr.readline()
                except ValueError:
                    line = f"(a line over {self.max_line_bytes} bytes, not shown)".encode()
                if not line:
                    return
                self._stderr.line(line)
        except OSError:
            return
        finally:
            self._stderr.flush()
            self._stderr_done.set()

    async def _stop(self, process: asyncio.subprocess.Process) -> None:
        """Close stdin; SIGTERM to the group if the server has not exited; then SIGKILL to
        the group, for it and whatever it started."""
        assert process.stdin is not None
        with contextlib.suppress(OSError):
            process.stdin.close()
        if not await _exited(process, _GRACE_S):
            _signal_group(process, signal.SIGTERM)
            await _exited(process, _TERM_S)
        _signal_group(process, signal.SIGKILL)
        if not await _exited(process, _TERM_S):
            logger.warning("%s: server process %d did not stop", self.label, process.pid)
        transport = getattr(process, "_transport", None)  # closed here, not at GC with a warning
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.close()


class _StderrLog:
    """The child's stderr as log records, escaped, prefixed and rate-limited."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.last = ""
        self._tokens = float(_BURST)
        self._stamp = time.monotonic()
        self._dropped = 0

    def line(self, raw: bytes) -> None:
        text = _printable(raw.rstrip(b"\r\n")[: _STDERR_CHARS * 4].decode("utf-8", "replace"))
        text = text[:_STDERR_CHARS]
        if not text.strip():
            return
        self.last = text
        now = time.monotonic()
        self._tokens = min(_BURST, self._tokens + (now - self._stamp) * _RATE)
        self._stamp = now
        if self._tokens < 1:
            self._dropped += 1
            return
        self._tokens -= 1
        self.flush()
        logger.warning("%s: %s", self.label, text)

    def flush(self) -> None:
        """Say how many lines the rate limit left out, if any."""
        if self._dropped:
            lines = "line" if self._dropped == 1 else "lines"
            logger.warning("%s: %d more stderr %s not shown", self.label, self._dropped, lines)
            self._dropped = 0


_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
"""What must not reach a terminal or a log raw: C0 and C1 controls, DEL, line separators and
bidirectional overrides (the set of ``composer.manifest.yamlnodes.printable``, which the
built-in types cannot import: they import only ``composer.plugin``)."""


def _printable(text: str) -> str:
    r"""``text`` with each unsafe character as its Python escape (``\x1b``)."""
    return _UNSAFE.sub(lambda match: repr(match.group())[1:-1], text)


def _parse(line: bytes) -> SessionMessage | Exception:
    """One stdout line as a message; what does not parse is handed to the session as an
    error value (the SDK's convention), without logging the line."""
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as e:
        return e


def _signal_group(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


async def _exited(process: asyncio.subprocess.Process, timeout: float) -> bool:
    """Whether the process has exited within ``timeout`` (polled: asyncio's ``wait`` also
    waits for the pipes, which a grandchild may hold open)."""
    deadline = time.monotonic() + timeout
    while process.returncode is None:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(_POLL_S)
    return True


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGKILL the child when its parent thread dies; None
    elsewhere. It runs between fork and exec, so it only calls what was looked up before."""
    if sys.platform != "linux":
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec
