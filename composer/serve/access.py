"""The access log: one line per request, naming its principal (never its token).

uvicorn's own access log knows the client address only; this middleware runs outside the
authentication, so once a request is answered it can say who made it: method, path, status,
principal (``-`` when none was authenticated) and time taken. Paths are escaped for the log
(a request line cannot forge another one).

Each record also carries those values as fields (``extra``: ``client``, ``method``, ``path``,
``route``, ``status``, ``principal``, ``duration_ms``, ``turn_id`` of a turn, ``user_agent``),
which ``--log-format json`` writes as they are (``composer.serve.logs``) and any structured
formatter of an application's own can read; the path and the user agent are cut at
``MAX_FIELD_CHARS`` and escaped as the path of the line is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from composer.manifest.yamlnodes import printable
from composer.serve.auth import PRINCIPAL_KEY
from composer.serve.paths import Answered, route_template

__all__ = ["MAX_FIELD_CHARS", "TURN_ID_KEY", "AccessLog", "cut"]

logger = logging.getLogger("composer.serve.access")

TURN_ID_KEY = "composer.turn_id"
"""Where the turn route leaves the id of the turn it served, in the request's scope."""

MAX_FIELD_CHARS = 1024
"""The longest path or user agent a record carries, cut past it."""


class AccessLog:
    """ASGI middleware: log each HTTP request once it is answered."""

    def __init__(self, app: ASGIApp, *, routes: Sequence[BaseRoute] = ()) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        route = route_template(self.routes, scope)  # now: a mount rewrites the scope
        answered = Answered(send, unanswered=0)
        try:
            await self.app(scope, receive, answered)
        finally:
            principal = scope.get(PRINCIPAL_KEY)
            name = getattr(principal, "name", None) or "-"
            client = scope.get("client")
            address = client[0] if client else "-"
            method = printable(str(scope.get("method", "-")))
            path = printable(cut(str(scope.get("path", ""))))
            ms = (time.perf_counter() - started) * 1000
            agent = next(
                (v for k, v in scope.get("headers", ()) if k.lower() == b"user-agent"), None
            )
            fields = {
                "client": address,
                "method": method,
                "path": path,
                "route": route,
                "status": answered.status,
                "principal": None if principal is None else name,
                "duration_ms": round(ms, 3),
                "turn_id": scope.get(TURN_ID_KEY),
                "user_agent": None if agent is None else printable(cut(agent.decode("latin-1"))),
            }
            logger.info(
                "%s %s %s %d principal=%s %.1f ms",
                address,
                method,
                path,
                answered.status,
                name,
                ms,
                extra=fields,
            )


def cut(text: str) -> str:
    """``text``, cut past ``MAX_FIELD_CHARS``."""
    return text if len(text) <= MAX_FIELD_CHARS else text[:MAX_FIELD_CHARS] + "..."
