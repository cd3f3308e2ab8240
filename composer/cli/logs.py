"""Log records and warnings while a command runs: one masked line per cause on stderr, never
a traceback.

Without a handler Python's last-resort one prints full tracebacks, unmasked; a command's own
output already names each failure, so one line per record is enough. Records are masked in
place before any handler formats them: composer's, and those of the libraries providers use
(psycopg quotes a DSN's password, httpx a URL, mcp a server's message). A library that says
the same thing again (psycopg_pool retrying a connection) is one line with a count: a
command's lines at its end, a server's at once, its repeats counted and reported at most once
a minute. A multi-line message (libpq's ``...\n\tIs the server running``) is joined into one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from composer.cli.output import Output

__all__ = [
    "MAX_CAUSES",
    "REPEATS_EVERY_S",
    "MaskRecords",
    "OneLineHandler",
    "log_access_to",
    "log_records_to",
    "one_line",
]

MAX_CAUSES = 256
"""Distinct lines whose repeats are counted; past it, a new cause is printed as it comes."""

REPEATS_EVERY_S = 60.0
"""How often, at most, a server reports a cause's repeats."""


def one_line(text: str) -> str:
    """``text``'s lines joined with ``; ``, each stripped (a tab-indented hint included)."""
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


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
    """Log records as one masked line per cause on stderr, the exception's first line appended.

    ``live=False`` (a command): each cause is printed by ``close`` with how many times it
    came. ``live=True`` (a server): a cause is printed when it first comes, and its repeats,
    counted, at most every ``REPEATS_EVERY_S`` and at ``close``.
    """

    def __init__(
        self,
        output: Output,
        redact: Callable[[str], str],
        *,
        live: bool = False,
        ignore: tuple[str, ...] = (),
    ) -> None:
        super().__init__(logging.WARNING)
        self.output = output
        self.redact = redact
        self.live = live
        self.ignore = ("composer.registry", *ignore)
        self.repeats_every_s = REPEATS_EVERY_S
        self._causes: dict[str, list[float]] = {}  # line -> [repeats not yet printed, when]
        self.addFilter(MaskRecords(redact))
        # Imported now, not while emitting: a server out of file descriptors logs that it
        # is, and an import then would need one (and fail, with a traceback).
        from composer.inspect.preview import first_line

        self._first_line = first_line

    def emit(self, record: logging.LogRecord) -> None:
        if any(record.name == name or record.name.startswith(f"{name}.") for name in self.ignore):
            return  # composer.registry: a provider that raised or timed out, its row says so
        first_line = self._first_line
        try:
            message = record.getMessage().rstrip()  # libpq ends its messages with a newline
            text = f"composer: {record.levelname.lower()}: {message}"
            error = record.exc_info[1] if record.exc_info else None
            if error is not None:
                text = f"{text}: {first_line(error)}"
            self._count(self.redact(one_line(text)))
        except Exception:
            self.handleError(record)

    def _count(self, text: str) -> None:
        """Print or count one line (called under the handler's lock)."""
        cause = self._causes.get(text)
        now = time.monotonic()
        if cause is None:
            if len(self._causes) >= MAX_CAUSES:
                self.output.warning(text)
                return
            self._causes[text] = [0 if self.live else 1, now]
            if self.live:
                self.output.warning(text)
            return
        cause[0] += 1
        if self.live and now - cause[1] >= self.repeats_every_s:
            self.output.warning(f"{text} (again {_times(int(cause[0]))})")
            cause[:] = [0, now]

    def close(self) -> None:
        """Print what is still counted: each cause once, with how many times it came."""
        self.acquire()
        try:
            causes, self._causes = self._causes, {}
            for text, (count, _) in causes.items():
                if self.live and count:
                    self.output.warning(f"{text} (again {_times(int(count))})")
                elif not self.live:
                    self.output.warning(text if count == 1 else f"{text} ({_times(int(count))})")
        except Exception:
            with contextlib.suppress(OSError):
                os.write(2, b"composer: log lines could not be written\n")
        finally:
            self.release()
            super().close()

    def handleError(self, record: logging.LogRecord) -> None:
        """A line that could not be written (stderr closed, no descriptor left) is lost;
        never logging's own ``--- Logging error ---`` traceback, which leaks the record."""
        with contextlib.suppress(OSError):
            os.write(2, b"composer: a log line could not be written\n")


@contextlib.contextmanager
def log_records_to(
    output: Output,
    redact: Callable[[str], str],
    *,
    live: bool = False,
    ignore: tuple[str, ...] = (),
) -> Iterator[None]:
    """Route warnings logged while a command runs (a provider that raised, a library's
    connection error), and those of ``warnings.warn``, through ``redact``, every logger's
    records alike, one line per cause (``OneLineHandler``); but those of the loggers named in
    ``ignore`` (and below them), whose news the command says itself."""
    handler = OneLineHandler(output, redact, live=live, ignore=ignore)
    root = logging.getLogger()
    root.addHandler(handler)
    shown = warnings.showwarning
    warnings.showwarning = _log_warning
    try:
        yield
    finally:
        warnings.showwarning = shown
        root.removeHandler(handler)
        handler.close()


def _log_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A library's ``warnings.warn`` as a log record: its category and message, no source."""
    logging.getLogger("py.warnings").warning("%s: %s", category.__name__, message)


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
