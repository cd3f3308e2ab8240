"""Where a request goes inside the server, wherever the server is mounted.

A program may mount the server's app in its own (``Mount("/composer", app=...)``): Starlette
then keeps the whole path in the request's scope and puts the prefix in ``root_path``, and
the routes match what is below it. The middleware (the open probes, the console's own
authentication, the JSON bodies, the rate limits' exemptions) compare that same path, so a
mounted server guards itself exactly as one served alone. The access log and the
request spans name a request by its route's template (``/v1/branches/{branch_id}/writeback``),
not its path: a name with few values, whatever a client puts in the path; they and the
request metrics read the status it was answered with through one recorder (``Answered``).
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.routing import BaseRoute, Match, Mount
from starlette.types import Message, Scope, Send

__all__ = ["Answered", "route_path", "route_template"]


def route_path(scope: Scope) -> str:
    """The request's path below the prefix the app is mounted at (``/v1/turns`` of
    ``/composer/v1/turns`` under ``/composer``); the whole path when served alone."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :] or "/"
    return path


def route_template(routes: Sequence[BaseRoute], scope: Scope, prefix: str = "") -> str | None:
    """The template of the route ``scope`` goes to (``/v1/branches/{branch_id}/writeback``;
    a mount's own routes below its path, ``/console/turns``), matched as the router matches;
    None when no route takes it (a ``404``). A route that takes the path but not the method
    (a ``405``) names it too."""
    partial: tuple[BaseRoute, Scope] | None = None
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return _template(route, {**scope, **child}, prefix)
        if match is Match.PARTIAL and partial is None:
            partial = (route, child)
    if partial is not None:
        return _template(partial[0], {**scope, **partial[1]}, prefix)
    return None


def _template(route: BaseRoute, scope: Scope, prefix: str) -> str:
    path = prefix + str(getattr(route, "path", ""))
    if isinstance(route, Mount):
        return route_template(route.routes, scope, path) or path + "/{path}"
    return path or "/"


class Answered:
    """A ``send`` that passes every message on and keeps the status the answer started with;
    ``status`` stays what it was made with until then (a request that raised first)."""

    __slots__ = ("_send", "status")

    def __init__(self, send: Send, unanswered: int) -> None:
        self._send = send
        self.status = unanswered

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
        await self._send(message)
