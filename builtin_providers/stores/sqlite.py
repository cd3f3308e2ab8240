"""A memory store in one SQLite file: the embedded default, safe for several processes.

WAL mode (readers never wait for a writer), a busy timeout and ``BEGIN IMMEDIATE`` writes
make it safe for several agent processes on one machine; it is not for several machines
(use PostgreSQL). Full-text search is FTS5 with the Porter stemmer, ranked by ``bm25``
(negated, so a higher ``score`` is more relevant); tags and top-level metadata values are in
their own indexed tables, so ``tags`` and ``filters`` are index look-ups, not scans. The
schema is versioned (``PRAGMA user_version``) and created or migrated on first use.

``seed``: a JSONL file imported when the store is first opened by a process and its content
changed since it was last imported (items whose id is already there are left as they are).
The database file is refused when it is a symlink or not a regular file, as the JSONL store's,
and is created 0600 (its ``-wal`` and ``-shm`` files take its mode): an agent's memories are
not for every local user to read. A batch is written in runs (``chunks``), one transaction
each, so a huge writeback never holds the store while another branch searches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from builtin_providers.stores.base import (
    COMMON_WORD,
    MemoryItem,
    as_query,
    body_of,
    canonical,
    chunks,
    created_now,
    digest_of,
    full_text,
    item_from_record,
    item_from_row,
    query_words,
    record_of,
)
from builtin_providers.stores.jsonl import JsonlMemoryStore
from composer.plugin import StoreError

__all__ = ["SCHEMA_VERSION", "SqliteMemoryStore"]

_T = TypeVar("_T")

SCHEMA_VERSION = 1

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE items (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            namespace TEXT NOT NULL,
            id TEXT NOT NULL,
            content TEXT NOT NULL,
            body TEXT NOT NULL,
            tags TEXT NOT NULL,
            metadata TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL,
            written_back INTEGER NOT NULL DEFAULT 0,
            UNIQUE (namespace, id)
        )""",
        "CREATE INDEX items_expiry ON items (expires_at) WHERE expires_at IS NOT NULL",
        "CREATE INDEX items_written_back ON items (namespace, seq) WHERE written_back",
        """CREATE TABLE item_tags (
            namespace TEXT NOT NULL, tag TEXT NOT NULL, seq INTEGER NOT NULL,
            PRIMARY KEY (namespace, tag, seq)
        ) WITHOUT ROWID""",
        "CREATE INDEX item_tags_seq ON item_tags (seq)",
        """CREATE TABLE item_meta (
            namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, seq INTEGER NOT NULL,
            PRIMARY KEY (namespace, key, value, seq)
        ) WITHOUT ROWID""",
        "CREATE INDEX item_meta_seq ON item_meta (seq)",
        """CREATE VIRTUAL TABLE items_fts USING fts5(
            body, content='items', content_rowid='seq',
            tokenize='porter unicode61 remove_diacritics 2'
        )""",
        """CREATE TRIGGER items_inserted AFTER INSERT ON items BEGIN
            INSERT INTO items_fts (rowid, body) VALUES (new.seq, new.body);
        END""",
        """CREATE TRIGGER items_deleted AFTER DELETE ON items BEGIN
            INSERT INTO items_fts (items_fts, rowid, body) VALUES ('delete', old.seq, old.body);
            DELETE FROM item_tags WHERE seq = old.seq;
            DELETE FROM item_meta WHERE seq = old.seq;
        END""",
        "CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ),
}

_COLUMNS = (
    "i.id, i.content, i.tags, i.metadata, i.namespace, i.expires_at, i.written_back, i.created_at"
)
_PURGE_BATCH = 500  # expired items deleted per write, so no write pays for a backlog at once
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _fold(text: str | None) -> str | None:
    """Python's ``str.lower``, so a substring match is LionAGI's (SQLite's folds ASCII only)."""
    return None if text is None else text.lower()


class SqliteMemoryStore:
    """composer's ``ItemStore`` in a SQLite file (created, with its schema, on first use)."""

    def __init__(
        self, path: Path | str, *, seed: Path | str | None = None, busy_timeout_s: float = 10.0
    ) -> None:
        self.path = Path(path)
        self.seed = Path(seed) if seed is not None else None
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"SqliteMemoryStore({str(self.path)!r})"

    # ------------------------------------------------------------------ the store contract

    async def store(self, item: Any) -> str:
        record = record_of(item)
        await self.add([item_from_record(record, record["id"])])
        return str(record["id"])

    async def add(
        self, items: Sequence[MemoryItem], *, written_back: bool = False, cap: int | None = None
    ) -> int:
        new = 0
        for run in chunks(items):  # the lock is free, and the loop runs, between runs
            new += await self._run(self._add, list(run), written_back, cap)
        return new

    async def retrieve(self, item_id: Any, namespace: str = "") -> MemoryItem | None:
        sql = (
            f"SELECT {_COLUMNS}, NULL FROM items i WHERE i.namespace = ? AND i.id = ?"
            " AND (i.expires_at IS NULL OR i.expires_at > ?)"
        )
        rows = await self._run(self._select, sql, [namespace, str(item_id), time.time()])
        return rows[0] if rows else None

    async def search(self, query: Any) -> list[MemoryItem]:
        spec = as_query(query)
        if spec.limit <= 0:
            return []
        where = ["i.namespace = ?", "(i.expires_at IS NULL OR i.expires_at > ?)"]
        args: list[Any] = [spec.namespace, time.time()]
        if spec.tags:
            marks = ", ".join("?" * len(spec.tags))
            where.append(
                f"i.seq IN (SELECT seq FROM item_tags WHERE namespace = ? AND tag IN ({marks}))"
            )
            args += [spec.namespace, *spec.tags]
        for key, value in (spec.filters or {}).items():
            where.append(
                "i.seq IN (SELECT seq FROM item_meta WHERE namespace = ? AND key = ? AND value = ?)"
            )
            args += [spec.namespace, key, canonical(value)]
        if spec.text and spec.match == "fulltext":
            expression = await self._run(self._expression, query_words(spec.text))
            if expression is None:
                return []
            where.insert(0, "items_fts MATCH ?")
            args.insert(0, expression)
            if spec.min_score is not None:
                where.append("bm25(items_fts) <= ?")
                args.append(-spec.min_score)
            sql = (
                f"SELECT {_COLUMNS}, -bm25(items_fts) FROM items_fts"
                " JOIN items i ON i.seq = items_fts.rowid"
                f" WHERE {' AND '.join(where)} ORDER BY bm25(items_fts), i.seq LIMIT ?"
            )
        else:
            if spec.text:
                where.append("instr(fold(i.body), ?) > 0")
                args.append(spec.text.lower())
            sql = f"SELECT {_COLUMNS}, NULL FROM items i WHERE {' AND '.join(where)} ORDER BY i.seq LIMIT ?"
        return await self._run(self._select, sql, [*args, spec.limit])

    async def export(self, namespace: str | None = None) -> list[MemoryItem]:
        where = "(i.expires_at IS NULL OR i.expires_at > ?)"
        args: list[Any] = [time.time()]
        if namespace is not None:
            where += " AND i.namespace = ?"
            args.append(namespace)
        sql = f"SELECT {_COLUMNS}, NULL FROM items i WHERE {where} ORDER BY i.seq"
        return await self._run(self._select, sql, args)

    async def counts(self) -> dict[str, int]:
        def count(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(
                "SELECT namespace, count(*) FROM items"
                " WHERE expires_at IS NULL OR expires_at > ? GROUP BY namespace ORDER BY namespace",
                (time.time(),),
            )
            return {str(namespace): int(n) for namespace, n in rows}

        return await self._run(count)

    async def exists(self) -> bool:
        """Whether the file is there with composer's tables; looked at through a connection
        that may not create it (``mode=rw``), and nothing is written."""

        def look() -> bool:
            with self._lock:
                self._refuse_links()
                if not self.path.exists():
                    return False
                uri = f"{self.path.resolve().as_uri()}?mode=rw"
                conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout_s)
                try:
                    (version,) = conn.execute("PRAGMA user_version").fetchone()
                    (tables,) = conn.execute(
                        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'items'"
                    ).fetchone()
                finally:
                    conn.close()
                return bool(version >= 1 and tables == 1)

        return await self._guarded(look)

    async def check(self) -> None:
        """Raise StoreError unless the file and its full-text index are consistent."""

        def check(conn: sqlite3.Connection) -> None:
            (result,) = conn.execute("PRAGMA quick_check").fetchone()
            if result != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {result}")
            conn.execute("INSERT INTO items_fts (items_fts) VALUES ('integrity-check')")

        await self._run(check)

    async def aclose(self) -> None:
        def close() -> None:
            with self._lock:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None

        await asyncio.to_thread(close)

    # ------------------------------------------------------------------ work in a thread

    async def _run(self, work: Callable[..., _T], *args: Any) -> _T:
        """``work(connection, *args)`` off the event loop, one call at a time per store."""

        def locked() -> _T:
            with self._lock:
                return work(self._connection(), *args)

        return await self._guarded(locked)

    async def _guarded(self, work: Callable[[], _T]) -> _T:
        """``work()`` in a thread; a failing database or file is the provider's StoreError."""
        try:
            return await asyncio.to_thread(work)
        except sqlite3.Error as e:
            raise StoreError(f"memory database {self.path}: {e}") from e
        except OSError as e:
            raise StoreError(f"memory database {self.path}: {e.strerror or e}") from e

    def _expression(self, conn: sqlite3.Connection, words: list[str]) -> str | None:
        """The FTS5 expression for ``words``: each counted up to COMMON_WORD matches."""
        counts = {
            f'"{word}"': conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM items_fts WHERE items_fts MATCH ? LIMIT ?)",
                (f'"{word}"', COMMON_WORD),
            ).fetchone()[0]
            for word in words
        }
        return full_text(counts, " OR ", " AND ")

    def _select(self, conn: sqlite3.Connection, sql: str, args: list[Any]) -> list[MemoryItem]:
        return [item_from_row(row) for row in conn.execute(sql, args)]

    def _add(
        self, conn: sqlite3.Connection, items: list[MemoryItem], written_back: bool, cap: int | None
    ) -> int:
        now = time.time()
        created = created_now()
        new = 0
        with _transaction(conn):
            for item in items:
                new += _insert(conn, item, created, written_back)
            if written_back and cap is not None:
                for namespace in {item.namespace for item in items}:
                    conn.execute(
                        "DELETE FROM items WHERE seq IN (SELECT seq FROM items"
                        " WHERE namespace = ? AND written_back ORDER BY seq DESC LIMIT -1 OFFSET ?)",
                        (namespace, cap),
                    )
            conn.execute(
                "DELETE FROM items WHERE seq IN (SELECT seq FROM items WHERE expires_at <= ?"
                " LIMIT ?)",
                (now, _PURGE_BATCH),
            )
        return new

    # ------------------------------------------------------------------ opening

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._refuse_links()
            self._create()
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                conn.create_function("fold", 1, _fold, deterministic=True)
                _retry_busy(lambda: conn.execute("PRAGMA journal_mode=WAL"), self.busy_timeout_s)
                conn.execute("PRAGMA synchronous=NORMAL")
                _migrate(conn)
                if self.seed is not None:
                    self._import_seed(conn, self.seed)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _refuse_links(self) -> None:
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(info.st_mode):
            raise StoreError(f"memory database {self.path} is a symlink (links are not followed)")
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"memory database {self.path} is not a regular file")

    def _create(self) -> None:
        """Create the database file 0600, whatever the umask (SQLite would make it 0644)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o600)
        except FileExistsError:
            return
        try:
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)

    def _import_seed(self, conn: sqlite3.Connection, seed: Path) -> None:
        items = JsonlMemoryStore(seed, read_links=True).items()
        digest = digest_of(items)
        with _transaction(conn):
            row = conn.execute("SELECT value FROM store_meta WHERE key = 'seed'").fetchone()
            if row is not None and row[0] == digest:
                return
            created = created_now()
            for item in items:
                _insert(conn, item, created, False)
            conn.execute(
                "INSERT INTO store_meta (key, value) VALUES ('seed', ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (digest,),
            )


def _insert(conn: sqlite3.Connection, item: MemoryItem, created: float, written_back: bool) -> int:
    """Insert one item unless its (namespace, id) is there; 1 when it was new. It keeps its
    own ``created_at`` and ``written_back`` (``created`` and ``written_back`` when unset)."""
    cursor = conn.execute(
        "INSERT INTO items (namespace, id, content, body, tags, metadata, created_at,"
        " expires_at, written_back) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (namespace, id) DO NOTHING",
        (
            item.namespace,
            item.id,
            json.dumps(item.content, ensure_ascii=False, default=str),
            body_of(item.content),
            json.dumps(item.tags, ensure_ascii=False),
            json.dumps(item.metadata, ensure_ascii=False, default=str),
            created if item.created_at is None else item.created_at,
            item.expires_at,
            int(written_back or item.written_back),
        ),
    )
    if cursor.rowcount != 1:
        return 0
    seq = cursor.lastrowid
    conn.executemany(
        "INSERT OR IGNORE INTO item_tags (namespace, tag, seq) VALUES (?, ?, ?)",
        [(item.namespace, tag, seq) for tag in item.tags],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO item_meta (namespace, key, value, seq) VALUES (?, ?, ?, ?)",
        [(item.namespace, key, canonical(value), seq) for key, value in item.metadata.items()],
    )
    return 1


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taking the write lock at once (no upgrade deadlock)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _migrate(conn: sqlite3.Connection) -> None:
    """Create or migrate the schema to ``SCHEMA_VERSION``, once, whoever gets there first."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version == SCHEMA_VERSION:
        return
    with _transaction(conn):
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(
                f"schema version {version} is newer than this composer's ({SCHEMA_VERSION})"
            )
        for step in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _MIGRATIONS[step]:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _retry_busy(work: Callable[[], Any], timeout_s: float) -> None:
    """Switching to WAL takes an exclusive lock that the busy handler does not wait for."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            work()
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
