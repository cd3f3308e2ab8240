"""``--log-format json``: the server's log as one JSON object a line, for a log shipper.

Loki, Elasticsearch and Cloud Logging read a line of JSON as fields; a line for people has to
be parsed with a pattern first. With ``log_format="json"`` every record of the server's log
is one line on standard error: composer's own (``composer.serve``, its access log
``composer.serve.access``, warnings of any library, as the text format shows them) and
uvicorn's (``uvicorn.error``: the server's start and stop, at ``info``). A line is::

    {"time": "2026-05-04T09:21:07.532114+00:00", "level": "info",
     "logger": "composer.serve.access", "message": "127.0.0.1 POST /v1/turns 200 ...",
     "client": "127.0.0.1", "method": "POST", "path": "/v1/turns", "route": "/v1/turns",
     "status": 200, "principal": "alice", "duration_ms": 12.845, "turn_id": "0193...",
     "trace_id": "4bf9...", "span_id": "00f0..."}

``time`` and ``turn_id`` are the audit line's fields of the same name and format (the
``stdout`` audit sink writes its lines unchanged beside these), ``principal`` is the audit
line's ``branch.principal``, so a turn's access line and its audit line join on ``turn_id``.
``principal`` is also on any record logged while a principal's turn runs; ``trace_id`` and
``span_id`` (hex, as OTLP exports them) on any record logged inside a span, when traces are on
(``composer.serve.telemetry``). A record with an exception carries its type and first line
(``error_type``, ``error``), never a traceback, as the text format.

Every string is masked (the manifest's ``${VAR}`` values, the OTLP exporter's headers) before
it is encoded; the line is ASCII (``\\n``, quotes and control characters escaped), so nothing a
client sends can break it or forge another, and it is at most ``MAX_LINE_BYTES``: the longest
strings are cut first (``"truncated": true``). That bound is also what a pipe writes whole, so
the lines of ``--workers`` sharing one standard error never interleave.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from composer.principal import principal_name

__all__ = [
    "FIELDS",
    "LOG_FORMATS",
    "MAX_LINE_BYTES",
    "JsonLines",
    "event_line",
    "json_logs",
    "record_line",
]

LOG_FORMATS = ("text", "json")
"""``--log-format``'s values: lines for people (the default), or JSON lines."""

MAX_LINE_BYTES = 4096
"""The longest line written, its newline included: POSIX's smallest ``PIPE_BUF``, the most a
pipe takes in one write without mixing it with another process's."""

FIELDS = (
    "url",
    "client",
    "method",
    "path",
    "route",
    "status",
    "principal",
    "duration_ms",
    "turn_id",
    "user_agent",
)
"""The fields a record carries as ``extra`` that a line writes (the access log's, the
listening line's ``url``)."""

_INFO_LOGGERS = ("composer.serve", "composer.reload", "uvicorn.error")
"""Whose ``info`` records are written too (the server's start, stop and access log, and each
process's manifest reloads)."""

_SKIPPED = frozenset({"composer.registry"})
"""A provider that raised or timed out: its turn's report and audit line say so already."""

_TRUNCATED = "..."


def event_line(
    message: str, *, level: str = "info", logger: str = "composer.serve", **fields: Any
) -> str:
    """One line, without its newline, for what the command itself says (where it listens,
    why it stopped), in the records' shape."""
    return _encode(
        {
            "time": _iso(time.time()),
            "level": level,
            "logger": logger,
            "message": message,
            **_traced(),
            **fields,
        }
    )


def record_line(record: logging.LogRecord, redact: Callable[[str], str] = str) -> str:
    """``record`` as one line, without its newline, every string through ``redact``."""
    try:
        message = record.getMessage()
    except Exception:  # arguments that do not fit the format: the format alone
        message = str(record.msg)
    line: dict[str, Any] = {
        "time": _iso(record.created),
        "level": record.levelname.lower(),
        "logger": record.name,
        "message": message,
    }
    for name in FIELDS:
        value = record.__dict__.get(name)
        if value is not None:
            line[name] = value
    if "principal" not in line:
        principal = principal_name()
        if principal is not None:
            line["principal"] = principal
    line |= _traced()
    error = record.exc_info[1] if record.exc_info else None
    if error is not None:
        line["error_type"] = type(error).__name__
        line["error"] = next(iter(str(error).strip().splitlines()), "")
    return _encode({key: _masked(value, redact) for key, value in line.items()})


class JsonLines(logging.Handler):
    """Writes each record as one JSON line (``record_line``) on ``stream``."""

    def __init__(
        self, stream: TextIO, redact: Callable[[str], str] = str, level: int = logging.INFO
    ) -> None:
        super().__init__(level)
        self.stream = stream
        self.redact = redact

    def emit(self, record: logging.LogRecord) -> None:
        if record.name in _SKIPPED:
            return
        try:
            self.stream.write(record_line(record, self.redact) + "\n")
            self.stream.flush()
        except Exception:
            self.handleError(record)

    def handleError(self, record: logging.LogRecord) -> None:
        """A line that could not be written is lost, said as a line of its own; never
        logging's ``--- Logging error ---`` traceback, which shows the record unmasked."""
        with contextlib.suppress(OSError):
            os.write(
                2, (event_line("a log line could not be written", level="error") + "\n").encode()
            )


@contextlib.contextmanager
def json_logs(redact: Callable[[str], str] = str, stream: TextIO | None = None) -> Iterator[None]:
    """For the block, the server's log as JSON lines on ``stream`` (standard error): every
    logger's warnings and errors, ``info`` of the server and of uvicorn, ``warnings.warn``.
    Nothing more when JSON lines are written already (a command that set them up)."""
    root = logging.getLogger()
    if any(isinstance(handler, JsonLines) for handler in root.handlers):
        yield
        return
    handler = JsonLines(stream if stream is not None else sys.stderr, redact)
    levels = {name: logging.getLogger(name).level for name in _INFO_LOGGERS}
    for name in _INFO_LOGGERS:
        if logging.getLogger(name).getEffectiveLevel() > logging.INFO:
            logging.getLogger(name).setLevel(logging.INFO)
    root.addHandler(handler)
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        handler.close()


def _iso(seconds: float) -> str:
    """A time as the audit line writes it: ISO 8601 in UTC, microseconds."""
    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).isoformat()


def _traced() -> dict[str, str]:
    """The current span's trace and span ids, when traces are on and a span is current."""
    if "opentelemetry.trace" not in sys.modules:
        return {}
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


def _masked(value: Any, redact: Callable[[str], str]) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact(value if isinstance(value, str) else str(value))


def _encode(line: dict[str, Any]) -> str:
    """``line`` as compact ASCII JSON of at most ``MAX_LINE_BYTES`` with its newline: while
    longer, the longest string is cut to half (a value that is not a string or a number is
    written as its text)."""
    text = json.dumps(line, ensure_ascii=True, separators=(",", ":"), default=str)
    while len(text) >= MAX_LINE_BYTES:
        strings = [key for key, value in line.items() if isinstance(value, str)]
        longest = max(strings, key=lambda key: len(line[key]), default=None)
        if longest is None or len(line[longest]) <= len(_TRUNCATED):
            return json.dumps(
                {"time": line.get("time"), "level": line.get("level"), "truncated": True}
            )
        value = line[longest]
        line[longest] = value[: max(0, len(value) // 2 - len(_TRUNCATED))] + _TRUNCATED
        line["truncated"] = True
        text = json.dumps(line, ensure_ascii=True, separators=(",", ":"), default=str)
    return text
