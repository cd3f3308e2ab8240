"""Serve composed context to any agent: ``composer serve``, or a program (the ``serve`` extra).

From Python, what ``composer serve configs --env prod --principals principals.yaml`` runs::

    config = ServerConfig(env="prod", principals=Path("principals.yaml"))
    run(load_manifest("configs", env="prod"), config)  # until SIGTERM or Ctrl-C
    app = create_app(load_manifest("configs", env="prod"), config)  # or its ASGI app

* ``config``: ``ServerConfig``, every option and the rules between them;
* ``app``: the composition root (``run``, ``create_app``): state, principals, console, workers;
* ``service``: one manifest, branches by id (``composer.branches``), turns, writebacks;
* ``http``: the HTTP context server (Starlette on uvicorn), with ``auth``, ``guard``,
  ``limits`` (bodies, clients), ``rates`` (the rate limits, counted in the state store),
  ``paths`` (routes below a mount's prefix), ``responses``, its body ``models`` and its
  ``openapi`` document;
* ``mcp_server``: the same turn as an MCP server, over stdio or streamable HTTP;
* ``options``: ``ServeOptions``, how both servers guard themselves;
* ``runner``: listening (loopback unless there is a token) and graceful shutdown;
* ``access``, ``logs``: the access log, and ``--log-format json``'s lines;
* ``telemetry``, ``spans``: traces when the ``OTEL_*`` variables ask (the SDK configured per
  process), and a span of each request, the parent of its turn's;
* ``state/``: what the server remembers of each branch (turn counts, last context) and where
  its rate limits count: in the process, or shared by replicas in PostgreSQL or Redis, one
  module per back-end, the one a URL names opened by ``state.open_state``;
* ``workers``: ``--workers N`` processes on one socket;
* ``reloading``: the served manifest following its files (``--watch``) and SIGHUP, each
  process by itself.

``async with ContextService(manifest) as service:`` closes every branch's registry and then
the manifest on the way out: the service takes the manifest it is given, as the servers take
the service (their shutdown closes it).

Importing this package imports neither Starlette, uvicorn, the MCP SDK nor the console:
``run`` and ``create_app`` import the composition root when called, by name, since the
console it mounts imports this package's authentication and principals.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from composer.branches import BranchEntry, BranchStore
from composer.errors import ServeError
from composer.serve.config import ServerConfig, install_hint, missing_modules
from composer.serve.service import ContextService

if TYPE_CHECKING:
    from types import ModuleType

    from starlette.applications import Starlette

    from composer.manifest import Manifest
    from composer.serve.runner import Listening

__all__ = ["BranchEntry", "BranchStore", "ContextService", "ServerConfig", "create_app", "run"]


def run(
    manifest: Manifest,
    config: ServerConfig | None = None,
    *,
    started: Callable[[Listening], None] | None = None,
) -> None:
    """Serve ``manifest`` as ``composer serve`` does with ``config`` until SIGTERM or SIGINT
    (``composer.serve.app.run``); ``started`` hears where it listens."""
    _root(config).run(manifest, config, started=started)


def create_app(manifest: Manifest, config: ServerConfig | None = None) -> Starlette:
    """The ASGI app of ``composer serve`` with ``config``, to serve or to mount in one's own
    Starlette or FastAPI app (``composer.serve.app.create_app``)."""
    return cast("Starlette", _root(config).create_app(manifest, config))


def _root(config: ServerConfig | None) -> ModuleType:
    """``composer.serve.app``, once the serve extra (and the metrics extra, for
    ``metrics``) is known to be installed."""
    missing = missing_modules(config or ServerConfig())
    if missing:
        raise ServeError(f"{', '.join(missing)} not installed: {install_hint(missing)}")
    return importlib.import_module("composer.serve.app")
