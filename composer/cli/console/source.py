"""Where the console reads turns: one small seam over the audit log's file readers.

Every page reads turns through ``TurnSource`` and nothing else, so that another kind of audit
log (a database) is one change here. Reads are bounded: a listing keeps only the lines it will
show (``offset + limit``), a search for one turn keeps one line; a file of any size is read a
line at a time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from composer.observe.record import AuditLine

__all__ = ["TurnSource"]


@dataclass(frozen=True)
class TurnSource:
    """The turns of one audit log (``runtime.audit.path``, or the file ``composer console``
    was given). A log that does not exist yet holds no turn."""

    path: Path

    def lines(self) -> Iterator[AuditLine]:
        """Every turn, oldest first; a line that is not an audit line is passed over."""
        from composer.observe.record import read_lines

        try:
            for _, line in read_lines(self.path):
                if not isinstance(line, str):
                    yield line
        except FileNotFoundError:
            return

    def newest(
        self, keep: Callable[[AuditLine], bool], *, limit: int, offset: int = 0
    ) -> tuple[list[AuditLine], int]:
        """The newest turns ``keep`` accepts, newest first, after skipping ``offset`` of them;
        and how many it accepts in all. Only ``offset + limit`` lines are held while reading."""
        kept: deque[AuditLine] = deque(maxlen=offset + limit)
        total = 0
        for line in self.lines():
            if keep(line):
                total += 1
                kept.append(line)
        newest = list(reversed(kept))
        return newest[offset : offset + limit], total

    def find(self, turn_id: str) -> AuditLine | None:
        """The turn whose id is exactly ``turn_id`` (a prefix names none here: a page link
        always holds the whole id), or None."""
        from composer.cli.audit import find_turn

        try:
            line, _ = find_turn(self.path, turn_id)
        except (LookupError, FileNotFoundError):
            return None
        return line if line.turn_id == turn_id else None
