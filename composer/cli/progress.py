"""Progress of index builds while ``preview`` warms its providers up.

A live ``indexing NAME: done/total`` counter on a terminal; otherwise one summary line, and
only for a large corpus, so that a log shows the same lines whatever the machine's load.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from composer.cli.output import Output, printable
from composer.inspect.words import counted

if TYPE_CHECKING:
    from composer.hooks import Progress

__all__ = ["LARGE_CORPUS_FILES", "TerminalProgress", "progress_factory"]

LARGE_CORPUS_FILES = 1000
"""A corpus this large gets one summary line in a log when its index is built."""


def progress_factory(output: Output) -> Callable[[str], Progress | None]:
    """The progress of provider NAME's index build: a live bar on a terminal, else a summary."""

    def make(name: str) -> Progress | None:
        if output.interactive:
            return TerminalProgress(name, output.err)

        def report(done: int, total: int) -> None:
            # by size, not by time: what a log shows must not depend on the machine's load
            if done == total and total >= LARGE_CORPUS_FILES:
                print(
                    printable(f"composer: indexed {name}: {counted(total, 'file')}"),
                    file=output.err,
                )

        return report

    return make


class TerminalProgress:
    """A one-line ``indexing NAME: done/total`` counter, redrawn in place on stderr."""

    def __init__(self, name: str, stream: TextIO) -> None:
        self.name = printable(name)
        self.stream = stream
        self.started = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        if time.perf_counter() - self.started < 0.3 and done < total:
            return  # only shown when indexing takes more than a moment
        end = "\n" if done >= total else ""
        self.stream.write(f"\rindexing {self.name}: {done}/{counted(total, 'file')}{end}")
        self.stream.flush()
