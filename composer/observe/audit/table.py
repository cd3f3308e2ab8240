"""The audit table in PostgreSQL: its DDL, one turn's row, and a connection to it.

One table, ``{schema}.audit_turns``, for every process and replica that writes to the same
DSN and schema. Each row holds the turn's line exactly as the file sink writes it (``line``,
text: read back with ``AuditLine``) and, beside it, the columns a reader filters and sorts
by: ``time`` (the turn's start, by the writer's clock, as in the line), ``turn_id``,
``branch_id``, ``branch_name``, ``principal``, ``manifest`` (its path), ``tokens_used``,
``budget`` and ``bytes`` (the line's size). Two columns are retention's: ``writer``, whose
rows they are (``runtime.audit.postgres.writer``, by default the manifest's path as the line
names it: replicas of one manifest are one writer), and ``written``, stamped by the server
when the row lands (``DEFAULT now()``), so retention compares the server's times with the
server's clock whatever a writer's clock says. The columns are indexed by time, by branch and
time, by principal and time, by turn id (a prefix lookup), and by writer with ``seq`` and with
``written``, and hold at most ``INDEXED_CHARS`` characters (a B-tree entry past about 2,700
bytes fails the insert, and a branch id is the caller's to choose); the line keeps the whole
value. Values are masked as in the line (the line's own ``redact``).

A table of the previous version (without ``writer`` and ``written``) is upgraded by the first
writer that connects (``create_table``): both columns are added, empty in the rows already
there (``postgres`` says what becomes of those), and their indexes built.

psycopg 3 is imported only when a table is used (the ``postgres`` extra, through
``composer._postgres``); a missing extra is an ``ImportError`` saying what to install.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import TYPE_CHECKING, Any

from composer._postgres import import_psycopg, with_schema
from composer.observe.record import Snapshot

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = [
    "COLUMNS",
    "INDEXED_CHARS",
    "TABLE",
    "UPGRADE_TIMEOUT_S",
    "column_text",
    "connect",
    "create_table",
    "row_of",
]

TABLE = "audit_turns"

INDEXED_CHARS = 256
"""The longest value of an indexed column; the line holds the whole value."""

COLUMNS = (
    "time",
    "turn_id",
    "branch_id",
    "branch_name",
    "principal",
    "manifest",
    "tokens_used",
    "budget",
    "bytes",
    "line",
    "writer",
)
"""The columns a writer sends (``written`` is the server's to stamp)."""

_DDL = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    """CREATE TABLE IF NOT EXISTS {s}.audit_turns (
        seq bigserial PRIMARY KEY,
        time timestamptz NOT NULL,
        turn_id text,
        branch_id text NOT NULL,
        branch_name text,
        principal text,
        manifest text,
        tokens_used integer NOT NULL,
        budget integer,
        bytes integer NOT NULL,
        line text NOT NULL,
        writer text,
        written timestamptz DEFAULT now()
    )""",
    "CREATE INDEX IF NOT EXISTS audit_turns_time ON {s}.audit_turns (time, seq)",
    "CREATE INDEX IF NOT EXISTS audit_turns_branch ON {s}.audit_turns (branch_id, time)",
    "CREATE INDEX IF NOT EXISTS audit_turns_principal ON {s}.audit_turns (principal, time)",
    "CREATE INDEX IF NOT EXISTS audit_turns_turn ON {s}.audit_turns (turn_id text_pattern_ops)",
)

_UPGRADE = (
    # the previous version's table: the columns added empty (a default given with ADD COLUMN
    # would stamp every old row with the time of the upgrade), the server's stamp after
    "ALTER TABLE {s}.audit_turns ADD COLUMN IF NOT EXISTS writer text",
    "ALTER TABLE {s}.audit_turns ADD COLUMN IF NOT EXISTS written timestamptz",
    "ALTER TABLE {s}.audit_turns ALTER COLUMN written SET DEFAULT now()",
    "CREATE INDEX IF NOT EXISTS audit_turns_writer ON {s}.audit_turns (writer, seq)",
    "CREATE INDEX IF NOT EXISTS audit_turns_written ON {s}.audit_turns (writer, written)",
)

UPGRADE_TIMEOUT_S = 600.0
"""How long the upgrade of a previous version's table may take (its indexes are built over
every row), past the connection's own statement timeout."""

_CREATE_LOCK = 0x636F6D706F736572  # "composer": one creator at a time, whatever the schema


def connect(dsn: str, timeout_s: float) -> Connection[Any]:
    """A connection in autocommit whose connecting, statements and unanswered sends each give
    up after about ``timeout_s`` (a server that stops answering never holds the caller)."""
    psycopg = import_psycopg("an audit table")
    ms = max(1, int(timeout_s * 1000))
    conn: Connection[Any] = psycopg.connect(
        dsn,
        autocommit=True,
        application_name="composer-audit",
        connect_timeout=max(2, math.ceil(timeout_s)),  # libpq's least is 2 seconds
        tcp_user_timeout=ms,
        keepalives=1,
        keepalives_idle=max(1, math.ceil(timeout_s)),
    )
    try:
        conn.execute(f"SET statement_timeout = {ms}")
    except BaseException:
        conn.close()
        raise
    return conn


def create_table(conn: Connection[Any], schema: str) -> None:
    """The schema, table and indexes, made once whatever number of writers start at once, and
    a previous version's table upgraded (``writer`` and ``written`` added); nothing is asked
    of a table that is there and current (a role that may only insert into it, made by an
    administrator, writes without any right to create)."""
    from psycopg import sql

    name = sql.Identifier(schema, TABLE).as_string(conn)
    found = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL, (SELECT count(*) FROM pg_attribute"
        " WHERE attrelid = to_regclass(%s) AND attname IN ('writer', 'written')"
        " AND NOT attisdropped)",
        (name, name),
    ).fetchone()
    exists, current = (bool(found[0]), found[1] == 2) if found is not None else (False, False)
    if current:
        return
    from psycopg.errors import InsufficientPrivilege

    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
            conn.execute(f"SET LOCAL statement_timeout = {int(UPGRADE_TIMEOUT_S * 1000)}")
            for text in _UPGRADE if exists else _DDL + _UPGRADE:
                conn.execute(with_schema(text, schema))
    except InsufficientPrivilege as e:
        raise RuntimeError(
            f"{schema}.{TABLE} is missing or of a previous version (no writer and written "
            "columns), and this role may not make or upgrade it: run a writer once as the "
            f"table's owner, or the statements of the observability guide ({e})"
        ) from e


def row_of(turn: Snapshot, line: bytes, writer: str) -> tuple[Any, ...]:
    """The row of one turn whose line is ``line``, written by ``writer``, in ``COLUMNS``'
    order (names masked)."""
    mask = turn.context.redact
    name = turn.branch_name
    return (
        _dt.datetime.fromtimestamp(turn.time, _dt.UTC),
        column_text(turn.turn_id),
        column_text(mask(turn.branch_id)),
        None if name is None else column_text(mask(str(name))),
        column_text(turn.principal),
        column_text(turn.context.manifest.get("path"), None),
        turn.tokens_used,
        turn.budget,
        len(line),
        line.decode("ascii"),
        column_text(writer),
    )


def column_text(value: str | None, limit: int | None = INDEXED_CHARS) -> str | None:
    """``value`` as a column holds it: at most ``limit`` characters, without NUL (which text
    refuses), valid UTF-8 (a lone surrogate would fail the whole batch)."""
    if value is None:
        return None
    text = value[:limit].replace("\0", "\ufffd")
    return text.encode("utf-8", "replace").decode("utf-8")
