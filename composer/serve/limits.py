"""Request limits: the size of a body, and how often one client may call.

Bodies are read with a bound (a declared ``Content-Length`` over it is refused before reading,
a chunked body as soon as it passes it), answered ``413``. Rates are a token bucket per
client address, answered ``429`` with ``Retry-After``; the buckets kept are bounded too.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Collection

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from composer.serve.responses import JsonResponse, error_response

__all__ = ["RateLimit", "read_body"]

_MAX_CLIENTS = 10_000


async def read_body(request: Request, limit: int) -> bytes | JsonResponse:
    """The request body, or the ``413`` answer when it is larger than ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> JsonResponse:
    return error_response(413, "too_large", f"the request body is larger than {limit} bytes")


class RateLimit:
    """ASGI middleware: at most ``rate`` requests a second per client address, in bursts of
    up to ``burst``; paths in ``exempt`` (health probes) are never limited."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        rate: float,
        burst: int,
        exempt: Collection[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be positive and burst at least 1")
        self.app = app
        self.rate = rate
        self.burst = burst
        self._exempt = frozenset(exempt)
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, time

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._exempt:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        wait = self._take(client[0] if client else "")
        if wait <= 0:
            await self.app(scope, receive, send)
            return
        refusal = error_response(
            429,
            "rate_limited",
            f"more than {self.rate:g} requests a second from this client",
            headers={"Retry-After": str(max(1, math.ceil(wait)))},
        )
        await refusal(scope, receive, send)

    def _take(self, key: str) -> float:
        """Take one token from ``key``'s bucket: 0 when there was one, else seconds to wait."""
        now = self._clock()
        tokens, then = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / self.rate
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > _MAX_CLIENTS:
            self._buckets.popitem(last=False)  # the least recently seen client starts afresh
        return wait
