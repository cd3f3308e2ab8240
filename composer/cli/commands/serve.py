"""``composer serve``: the manifest's context over HTTP and MCP (the ``serve`` extra).

Starlette, uvicorn and the MCP SDK are imported when the command runs, not when its options
are declared.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from composer.cli.exit_codes import FAILURE, SUCCESS, USAGE
from composer.cli.options import add_manifest_arguments, manifest_from
from composer.inspect.words import counted

if TYPE_CHECKING:
    from composer.cli.output import Output

__all__ = ["DESCRIPTION", "add_arguments", "run"]

_EXTRA_HINT = "pip install 'context-composer[serve]'"

DESCRIPTION = (
    "Load MANIFEST once and serve turns for any number of branches: an HTTP API "
    "(POST /v1/turns, POST /v1/branches/ID/writeback, GET /v1/manifest, /healthz, "
    "/readyz, /openapi.json) with MCP over streamable HTTP at /mcp; or, with "
    "--mcp-stdio, an MCP server on stdin/stdout for a client that starts it. Callers "
    "authenticate with a bearer token: one (--token-file, or the variable named by "
    "--token-var) or one per principal (--principals FILE, each principal's branch "
    "metadata bound); without a token it listens only on a loopback address. A shared "
    "memory store whose namespace reads anything a client states is refused unless "
    "--principals binds it. Replicas behind a load balancer, or --workers N processes, "
    "share each branch's turn count and last context, and the rate limits, through --state "
    "(PostgreSQL or Redis). Needs the serve extra: " + _EXTRA_HINT
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)
    parser.add_argument(
        "--mcp-stdio",
        action="store_true",
        help="serve MCP on stdin/stdout instead of HTTP (what an MCP client starts)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8080, help="port; 0: any free port")
    parser.add_argument(
        "--token-var",
        default="COMPOSER_SERVE_TOKEN",
        metavar="NAME",
        help="variable holding the bearer token, looked up like ${NAME}",
    )
    parser.add_argument("--token-file", type=Path, help="read the bearer token from this file")
    parser.add_argument(
        "--principals",
        type=Path,
        metavar="FILE",
        help="a YAML file of principals (name, token or token_file, bound metadata): each "
        "token is one caller, whose branches and bound metadata are its own",
    )
    parser.add_argument(
        "--principal",
        metavar="NAME",
        help="with --mcp-stdio and --principals: the principal the one client is (needed when "
        "the file names several)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=1 << 20,
        help="largest request body in bytes (default: 1 MiB)",
    )
    parser.add_argument(
        "--rate-limit",
        type=float,
        default=100.0,
        metavar="PER_SECOND",
        help="requests a second per client address (all of loopback, or an IPv6 /64, is "
        "one) and per principal, and ten times that from all clients together: each admits "
        "twice that (rounded) a 2-second sliding window (below 0.5: one a 1/PER_SECOND-second "
        "window, rounded up); counted in --state when given, so every worker and replica "
        "sharing it shares one limit, else in the process; 0: off",
    )
    parser.add_argument(
        "--max-branches", type=int, default=1000, help="branches kept, least recently used go"
    )
    parser.add_argument(
        "--branch-ttl",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="drop a branch after this many seconds without a turn",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="close a connection that has not sent a whole request within this many seconds",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="open connections in all (default: the descriptor limit less 512)",
    )
    parser.add_argument(
        "--max-connections-per-client",
        type=int,
        default=1024,
        metavar="N",
        help="open connections from one address, an IPv6 /64 counting as one",
    )
    parser.add_argument(
        "--forwarded-allow-ips",
        metavar="ADDRESSES",
        help="behind a reverse proxy: its addresses (comma-separated, or *), whose "
        "X-Forwarded-For then names the client for rate limits and the access log",
    )
    parser.add_argument(
        "--state",
        metavar="URL",
        help="keep each branch's turn count and last context in PostgreSQL (postgresql://...) "
        "or Redis (redis://...), shared by every replica, instead of in the process; "
        "'${NAME}' reads the URL from that variable (keeps a password off the command line)",
    )
    parser.add_argument(
        "--state-schema",
        default="composer_state",
        metavar="NAME",
        help="with --state: the PostgreSQL schema, or the Redis key prefix",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="serve with N processes on one socket; above 1 needs --state",
    )
    parser.add_argument(
        "--access-log",
        action="store_true",
        help="log every request: address, method, path, status, principal, time",
    )
    parser.add_argument(
        "--console",
        action="store_true",
        help="also serve a read-only web console at /console: the audit log's turns (each "
        "principal its own), the providers' counts, the manifest (off by default)",
    )
    parser.add_argument(
        "--console-preview",
        action="store_true",
        help="with --console: a form that runs one real turn of an instruction",
    )


def run(args: argparse.Namespace, output: Output) -> int:
    from composer.cli.logs import log_records_to
    from composer.errors import ComposerError

    needed = ("mcp", "starlette", "uvicorn", "limits", *(["itsdangerous"] if args.console else []))
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        output.error(f"composer serve: {', '.join(missing)} not installed: {_EXTRA_HINT}")
        return FAILURE
    positive = (args.max_branches, args.max_body_bytes, args.max_connections_per_client)
    if (
        min(positive) < 1
        or args.rate_limit < 0
        or args.request_timeout <= 0
        or (args.max_connections is not None and args.max_connections < 1)
    ):
        output.error(
            "composer serve: --max-branches, --max-body-bytes, --request-timeout and the "
            "connection limits must be positive, --rate-limit at least 0"
        )
        return USAGE
    if args.principals is not None and args.token_file is not None:
        output.error("composer serve: give --principals or --token-file, not both")
        return USAGE
    if args.console_preview and not args.console:
        output.error("composer serve: --console-preview goes with --console")
        return USAGE
    if args.principal is not None and not (args.mcp_stdio and args.principals is not None):
        output.error("composer serve: --principal goes with --mcp-stdio and --principals")
        return USAGE
    refused = _workers_refused(args)
    if refused is not None:
        output.error(f"composer serve: {refused}")
        return USAGE
    manifest = manifest_from(args, output)
    if manifest is None:
        return FAILURE
    from composer.serve.service import ContextService

    try:
        principals, token = _principals(args)
        service = ContextService(
            manifest,
            env=args.env,
            max_branches=args.max_branches,
            idle_ttl_s=args.branch_ttl,
            principals=_callers(args, principals, token),
            state=_state(args),
        )
        with log_records_to(output, manifest.redact, live=True):
            if args.mcp_stdio:
                import asyncio

                from composer.serve.mcp_server import run_stdio

                one = principals.named(args.principal) if principals is not None else None
                asyncio.run(run_stdio(service, one))
            else:
                _serve_http(args, output, service, principals, token)
    except KeyboardInterrupt:
        return SUCCESS
    except ComposerError as e:
        output.error(manifest.redact(f"composer serve: {e}"))
        return FAILURE
    return SUCCESS


def _workers_refused(args: argparse.Namespace) -> str | None:
    """Why ``--workers`` cannot be as asked, or None."""
    from composer.serve.workers import MAX_WORKERS

    if not 1 <= args.workers <= MAX_WORKERS:
        return f"--workers must be between 1 and {MAX_WORKERS}"
    if args.workers == 1:
        return None
    if args.state is None:
        return (
            "--workers above 1 needs --state postgresql://... or redis://...: each worker is a "
            "process of its own, and a branch's turns must be counted in one place"
        )
    if args.mcp_stdio:
        return "--workers goes with HTTP, not --mcp-stdio"
    if not hasattr(os, "fork"):
        return "--workers needs fork(), which this platform lacks; run several servers"
    return None


def _state(args: argparse.Namespace) -> Any:
    """The state store ``--state`` names (checked once now: a wrong URL fails the start), or
    the process's own."""
    import asyncio

    from composer.errors import ServeError
    from composer.serve.state import open_state

    url = args.state
    if url is None:
        return open_state(None, max_records=max(100_000, 10 * args.max_branches))
    named = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", url)
    if named is not None:
        from composer.manifest.settings import load_settings

        url = load_settings().variables().get(named[1])
        if not url:
            raise ServeError(f"--state {args.state}: the variable is not set")
    state = open_state(
        url,
        schema=args.state_schema,
        max_records=max(100_000, 10 * args.max_branches),
        ttl_s=max(3600.0, 10 * args.branch_ttl),
    )

    async def probe() -> None:
        try:
            await state.check()
        finally:
            await state.aclose()

    try:
        asyncio.run(probe())
    except ServeError:
        raise
    except Exception as e:
        raise ServeError(
            f"--state {state.describe()}: the store did not answer ({type(e).__name__})"
        ) from None
    return state


def _principals(args: argparse.Namespace) -> tuple[Any, str | None]:
    """The principals file's ``Principals`` (or None) and the single token (or None)."""
    from composer.serve.auth import load_token
    from composer.serve.principals import load_principals

    if args.principals is not None:
        return load_principals(args.principals), None
    if args.mcp_stdio:
        return None, None
    return None, load_token(variable=args.token_var, file=args.token_file)


def _callers(args: argparse.Namespace, principals: Any, token: str | None) -> Any:
    """Every principal the server will accept: its isolation is checked against them."""
    from composer.serve.principals import DEFAULT_PRINCIPAL, LOCAL_PRINCIPAL

    if principals is not None:
        if args.mcp_stdio:
            return (principals.named(args.principal),)
        return principals.principals
    return (DEFAULT_PRINCIPAL,) if token is not None else (LOCAL_PRINCIPAL,)


def _serve_http(
    args: argparse.Namespace, output: Output, service: Any, principals: Any, token: str | None
) -> None:
    from composer.serve.auth import check_bind
    from composer.serve.connections import ConnectionLimits, default_total, raise_descriptor_limit
    from composer.serve.http import ServeOptions, create_app
    from composer.serve.runner import bind, serve

    check_bind(args.host, token if principals is None else "principals")
    options = ServeOptions(
        token=token,
        principals=principals,
        max_body_bytes=args.max_body_bytes,
        rate=args.rate_limit,
        burst=max(1, int(args.rate_limit * 2)),
        host=args.host,
        access_log=args.access_log,
        console=_console(args, service, principals, token),
    )
    soft = raise_descriptor_limit()
    limits = ConnectionLimits(
        request_s=args.request_timeout,
        per_client=args.max_connections_per_client,
        total=args.max_connections or default_total(soft),
    )
    sock = bind(args.host, args.port)
    if args.access_log:
        from composer.cli.logs import log_access_to

        log_access_to(output, service.manifest.redact)

    def started(url: str) -> None:
        if principals is not None:
            guard = f"{counted(len(principals.principals), 'principal')}, bearer token required"
        else:
            guard = "bearer token required" if token else "no token: loopback only"
        workers = f", {args.workers} workers" if args.workers > 1 else ""
        state = f", state {service.state.describe()}" if service.state.shared else ""
        console = f"; console at {url}/console" if args.console else ""
        output.print(
            f"composer serve: listening on {url} ({guard}{workers}{state}); "
            f"MCP at {url}/mcp{console}"
        )
        output.out.flush()

    def work(started: Any = None) -> None:
        app = create_app(service, options)  # in each worker: its own app and session manager
        forwarded = args.forwarded_allow_ips
        serve(app, sock, limits=limits, forwarded_allow_ips=forwarded, started=started)

    if args.workers == 1:
        work(started)
        return
    from composer.errors import ServeError
    from composer.serve.workers import run_workers

    host, port = sock.getsockname()[:2]
    started(f"http://{f'[{host}]' if ':' in host else host}:{port}")
    if run_workers(args.workers, work) != 0:
        raise ServeError("a worker stopped by itself; the others were stopped")


def _console(args: argparse.Namespace, service: Any, principals: Any, token: str | None) -> Any:
    """The console's routes (``--console``), reading the manifest's own audit log (its file
    or its PostgreSQL table; none with ``stdout``); None without ``--console``."""
    if not args.console:
        return None
    from composer.console import Console, TurnSource, console_mount
    from composer.serve.principals import Principals

    if principals is None and token is not None:
        principals = Principals.single(token)
    audit = service.manifest.runtime.audit
    source = None
    if audit is not None and audit.path is not None:
        source = TurnSource(audit.path)
    elif audit is not None and audit.postgres is not None:
        source = TurnSource(audit.postgres.dsn, audit.postgres.db_schema)
    return console_mount(
        Console(
            source,
            principals=principals,
            manifest=service.manifest,
            env=args.env,
            preview=args.console_preview,
        )
    )
