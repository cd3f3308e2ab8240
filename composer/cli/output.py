"""Where a command writes, and how the process's own streams are kept writable.

Everything printed goes through ``Output``, which escapes control characters (``printable``):
names come from files other people write, and must not drive the operator's terminal or forge
log lines. A command that was given its file relatively (``validate configs``) names every file
under the working directory relative to it, in its diagnostics and its preview's rows, as
the operator did, though the message had the absolute path the loader resolved
(``relative_paths``); given an absolute path, every path stays absolute. Colour only on a terminal and never with ``NO_COLOR`` set. Only the standard library
is imported here, so ``--help`` and ``--version`` stay light.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "Output",
    "detach_stdout",
    "escape_what_cannot_be_encoded",
    "print_document",
    "printable",
    "relative_paths",
    "say",
    "wants_colour",
]


def printable(text: str, *, keep: str = "", json: bool = False) -> str:
    """``composer.manifest.yamlnodes.printable``, imported when first needed."""
    from composer.manifest.yamlnodes import printable as escape

    return escape(text, keep=keep, json=json)


class Output:
    """Where a command writes: results to ``out``, diagnostics to ``err``; rich colour on a TTY.

    ``print``, ``error`` and ``warning`` write one line each: a newline or any other control
    character in ``text`` is escaped, so a name cannot start a line of its own. ``block`` keeps
    the newlines and tabs of a multi-line text, ``json`` writes a JSON document.
    """

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self._colour = wants_colour(self.err)
        self.relative_to: str | None = None
        """The working directory when the command's file was named relatively."""

    def name_files_as(self, spelled: str | os.PathLike[str] | None) -> None:
        """Name files as ``spelled`` (the file the command was given) is: relative to the
        working directory when it is relative."""
        if spelled is not None and not os.path.isabs(spelled):
            with contextlib.suppress(OSError):  # a working directory that was removed
                self.relative_to = os.getcwd()

    def muted(self) -> Output:
        """This output with its results written nowhere (``--json`` prints its document on
        ``out`` instead); diagnostics go where they go."""
        muted = copy.copy(self)
        muted.out = io.StringIO()
        return muted

    def relative(self, text: str) -> str:
        """``text`` with paths named as the command's file was (``name_files_as``)."""
        return relative_paths(text, self.relative_to) if self.relative_to else text

    def print(self, text: str) -> None:
        print(printable(text), file=self.out)

    def block(self, text: str) -> None:
        """Several lines as they are, but for control characters other than newline and tab."""
        print(printable(text, keep="\n\t"), file=self.out)

    def json(self, text: str) -> None:
        """A JSON document; characters its encoder leaves raw (DEL, C1, bidi) as ``\\u`` escapes."""
        print(printable(text, keep="\n", json=True), file=self.out)

    @property
    def utf8(self) -> bool:
        """Whether results are written as UTF-8 (else JSON is kept to ASCII with escapes)."""
        encoding = getattr(self.out, "encoding", None) or "utf-8"
        return encoding.lower().replace("-", "").replace("_", "") == "utf8"

    @property
    def colour(self) -> bool:
        """Whether results may use colour and box tables (stdout is a terminal, no NO_COLOR)."""
        return wants_colour(self.out)

    @property
    def interactive(self) -> bool:
        """Whether progress may be drawn on stderr."""
        return self._colour

    def error(self, text: str) -> None:
        self._diagnostic(text, "red")

    def warning(self, text: str) -> None:
        self._diagnostic(text, "yellow")

    def _diagnostic(self, text: str, style: str) -> None:
        text = printable(self.relative(text))
        if self._colour:
            try:
                from rich.console import Console  # only paid for on a terminal
                from rich.text import Text
            except ImportError:
                pass
            else:
                console = Console(file=self.err, highlight=False, soft_wrap=True, emoji=False)
                console.print(Text(text, style=style))
                return
        print(text, file=self.err)


def print_document(
    output: Output, document: BaseModel, redact: Callable[[str], str] | None = None
) -> None:
    """``document`` (``composer.inspect.documents``) as indented JSON on ``output``, every
    string through ``redact`` when given (values, not the serialized text: the JSON stays
    valid)."""
    from composer.manifest import map_strings

    data = document.model_dump(mode="json")
    if redact is not None:
        data = map_strings(data, redact)
    # through json, not pydantic: a lone surrogate (bytes that are not UTF-8 in a file name
    # or an argument) becomes a \udcXX escape instead of a serialisation error
    output.json(json.dumps(data, indent=2, ensure_ascii=not output.utf8))


def relative_paths(text: str, cwd: str) -> str:
    """``text`` with each absolute path under ``cwd`` written relative to it (``cwd`` itself
    as ``.``); other paths as they are."""
    cwd = cwd.rstrip(os.sep)
    if not cwd or cwd not in text:
        return text
    start = r"(?<![\w.~/\\-])" + re.escape(cwd)  # not the tail of a longer path
    text = re.sub(start + re.escape(os.sep) + r"(?=[^\s/])", "", text)
    return re.sub(start + r"(?![\w.~/\\-])", ".", text)


def wants_colour(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal and ``NO_COLOR`` is not set."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def escape_what_cannot_be_encoded() -> None:
    """Let stdout and stderr write any text: what their encoding (ascii, latin-1, a lone
    surrogate from bytes that are not UTF-8) cannot represent becomes a backslash escape."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            with contextlib.suppress(ValueError):  # a closed stream
                stream.reconfigure(errors="backslashreplace")


def detach_stdout() -> None:
    """Point stdout at devnull, so the interpreter's final flush does not fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def say(text: str) -> None:
    """One line ``composer: text`` on stderr, if there is a stderr to write to."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        print(f"composer: {text}", file=sys.stderr, flush=True)
