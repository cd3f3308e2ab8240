"""What ``composer serve --metrics`` counts of each HTTP request: how many, how long, by
route template, method and status.

Labels are bounded whatever clients send: the route is the template the request matched
(``/v1/branches/{branch_id}/writeback``, never the branch id; a mounted app's routes under
its prefix, ``/console/turns/{turn_id}``), and every path that matches none is one label,
``unmatched``; a method outside the HTTP standard's is ``other``; the status is what the
server answered (a request that raised before answering is ``500``). So the series number
at most routes x methods x statuses, however many distinct paths arrive.

The middleware runs outermost (before the access log, the guards, the rate limits and the
token), so a refused request is counted with the status it got. The route is found before
the request goes in: routing changes the scope on its way (a mount's prefix).

| metric | type | labels |
| --- | --- | --- |
| ``composer_http_requests_total`` | counter | route, method, status |
| ``composer_http_request_duration_seconds`` | histogram | route, method, status |
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from prometheus_client import Counter, Histogram
from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["UNMATCHED", "HttpMetrics", "RequestMetrics", "request_metrics", "route_template"]

UNMATCHED = "unmatched"
"""The route label of every path no route matches (a template always starts with ``/``)."""

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class RequestMetrics:
    """The process's request collectors (registered once, in the default registry)."""

    def __init__(self) -> None:
        labels = ["route", "method", "status"]
        self.requests = Counter(
            "composer_http_requests", "HTTP requests answered, by route template.", labels
        )
        self.duration = Histogram(
            "composer_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer, by route template.",
            labels,
            buckets=_SECONDS,
        )
        self._children: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one answered request (labels already bounded)."""
        key = (route, method, str(status) if 100 <= status <= 599 else "other")
        child = self._children.get(key)
        if child is None:
            child = (self.requests.labels(*key), self.duration.labels(*key))
            self._children[key] = child
        child[0].inc()
        child[1].observe(seconds)


_METRICS: RequestMetrics | None = None
_LOCK = threading.Lock()


def request_metrics() -> RequestMetrics:
    """The process's one ``RequestMetrics`` (a collector can be registered once)."""
    global _METRICS
    with _LOCK:
        if _METRICS is None:
            _METRICS = RequestMetrics()
        return _METRICS


def route_template(routes: Sequence[BaseRoute], scope: Scope) -> str:
    """The template of the route ``scope`` goes to (a wrong method still names its route),
    or ``UNMATCHED``."""
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.NONE:
            continue
        if isinstance(route, Mount):
            inner = route_template(route.routes, {**scope, **child})
            return UNMATCHED if inner == UNMATCHED else route.path + inner
        path: str | None = getattr(route, "path", None)
        return path if path is not None else UNMATCHED
    return UNMATCHED


class HttpMetrics:
    """ASGI middleware: count each HTTP request and its time, labelled by ``routes``'
    templates (the app's own route list, read as each request arrives)."""

    def __init__(self, app: ASGIApp, *, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self._routes = routes
        self._metrics = request_metrics()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        route = route_template(self._routes, scope)
        method = scope.get("method", "")
        status = 500  # unless an answer starts: raised before answering

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self._metrics.observe(
                route,
                method if method in _METHODS else "other",
                status,
                time.perf_counter() - started,
            )
