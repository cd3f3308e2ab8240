"""Where a request goes inside the server, wherever the server is mounted.

A program may mount the server's app in its own (``Mount("/composer", app=...)``): Starlette
then keeps the whole path in the request's scope and puts the prefix in ``root_path``, and
the routes match what is below it. The middleware (the open probes, the console's own
authentication, the JSON bodies, the rate limits' exemptions) compare that same path, so a
mounted server guards itself exactly as one served alone.
"""

from __future__ import annotations

from starlette.types import Scope

__all__ = ["route_path"]


def route_path(scope: Scope) -> str:
    """The request's path below the prefix the app is mounted at (``/v1/turns`` of
    ``/composer/v1/turns`` under ``/composer``); the whole path when served alone."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :] or "/"
    return path
