"""Log records while a command runs: one masked line each on stderr, never a traceback.

Without a handler Python's last-resort one prints full tracebacks, unmasked; a command's own
output already names each failure, so one line per record is enough. Records are masked in
place before any handler formats them: composer's, and those of the libraries providers use
(psycopg quotes a DSN's password, httpx a URL, mcp a server's message).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from composer.cli.output import Output

__all__ = ["MaskRecords", "OneLineHandler", "log_access_to", "log_records_to"]


class MaskRecords(logging.Filter):
    """Masks a log record in place before it is formatted.

    The message is formatted once and masked and its arguments dropped; the exception's text
    and the stack are masked too, so no formatter, and no handler running after this one,
    can show a secret (``logging``'s own error report included).
    """

    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: the format alone
            message = str(record.msg)
        record.msg = self.redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


class OneLineHandler(logging.Handler):
    """Log records as one masked line each on stderr, the exception's first line appended."""

    def __init__(self, output: Output, redact: Callable[[str], str]) -> None:
        super().__init__(logging.WARNING)
        self.output = output
        self.redact = redact
        self.addFilter(MaskRecords(redact))
        # Imported now, not while emitting: a server out of file descriptors logs that it
        # is, and an import then would need one (and fail, with a traceback).
        from composer.cli.preview import first_line

        self._first_line = first_line

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "composer.registry":
            return  # a provider that raised or timed out: its row already says so, once
        first_line = self._first_line
        try:
            message = record.getMessage().rstrip()  # libpq ends its messages with a newline
            text = f"composer: {record.levelname.lower()}: {message}"
            error = record.exc_info[1] if record.exc_info else None
            if error is not None:
                text = f"{text}: {first_line(error)}"
            self.output.warning(self.redact(text))
        except Exception:
            self.handleError(record)

    def handleError(self, record: logging.LogRecord) -> None:
        """A line that could not be written (stderr closed, no descriptor left) is lost;
        never logging's own ``--- Logging error ---`` traceback, which leaks the record."""
        with contextlib.suppress(OSError):
            os.write(2, b"composer: a log line could not be written\n")


@contextlib.contextmanager
def log_records_to(output: Output, redact: Callable[[str], str]) -> Iterator[None]:
    """Route warnings logged while a command runs (a provider that raised, a library's
    connection error) through ``redact``, every logger's records alike."""
    handler = OneLineHandler(output, redact)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


def log_access_to(output: Output, redact: Callable[[str], str]) -> None:
    """Print the access log's lines (``composer.serve.access``, INFO) on stderr, masked."""

    class AccessLines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                print(redact(f"composer: access: {record.getMessage()}"), file=output.err)
                output.err.flush()
            except Exception:
                self.handleError(record)

    access = logging.getLogger("composer.serve.access")
    access.setLevel(logging.INFO)
    access.propagate = False
    access.addHandler(AccessLines(logging.INFO))
