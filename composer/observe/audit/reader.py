"""Audit lines read back from where a sink wrote them: a JSON Lines file or a PostgreSQL table.

``read_turns`` is the one reader (``composer audit list|show|diff`` and the web console go
through it); ``find_turn`` names one turn by its id or a unique prefix. A location is a file
path, or a DSN (``postgresql://...`` or ``postgres://...``) with a schema, whose table is the
one ``runtime.audit.postgres`` writes (``composer.observe.audit.table``). A table is read
with SQL (the filters, the newest-first order, the limit and the offset are the server's);
a file is read once, line by line, keeping only the page asked for. Every line, a file's or
a row's, is parsed by ``record.parse_line`` alone, which never raises: a line of any shape
that is not an audit line is counted and named (``TurnPage.skipped``), and the turns around it
are read; a line longer than ``record.MAX_LINE_BYTES`` is not even fetched.

Nothing here writes; a location is only ever shown masked (``shown``: a DSN by its host,
port and database).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composer._postgres import import_psycopg, with_schema
from composer.errors import AuditReadError
from composer.manifest.dsn import describe_dsn, dsn_secrets
from composer.manifest.models import redact
from composer.observe.record import MAX_LINE_BYTES, AuditLine, parse_line, read_lines

__all__ = [
    "LOOKUP_LIMIT",
    "MAX_LIMIT",
    "MAX_OFFSET",
    "MAX_SKIPPED",
    "TurnPage",
    "Window",
    "find_turn",
    "is_dsn",
    "matches",
    "read_turns",
    "shown",
]

LOOKUP_LIMIT = 50
"""The turns ``find_turn`` reads that share a prefix (enough to tell one from many)."""

MAX_LIMIT = 10_000
"""The most turns one page holds: a reader's memory is bounded whatever it is asked."""

MAX_OFFSET = 100_000
"""The deepest page: a file's reader keeps ``offset + limit`` lines while it reads."""

MAX_SKIPPED = 100
"""The lines that are not audit lines a page names at most (a file of another program's
text would otherwise name each of its lines)."""

_SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True)
class TurnPage:
    """One page of turns, newest first."""

    lines: list[AuditLine]
    total: int
    """The turns that match the filters, on every page (``lines`` are ``limit`` of them)."""
    skipped: list[tuple[int, str]] = field(default_factory=list)
    """``(line number or row seq, problem)`` of the lines read that are not audit lines (a
    torn last line after a crash, another program's text): reported, never guessed at; the
    first ``MAX_SKIPPED`` of them."""
    unreadable: int = 0
    """How many lines read were not audit lines, ``skipped`` or not."""


def is_dsn(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a file."""
    return isinstance(location, str) and location.startswith(_SCHEMES)


def shown(location: str | os.PathLike[str]) -> str:
    """``location`` for a message: a file as given, a DSN as its host, port and database
    (its password, user and options never)."""
    return describe_dsn(str(location)) if is_dsn(location) else str(location)


def read_turns(
    location: str | os.PathLike[str],
    *,
    schema: str = "composer",
    limit: int = 20,
    offset: int = 0,
    turn: str | None = None,
    branch: str | None = None,
    principal: str | None = None,
    since: _dt.datetime | None = None,
    until: _dt.datetime | None = None,
    timeout_s: float = 10.0,
) -> TurnPage:
    """The turns of ``location`` that match every filter given, newest first, ``offset`` of
    them skipped and at most ``limit`` kept, with how many match in all.

    ``location``: a file path, or a DSN (``postgresql://...``) whose ``schema`` holds the
    table ``audit_turns``. Filters: ``turn``, a prefix of the turn id (the whole id matches
    itself); ``branch``, the branch id exactly; ``principal``, the principal's name exactly;
    ``since`` (inclusive) and ``until`` (exclusive), times (naive ones are UTC). A file's
    newest turns are its last lines; a table's are by time, then by row.

    Blocking (a file read, a query): call it from a thread in async code. Raises
    ``AuditReadError`` (its message names the location masked) for a file that cannot be read,
    a database that cannot be reached (past ``timeout_s``), a schema without an audit table,
    or psycopg missing; ``ValueError`` for a limit outside 0 to ``MAX_LIMIT`` or an offset
    outside 0 to ``MAX_OFFSET``.
    """
    if not (0 <= limit <= MAX_LIMIT and 0 <= offset <= MAX_OFFSET):
        raise ValueError(
            f"limit must be 0 to {MAX_LIMIT} and offset 0 to {MAX_OFFSET}: {limit}, {offset}"
        )
    ask = _Ask(limit, offset, turn, branch, principal, (_utc(since), _utc(until)))
    if is_dsn(location):
        return _from_table(_Table(str(location), schema, timeout_s), ask)
    return _from_file(Path(location), ask)


def find_turn(
    location: str | os.PathLike[str], turn: str | None, *, schema: str = "composer"
) -> tuple[AuditLine, list[tuple[int, str]]]:
    """The line of ``turn`` (an id or a unique prefix; None: the newest turn) and the lines
    read that were not audit lines. Raises ``LookupError`` saying why no single turn
    matched, ``AuditReadError`` as ``read_turns``."""
    page = read_turns(location, schema=schema, limit=LOOKUP_LIMIT if turn else 1, turn=turn)
    if turn is None:
        if not page.lines:
            raise LookupError("holds no turn")
        return page.lines[0], page.skipped
    exact = [line for line in page.lines if line.turn_id == turn]
    if len(exact) == 1 or (page.total == 1 and page.lines):
        return (exact or page.lines)[0], page.skipped
    if not page.lines:
        raise LookupError(f"no turn {turn}")
    raise LookupError(f"{page.total} turns start with {turn}; give more of the id")


Window = tuple[_dt.datetime | None, _dt.datetime | None]


def _utc(moment: _dt.datetime | None) -> _dt.datetime | None:
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=_dt.UTC)


@dataclass(frozen=True)
class _Ask:
    """What one read asks for: a page of ``limit`` turns past ``offset``, of those that
    match the filters of ``read_turns``."""

    limit: int
    offset: int
    turn: str | None
    branch: str | None
    principal: str | None
    window: Window


def _from_file(path: Path, ask: _Ask) -> TurnPage:
    kept: deque[AuditLine] = deque(maxlen=ask.limit + ask.offset)
    skipped: list[tuple[int, str]] = []
    total = unreadable = 0
    try:
        for number, line in read_lines(path):
            if isinstance(line, str):
                unreadable += 1
                if len(skipped) < MAX_SKIPPED:
                    skipped.append((number, line))
            elif matches(line, ask.turn, ask.branch, ask.principal, ask.window):
                total += 1
                kept.append(line)
    except OSError as e:
        raise AuditReadError(f"{path}: {e.strerror or e}") from None
    newest = list(reversed(kept))
    return TurnPage(newest[ask.offset : ask.offset + ask.limit], total, skipped, unreadable)


def matches(
    line: AuditLine, turn: str | None, branch: str | None, principal: str | None, window: Window
) -> bool:
    """Whether ``line`` passes ``read_turns``'s filters of a file: ``window`` is (since,
    until), inclusive and exclusive, compared as times (naive ones are UTC)."""
    if turn is not None and not (line.turn_id or "").startswith(turn):
        return False
    if branch is not None and line.branch.id != branch:
        return False
    if principal is not None and line.branch.principal != principal:
        return False
    since, until = (_utc(moment) for moment in window)
    if since is None and until is None:
        return True
    try:
        moment = _utc(_dt.datetime.fromisoformat(line.time))
    except ValueError:
        return False
    assert moment is not None
    return (since is None or moment >= since) and (until is None or moment < until)


@dataclass(frozen=True)
class _Table:
    dsn: str
    schema: str
    timeout_s: float


def _from_table(table: _Table, ask: _Ask) -> TurnPage:
    from composer.observe.audit.table import INDEXED_CHARS, connect

    where: list[str] = []
    values: list[Any] = []
    if ask.turn is not None:
        where.append("turn_id LIKE %s")
        values.append(_like_prefix(ask.turn[:INDEXED_CHARS]))
    for column, value, before, after in (
        ("branch_id", ask.branch, '"branch":{"id":', ',"name":'),
        ("principal", ask.principal, '"principal":', '},"manifest":'),
    ):
        if value is not None:
            where.append(f"{column} = %s")
            values.append(value[:INDEXED_CHARS])
            if len(value) >= INDEXED_CHARS:  # the column holds its start: the line decides
                where.append("strpos(line, %s) > 0")  # as json_line wrote it, never parsed
                values.append(before + json.dumps(value) + after)
    since, until = ask.window
    if since is not None:
        where.append("time >= %s")
        values.append(since)
    if until is not None:
        where.append("time < %s")
        values.append(until)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    dsn, schema, where_shown = table.dsn, table.schema, shown(table.dsn)
    psycopg = import_psycopg(f"{where_shown}: reading an audit table", AuditReadError)
    try:
        with connect(dsn, table.timeout_s) as conn:
            rows = conn.execute(
                with_schema(
                    "SELECT seq, CASE WHEN octet_length(line) <= %s THEN line END"
                    f" FROM {{s}}.audit_turns{clause}"
                    " ORDER BY time DESC, seq DESC LIMIT %s OFFSET %s",
                    schema,
                ),
                [MAX_LINE_BYTES, *values, ask.limit, ask.offset],
            ).fetchall()
            counted = conn.execute(
                with_schema(f"SELECT count(*) FROM {{s}}.audit_turns{clause}", schema), values
            ).fetchone()
    except psycopg.errors.UndefinedTable:
        raise AuditReadError(
            f"{where_shown}: schema {schema!r} holds no audit table (audit_turns): give the "
            "schema of runtime.audit.postgres with --schema"
        ) from None
    except psycopg.Error as e:
        problem = redact(str(e).strip().splitlines()[0] if str(e).strip() else "", dsn_secrets(dsn))
        raise AuditReadError(f"{where_shown}: {problem or type(e).__name__}") from None
    lines, skipped = _parsed(rows)
    return TurnPage(lines, counted[0] if counted else len(lines), skipped, len(skipped))


def _parsed(rows: list[tuple[Any, ...]]) -> tuple[list[AuditLine], list[tuple[int, str]]]:
    lines: list[AuditLine] = []
    skipped: list[tuple[int, str]] = []
    for seq, text in rows:
        line = parse_line(text)
        if isinstance(line, str):
            skipped.append((seq, line))
        else:
            lines.append(line)
    return lines, skipped


def _like_prefix(prefix: str) -> str:
    """``prefix`` as a LIKE pattern matching what starts with it (its ``%``, ``_`` and
    backslashes taken literally)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"
