"""A memory store in PostgreSQL: one store for agents on many machines, teams kept apart.

psycopg 3 (async) with a psycopg_pool connection pool; both are imported on first use, from
the ``postgres`` extra. Full-text ranking is ``tsvector`` (a stored generated column, English
configuration: stemming and stop words) with ``ts_rank_cd``; tags (``text[]``) and metadata
(``jsonb``) have GIN indexes. Every row has a ``namespace``, and every query names one, so
tenants and teams sharing the database never see each other's items.

The schema (default ``composer``) is created or migrated on first use, under a transaction
advisory lock so that many processes starting at once migrate it once; its version is in
``store_meta``. A connection is checked when taken from the pool, so after the server
restarts the next turn reconnects; while the server is down, taking a connection fails after
``connect_timeout_s`` and the turn's provider fails (contained), never the turn.

A batch is written in runs (``chunks``), one transaction each, so a huge writeback never
holds locks (or the event loop, building rows) for long. A cap's eviction takes a
transaction advisory lock on its namespace first: writers evicting from one namespace at once
would otherwise lock the same old rows in different orders and deadlock. A transaction the
server still picks as a deadlock victim (two writers inserting the same ids) is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import re
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builtin_providers.stores.base import (
    MemoryItem,
    as_query,
    body_of,
    chunks,
    digest_of,
    full_text,
    item_from_record,
    item_from_row,
    query_words,
    record_of,
)
from builtin_providers.stores.jsonl import JsonlMemoryStore
from composer.plugin import PostgresPools, StoreError, describe_dsn

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["SCHEMA_VERSION", "PostgresMemoryStore"]

SCHEMA_VERSION = 1

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_MAX_BODY = 500_000  # characters indexed per item: a tsvector holds at most 1 MB

# Each statement is formatted with the schema as {s} (quoted by psycopg.sql.Identifier).
# GIN indexes without a pending list (fastupdate off): a write pays its index update at once,
# instead of every search scanning unmerged entries until the next vacuum.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        f"""CREATE TABLE {{s}}.items (
            seq bigserial PRIMARY KEY,
            namespace text NOT NULL,
            id text NOT NULL,
            content text NOT NULL,
            body text NOT NULL,
            tags text[] NOT NULL,
            metadata jsonb NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at double precision,
            written_back boolean NOT NULL DEFAULT false,
            tsv tsvector GENERATED ALWAYS AS
                (to_tsvector('english'::regconfig, left(body, {_MAX_BODY}))) STORED,
            UNIQUE (namespace, id)
        )""",
        "CREATE INDEX items_tsv ON {s}.items USING gin (tsv) WITH (fastupdate = off)",
        "CREATE INDEX items_tags ON {s}.items USING gin (tags) WITH (fastupdate = off)",
        "CREATE INDEX items_metadata ON {s}.items USING gin (metadata jsonb_path_ops)"
        " WITH (fastupdate = off)",
        "CREATE INDEX items_namespace ON {s}.items (namespace, seq)",
        "CREATE INDEX items_expiry ON {s}.items (expires_at) WHERE expires_at IS NOT NULL",
        "CREATE INDEX items_written_back ON {s}.items (namespace, seq) WHERE written_back",
    ),
}

_COLUMNS = (
    "id, content, tags, metadata, namespace, expires_at, written_back,"
    " extract(epoch FROM created_at)"
)
_PURGE_BATCH = 500
_ANALYZE_AFTER = 1000  # items added at once after which the table's statistics are renewed
_STATISTICS_TTL_S = 60.0  # how long the common lexemes read from pg_stats are used
_LEXEMES_KEPT = 10_000  # words whose lexemes (the server's stemming) are remembered
_DEADLOCK_ATTEMPTS = 5  # tries of a run's transaction the server aborted as a deadlock (40P01)


class PostgresMemoryStore:
    """composer's ``ItemStore`` in a PostgreSQL schema; the pool opens on first use."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "composer",
        pool_size: int = 4,
        connect_timeout_s: float = 5.0,
        seed: Path | str | None = None,
    ) -> None:
        if not _IDENTIFIER.fullmatch(schema):
            raise ValueError(f"schema {schema!r} is not a lower-case SQL identifier")
        self.dsn = dsn
        self.schema = schema
        self.pool_size = pool_size
        self.connect_timeout_s = connect_timeout_s
        self.seed = Path(seed) if seed is not None else None
        self._where = describe_dsn(dsn)
        self._pools = PostgresPools(
            dsn,
            name=f"composer-memory-{schema}",
            size=pool_size,
            timeout_s=connect_timeout_s,
            check=True,  # after the server restarts, the next turn reconnects
            needed_by="the postgres memory store",
            error=StoreError,
        )
        self._ready = False
        self._common: tuple[float, dict[str, float]] | None = None
        self._lexemes: dict[str, tuple[str, ...]] = {}  # stemming never changes: asked once

    def __repr__(self) -> str:
        return f"PostgresMemoryStore({self._where!r}, schema={self.schema!r})"

    # ------------------------------------------------------------------ the store contract

    async def store(self, item: Any) -> str:
        record = record_of(item)
        await self.add([item_from_record(record, record["id"])])
        return str(record["id"])

    async def add(
        self, items: Sequence[MemoryItem], *, written_back: bool = False, cap: int | None = None
    ) -> int:
        if not items:
            return 0
        new = 0
        async with self._guard(), self._connection() as conn:
            for run in chunks(items):
                new += await self._add_run(conn, run, written_back, cap)
        if new >= _ANALYZE_AFTER:  # an import: refresh the statistics the queries rely on
            async with self._guard(), self._connection() as conn:
                await conn.execute(self._sql("ANALYZE {s}.items"))
            self._common = None
        return new

    async def _add_run(
        self,
        conn: AsyncConnection[Any],
        items: Sequence[MemoryItem],
        written_back: bool,
        cap: int | None,
    ) -> int:
        """One run of a batch in one transaction, retried when it was a deadlock's victim
        (rolled back whole, so nothing of it is stored twice)."""
        from psycopg import errors

        attempt = 1
        while True:
            try:
                async with conn.transaction():
                    new = await self._insert(conn, items, written_back)
                    if written_back and cap is not None:
                        for namespace in sorted({item.namespace for item in items}):
                            await self._evict(conn, namespace, cap)
                    await conn.execute(  # rows another writer holds are its to delete
                        self._sql(
                            "DELETE FROM {s}.items WHERE seq IN (SELECT seq FROM {s}.items"
                            " WHERE expires_at <= %s ORDER BY expires_at LIMIT %s"
                            " FOR UPDATE SKIP LOCKED)"
                        ),
                        (time.time(), _PURGE_BATCH),
                    )
                return new
            except errors.DeadlockDetected:
                if attempt == _DEADLOCK_ATTEMPTS:
                    raise
                await asyncio.sleep(random.uniform(0, 0.05 * attempt))  # apart, not in step
                attempt += 1

    async def _evict(self, conn: AsyncConnection[Any], namespace: str, cap: int) -> None:
        """Delete the namespace's oldest written-back items beyond ``cap``, one evicting
        transaction per namespace at a time (the lock is held until commit)."""
        key = hashlib.sha256(f"composer:{self.schema}:cap:{namespace}".encode()).digest()[:8]
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (int.from_bytes(key) - (1 << 63),))
        await conn.execute(
            self._sql(
                "DELETE FROM {s}.items WHERE seq IN (SELECT seq FROM {s}.items"
                " WHERE namespace = %s AND written_back ORDER BY seq DESC OFFSET %s)"
            ),
            (namespace, cap),
        )

    async def retrieve(self, item_id: Any, namespace: str = "") -> MemoryItem | None:
        rows = await self._select(
            f"SELECT {_COLUMNS}, NULL FROM {{s}}.items WHERE namespace = %s AND id = %s"
            " AND (expires_at IS NULL OR expires_at > %s)",
            [namespace, str(item_id), time.time()],
        )
        return rows[0] if rows else None

    async def search(self, query: Any) -> list[MemoryItem]:
        spec = as_query(query)
        if spec.limit <= 0:
            return []
        where = ["namespace = %s", "(expires_at IS NULL OR expires_at > %s)"]
        args: list[Any] = [spec.namespace, time.time()]
        if spec.tags:
            where.append("tags && %s::text[]")
            args.append(list(spec.tags))
        if spec.filters:
            from psycopg.types.json import Jsonb

            where.append("metadata @> %s")  # the GIN index narrows; equality below is exact
            args.append(Jsonb(spec.filters))
            for key, value in spec.filters.items():
                where.append("metadata -> %s = %s")
                args += [key, Jsonb(value)]
        if spec.text and spec.match == "fulltext":
            words = query_words(spec.text)
            if not words:
                return []
            if spec.min_score is not None:
                where.append("ts_rank_cd(tsv, q) >= %s")
                args.append(spec.min_score)
            # The words' matches first, through the full-text index alone (the expression
            # keeps them few); the namespace and the rest filter those. Left to itself, the
            # planner may intersect with the namespace index, which holds every row.
            sql = (
                "WITH q AS (SELECT to_tsquery('english'::regconfig, %s) AS q),"
                " hits AS MATERIALIZED (SELECT i.*, q.q FROM {s}.items i, q WHERE i.tsv @@ q.q)"
                f" SELECT {_COLUMNS}, ts_rank_cd(tsv, q) AS score FROM hits"
                f" WHERE {' AND '.join(where)} ORDER BY score DESC, seq LIMIT %s"
            )
            return await self._select(sql, [*args, spec.limit], words=words)
        else:
            if spec.text:
                where.append("strpos(lower(body), %s) > 0")
                args.append(spec.text.lower())
            sql = (
                f"SELECT {_COLUMNS}, NULL FROM {{s}}.items WHERE {' AND '.join(where)}"
                " ORDER BY seq LIMIT %s"
            )
        return await self._select(sql, [*args, spec.limit])

    async def _expression(self, conn: AsyncConnection[Any], words: list[str]) -> str | None:
        """The ``to_tsquery`` text for ``words``, from how many items each is in.

        PostgreSQL's own statistics say it: ``ANALYZE`` keeps the most common lexemes of the
        ``tsv`` column with their frequencies (``pg_stats.most_common_elems``), so a word's
        count is its frequency times the table's rows (read at most once a minute), and a word
        whose lexemes are not listed is rare (counted 1). A stop word, which has no lexeme, is
        counted 0. No item is read.
        """
        common = await self._common_lexemes(conn)
        unknown = [word for word in words if word not in self._lexemes]
        if unknown:
            cursor = await conn.execute(
                "SELECT w, array(SELECT lexeme FROM unnest(to_tsvector('english'::regconfig, w)))"
                " FROM unnest(%s::text[]) AS w",
                (unknown,),
            )
            if len(self._lexemes) > _LEXEMES_KEPT:
                self._lexemes.clear()
            for word, lexemes in await cursor.fetchall():
                self._lexemes[str(word)] = tuple(str(lexeme) for lexeme in lexemes)
        counts: dict[str, int] = {}
        for word in words:
            lexemes = self._lexemes.get(word, ())
            estimate = max((common.get(lexeme, 1.0) for lexeme in lexemes), default=0.0)
            counts[word] = max(1, round(estimate)) if lexemes else 0
        return full_text(counts, " | ", " & ")

    async def _common_lexemes(self, conn: AsyncConnection[Any]) -> dict[str, float]:
        """The most common lexemes of the items, with how many items hold each."""
        now = time.monotonic()
        if self._common is not None and now - self._common[0] < _STATISTICS_TTL_S:
            return self._common[1]
        cursor = await conn.execute(
            self._sql(
                "SELECT e.lexeme, f.freq * greatest(c.reltuples, 0) FROM pg_stats s,"
                " pg_class c,"
                " unnest(s.most_common_elems::text::text[]) WITH ORDINALITY AS e(lexeme, i),"
                " unnest(s.most_common_elem_freqs) WITH ORDINALITY AS f(freq, j)"
                " WHERE s.schemaname = %s AND s.tablename = 'items' AND s.attname = 'tsv'"
                " AND c.oid = '{s}.items'::regclass AND e.i = f.j"
            ),
            (self.schema,),
        )
        common = {str(lexeme): float(n) for lexeme, n in await cursor.fetchall()}
        self._common = (now, common)
        return common

    async def export(self, namespace: str | None = None) -> list[MemoryItem]:
        where = "(expires_at IS NULL OR expires_at > %s)"
        args: list[Any] = [time.time()]
        if namespace is not None:
            where += " AND namespace = %s"
            args.append(namespace)
        return await self._select(
            f"SELECT {_COLUMNS}, NULL FROM {{s}}.items WHERE {where} ORDER BY seq", args
        )

    async def counts(self) -> dict[str, int]:
        async with self._guard(), self._connection() as conn:
            cursor = await conn.execute(
                self._sql(
                    "SELECT namespace, count(*) FROM {s}.items"
                    " WHERE expires_at IS NULL OR expires_at > %s"
                    " GROUP BY namespace ORDER BY namespace"
                ),
                (time.time(),),
            )
            return {str(namespace): int(n) for namespace, n in await cursor.fetchall()}

    async def exists(self) -> bool:
        """Whether the schema holds composer's tables (its version recorded), asked without
        migrating: a mistyped ``schema`` is reported, not created."""
        async with self._guard(), self._connection(migrate=False) as conn:
            cursor = await conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
                (f'"{self.schema}".store_meta', f'"{self.schema}".items'),
            )
            row = await cursor.fetchone()
            if not (row and row[0]):
                return False
            return await self._meta(conn, "schema_version") is not None

    async def aclose(self) -> None:
        """Close the pool of the running loop; pools of loops that are gone are dropped."""
        await self._pools.aclose()

    async def drop_schema(self) -> None:
        """Remove the schema and everything in it (tests and ``composer memory`` only)."""
        from psycopg import sql

        async with self._guard(), self._connection(migrate=False) as conn:
            statement = sql.SQL("DROP SCHEMA IF EXISTS {s} CASCADE")
            await conn.execute(statement.format(s=sql.Identifier(self.schema)))
        self._ready = False

    # ------------------------------------------------------------------ connections

    def _connection(self, *, migrate: bool = True) -> Any:
        return _PooledConnection(self, migrate)

    async def _reset_pool(self) -> None:
        """Drop the running loop's pool after the server went away: a new one connects at
        once, so the first turn after the server is back succeeds; the schema is checked again."""
        await self._pools.reset()
        self._ready = False

    async def _migrate(self, conn: AsyncConnection[Any]) -> None:
        if self._ready:
            return
        from psycopg import sql

        lock = int.from_bytes(hashlib.sha256(f"composer:{self.schema}".encode()).digest()[:8])
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock - (1 << 63),))
            await conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {s}").format(s=sql.Identifier(self.schema))
            )
            await conn.execute(
                self._sql(
                    "CREATE TABLE IF NOT EXISTS {s}.store_meta"
                    " (key text PRIMARY KEY, value text NOT NULL)"
                )
            )
            version = int(await self._meta(conn, "schema_version") or 0)
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"memory database {self._where}: schema {self.schema} is at version "
                    f"{version}, newer than this composer's ({SCHEMA_VERSION})"
                )
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[step]:
                    await conn.execute(self._sql(statement))
            await self._set_meta(conn, "schema_version", str(SCHEMA_VERSION))
            if self.seed is not None:
                await self._import_seed(conn, self.seed)
        self._ready = True

    async def _import_seed(self, conn: AsyncConnection[Any], seed: Path) -> None:
        items = await asyncio.to_thread(JsonlMemoryStore(seed, read_links=True).items)
        digest = digest_of(items)
        if await self._meta(conn, "seed") != digest:
            await self._insert(conn, items, False)
            await self._set_meta(conn, "seed", digest)

    async def _meta(self, conn: AsyncConnection[Any], key: str) -> str | None:
        cursor = await conn.execute(
            self._sql("SELECT value FROM {s}.store_meta WHERE key = %s"), (key,)
        )
        row = await cursor.fetchone()
        return None if row is None else str(row[0])

    async def _set_meta(self, conn: AsyncConnection[Any], key: str, value: str) -> None:
        await conn.execute(
            self._sql(
                "INSERT INTO {s}.store_meta (key, value) VALUES (%s, %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            ),
            (key, value),
        )

    async def _insert(
        self, conn: AsyncConnection[Any], items: Sequence[MemoryItem], written_back: bool
    ) -> int:
        from psycopg.types.json import Jsonb

        rows = [
            (
                item.namespace,
                item.id,
                json.dumps(item.content, ensure_ascii=False, default=str),
                body_of(item.content).replace("\x00", ""),
                list(item.tags),
                Jsonb(item.metadata, dumps=_dumps),
                item.created_at,
                item.expires_at,
                written_back or item.written_back,
            )
            for item in items
        ]
        async with conn.cursor() as cursor:
            await cursor.executemany(
                self._sql(
                    "INSERT INTO {s}.items (namespace, id, content, body, tags, metadata,"
                    " created_at, expires_at, written_back) VALUES (%s, %s, %s, %s, %s, %s,"
                    " coalesce(to_timestamp(%s), now()), %s, %s)"
                    " ON CONFLICT (namespace, id) DO NOTHING RETURNING seq"
                ),
                rows,
                returning=True,
            )
            new = 0
            while True:
                new += len(await cursor.fetchall())
                if not cursor.nextset():
                    return new

    async def _select(
        self, statement: str, args: list[Any], *, words: list[str] | None = None
    ) -> list[MemoryItem]:
        """Run a SELECT of items; with ``words``, its first parameter is their full-text
        expression, made on the same connection."""
        async with self._guard(), self._connection() as conn:
            if words is not None:
                expression = await self._expression(conn, words)
                if expression is None:
                    return []
                args = [expression, *args]
            cursor = await conn.execute(self._sql(statement), args)
            rows = await cursor.fetchall()
        return [item_from_row(row) for row in rows]

    def _sql(self, statement: str) -> Any:
        from psycopg import sql

        return sql.SQL(statement).format(s=sql.Identifier(self.schema))

    @contextlib.asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        """A database failure becomes the provider's StoreError (no DSN, so no password)."""
        try:
            yield
        except StoreError:
            raise
        except Exception as e:
            import psycopg

            if not isinstance(e, psycopg.Error):
                raise
            if isinstance(e, psycopg.OperationalError):
                await self._reset_pool()  # the next turn connects afresh, without backoff
            lines = str(e).strip().splitlines()
            detail = lines[0] if lines else type(e).__name__
            raise StoreError(f"memory database {self._where}: {detail}") from e


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class _PooledConnection:
    """``async with``: a connection from the running loop's pool, the schema migrated."""

    def __init__(self, store: PostgresMemoryStore, migrate: bool) -> None:
        self.store = store
        self.migrate = migrate
        self._context: Any = None

    async def __aenter__(self) -> AsyncConnection[Any]:
        pool = await self.store._pools.pool()
        self._context = pool.connection()
        conn: AsyncConnection[Any] = await self._context.__aenter__()
        if self.migrate:
            try:
                await self.store._migrate(conn)
            except BaseException as e:
                await self._context.__aexit__(type(e), e, e.__traceback__)
                raise
        return conn

    async def __aexit__(self, *exc: Any) -> None:
        await self._context.__aexit__(*exc)
