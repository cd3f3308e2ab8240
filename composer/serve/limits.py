"""Request limits: the size of a body, and how often one caller may call.

Bodies are read with a bound (a declared ``Content-Length`` over it is refused before reading,
a chunked body as soon as it passes it), answered ``413``. Rates are token buckets, answered
``429`` with ``Retry-After``; the buckets kept are bounded too. A server keeps three: one for
all requests together (a ceiling), one per client (``client_group``: an IPv6 /64 and all of
loopback count as one client, so rotating addresses evades nothing) and one per principal
(after authentication: a token shared by many addresses is still one caller).
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Collection

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from composer.serve.responses import JsonResponse, error_response

__all__ = ["RateLimit", "address_group", "client_group", "read_body"]

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


def client_group(scope: Scope) -> str:
    """Who a request counts as for the per-client rate: its address, except that every
    loopback address is one client and an IPv6 address counts by its /64 (a host is handed a
    whole /64 and can rotate through it)."""
    client = scope.get("client")
    return address_group(client[0] if client else "", loopback_as_one=True)


def address_group(host: str, *, loopback_as_one: bool) -> str:
    """The client an address counts as: itself (an IPv4-mapped IPv6 address as its IPv4
    one), an IPv6 address by its /64, and with ``loopback_as_one`` all of loopback as one."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if loopback_as_one and address.is_loopback:
        return "loopback"
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    return str(address)


class RateLimit:
    """ASGI middleware: at most ``rate`` requests a second per ``key(scope)`` (by default
    the client, ``client_group``), in bursts of up to ``burst``; paths in ``exempt`` (health
    probes) are never limited. ``who`` words the refusal ("this client")."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        rate: float,
        burst: int,
        exempt: Collection[str] = (),
        key: Callable[[Scope], str] = client_group,
        who: str = "this client",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be positive and burst at least 1")
        self.app = app
        self.rate = rate
        self.burst = burst
        self._exempt = frozenset(exempt)
        self._key = key
        self._who = who
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, time

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._exempt:
            await self.app(scope, receive, send)
            return
        wait = self._take(self._key(scope))
        if wait <= 0:
            await self.app(scope, receive, send)
            return
        refusal = error_response(
            429,
            "rate_limited",
            f"more than {self.rate:g} requests a second from {self._who}",
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
