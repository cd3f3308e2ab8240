"""The server's composition root: a manifest and a ``ServerConfig`` become what ``composer
serve`` runs, for the command line and for a program alike.

``build`` reads what the config points at (the principals file or the single token, the state
store, checked once now so that a wrong URL fails the start) and makes the service, the
callers it accepts and the options both transports read, with the web console's routes when
asked. ``create_app`` is that server's ASGI app, for a program to serve or mount in its own
Starlette or FastAPI app; ``run`` listens and serves until a signal stops it (HTTP, on one
socket by one or ``workers`` processes, or MCP on stdin and stdout), as the command does.

The served manifest is the server's from then on: its shutdown closes it. This is the one
module of ``composer.serve`` that imports the console (``tests/test_layout.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TypeVar

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from composer.console import Console, TurnSource, console_mount
from composer.errors import ServeError
from composer.inspect.words import counted
from composer.manifest import Manifest
from composer.manifest.settings import load_settings
from composer.observe.switch import record_metrics_always, record_traces_always
from composer.principal import Principal
from composer.serve.auth import check_bind, load_token
from composer.serve.config import ServerConfig
from composer.serve.connections import ConnectionLimits, default_total, raise_descriptor_limit
from composer.serve.http import create_app as http_app
from composer.serve.logs import json_logs
from composer.serve.mcp_server import run_stdio
from composer.serve.metrics import (
    bind_metrics_port,
    instrument,
    shared_by_workers,
)
from composer.serve.options import CONSOLE_PREFIX, ServeOptions
from composer.serve.principals import (
    DEFAULT_PRINCIPAL,
    LOCAL_PRINCIPAL,
    Principals,
    load_principals,
)
from composer.serve.reloading import Reloader, log_masking
from composer.serve.runner import Listening, bind, serve
from composer.serve.service import ContextService
from composer.serve.state import StateStore, open_state
from composer.serve.telemetry import start_traces, traced
from composer.serve.tenancy import check_isolation
from composer.serve.workers import run_workers

__all__ = ["Callers", "Server", "build", "create_app", "run"]

logger = logging.getLogger("composer.serve")

_T = TypeVar("_T")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Callers:
    """Who may call the server: a principals file's principals, or one bearer token, or
    (neither) the one ``local`` caller of a loopback server."""

    principals: Principals | None
    token: str | None

    def guard(self) -> Principals | None:
        """The tokens the server checks (one token is the one principal ``default``)."""
        if self.principals is None and self.token is not None:
            return Principals.single(self.token)
        return self.principals


@dataclass(frozen=True)
class Server:
    """The parts of one configured server: the service, its callers, how it guards itself."""

    config: ServerConfig
    service: ContextService
    callers: Callers
    options: ServeOptions
    stdio_principal: Principal | None = None
    """With ``mcp_stdio``: the principal the one client is (None: ``local``)."""

    def app(self) -> Starlette:
        """The ASGI app (each ``run`` worker makes its own: its own MCP session manager, its
        own tracer provider when ``OTEL_*`` asks for traces)."""
        if self.options.traces:
            start_traces()
        app = http_app(self.service, self.options)
        if self.config.metrics:
            instrument(app)
        return app

    def describe(self, url: str, metrics_port: int | None = None) -> Listening:
        """What the command prints once it listens at ``url``."""
        config, principals = self.config, self.callers.principals
        if principals is not None:
            guard = f"{counted(len(principals.principals), 'principal')}, bearer token required"
        else:
            guard = "bearer token required" if self.callers.token else "no token: loopback only"
        workers = f", {config.workers} workers" if config.workers > 1 else ""
        state = self.service.state
        shared = f", state {state.describe()}" if state.shared else ""
        console = f"; console at {url}{CONSOLE_PREFIX}" if config.console else ""
        metrics = f"; metrics at {url}/metrics" if config.metrics else ""
        if metrics_port is not None:
            metrics += f", without a token on port {metrics_port}"
        text = f"listening on {url} ({guard}{workers}{shared}); MCP at {url}/mcp{console}{metrics}"
        return Listening(url, text)


def build(manifest: Manifest, config: ServerConfig, *, signals: bool = False) -> Server:
    """The server ``config`` describes, serving ``manifest``: ``ServeError`` (or, for a
    principals file, a located ``ManifestError``) when it cannot start as configured.

    With ``watch``, or ``signals`` (``run``'s servers, SIGHUP reloading), the manifest follows
    its files (``composer.serve.reloading``)."""
    if config.metrics:
        record_metrics_always()  # whatever runtime.metrics says: /metrics must not be empty
    traces = not config.mcp_stdio and traced()
    if traces:
        record_traces_always()  # whatever runtime.traces says: a request span has its turn
    callers = _callers(config)
    stdio_principal = None
    if config.mcp_stdio and callers.principals is not None:
        stdio_principal = callers.principals.named(config.principal)
    accepted: Sequence[Principal]
    if stdio_principal is not None:
        accepted = (stdio_principal,)
    elif callers.principals is not None:
        accepted = callers.principals.principals
    else:
        accepted = (DEFAULT_PRINCIPAL,) if callers.token is not None else (LOCAL_PRINCIPAL,)
    reloader = None
    if (config.watch or signals) and not config.mcp_stdio:
        if manifest.path is not None:
            reloader = Reloader(
                manifest.path,
                watch=config.watch,
                accept=functools.partial(check_isolation, principals=accepted),
            )
        elif config.watch:
            raise ServeError("--watch follows a manifest's files: this one was read from none")
    service = ContextService(
        manifest,
        env=config.env,
        max_branches=config.max_branches,
        idle_ttl_s=config.branch_ttl,
        principals=accepted,
        state=_state(config),
        reloader=reloader,
    )
    if not config.mcp_stdio:
        check_bind(config.host, callers.token if callers.principals is None else "principals")
    options = ServeOptions(
        token=callers.token,
        principals=callers.principals,
        max_body_bytes=config.max_body_bytes,
        rate=config.rate_limit,
        burst=max(1, int(config.rate_limit * 2)),
        host=config.host,
        access_log=config.access_log,
        traces=traces,
        console=_console(config, service, callers) if not config.mcp_stdio else None,
        reload_signals=signals,
    )
    return Server(config, service, callers, options, stdio_principal)


def create_app(manifest: Manifest, config: ServerConfig | None = None) -> Starlette:
    """The ASGI app of ``composer serve`` with ``config``: the API, MCP at ``/mcp``, and with
    ``config.console`` the console at ``/console``. Serve it with any ASGI server, or mount
    it in a Starlette or FastAPI app (``Mount("/composer", app=app)``) and run its lifespan
    with yours (``lifespan=app.router.lifespan_context``): it starts the MCP sessions and the
    providers' warm-up, and closes the providers and the manifest on shutdown.

    Listening is the ASGI server's, so ``mcp_stdio`` and ``workers`` are ``run``'s only;
    ``host`` is still where the app will be reached (a token-less app is for loopback).
    """
    config = config or ServerConfig()
    if config.mcp_stdio:
        raise ServeError("--mcp-stdio serves on stdin and stdout: use composer.serve.run")
    if config.workers > 1:
        raise ServeError("--workers above 1 forks servers of its own: use composer.serve.run")
    return build(manifest, config).app()


def run(
    manifest: Manifest,
    config: ServerConfig | None = None,
    *,
    started: Callable[[Listening], None] | None = None,
) -> None:
    """Serve ``manifest`` as ``composer serve`` does with ``config``, until SIGTERM or
    SIGINT stops it gracefully (or, with ``mcp_stdio``, until the client leaves); SIGHUP
    reloads the manifest from its files (``composer.serve.reloading``).
    ``started`` hears where it listens (else that is logged by ``composer.serve``, INFO).
    With ``log_format="json"`` the server's log is JSON lines on standard error meanwhile.
    """
    config = config or ServerConfig()
    logs: AbstractContextManager[None]
    logs = json_logs(log_masking(manifest)) if config.log_format == "json" else nullcontext()
    with logs:
        _run(manifest, config, started)


def _run(
    manifest: Manifest, config: ServerConfig, started: Callable[[Listening], None] | None
) -> None:
    server = build(manifest, config, signals=True)
    if config.mcp_stdio:
        asyncio.run(run_stdio(server.service, server.stdio_principal))
        return
    limits = ConnectionLimits(
        request_s=config.request_timeout,
        per_client=config.max_connections_per_client,
        total=config.max_connections or default_total(raise_descriptor_limit()),
    )
    sock = bind(config.host, config.port)
    scraped = bind_metrics_port(config)

    def announce(url: str) -> None:
        listening = server.describe(url, scraped.port if scraped else None)
        if started is not None:
            started(listening)
        else:
            logger.info("%s", listening, extra={"url": listening.url})

    def work(heard: Callable[[str], None] | None = None) -> None:
        app = server.app()  # in each worker: its own app and session manager
        served = app if scraped is None else scraped.serving(app)
        more = () if scraped is None else (scraped.sock,)
        serve(
            served,
            sock,
            limits=limits,
            forwarded_allow_ips=config.forwarded_allow_ips,
            started=heard,
            also=more,
            drain_s=config.drain_delay,
            draining=server.service.drain,
        )

    if config.workers == 1:
        with _hang_ups_ignored():  # until the app reloads on them: one must not end it
            work(announce)
        return
    host, port = sock.getsockname()[:2]
    announce(f"http://{f'[{host}]' if ':' in host else host}:{port}")
    with shared_by_workers(config) as ended:
        code = run_workers(config.workers, work, ended=ended)
    if code != 0:
        raise ServeError("a worker stopped by itself; the others were stopped")


@contextlib.contextmanager
def _hang_ups_ignored() -> Iterator[None]:
    """SIGHUP ignored meanwhile, in the main thread (elsewhere no signal can be handled)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)


def _callers(config: ServerConfig) -> Callers:
    """The principals file's principals, or the single token (None: none is set)."""
    if config.principals is not None:
        return Callers(load_principals(config.principals), None)
    if config.mcp_stdio:
        return Callers(None, None)
    return Callers(None, load_token(variable=config.token_var, file=config.token_file))


def _state(config: ServerConfig) -> StateStore:
    """The state store ``state`` names (asked once now: a wrong URL fails the start), or
    the process's own."""
    url = config.state
    records = max(100_000, 10 * config.max_branches)
    if url is None:
        return open_state(None, max_records=records)
    named = _VARIABLE.fullmatch(url)
    if named is not None:
        url = load_settings().variables().get(named[1])
        if not url:
            raise ServeError(f"--state {config.state}: the variable is not set")
    state = open_state(
        url,
        schema=config.state_schema,
        max_records=records,
        ttl_s=max(3600.0, 10 * config.branch_ttl),
    )

    async def probe() -> None:
        try:
            await state.check()
        finally:
            await state.aclose()

    try:
        _blocking(probe)
    except ServeError:
        raise
    except Exception as e:
        raise ServeError(
            f"--state {state.describe()}: the store did not answer ({type(e).__name__})"
        ) from None
    return state


def _blocking(make: Callable[[], Awaitable[_T]]) -> _T:
    """``make()`` run to its end on an event loop of its own: this thread's, or, called
    from a running loop (a program building its app in ``async def``), another thread's."""

    async def main() -> _T:
        return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def _console(config: ServerConfig, service: ContextService, callers: Callers) -> BaseRoute | None:
    """The console's routes (``console``), reading the manifest's own audit log (its file or
    its PostgreSQL table; none with ``stdout``); None without ``console``."""
    if not config.console:
        return None
    audit = service.manifest.runtime.audit
    source = None
    if audit is not None and audit.path is not None:
        source = TurnSource(audit.path)
    elif audit is not None and audit.postgres is not None:
        source = TurnSource(audit.postgres.dsn, audit.postgres.db_schema)
    console = Console(
        source,
        principals=callers.guard(),
        manifest=service.manifest,
        env=config.env,
        preview=config.console_preview,
        follow=(lambda: service.manifest) if service.reloader is not None else None,
        hold=service.held_manifest if service.reloader is not None else None,
    )
    return console_mount(console)
