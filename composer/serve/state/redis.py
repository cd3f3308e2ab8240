"""Branch state in Redis (``composer serve --state redis://...``), shared by replicas.

Each branch is one hash, ``{PREFIX}:b:PRINCIPAL/BRANCH``, expiring ``ttl_s`` after its last
turn (Redis ``PEXPIRE``); a sorted set ``{PREFIX}:index`` orders them by last use, so the sweep
drops the least recently used over ``max_records``. A turn is counted in one script
(``HINCRBY``, the epoch drawn only when the hash is new), so replicas counting the same
branch at once get two numbers; the turns' calls go in batches (``batch``), one ``EVALSHA`` of
that script a round trip. The prefix is a hash tag: in a cluster every key of one
server's state is in one slot, as the scripts need; the rate limits' windows are the
``limits`` library's keys under ``{PREFIX}:r:`` (``rate_storage``). The ``redis`` client
comes from the ``redis`` extra, imported on first use.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from composer.caching.redis import close_loop_client, loop_client
from composer.errors import ServeError
from composer.manifest.dsn import mask_url
from composer.serve.state.base import BranchRecord, SharedState, TurnSlot, cut
from composer.serve.state.batch import Batcher

if TYPE_CHECKING:
    from limits.aio.storage import RedisStorage
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

__all__ = ["RedisState"]

_BATCH = """
local ttl = ARGV[1]
local now = redis.call('TIME')
local at = now[1] + now[2] / 1000000
local answers = {}
local i = 2
for k = 2, #KEYS do
  local key = KEYS[k]
  if ARGV[i] == 'b' then
    if redis.call('EXISTS', key) == 0 then
      redis.call('HSET', key, 'epoch', ARGV[i + 1], 'turns', 0, 'guided', 0, 'principal', ARGV[i + 4])
    end
    local count = redis.call('HINCRBY', key, 'turns', 1)
    redis.call('HSET', key, 'name', ARGV[i + 2], 'metadata', ARGV[i + 3], 'updated_at', now[1])
    redis.call('PEXPIRE', key, ttl)
    redis.call('ZADD', KEYS[1], at, ARGV[i + 5])
    answers[k - 1] = {redis.call('HGET', key, 'epoch'), count}
    i = i + 6
  else
    answers[k - 1] = 0
    if redis.call('HGET', key, 'epoch') == ARGV[i + 1]
        and tonumber(redis.call('HGET', key, 'guided') or '0') < tonumber(ARGV[i + 2]) then
      redis.call('HSET', key, 'guided', ARGV[i + 2], 'guidance', ARGV[i + 3], 'report', ARGV[i + 4])
      answers[k - 1] = 1
    end
    i = i + 5
  end
end
return answers
"""
"""A batch of calls (``Batcher``) in one script, in order: KEYS the index, then each call's
branch; ARGV the TTL, then each call's arguments: ``b`` (a begin: the epoch of a new record,
name, metadata, principal, index member) or ``f`` (a finish: epoch, count, text, report)."""


class RedisState(SharedState):
    """Branch records under a key prefix in one Redis database."""

    kind = "redis"

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "composer_state",
        max_records: int = 100_000,
        ttl_s: float = 36_000.0,
        timeout_s: float = 5.0,
    ) -> None:
        super().__init__(max_records=max_records, ttl_s=ttl_s, timeout_s=timeout_s)
        self.url = url
        self.prefix = "{" + prefix + "}"
        # A redis.asyncio client belongs to the event loop it first ran in.
        self._clients: dict[asyncio.AbstractEventLoop, Redis] = {}
        self._rates: dict[Redis, RedisStorage] = {}
        self._scripts: dict[Redis, AsyncScript] = {}
        self._batcher: Batcher[tuple[Any, ...], Any] = Batcher(self._send)

    def __repr__(self) -> str:
        return f"RedisState({self.describe()!r})"

    def describe(self) -> str:
        return f"{mask_url(self.url)} prefix {self.prefix}"

    def _key(self, principal: str, branch_id: str) -> str:
        return f"{self.prefix}:b:{principal}/{branch_id}"

    async def begin(
        self, principal: str, branch_id: str, name: str | None, metadata: dict[str, Any]
    ) -> TurnSlot:
        call = (
            self._key(principal, branch_id),
            "b",
            secrets.token_hex(4),
            json.dumps(name),
            json.dumps(metadata),
            principal,
            f"{principal}/{branch_id}",
        )
        answer = await self._batcher.call(call)
        epoch, count = answer
        return TurnSlot(_text(epoch), int(count))

    async def finish(
        self,
        principal: str,
        branch_id: str,
        slot: TurnSlot,
        guidance: str | None,
        report: dict[str, Any] | None,
    ) -> None:
        call = (
            self._key(principal, branch_id),
            "f",
            slot.epoch,
            slot.count,
            json.dumps(cut(guidance)),
            json.dumps(report),
        )
        await self._batcher.call(call)

    async def _send(self, calls: Sequence[tuple[Any, ...]]) -> list[Any]:
        """A batch's calls in one script, one round trip (``Batcher``)."""
        client = self._client()
        script = self._scripts.get(client)
        if script is None:
            script = self._scripts[client] = client.register_script(_BATCH)
        keys = [f"{self.prefix}:index", *(call[0] for call in calls)]
        args = [max(1, round(self.ttl_s * 1000))]
        for call in calls:
            args.extend(call[1:])
        answers: list[Any] = await script(keys, args, client)
        return answers

    async def recall(self, principal: str, branch_id: str) -> BranchRecord | None:
        raw = await self._client().hgetall(self._key(principal, branch_id))
        fields = {_text(k): _text(v) for k, v in raw.items()}
        if fields.get("principal") != principal or "epoch" not in fields:
            return None
        return BranchRecord(
            principal=principal,
            branch_id=branch_id,
            name=json.loads(fields.get("name", "null")),
            metadata=json.loads(fields.get("metadata", "{}")),
            epoch=fields["epoch"],
            turns=int(fields.get("turns", "0")),
            guidance=json.loads(fields.get("guidance", "null")),
            report=json.loads(fields.get("report", "null")),
            updated_at=float(fields.get("updated_at", "0")),
        )

    async def check(self) -> None:
        await self._client().ping()

    def rate_storage(self) -> RedisStorage:
        """The library's Redis storage, on this loop's client's connections, its keys under
        ``{PREFIX}:r:`` (the same hash tag)."""
        client = self._client()
        storage = self._rates.get(client)
        if storage is None:
            from limits.aio.storage import RedisStorage

            storage = RedisStorage(
                "async+redis://",
                implementation="redispy",
                key_prefix=f"{self.prefix}:r",
                connection_pool=client.connection_pool,  # type: ignore[arg-type]  # taken, per its docs
            )
            self._rates[client] = storage
        return storage

    async def sweep(self) -> None:
        client = self._client()
        index = f"{self.prefix}:index"
        now, micro = await client.time()
        await client.zremrangebyscore(index, "-inf", now + micro / 1e6 - self.ttl_s)
        over = int(await client.zcard(index)) - self.max_records
        if over > 0:
            oldest: list[Any] = list(await client.zpopmin(index, over))
            names = [_text(pair[0]) for pair in oldest]
            if names:
                await client.delete(*(f"{self.prefix}:b:{name}" for name in names))

    async def aclose(self) -> None:
        """Close the running loop's client; clients of other loops are dropped."""
        clients, self._clients = self._clients, {}
        self._rates = {}
        self._scripts = {}
        await close_loop_client(clients)

    def _client(self) -> Redis:
        return loop_client(self._clients, self.url, self.timeout_s, "--state redis://", ServeError)


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
