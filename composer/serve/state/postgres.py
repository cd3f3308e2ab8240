"""Branch state in PostgreSQL (``composer serve --state postgresql://...``), shared by replicas.

One table, ``branches``, in its own schema (``--state-schema``, default ``composer_state``),
beside the rate limits' ``rate_windows`` (``postgres_rates``), created on first use under an
advisory lock (replicas start together). A turn is counted in one statement (``INSERT ... ON
CONFLICT DO UPDATE ... RETURNING``), so two replicas counting the same branch at once get two
numbers; a record idle past its TTL counts as gone (a new epoch) before the sweep removes it.
Times are the database's own clock, never a replica's. Connections are not checked when taken
from the pool (that would be a third round trip per turn): after the database restarts, the
request that meets a dead connection answers 503 and the pool replaces it. psycopg 3 and its
pool come from the ``postgres`` extra, imported on first use (``composer._postgres``: a pool
per event loop).
"""

from __future__ import annotations

import hashlib
import secrets
from typing import TYPE_CHECKING, Any

from composer._postgres import PostgresPools, with_schema
from composer.errors import ServeError
from composer.manifest.dsn import mask_url
from composer.serve.state.base import BranchRecord, SharedState, TurnSlot, cut
from composer.serve.state.postgres_rates import CREATE_RATES, EXPIRE_RATES, PostgresRateStorage

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresState"]

_NOW = "extract(epoch from clock_timestamp())"

_CREATE = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    """CREATE TABLE IF NOT EXISTS {s}.branches (
        principal text NOT NULL,
        branch_id text NOT NULL,
        name text,
        metadata jsonb NOT NULL,
        epoch text NOT NULL,
        turns bigint NOT NULL,
        guided bigint NOT NULL DEFAULT 0,
        guidance text,
        report jsonb,
        updated_at double precision NOT NULL,
        PRIMARY KEY (principal, branch_id)
    )""",
    "CREATE INDEX IF NOT EXISTS branches_updated ON {s}.branches (updated_at)",
    CREATE_RATES,
)

_BEGIN = f"""
INSERT INTO {{s}}.branches AS b (principal, branch_id, name, metadata, epoch, turns, updated_at)
VALUES (%(principal)s, %(branch)s, %(name)s, %(metadata)s, %(epoch)s, 1, {_NOW})
ON CONFLICT (principal, branch_id) DO UPDATE SET
    epoch = CASE WHEN b.updated_at < {_NOW} - %(ttl)s THEN EXCLUDED.epoch ELSE b.epoch END,
    turns = CASE WHEN b.updated_at < {_NOW} - %(ttl)s THEN 1 ELSE b.turns + 1 END,
    guided = CASE WHEN b.updated_at < {_NOW} - %(ttl)s THEN 0 ELSE b.guided END,
    name = EXCLUDED.name,
    metadata = EXCLUDED.metadata,
    updated_at = EXCLUDED.updated_at
RETURNING epoch, turns
"""

_FINISH = """
UPDATE {s}.branches SET guidance = %(guidance)s, report = %(report)s, guided = %(count)s
WHERE principal = %(principal)s AND branch_id = %(branch)s AND epoch = %(epoch)s
  AND guided < %(count)s
"""

_RECALL = f"""
SELECT principal, branch_id, name, metadata, epoch, turns, guidance, report, updated_at
FROM {{s}}.branches
WHERE principal = %(principal)s AND branch_id = %(branch)s
  AND updated_at >= {_NOW} - %(ttl)s
"""

_EXPIRE = f"DELETE FROM {{s}}.branches WHERE updated_at < {_NOW} - %(ttl)s"
_TRIM = """
DELETE FROM {s}.branches WHERE ctid IN (
    SELECT ctid FROM {s}.branches ORDER BY updated_at LIMIT %(over)s
)
"""


class PostgresState(SharedState):
    """Branch records in a PostgreSQL schema; the pool opens on first use, per event loop."""

    kind = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "composer_state",
        max_records: int = 100_000,
        ttl_s: float = 36_000.0,
        pool_size: int = 8,
        timeout_s: float = 5.0,
    ) -> None:
        super().__init__(max_records=max_records, ttl_s=ttl_s, timeout_s=timeout_s)
        self.dsn = dsn
        self.schema = schema
        self.pool_size = pool_size
        self._pools = PostgresPools(
            dsn,
            name=f"composer-state-{schema}",
            size=pool_size,
            timeout_s=timeout_s,
            check=False,
            needed_by="--state postgresql://",
            error=ServeError,
        )
        self._created = False
        self._composed: dict[str, Any] = {}
        self._rates = PostgresRateStorage(self._one)

    def __repr__(self) -> str:
        return f"PostgresState({self.describe()!r})"

    def describe(self) -> str:
        return f"{mask_url(self.dsn)} schema {self.schema}"

    async def begin(
        self, principal: str, branch_id: str, name: str | None, metadata: dict[str, Any]
    ) -> TurnSlot:
        row = await self._one(
            _BEGIN,
            {
                "principal": principal,
                "branch": branch_id,
                "name": name,
                "metadata": _jsonb(metadata),
                "epoch": secrets.token_hex(4),
                "ttl": self.ttl_s,
            },
        )
        assert row is not None  # INSERT ... RETURNING always returns the row
        return TurnSlot(str(row[0]), int(row[1]))

    async def finish(
        self,
        principal: str,
        branch_id: str,
        slot: TurnSlot,
        guidance: str | None,
        report: dict[str, Any] | None,
    ) -> None:
        await self._one(
            _FINISH,
            {
                "principal": principal,
                "branch": branch_id,
                "epoch": slot.epoch,
                "count": slot.count,
                "guidance": cut(guidance),
                "report": _jsonb(report) if report is not None else None,
            },
            returns=False,
        )

    async def recall(self, principal: str, branch_id: str) -> BranchRecord | None:
        row = await self._one(
            _RECALL, {"principal": principal, "branch": branch_id, "ttl": self.ttl_s}
        )
        if row is None or row[0] != principal:
            return None
        return BranchRecord(
            principal=row[0],
            branch_id=row[1],
            name=row[2],
            metadata=dict(row[3] or {}),
            epoch=row[4],
            turns=int(row[5]),
            guidance=row[6],
            report=row[7],
            updated_at=float(row[8]),
        )

    async def check(self) -> None:
        await self._one("SELECT 1 FROM {s}.branches LIMIT 1", {})

    def rate_storage(self) -> PostgresRateStorage:
        return self._rates

    async def sweep(self) -> None:
        pool = await self._pool()
        async with pool.connection() as conn:
            await conn.execute(self._sql(_EXPIRE), {"ttl": self.ttl_s})
            await conn.execute(self._sql(EXPIRE_RATES))
            cursor = await conn.execute(self._sql("SELECT count(*) FROM {s}.branches"))
            row = await cursor.fetchone()
            over = int(row[0]) - self.max_records if row is not None else 0
            if over > 0:
                await conn.execute(self._sql(_TRIM), {"over": over})

    async def aclose(self) -> None:
        """Close the running loop's pool; pools of loops that are gone are dropped."""
        await self._pools.aclose()

    async def _one(self, statement: str, params: dict[str, Any], *, returns: bool = True) -> Any:
        pool = await self._pool()
        async with pool.connection() as conn:
            cursor = await conn.execute(self._sql(statement), params)
            return await cursor.fetchone() if returns else None

    def _sql(self, statement: str) -> Any:
        """``statement`` with this store's schema, composed once (a turn runs two)."""
        composed = self._composed.get(statement)
        if composed is None:
            composed = self._composed[statement] = with_schema(statement, self.schema)
        return composed

    async def _pool(self) -> AsyncConnectionPool[Any]:
        pool = await self._pools.pool()
        if not self._created:
            await self._create(pool)
        return pool

    async def _create(self, pool: AsyncConnectionPool[Any]) -> None:
        """The schema and table, once; replicas starting together wait on one lock."""
        lock = int.from_bytes(
            hashlib.sha256(f"composer-state:{self.schema}".encode()).digest()[:8], signed=True
        )
        async with pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
            for statement in _CREATE:
                await conn.execute(self._sql(statement))
        self._created = True


def _jsonb(value: Any) -> Any:
    from psycopg.types.json import Jsonb

    return Jsonb(value)
