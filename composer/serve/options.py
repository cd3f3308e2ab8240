"""How ``composer serve`` guards itself: the options both transports read (HTTP and MCP over
HTTP), in a module of their own so that neither server module imports the other for them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from composer.serve.principals import Principals

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

__all__ = ["CONSOLE_PREFIX", "ServeOptions"]

CONSOLE_PREFIX = "/console"
"""Where ``ServeOptions.console`` is mounted; its pages authenticate themselves (a browser
following a link sends a session cookie, not a bearer header)."""


@dataclass(frozen=True)
class ServeOptions:
    """How the server guards itself; the defaults suit one host's agents."""

    token: str | None = None
    """One bearer token: the one-principal form (``default``)."""
    principals: Principals | None = None
    """Several callers, each with its token and bound metadata (takes the place of ``token``)."""
    max_body_bytes: int = 1 << 20
    rate: float = 100.0
    """Requests a second per client (``client_group``) and per principal; 0 switches the
    limits off (the ceiling too)."""
    burst: int = 200
    ceiling: float | None = None
    """Requests a second over all clients together (default: ten times ``rate``)."""
    mcp: bool = True
    """Serve MCP over streamable HTTP at ``/mcp`` as well."""
    host: str = "127.0.0.1"
    """The address listened on: the MCP transport's DNS-rebinding guard depends on it."""
    access_log: bool = False
    """Log one line per request with its principal (``composer.serve.access``)."""
    traces: bool = False
    """Record a span of each request, the parent of its turn's (``composer.serve.spans``),
    and flush this process's spans on shutdown (``composer.serve.telemetry``)."""
    console: BaseRoute | None = None
    """The web console's routes (``composer serve --console``), mounted at
    ``CONSOLE_PREFIX``: they authenticate their requests themselves (a bearer header or a
    session cookie)."""
    reload_signals: bool = False
    """SIGHUP reloads the manifest (``run``'s servers, each in a process of its own)."""
