"""A span for each HTTP request, the parent of the turn it serves (``composer serve`` with
traces: ``composer.serve.telemetry``).

The span is the request's, outermost: it covers the guards, the authentication and the rate
limits as well as the route, so a refused request is a span too. Its name is the method and
the route's template (``POST /v1/turns``; the method alone when no route takes the path), so
that a client's path never becomes a span name; its attributes follow OpenTelemetry's HTTP
server conventions (``http.request.method``, ``http.route``, ``url.path``,
``http.response.status_code``, ``client.address``, ``user_agent.original``), every string
bounded (``access.MAX_FIELD_CHARS``). A ``5xx`` answer, or an exception, is an error. A caller's
``traceparent`` (``OTEL_PROPAGATORS``: W3C trace context and baggage by default) makes the
span a child of the caller's own. While the route runs the span is the current one, so the
turn span of ``composer.observe.tracing`` (and whatever a provider's libraries record) is its
child.

When a span is current already (the application's own instrumentation wraps a mounted
server), that one is the request's span and this middleware adds none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from composer._version import __version__
from composer.serve.access import cut
from composer.serve.paths import route_template

__all__ = ["RequestSpans"]

_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)
"""The methods the HTTP conventions name as they are; any other is ``_OTHER``."""


class RequestSpans:
    """ASGI middleware: one ``SERVER`` span per HTTP request, current while it is served."""

    def __init__(self, app: ASGIApp, *, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.routes = routes
        self._tracer = trace.get_tracer("composer.serve", __version__)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or trace.get_current_span().get_span_context().is_valid:
            await self.app(scope, receive, send)
            return
        given = str(scope.get("method", ""))
        method = given if given in _METHODS else "_OTHER"
        route = route_template(self.routes, scope)
        attributes: dict[str, Any] = {
            "http.request.method": method,
            "url.path": cut(str(scope.get("path", ""))),
            "url.scheme": str(scope.get("scheme", "http")),
        }
        if method != given:
            attributes["http.request.method_original"] = cut(given)
        if route is not None:
            attributes["http.route"] = route
        client = scope.get("client")
        if client:
            attributes["client.address"] = str(client[0])
        server = scope.get("server")
        if server:
            attributes["server.address"] = str(server[0])
            if server[1] is not None:
                attributes["server.port"] = int(server[1])
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in scope.get("headers", ())
        }
        agent = headers.get("user-agent")
        if agent:
            attributes["user_agent.original"] = cut(agent)
        parent = propagate.extract(headers)
        span = self._tracer.start_span(
            f"{method} {route}" if route is not None else method,
            context=parent,
            kind=SpanKind.SERVER,
            attributes=attributes,
        )
        token = context.attach(trace.set_span_in_context(span, parent))

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = int(message["status"])
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_attribute("error.type", str(status))
                    span.set_status(Status(StatusCode.ERROR))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except BaseException as e:
            span.set_attribute("error.type", type(e).__name__)
            span.set_status(Status(StatusCode.ERROR, type(e).__name__))
            raise
        finally:
            context.detach(token)
            span.end()
