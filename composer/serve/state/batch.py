"""The shared stores' calls, gathered: what arrives while a round trip is out goes in the next.

Every turn makes two calls to a shared store (``begin`` before its providers, ``finish``
before its answer), each once a round trip. Under load most of that is the client library's
own work per round trip (a pool checkout, a statement, a send that wakes the store, a
response to parse), so ``Batcher`` sends the calls of a running event loop together: a call
goes as soon as the loop is free (a lone turn waits for nothing), and the calls made while a
batch is out go as the next one, one round trip and one statement or script, when it is
back. Each call still gets its own result or error. A batch holds at most ``max_batch``
calls, and with ``key`` no two calls of one key (a PostgreSQL statement may change a row
once): a later call of a key waits for the next batch, in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["MAX_BATCH", "Batcher"]

MAX_BATCH = 32
"""Calls a batch holds at most (each carries at most a composed text, ``base.MAX_TEXT``)."""

_C = TypeVar("_C")
_R = TypeVar("_R")


@dataclass
class _Lane(Generic[_C, _R]):
    """One event loop's calls waiting, and whether a batch of them is out."""

    waiting: list[tuple[_C, asyncio.Future[_R]]] = field(default_factory=list)
    sending: asyncio.Task[None] | None = None


class Batcher(Generic[_C, _R]):
    """Sends calls in batches through ``send``, which answers each call of a batch, in order,
    with its result or the exception it raised; an exception ``send`` raises is every
    call's."""

    def __init__(
        self,
        send: Callable[[Sequence[_C]], Awaitable[Sequence[_R | Exception]]],
        *,
        key: Callable[[_C], Hashable] | None = None,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._send = send
        self._key = key
        self.max_batch = max_batch
        self._lanes: dict[asyncio.AbstractEventLoop, _Lane[_C, _R]] = {}

    async def call(self, call: _C) -> _R:
        """``call``'s result, once the batch it went in is back."""
        loop = asyncio.get_running_loop()
        lane = self._lanes.get(loop)
        if lane is None:
            for old in [other for other in self._lanes if other.is_closed()]:
                del self._lanes[old]
            lane = self._lanes[loop] = _Lane()
        future: asyncio.Future[_R] = loop.create_future()
        lane.waiting.append((call, future))
        if lane.sending is None:
            lane.sending = loop.create_task(self._drain(lane))
        return await future

    async def _drain(self, lane: _Lane[_C, _R]) -> None:
        """Send the lane's waiting calls, a batch at a time, until none wait."""
        try:
            while lane.waiting:
                batch = self._take(lane)
                try:
                    results = await self._send([call for call, _ in batch])
                except Exception as e:
                    results = [e] * len(batch)
                for (_, future), result in zip(batch, results, strict=True):
                    if future.done():  # its caller was cancelled
                        continue
                    if isinstance(result, Exception):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            lane.sending = None
            for _, future in lane.waiting:  # only when cancelled (the loop closing)
                future.cancel()
            lane.waiting.clear()

    def _take(self, lane: _Lane[_C, _R]) -> list[tuple[_C, asyncio.Future[_R]]]:
        """The next batch: waiting calls in order, at most ``max_batch``, a key once."""
        batch: list[tuple[_C, asyncio.Future[_R]]] = []
        rest: list[tuple[_C, asyncio.Future[_R]]] = []
        keys: set[Hashable] = set()
        for waiting in lane.waiting:
            call, future = waiting
            if future.done():
                continue
            key = self._key(call) if self._key is not None else None
            if len(batch) >= self.max_batch or (key is not None and key in keys):
                rest.append(waiting)
                continue
            keys.add(key)
            batch.append(waiting)
        lane.waiting = rest
        return batch
