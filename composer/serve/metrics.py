"""``composer serve --metrics``: ``/metrics`` in Prometheus's text format, one true scrape
whichever worker answers.

``/metrics`` is a route of the API, behind its guards: the bearer token (any principal's), the
rate limits, the loopback ``Host`` check; a loopback server without a token answers it as it
answers ``/v1/manifest``. It holds composer's own metrics (``composer.observe.metrics``: turns,
providers, budget, the audit log, reloads), counted for every manifest the server serves
(``composer.observe.switch``), and the HTTP requests' (``composer.serve.request_metrics``).
It is not in the OpenAPI document: it is there only with ``--metrics``, and is text, not JSON.

``--metrics-port`` adds a listener on the same host that answers ``GET /metrics`` and nothing
else, without a token, for a scraper that cannot send one: reach it only from inside the
cluster. It is bounded as the API is (the same connection limits and request deadline, the
loopback ``Host`` check) and its scrape is made at most once a second (``OPEN_SCRAPE_S``),
however often it is asked.

Under ``--workers N`` each worker is a process with its own counters, so the supervisor
gives them prometheus_client's multiprocess mode: before forking it makes a private
directory (mode 0700) and names it in ``PROMETHEUS_MULTIPROC_DIR``; each worker writes its
values to its own files there; a scrape, in whichever worker, reads and sums all of them
(``MultiProcessCollector``); a worker that ends is marked dead (``mark_process_dead``), and
the directory is removed when the command ends. A ``PROMETHEUS_MULTIPROC_DIR`` set for a
single process is honoured the same way. prometheus_client is imported only in the workers,
after the variable is set (it chooses its mode on import).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from composer.errors import ServeError
from composer.serve.auth import is_loopback
from composer.serve.config import ServerConfig
from composer.serve.guard import RequestGuard
from composer.serve.paths import route_path
from composer.serve.responses import error_response
from composer.serve.runner import bind

__all__ = [
    "CONTENT_TYPE",
    "METRICS_PATH",
    "MULTIPROCESS_VARIABLE",
    "OPEN_SCRAPE_S",
    "MetricsPort",
    "Scrapes",
    "bind_metrics_port",
    "instrument",
    "scrape",
    "shared_by_workers",
]

METRICS_PATH = "/metrics"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus's text format, which every Prometheus reads."""
MULTIPROCESS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
OPEN_SCRAPE_S = 1.0
"""How long the unauthenticated listener reuses a scrape: a flood costs one a second."""


def scrape() -> bytes:
    """The process's metrics in the text format; under multiprocess mode, every process's."""
    from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

    if not os.environ.get(MULTIPROCESS_VARIABLE):
        return generate_latest(REGISTRY)
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return generate_latest(registry)


@dataclass
class Scrapes:
    """Scrapes made one at a time, off the event loop; one younger than ``max_age_s`` is
    answered again."""

    max_age_s: float = 0.0
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _last: tuple[float, bytes] | None = None

    async def text(self) -> bytes:
        async with self._lock:
            last = self._last
            if last is not None and time.monotonic() - last[0] < self.max_age_s:
                return last[1]
            body = await asyncio.to_thread(scrape)
            self._last = (time.monotonic(), body)
            return body

    async def response(self) -> Response:
        return Response(await self.text(), media_type=CONTENT_TYPE)


def instrument(app: Starlette) -> None:
    """Add ``/metrics`` to the API ``app`` (behind its middleware) and count its requests
    (``HttpMetrics``, outermost). Before the app first serves."""
    from composer.serve.request_metrics import HttpMetrics

    scrapes = Scrapes()

    async def metrics(request: Request) -> Response:
        return await scrapes.response()

    app.router.routes.append(Route(METRICS_PATH, metrics, methods=["GET"]))
    app.add_middleware(HttpMetrics, routes=app.router.routes)


@dataclass(frozen=True)
class MetricsPort:
    """The ``--metrics-port`` listener: its socket, bound with the API's."""

    sock: socket.socket
    loopback: bool

    @property
    def port(self) -> int:
        port: int = self.sock.getsockname()[1]
        return port

    def serving(self, app: ASGIApp) -> ASGIApp:
        """``app`` on the API's socket, and on this one ``GET /metrics`` alone."""
        scrapes = Scrapes(OPEN_SCRAPE_S)

        async def metrics_only(scope: Scope, receive: Receive, send: Send) -> None:
            answer: Response
            if route_path(scope) != METRICS_PATH:
                answer = error_response(404, "not_found", "this listener serves /metrics only")
            elif scope.get("method") not in ("GET", "HEAD"):
                answer = error_response(
                    405, "method_not_allowed", "GET /metrics", headers={"Allow": "GET, HEAD"}
                )
            else:
                answer = await scrapes.response()
            await answer(scope, receive, send)

        guarded = RequestGuard(metrics_only, loopback=self.loopback, open_paths=())
        port = self.port

        async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
            server = scope.get("server") if scope["type"] == "http" else None
            if server is not None and server[1] == port:
                await guarded(scope, receive, send)
            else:
                await app(scope, receive, send)

        return dispatch


def bind_metrics_port(config: ServerConfig) -> MetricsPort | None:
    """The ``metrics_port`` listener on ``host``, or None without one."""
    if config.metrics_port is None:
        return None
    return MetricsPort(bind(config.host, config.metrics_port), is_loopback(config.host))


@contextlib.contextmanager
def shared_by_workers(config: ServerConfig) -> Iterator[Callable[[int], None] | None]:
    """Around forking the workers: with ``metrics`` and ``workers`` above 1, a private
    directory in ``PROMETHEUS_MULTIPROC_DIR`` meanwhile, and what to call with each worker
    that ended; else nothing to do."""
    if not config.metrics or config.workers == 1:
        yield None
        return
    values = sys.modules.get("prometheus_client.values")
    if values is not None and not getattr(values.ValueClass, "_multiprocess", False):
        raise ServeError(
            "--metrics with --workers: prometheus_client was imported in single-process mode "
            f"before the workers were started; set {MULTIPROCESS_VARIABLE} before importing "
            "it, or run composer serve as a process of its own"
        )
    folder = tempfile.mkdtemp(prefix="composer-metrics-")
    previous = os.environ.get(MULTIPROCESS_VARIABLE)
    os.environ[MULTIPROCESS_VARIABLE] = folder

    def ended(pid: int) -> None:
        from prometheus_client.multiprocess import mark_process_dead

        with contextlib.suppress(OSError):
            mark_process_dead(pid, folder)  # type: ignore[no-untyped-call]

    try:
        yield ended
    finally:
        if previous is None:
            os.environ.pop(MULTIPROCESS_VARIABLE, None)
        else:
            os.environ[MULTIPROCESS_VARIABLE] = previous
        shutil.rmtree(folder, ignore_errors=True)
