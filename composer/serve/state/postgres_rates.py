"""The rate windows in PostgreSQL: a storage of the ``limits`` library, on the state's pool.

``limits`` keeps its windows in memory, Redis, Memcached or MongoDB, not in PostgreSQL; a
server whose ``--state`` is PostgreSQL keeps them beside its branch records, in the same
schema, so that every replica and worker counts one limit. This is a ``limits`` storage for
the library's own sliding-window counter (``SlidingWindowCounterRateLimiter``), as its Redis
storage does it: a window opens at a key's first hit and lasts ``expiry`` seconds; when it
ends, its count becomes the previous window's, which weighs on the next one by the share of
it the sliding window still covers (``previous * (start + expiry - now) / expiry +
current``); after two windows without a hit the key starts afresh. The strategy, what is
admitted, stays the library's: this module only keeps and shifts the counts, each hit in one
statement (the row locked by its ``INSERT ... ON CONFLICT DO UPDATE``), timed by the
database's clock, never a replica's.

One row per key: ``rate_windows(key, started, current, previous, expires, admitted)``, made
with the state's tables; the state's sweep deletes rows past ``expires``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from limits.aio.storage import SlidingWindowCounterSupport, Storage

__all__ = ["CREATE_RATES", "EXPIRE_RATES", "PostgresRateStorage", "Run"]

Run = Callable[..., Awaitable[Any]]
"""``PostgresState._one``: a statement with ``{s}`` for the schema, its parameters, and
whether it returns a row."""

_NOW = "extract(epoch from clock_timestamp())"

CREATE_RATES = """CREATE TABLE IF NOT EXISTS {s}.rate_windows (
    key text PRIMARY KEY,
    started double precision NOT NULL,
    current bigint NOT NULL,
    previous bigint NOT NULL,
    expires double precision NOT NULL,
    admitted boolean NOT NULL
)"""

EXPIRE_RATES = f"DELETE FROM {{s}}.rate_windows WHERE expires < {_NOW}"

# The window as of ``t`` (the hit's time): unchanged, shifted once (the current window ended:
# its count is the previous one's), or afresh (two windows passed without a hit).
_SHIFTED = """
    CASE WHEN t >= r.started + 2 * %(expiry)s THEN t
         WHEN t >= r.started + %(expiry)s THEN r.started + %(expiry)s
         ELSE r.started END AS started,
    CASE WHEN t >= r.started + %(expiry)s THEN 0 ELSE r.current END AS current,
    CASE WHEN t >= r.started + 2 * %(expiry)s THEN 0
         WHEN t >= r.started + %(expiry)s THEN r.current
         ELSE r.previous END AS previous"""

_ACQUIRE = f"""
INSERT INTO {{s}}.rate_windows AS r (key, started, current, previous, expires, admitted)
VALUES (%(key)s, {_NOW}, %(amount)s, 0, {_NOW} + 2 * %(expiry)s, true)
ON CONFLICT (key) DO UPDATE SET (started, current, previous, expires, admitted) = (
    SELECT w.started, w.current + CASE WHEN w.admit THEN %(amount)s ELSE 0 END,
           w.previous, w.started + 2 * %(expiry)s, w.admit
    FROM (
        SELECT s.started, s.current, s.previous,
               floor(s.previous * (s.started + %(expiry)s - s.t) / %(expiry)s + s.current)
                   + %(amount)s <= %(limit)s AS admit
        FROM (SELECT t, {_SHIFTED} FROM (SELECT EXCLUDED.started AS t) AS n) AS s
    ) AS w
)
RETURNING admitted
"""

_WINDOW = f"""
SELECT s.previous, s.started + %(expiry)s - s.t, s.current, s.started + 2 * %(expiry)s - s.t
FROM (
    SELECT t, {_SHIFTED}
    FROM {{s}}.rate_windows AS r, (SELECT {_NOW} AS t) AS n
    WHERE r.key = %(key)s
) AS s
"""

_CLEAR = "DELETE FROM {s}.rate_windows WHERE key = %(key)s"
_RESET = "WITH gone AS (DELETE FROM {s}.rate_windows RETURNING 1) SELECT count(*) FROM gone"


class PostgresRateStorage(Storage, SlidingWindowCounterSupport):
    """A ``limits`` storage of sliding-window counters in the state's schema.

    Only the sliding-window counter is kept here (the strategy ``composer serve`` uses); the
    fixed-window calls (``incr``, ``get``, ``get_expiry``) say so.
    """

    STORAGE_SCHEME = None  # made by PostgresState, never from a URI

    def __init__(self, run: Run) -> None:
        super().__init__()
        self._run = run

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        import psycopg

        return psycopg.Error

    async def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        if amount > limit:
            return False
        params = {"key": key, "limit": limit, "expiry": float(expiry), "amount": amount}
        row = await self._run(_ACQUIRE, params)
        return bool(row[0])

    async def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        row = await self._run(_WINDOW, {"key": key, "expiry": float(expiry)})
        if row is None:
            return 0, 0.0, 0, 0.0
        previous, previous_ttl, current, current_ttl = row
        return int(previous), float(previous_ttl), int(current), float(current_ttl)

    async def clear_sliding_window(self, key: str, expiry: int) -> None:
        await self.clear(key)

    async def clear(self, key: str) -> None:
        await self._run(_CLEAR, {"key": key}, returns=False)

    async def reset(self) -> int | None:
        row = await self._run(_RESET, {})
        return int(row[0])

    async def check(self) -> bool:
        try:
            await self._run("SELECT 1 FROM {s}.rate_windows LIMIT 1", {})
        except Exception:
            return False
        return True

    async def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        raise NotImplementedError(_SLIDING_ONLY)

    async def get(self, key: str) -> int:
        raise NotImplementedError(_SLIDING_ONLY)

    async def get_expiry(self, key: str) -> float:
        raise NotImplementedError(_SLIDING_ONLY)


_SLIDING_ONLY = "the PostgreSQL rate storage keeps sliding-window counters only"
