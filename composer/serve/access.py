"""The access log: one line per request, naming its principal (never its token).

uvicorn's own access log knows the client address only; this middleware runs outside the
authentication, so once a request is answered it can say who made it: method, path, status,
principal (``-`` when none was authenticated) and time taken. Paths are escaped for the log
(a request line cannot forge another one).
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from composer.manifest.yamlnodes import printable
from composer.serve.auth import PRINCIPAL_KEY

__all__ = ["AccessLog"]

logger = logging.getLogger("composer.serve.access")


class AccessLog:
    """ASGI middleware: log each HTTP request once it is answered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            principal = scope.get(PRINCIPAL_KEY)
            name = getattr(principal, "name", None) or "-"
            client = scope.get("client")
            logger.info(
                "%s %s %s %d principal=%s %.1f ms",
                client[0] if client else "-",
                scope.get("method", "-"),
                printable(scope.get("path", "")),
                status,
                name,
                (time.perf_counter() - started) * 1000,
            )
