"""The audit log's PostgreSQL sink: the same queue and thread as the file's, batches COPYed.

The writer thread holds one connection (a pool would serve one thread). Each batch of lines
is one ``COPY`` in one transaction: all of it lands or none. When the server cannot be reached
or a batch fails (the server restarted, the connection was killed, a timeout), the batch's
lines are lost, counted in ``failed`` and warned (once a minute per kind of failure, masked:
the DSN is named by its host and database only), the connection is dropped, and the writer
waits before it tries again (1 s, doubling to ``RETRY_MAX_S``) while new lines wait in the
bounded queue (full, they are dropped and counted). The turn never waits on any of it.

Many writers share one table, so each row names its ``writer`` and retention deletes only
its own writer's rows: replicas of one manifest are one writer (by default its path as the
line names it), so between them they keep ``max_rows``; another manifest's rows are never
touched. Ages are on the server's clock alone: a row's ``written`` is stamped by the server
when it lands, and compared with the server's ``now()``, so a writer whose clock is wrong
neither deletes its fresh rows nor keeps its old ones.

Retention runs on the writer's connection after a batch, once a minute (and at once again
after a run that deleted a full ``RETAIN_BATCH``): this writer's rows older than ``max_age_s``,
then its rows beyond its newest ``max_rows``, at most ``RETAIN_BATCH`` of each per run. One
replica of a writer at a time does it (a transaction advisory lock of the schema and writer
that the others skip). Rows from before the table had a ``writer`` (a previous version's)
belong to nobody by that column: the writer whose manifest path they name (their
``manifest``) deletes them by age alone, by their own ``time`` (the old writer's clock); they
count towards no ``max_rows``.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from typing import TYPE_CHECKING, Any, Unpack

from composer._postgres import with_schema
from composer.manifest.dsn import describe_dsn
from composer.observe.audit.base import AuditQueue, QueueOptions
from composer.observe.audit.table import COLUMNS, TABLE, column_text, connect, create_table, row_of
from composer.observe.record import Snapshot, json_line

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ["RETAIN_BATCH", "RETAIN_EVERY_S", "RETRY_MAX_S", "PostgresAuditLog"]

RETRY_MAX_S = 5.0
"""The longest wait between tries while the server fails."""

RETAIN_EVERY_S = 60.0
"""How often a writer deletes what is past the retention."""

RETAIN_BATCH = 10_000
"""Rows deleted at most per kind per retention run: a run never holds the writer long."""

_COPY = "COPY {s}.%s (%s) FROM STDIN" % (TABLE, ", ".join(COLUMNS))  # noqa: UP031
_BY_AGE = (
    "DELETE FROM {s}.audit_turns WHERE seq IN (SELECT seq FROM {s}.audit_turns"
    " WHERE writer = %(writer)s AND written < now() - make_interval(secs => %(age)s)"
    " ORDER BY written LIMIT %(batch)s)"
)
_BY_ROWS = (
    "DELETE FROM {s}.audit_turns WHERE seq IN (SELECT seq FROM {s}.audit_turns"
    " WHERE writer = %(writer)s AND seq <= (SELECT seq FROM {s}.audit_turns"
    " WHERE writer = %(writer)s ORDER BY seq DESC OFFSET %(rows)s LIMIT 1)"
    " ORDER BY seq LIMIT %(batch)s)"
)
_PREVIOUS_BY_AGE = (
    "DELETE FROM {s}.audit_turns WHERE seq IN (SELECT seq FROM {s}.audit_turns"
    " WHERE writer IS NULL AND manifest = %(manifest)s"
    " AND time < now() - make_interval(secs => %(age)s) ORDER BY time LIMIT %(batch)s)"
)


class PostgresAuditLog(AuditQueue):
    """Writes one row per turn to ``{schema}.audit_turns`` from a thread of its own."""

    kind = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str,
        writer: str,
        manifest: str | None = None,
        max_age_s: float,
        max_rows: int,
        timeout_s: float,
        **queue: Unpack[QueueOptions],
    ) -> None:
        label = f"{describe_dsn(dsn)} schema {schema}"
        super().__init__(label, ("postgres", dsn, schema, writer), **queue)
        self._dsn = dsn
        self.schema = schema
        self.writer = writer
        self.manifest = manifest
        self.max_age_s = max_age_s
        self.max_rows = max_rows
        self.timeout_s = timeout_s
        self._conn: Connection[Any] | None = None
        self._retry_at = 0.0
        self._backoff = 1.0
        self._retain_at = 0.0  # the first batch retains
        lock = f"composer:audit-retain:{schema}:{writer}"
        digest = hashlib.sha256(lock.encode("utf-8", "surrogatepass")).digest()
        self._retain_lock = int.from_bytes(digest[:8], signed=True)

    def __repr__(self) -> str:
        return f"<PostgresAuditLog {self.label} written={self.written} failed={self.failed}>"

    def _make(self, snapshot: Snapshot) -> tuple[tuple[Any, ...], int]:
        line = json_line(snapshot)
        return row_of(snapshot, line, self.writer), len(line)

    def _pause(self) -> None:
        """After a failure, wait for the next try (lines stay queued meanwhile); a close
        ends the wait."""
        while not self._closed and (left := self._retry_at - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))

    def _write(self, lines: list[Any]) -> None:
        if self._closed and time.monotonic() < self._retry_at:
            self._lost("unreachable", len(lines), self.last_error or "the server failed")
            return
        try:
            conn = self._connection()
            with conn.transaction(), conn.cursor().copy(with_schema(_COPY, self.schema)) as copy:
                for row in lines:
                    copy.write_row(row)
        except Exception as e:  # psycopg.Error, OSError, a row psycopg could not send
            self._failed(e, len(lines))
            return
        self._written(len(lines))
        self._backoff = 1.0
        if time.monotonic() >= self._retain_at:
            self._retain(conn)

    def _connection(self) -> Connection[Any]:
        if self._conn is None or self._conn.closed:
            conn = connect(self._dsn, self.timeout_s)
            try:
                create_table(conn, self.schema)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _failed(self, error: Exception, lost: int) -> None:
        """A batch that did not land: the connection dropped, the next try put off."""
        self._finish()
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, RETRY_MAX_S)
        kind = "unreachable" if _unreachable(error) else type(error).__name__
        message = str(error).strip().splitlines()[0] if str(error).strip() else kind
        self._lost(kind, lost, message)

    def _retain(self, conn: Connection[Any]) -> None:
        """Delete this writer's rows past the age and the count (and a previous version's rows
        of its manifest past the age), ``RETAIN_BATCH`` at most of each."""
        deleted = 0
        try:
            with conn.transaction():
                row = conn.execute(
                    "SELECT pg_try_advisory_xact_lock(%s)", (self._retain_lock,)
                ).fetchone()
                if row is not None and row[0]:
                    values = {
                        "writer": column_text(self.writer),
                        "manifest": column_text(self.manifest, None),
                        "age": self.max_age_s,
                        "rows": self.max_rows,
                        "batch": RETAIN_BATCH,
                    }
                    kinds = [_BY_AGE, _BY_ROWS] + ([_PREVIOUS_BY_AGE] if self.manifest else [])
                    for text in kinds:
                        done = conn.execute(with_schema(text, self.schema), values)
                        deleted = max(deleted, done.rowcount)
        except Exception as e:
            self._warn("retention", f"audit log {self.label}: retention failed: {e!r}")
            self._finish()
        if deleted < RETAIN_BATCH:
            self._retain_at = time.monotonic() + RETAIN_EVERY_S

    def retain_now(self) -> None:
        """Run retention at the next batch (a test's or an operator's)."""
        self._retain_at = 0.0

    def _finish(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


def _unreachable(error: Exception) -> bool:
    """Whether ``error`` says the server is not there (refused, unknown host, timed out,
    gone), as opposed to a statement it refused."""
    try:
        from psycopg import OperationalError
    except ImportError:
        return False
    return isinstance(error, OperationalError | OSError)
