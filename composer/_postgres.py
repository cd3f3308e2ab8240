"""What every PostgreSQL back-end shares: the import guard, a pool per event loop, the schema.

The memory store (``builtin_providers.stores.postgres``, through ``composer.plugin.
PostgresPools``), the server's branch state and rate windows (``composer.serve.state.
postgres``) and the audit table's writer and reader (``composer.observe.audit``) import
psycopg through here, on first use, from the ``postgres`` extra: without it, each says who
needs it and the one command that installs it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import ModuleType

    from psycopg.sql import Composed
    from psycopg_pool import AsyncConnectionPool

__all__ = ["INSTALL", "PostgresPools", "import_psycopg", "with_schema"]

INSTALL = "pip install 'context-composer[postgres]'"
"""What a message about the missing ``postgres`` extra tells the user to run."""


def import_psycopg(needed_by: str, error: type[Exception] = ImportError) -> ModuleType:
    """psycopg, or ``error`` saying that ``needed_by`` needs it and how to install it."""
    try:
        import psycopg
    except ImportError:
        raise error(f"{needed_by} needs psycopg: {INSTALL}") from None
    return psycopg


def with_schema(statement: str, schema: str) -> Composed:
    """``statement`` with ``{s}`` as the quoted ``schema``."""
    from psycopg import sql

    return sql.SQL(statement).format(s=sql.Identifier(schema))


class PostgresPools:
    """A ``psycopg_pool`` connection pool per event loop, opened on first use.

    A pool belongs to the event loop it was opened in, and one store may be used from several
    (one ``asyncio.run`` per CLI command or test, a loop per worker). Each pool holds at
    least one and at most ``size`` connections in autocommit, waits ``timeout_s`` for one
    (connecting gives up after as many whole seconds), and is called ``name`` in psycopg's
    logs. With ``check``, a connection is checked when it is taken (a round trip, in return
    for a server restart that costs no request). Without psycopg, the first use raises
    ``error`` saying that ``needed_by`` needs it.
    """

    def __init__(
        self,
        dsn: str,
        *,
        name: str,
        size: int,
        timeout_s: float,
        check: bool,
        needed_by: str,
        error: type[Exception],
    ) -> None:
        self.dsn = dsn
        self.name = name
        self.size = size
        self.timeout_s = timeout_s
        self.check = check
        self._needed_by = needed_by
        self._error = error
        self._pools: dict[asyncio.AbstractEventLoop, AsyncConnectionPool[Any]] = {}

    async def pool(self) -> AsyncConnectionPool[Any]:
        """The running loop's pool, opened (without waiting for a connection) on first use;
        pools of loops that are closed are dropped then."""
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            try:
                from psycopg_pool import AsyncConnectionPool
            except ImportError as e:
                raise self._error(
                    f"{self._needed_by} needs psycopg 3 and psycopg_pool: {INSTALL}"
                ) from e
            for old in [other for other in self._pools if other.is_closed()]:
                del self._pools[old]
            pool = AsyncConnectionPool(
                self.dsn,
                min_size=1,
                max_size=self.size,
                open=False,
                timeout=self.timeout_s,
                check=AsyncConnectionPool.check_connection if self.check else None,
                kwargs={"autocommit": True, "connect_timeout": max(1, round(self.timeout_s))},
                name=self.name,
            )
            await pool.open(wait=False)
            self._pools[loop] = pool
        return pool

    async def reset(self) -> None:
        """Drop the running loop's pool after the server went away (restart, network).

        A pool left alone reconnects on its own schedule, with a growing backoff; a new one
        connects at once, so the first request after the server is back succeeds.
        """
        pool = self._pools.pop(asyncio.get_running_loop(), None)
        if pool is not None:
            with contextlib.suppress(Exception):
                await pool.close(timeout=1.0)

    async def aclose(self) -> None:
        """Close the running loop's pool; pools of loops that are gone are dropped."""
        pools, self._pools = self._pools, {}
        pool = pools.pop(asyncio.get_running_loop(), None)
        if pool is not None:
            await pool.close()
