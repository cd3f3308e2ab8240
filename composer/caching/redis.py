"""A provider result cache in Redis, shared by every process and machine that uses the server.

Selected by the manifest (``runtime.cache: {redis: {url: ...}}``); the ``redis`` client is
imported on first use, from the ``redis`` extra. It keeps the ``ContextCache`` contract of
``composer.caching.store``: ``get`` returns ``MISS`` or the cached result (``None`` included), and
entries expire after their ``ttl_s`` (Redis ``PX``). Redis evicts by its own ``maxmemory``
policy, so a provider's ``cache.max_entries`` does not apply here.

A cache is an optimisation, never a dependency of the turn: when Redis is down or slow
(``timeout_s``), ``get`` is a miss and ``set`` is dropped, with one warning per outage, and
the provider is simply called.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from composer.caching.store import MISS, _Miss
from composer.errors import ComposerError, ProviderError

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RedisCache", "close_loop_client", "loop_client"]

logger = logging.getLogger(__name__)

_TEXT = b"s"  # a cached text: this byte, then the UTF-8 text
_NONE = b"n"  # a cached "nothing this turn"


class RedisCache:
    """One provider's results under ``prefix`` in a Redis database."""

    def __init__(self, url: str, *, prefix: str, timeout_s: float = 0.25) -> None:
        self.url = url
        self.prefix = prefix
        self.timeout_s = timeout_s
        # A redis.asyncio client belongs to the event loop it first ran in.
        self._clients: dict[asyncio.AbstractEventLoop, Redis] = {}
        self._failing = False

    def __repr__(self) -> str:
        return f"RedisCache(prefix={self.prefix!r})"  # never the URL: it may hold a password

    async def get(self, key: str) -> str | _Miss | None:
        try:
            value = await self._client().get(self.prefix + key)
        except Exception as e:
            self._failed(e)
            return MISS
        self._failing = False
        if value is None:
            return MISS
        data = value if isinstance(value, bytes) else str(value).encode()
        if data[:1] == _NONE:
            return None
        if data[:1] == _TEXT:
            return data[1:].decode("utf-8")
        return MISS  # not written by composer: never served

    async def set(self, key: str, value: str | None, ttl_s: float) -> None:
        data = _NONE if value is None else _TEXT + value.encode("utf-8")
        try:
            await self._client().set(self.prefix + key, data, px=max(1, round(ttl_s * 1000)))
        except Exception as e:
            self._failed(e)
            return
        self._failing = False

    async def aclose(self) -> None:
        """Close the running loop's client; clients of other loops are dropped."""
        clients, self._clients = self._clients, {}
        await close_loop_client(clients)

    def _client(self) -> Redis:
        return loop_client(self._clients, self.url, self.timeout_s, "runtime.cache.redis")

    def _failed(self, error: Exception) -> None:
        if isinstance(error, ProviderError):
            raise error  # the extra is missing: a setup mistake, not an outage
        if not self._failing:
            # The error's class only: a message could quote the URL, and with it a password.
            logger.warning(
                "redis cache %s unavailable (%s); providers are called uncached",
                self.prefix,
                type(error).__name__,
            )
        self._failing = True


def loop_client(
    clients: dict[asyncio.AbstractEventLoop, Redis],
    url: str,
    timeout_s: float,
    needed_by: str,
    error: type[ComposerError] = ProviderError,
) -> Redis:
    """The running loop's client in ``clients`` (a ``redis.asyncio`` client belongs to the
    loop it first ran in), made on first use; ``error`` names ``needed_by`` when the
    ``redis`` extra is missing."""
    loop = asyncio.get_running_loop()
    client = clients.get(loop)
    if client is None:
        try:
            from redis.asyncio import Redis
        except ImportError as e:
            raise error(
                f"{needed_by} needs the redis client: pip install 'context-composer[redis]'"
            ) from e
        client = Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry_on_timeout=False,
        )
        clients[loop] = client
    return client


async def close_loop_client(clients: dict[asyncio.AbstractEventLoop, Redis]) -> None:
    """Close the running loop's client in ``clients``; the others belong to loops gone."""
    client = clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()
