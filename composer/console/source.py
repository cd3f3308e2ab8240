"""Where the console reads turns: one small seam over the audit log's reader
(``composer.observe.audit.reader``: a JSON Lines file, or a PostgreSQL table by its DSN).

Every page reads turns through ``TurnSource`` and nothing else. Each line is parsed by the
audit reader's one parser (``composer.observe.record.parse_line``), which never raises: a line
of any shape that is not an audit line is counted (``Listing.unreadable``) and passed over,
and the good turns around it are shown. Reads are bounded: a listing
keeps only the lines it will show (``offset + limit``), a search for one turn a few; a file of
any size is read a line at a time, and a table is read in pages of ``BATCH`` rows, at most
``SCAN_ROWS`` of them for a filter SQL cannot apply (a provider, an outcome) or for counts.
"""

from __future__ import annotations

import datetime as _dt
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from composer.observe.audit.reader import TurnPage
    from composer.observe.record import AuditLine

__all__ = ["BATCH", "SCAN_ROWS", "Keep", "Listing", "TurnSource"]

BATCH = 500
SCAN_ROWS = 10_000
"""Rows of a table read at most for one page whose filter is applied here, not in SQL."""

Keep = Callable[["AuditLine"], bool]


@dataclass(frozen=True)
class Listing:
    """One page of turns, newest first, and what was read to make it."""

    lines: list[AuditLine]
    total: int
    """The turns that match in all (in a table with a filter applied here: among the rows
    scanned)."""
    unreadable: int = 0
    """The lines read that were not audit lines (skipped: the page shows the turns around
    them)."""


@dataclass(frozen=True)
class TurnSource:
    """The turns of one audit log: a file path, or a DSN and the schema of its table.
    A file that does not exist yet holds no turn. Read errors are ``AuditReadError``."""

    location: str | Path
    schema: str = "composer"

    @property
    def is_table(self) -> bool:
        from composer.observe.audit.reader import is_dsn

        return is_dsn(self.location)

    def lines(
        self, *, principal: str | None = None, since: _dt.datetime | None = None
    ) -> Iterator[AuditLine]:
        """The turns of ``principal`` (None: everyone's) since ``since``: a file's all, oldest
        first; a table's newest ``SCAN_ROWS``, newest first."""
        for entry in self.entries(principal=principal, since=since):
            if not isinstance(entry, str):
                yield entry

    def entries(
        self, *, principal: str | None = None, since: _dt.datetime | None = None
    ) -> Iterator[AuditLine | str]:
        """``lines``, each line that is not an audit line among them as its problem."""
        if self.is_table:
            yield from self._rows(principal, since)
            return
        from composer.observe.audit.reader import matches
        from composer.observe.record import read_lines

        try:
            for _, line in read_lines(Path(self.location)):
                if isinstance(line, str) or matches(line, None, None, principal, (since, None)):
                    yield line
        except FileNotFoundError:
            return

    def newest(
        self,
        keep: Keep | None,
        *,
        limit: int,
        offset: int = 0,
        principal: str | None = None,
        since: _dt.datetime | None = None,
    ) -> Listing:
        """The newest turns of ``principal`` since ``since`` that ``keep`` accepts (None: all),
        newest first, ``offset`` of them skipped; how many match in all (in a table with
        ``keep``: among the rows scanned); how many lines read were not audit lines."""
        if self.is_table and keep is None:
            page = self._page(limit, offset, principal, since)
            return Listing(page.lines, page.total, page.unreadable)
        total = unreadable = 0
        entries = self.entries(principal=principal, since=since)
        kept: deque[AuditLine] | list[AuditLine]
        # a table's rows come newest first (the first matches are the page), a file's last
        kept = [] if self.is_table else deque(maxlen=offset + limit)
        for entry in entries:
            if isinstance(entry, str):
                unreadable += 1
            elif keep is None or keep(entry):
                total += 1
                if isinstance(kept, deque) or len(kept) < offset + limit:
                    kept.append(entry)
        newest = list(kept) if self.is_table else list(reversed(kept))
        return Listing(newest[offset : offset + limit], total, unreadable)

    def find(self, turn_id: str) -> AuditLine | None:
        """The turn whose id is exactly ``turn_id`` (a prefix names none here: a page link
        always holds the whole id), or None."""
        from composer.observe.audit.reader import LOOKUP_LIMIT, read_turns

        if not self.is_table and not Path(self.location).exists():
            return None
        page = read_turns(self.location, schema=self.schema, limit=LOOKUP_LIMIT, turn=turn_id)
        return next((line for line in page.lines if line.turn_id == turn_id), None)

    def _rows(self, principal: str | None, since: _dt.datetime | None) -> Iterator[AuditLine | str]:
        for offset in range(0, SCAN_ROWS, BATCH):
            page = self._page(BATCH, offset, principal, since)
            yield from page.lines
            yield from ["not an audit line"] * page.unreadable
            if len(page.lines) + page.unreadable < BATCH:
                return

    def _page(
        self, limit: int, offset: int, principal: str | None, since: _dt.datetime | None
    ) -> TurnPage:
        from composer.observe.audit.reader import read_turns

        return read_turns(
            self.location,
            schema=self.schema,
            limit=limit,
            offset=offset,
            principal=principal,
            since=since,
        )
