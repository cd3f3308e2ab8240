"""What ``composer serve --metrics`` counts of each HTTP request: how many, how long, by
route template, method and status.

Labels are bounded whatever clients send: the route is the template the request matched
(``/v1/branches/{branch_id}/writeback``, never the branch id; a mounted app's routes under
its prefix, ``/console/turns/{turn_id}``, and ``/console/{path}`` for the rest of the mount,
``composer.serve.paths.route_template``), and every path that matches none is one label,
``unmatched``; a method outside the HTTP standard's is ``other``; the status is what the
server answered (a request that raised before answering is ``500``). So the series number
at most routes x methods x statuses, however many distinct paths arrive.

The middleware runs outermost (before the access log, the guards, the rate limits and the
token), so a refused request is counted with the status it got. The route is found before
the request goes in (routing changes the scope on its way: a mount's prefix), by the router's
own matching; a path that is itself a template (``/healthz``) is remembered, so the common
requests skip it (at most one entry per route: other paths are never kept).

| metric | type | labels |
| --- | --- | --- |
| ``composer_http_requests_total`` | counter | route, method, status |
| ``composer_http_request_duration_seconds`` | histogram | route, method, status |
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from prometheus_client import Counter, Histogram
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from composer.serve.paths import Answered, route_path, route_template

__all__ = ["METRICS", "UNMATCHED", "HttpMetrics", "RequestMetrics"]

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


METRICS = RequestMetrics()
"""The process's collectors, registered on import (this module is imported with
``--metrics`` only, in each worker once prometheus_client's mode is set)."""


class HttpMetrics:
    """ASGI middleware: count each HTTP request and its time, labelled by ``routes``'
    templates (the app's own route list, read as each request arrives)."""

    def __init__(self, app: ASGIApp, *, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self._routes = routes
        self._metrics = METRICS
        self._static: dict[str, str] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        path = route_path(scope)
        route = self._static.get(path)
        if route is None:
            route = route_template(self._routes, scope) or UNMATCHED
            if route == path:  # a template without parameters: one entry per such route
                self._static[path] = route
        method = scope.get("method", "")
        answered = Answered(send, unanswered=500)  # raised before answering: a 500
        try:
            await self.app(scope, receive, answered)
        finally:
            self._metrics.observe(
                route,
                method if method in _METHODS else "other",
                answered.status,
                time.perf_counter() - started,
            )
