"""How often one caller may call: the ``limits`` library's sliding-window counter, counted in
the server's state store.

A server keeps three limits: one for all requests together (a ceiling), one per client
(``client_group``: an IPv6 /64 and all of loopback count as one client, so rotating addresses
evades nothing) and one per principal (after authentication: a token shared by many addresses
is still one caller). Each counts where the branch state is (``StateStore.rate_storage``): in
the process without ``--state`` (the library's memory storage), else in PostgreSQL or Redis,
so that every worker and replica sharing the store counts one limit, not one each.

A limit of ``rate`` requests a second in bursts of ``burst`` is a window of ``burst / rate``
seconds, rounded up to whole seconds (the library's windows are whole seconds), admitting
``rate`` times that many requests (``rate_window``): ``--rate-limit 5`` admits 10 requests
in any 2-second window, weighed the library's way (the previous window's count counts by the
share of it the sliding window still covers), so about 5 a second over time. Past it a
request gets ``429`` with ``Retry-After`` (the seconds one request's share of the window
takes to slide by); a store that does not answer makes it ``503 state_unavailable`` (closed,
as a turn is: a limit that cannot be counted is not waived). Health paths are never limited.

Keys are bounded: each expires two windows after its last hit (in every storage), and the
ceiling, checked first, bounds how many new clients can arrive in that time; a key longer
than ``MAX_KEY`` characters (a proxy's forwarded name) is counted by its digest.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

from composer.serve.limits import client_group
from composer.serve.paths import route_path
from composer.serve.responses import error_response

if TYPE_CHECKING:
    from limits import RateLimitItem
    from limits.aio.storage import Storage

__all__ = ["MAX_KEY", "RateLimit", "rate_window"]

logger = logging.getLogger(__name__)

MAX_KEY = 128
"""The longest key counted as it is; a longer one is counted by its SHA-256."""

_WARN_EVERY_S = 60.0


def rate_window(rate: float, burst: int, namespace: str) -> RateLimitItem:
    """``rate`` requests a second in bursts of ``burst``, as the library's window: ``burst /
    rate`` seconds rounded up, admitting ``rate`` times that (at least 1)."""
    from limits import RateLimitItemPerSecond

    if rate <= 0 or burst < 1:
        raise ValueError("rate must be positive and burst at least 1")
    seconds = max(1, math.ceil(burst / rate))
    return RateLimitItemPerSecond(max(1, round(rate * seconds)), seconds, namespace=namespace)


class RateLimit:
    """ASGI middleware: at most ``rate`` requests a second per ``key(scope)`` (by default
    the client, ``client_group``), in bursts of up to ``burst``, counted in ``storage()``;
    paths in ``exempt`` (health probes) are never limited. ``name`` keeps each limit's keys
    apart; ``who`` words the refusal ("this client"); ``failed`` hears of a store that did not
    answer (readiness)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        storage: Callable[[], Storage],
        rate: float,
        burst: int,
        name: str = "client",
        exempt: Collection[str] = (),
        key: Callable[[Scope], str] = client_group,
        who: str = "this client",
        failed: Callable[[Exception], None] | None = None,
    ) -> None:
        self.app = app
        self.rate = rate
        self.item = rate_window(rate, burst, name)
        self._storage = storage
        self._exempt = frozenset(exempt)
        self._key = key
        self._who = who
        self._failed = failed
        self._retry_after = str(max(1, math.ceil(self.item.get_expiry() / self.item.amount)))
        self._warned = -_WARN_EVERY_S

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or route_path(scope) in self._exempt:
            await self.app(scope, receive, send)
            return
        from limits.aio.strategies import SlidingWindowCounterRateLimiter

        key = self._key(scope)
        if len(key) > MAX_KEY:
            key = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        try:
            limiter = SlidingWindowCounterRateLimiter(self._storage())
            admitted = await limiter.hit(self.item, key)
        except Exception as e:
            self._warn(e)
            if self._failed is not None:
                self._failed(e)
            refusal = error_response(
                503, "state_unavailable", "the rate limit store did not answer; try again"
            )
            await refusal(scope, receive, send)
            return
        if admitted:
            await self.app(scope, receive, send)
            return
        refusal = error_response(
            429,
            "rate_limited",
            f"more than {self.rate:g} requests a second from {self._who}",
            headers={"Retry-After": self._retry_after},
        )
        await refusal(scope, receive, send)

    def _warn(self, error: Exception) -> None:
        """Log a store's failure at most once a minute, by its kind (never its message: a
        driver's may quote the URL, and with it a password)."""
        now = time.monotonic()
        if now - self._warned >= _WARN_EVERY_S:
            self._warned = now
            logger.warning("the rate limit store failed (%s); answering 503", type(error).__name__)
