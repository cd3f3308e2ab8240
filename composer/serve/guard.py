"""What a web page may do to a server on this machine: nothing.

A server without a token listens on loopback only, which does not stop a browser: any page a
developer opens can send requests to ``http://127.0.0.1:8080`` (a "simple" cross-site POST
with ``text/plain`` needs no permission) and, through DNS rebinding (a name of the attacker's
that resolves to 127.0.0.1), read the answers. Two middlewares refuse all three ways in:

* ``RequestGuard``, first of all: a ``Host`` that is not this machine's loopback name, on a
  loopback listener (``421``): a rebound name never reaches a route; an ``Origin`` header
  other than the server's own (``403``): a cross-site fetch or form;
* ``JsonBodies``, after authentication (a wrong token is answered ``401`` whatever its body):
  a body that is not ``application/json`` (``415``): a form post or a ``text/plain`` simple
  request, which a browser sends cross-site without asking. A JSON body sent with another
  type (``curl -d`` says ``application/x-www-form-urlencoded``) is refused too, not guessed
  at: accepting it would let exactly that cross-site form through on a token-less server.

Health, readiness and the OpenAPI document are left open (they say nothing of the manifest).
"""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from composer.serve.auth import is_loopback
from composer.serve.paths import route_path
from composer.serve.responses import error_response

__all__ = ["JsonBodies", "RequestGuard"]

_BODY_METHODS = frozenset({"POST"})  # the only method with a body here; others are 405


class RequestGuard:
    """ASGI middleware: refuse a foreign Host on loopback, a foreign Origin."""

    def __init__(self, app: ASGIApp, *, loopback: bool, open_paths: Collection[str]) -> None:
        self.app = app
        self.loopback = loopback
        self._open = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or route_path(scope) in self._open:
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, kind, message = refusal
        await error_response(status, kind, message)(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if self.loopback and not is_loopback(_hostname(host)):
            return 421, "misdirected", "this server answers only to a loopback Host"
        origin = headers.get("origin")
        if origin is not None and not _same_origin(origin, host, scope):
            return 403, "foreign_origin", "requests from another origin are refused"
        return None


class JsonBodies:
    """ASGI middleware: a POST to one of ``body_paths`` (prefixes of the routes that take a
    body) must say ``Content-Type: application/json``."""

    def __init__(self, app: ASGIApp, *, body_paths: tuple[str, ...]) -> None:
        self.app = app
        self._body_paths = body_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope.get("method") in _BODY_METHODS
            and route_path(scope).startswith(self._body_paths)
        ):
            kind = Headers(scope=scope).get("content-type", "").split(";", 1)[0]
            if kind.strip().lower() != "application/json":
                refusal = error_response(415, "unsupported_media_type", _NOT_JSON)
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


_NOT_JSON = (
    "the body must be JSON, sent with Content-Type: application/json "
    "(curl: -H 'Content-Type: application/json')"
)


def _hostname(host: str) -> str:
    """The name or address of a ``Host`` header, without its port (``[::1]:8080`` -> ``::1``)."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _same_origin(origin: str, host: str, scope: Scope) -> bool:
    """Whether ``Origin`` names this server: its scheme and exactly the ``Host`` asked for."""
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    scheme = scope.get("scheme", "http")
    return parts.scheme == scheme and parts.netloc.lower() == host.lower() and bool(host)
