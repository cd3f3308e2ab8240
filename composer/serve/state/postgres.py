"""Branch state in PostgreSQL (``composer serve --state postgresql://...``), shared by replicas.

One table, ``branches``, in its own schema (``--state-schema``, default ``composer_state``),
beside the rate limits' ``rate_windows`` (``postgres_rates``), created on first use under an
advisory lock (replicas start together). A turn is counted in one statement (``INSERT ... ON
CONFLICT DO UPDATE ... RETURNING``), so two replicas counting the same branch at once get two
numbers; a record idle past its TTL counts as gone (a new epoch) before the sweep removes it.
The turns' calls (``begin``, ``finish``) go in batches (``batch``): one statement a round trip,
the finishes' writes and the begins' counts in it as JSON records, prepared by psycopg after its
fifth use on a connection. Times are the database's own clock, never a replica's. Text and
jsonb hold no NUL: a NUL in a stored string is escaped (``_escape``) and read back as given.
Connections are not checked when taken from the pool (that would be one more round trip per
batch): after the database restarts, the request that meets a dead connection answers 503 and
the pool replaces it. psycopg 3 and its
pool come from the ``postgres`` extra, imported on first use (``composer._postgres``: a pool
per event loop).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from composer._postgres import PostgresPools, with_schema
from composer.errors import ServeError
from composer.manifest.dsn import mask_url
from composer.manifest.models import map_strings
from composer.serve.state.base import BranchRecord, SharedState, TurnSlot, cut
from composer.serve.state.batch import Batcher
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

_BATCH = f"""
WITH finished AS (
    UPDATE {{s}}.branches AS b
    SET guidance = f.guidance, report = f.report, guided = f.turn
    FROM json_to_recordset(%(finishes)s::json)
         AS f(principal text, branch text, epoch text, turn bigint, guidance text, report jsonb)
    WHERE b.principal = f.principal AND b.branch_id = f.branch AND b.epoch = f.epoch
      AND b.guided < f.turn
    RETURNING 1
)
INSERT INTO {{s}}.branches AS b (principal, branch_id, name, metadata, epoch, turns, updated_at)
SELECT n.principal, n.branch, n.name, n.metadata, n.epoch, 1, {_NOW}
FROM json_to_recordset(%(begins)s::json)
     AS n(principal text, branch text, name text, metadata jsonb, epoch text)
ON CONFLICT (principal, branch_id) DO UPDATE SET
    epoch = CASE WHEN b.updated_at < {_NOW} - %(ttl)s THEN EXCLUDED.epoch ELSE b.epoch END,
    turns = CASE WHEN b.updated_at < {_NOW} - %(ttl)s THEN 1 ELSE b.turns + 1 END,
    guided = CASE WHEN b.updated_at < {_NOW} - %(ttl)s THEN 0 ELSE b.guided END,
    name = EXCLUDED.name,
    metadata = EXCLUDED.metadata,
    updated_at = EXCLUDED.updated_at
RETURNING b.principal, b.branch_id, b.epoch, b.turns
"""
"""A batch of calls in one statement: the finishes' writes, then the begins' counts, each a
JSON array of records (one parameter: dumped in C, where eleven arrays cost psycopg more than
the round trip). The batch holds a branch once, so the two never meet a row twice."""

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
        self._composed: dict[str, str] = {}
        self._batcher: Batcher[_Call, TurnSlot | None] = Batcher(
            self._send, key=lambda call: (call.principal, call.branch)
        )
        self._rates = PostgresRateStorage(self._one)

    def __repr__(self) -> str:
        return f"PostgresState({self.describe()!r})"

    def describe(self) -> str:
        return f"{mask_url(self.dsn)} schema {self.schema}"

    async def begin(
        self, principal: str, branch_id: str, name: str | None, metadata: dict[str, Any]
    ) -> TurnSlot:
        call = _Begin(principal, branch_id, name, metadata, secrets.token_hex(4))
        slot = await self._batcher.call(call)
        assert slot is not None  # a begin's answer is its slot
        return slot

    async def finish(
        self,
        principal: str,
        branch_id: str,
        slot: TurnSlot,
        guidance: str | None,
        report: dict[str, Any] | None,
    ) -> None:
        call = _Finish(principal, branch_id, slot.epoch, slot.count, cut(guidance), report)
        await self._batcher.call(call)

    async def recall(self, principal: str, branch_id: str) -> BranchRecord | None:
        row = await self._one(
            _RECALL, {"principal": principal, "branch": branch_id, "ttl": self.ttl_s}
        )
        if row is None or row[0] != principal:
            return None
        return BranchRecord(
            principal=row[0],
            branch_id=row[1],
            name=_read(row[2]),
            metadata=dict(_read(row[3]) or {}),
            epoch=row[4],
            turns=int(row[5]),
            guidance=_read(row[6]),
            report=_read(row[7]),
            updated_at=float(row[8]),
        )

    async def _send(self, calls: Sequence[_Call]) -> list[TurnSlot | Exception | None]:
        """A batch's calls in one statement (``Batcher``). A batch the database refuses for
        what one call holds is sent again a call at a time, so that only that call fails;
        one it cannot reach fails every call."""
        try:
            rows = await self._all(_BATCH, _batch_params(calls, self.ttl_s))
        except Exception as e:
            if len(calls) == 1 or _unreachable(e):
                raise
            return [await _alone(self._send, call) for call in calls]
        slots = {(row[0], row[1]): TurnSlot(str(row[2]), int(row[3])) for row in rows}
        return [
            slots[call.principal, call.branch] if isinstance(call, _Begin) else None
            for call in calls
        ]

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

    async def _all(self, statement: str, params: dict[str, Any]) -> list[Any]:
        pool = await self._pool()
        async with pool.connection() as conn:
            cursor = await conn.execute(self._sql(statement), params, binary=True)
            rows: list[Any] = await cursor.fetchall()
            return rows

    def _sql(self, statement: str) -> str:
        """``statement`` with this store's schema, composed once (every batch runs one)."""
        composed = self._composed.get(statement)
        if composed is None:
            text = with_schema(statement, self.schema).as_string(None)
            composed = self._composed[statement] = text
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


class _Begin(NamedTuple):
    principal: str
    branch: str
    name: str | None
    metadata: dict[str, Any]
    epoch: str


class _Finish(NamedTuple):
    principal: str
    branch: str
    epoch: str
    turn: int
    guidance: str | None
    report: dict[str, Any] | None


_Call = _Begin | _Finish


def _batch_params(calls: Sequence[_Call], ttl_s: float) -> dict[str, Any]:
    """``_BATCH``'s parameters: the begins and the finishes, each a JSON array of records."""
    begins = [call._asdict() for call in calls if isinstance(call, _Begin)]
    finishes = [call._asdict() for call in calls if isinstance(call, _Finish)]
    return {
        "begins": _stored_json(begins, ("name", "metadata")),
        "finishes": _stored_json(finishes, ("guidance", "report")),
        "ttl": ttl_s,
    }


async def _alone(
    send: Callable[[Sequence[_Call]], Awaitable[list[TurnSlot | Exception | None]]], call: _Call
) -> TurnSlot | Exception | None:
    try:
        return (await send([call]))[0]
    except Exception as e:
        return e


def _unreachable(error: Exception) -> bool:
    """Whether ``error`` says the database could not be reached (no call would fare better)."""
    from psycopg import OperationalError

    return isinstance(error, OperationalError)


_ESCAPE = "\ue000"
"""A private-use character that marks an escape in stored text: PostgreSQL's text and jsonb
hold no NUL, so a NUL is stored as ``_ESCAPE 0`` and the marker itself doubled."""
_ESCAPED = re.compile(_ESCAPE + "(.)", re.DOTALL)


def _escape(text: str) -> str:
    """``text`` as stored: NUL (which PostgreSQL's text cannot hold) escaped."""
    if "\x00" not in text and _ESCAPE not in text:
        return text
    return text.replace(_ESCAPE, _ESCAPE * 2).replace("\x00", _ESCAPE + "0")


def _stored_json(records: list[dict[str, Any]], values: tuple[str, ...]) -> str:
    """``records`` as JSON, the strings in their ``values`` escaped (``_escape``) when one holds
    a NUL (PostgreSQL refuses ``\\u0000`` in text and jsonb) or the escape's marker."""
    dumped = json.dumps(records)
    if "\\u0000" not in dumped and "\\ue000" not in dumped:
        return dumped
    escaped = [
        {
            key: map_strings(item, _escape, keys=True) if key in values else item
            for key, item in record.items()
        }
        for record in records
    ]
    return json.dumps(escaped)


def _read(value: Any) -> Any:
    """A stored text or jsonb value as it was given: the escapes undone."""
    return map_strings(value, _unescape, keys=True)


def _unescape(text: str) -> str:
    if _ESCAPE not in text:
        return text
    return _ESCAPED.sub(lambda found: _ESCAPE if found[1] == _ESCAPE else "\x00", text)
