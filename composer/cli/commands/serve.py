"""``composer serve``: the manifest's context over HTTP and MCP (the ``serve`` extra).

Starlette, uvicorn and the MCP SDK are imported when the command runs, not when its options
are declared.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS, USAGE
from composer.cli.options import add_manifest_arguments, manifest_from
from composer.errors import ServeError
from composer.serve.config import (
    EXTRA_HINT,
    MAX_DRAIN_DELAY_S,
    ServerConfig,
    install_hint,
    missing_modules,
)
from composer.serve.logs import LOG_FORMATS

if TYPE_CHECKING:
    from composer.cli.output import Output
    from composer.serve.runner import Listening

__all__ = ["DESCRIPTION", "add_arguments", "run"]

_DEFAULT = ServerConfig()
_FIELDS = tuple(field.name for field in fields(ServerConfig))
"""Each option's destination is the config's field of the same name."""

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
    "(PostgreSQL or Redis). Needs the serve extra: " + EXTRA_HINT
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)
    parser.add_argument(
        "--mcp-stdio",
        action="store_true",
        help="serve MCP on stdin/stdout instead of HTTP (what an MCP client starts)",
    )
    parser.add_argument("--host", default=_DEFAULT.host, help="address to listen on")
    parser.add_argument("--port", type=int, default=_DEFAULT.port, help="port; 0: any free port")
    parser.add_argument(
        "--token-var",
        default=_DEFAULT.token_var,
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
        default=_DEFAULT.max_body_bytes,
        help="largest request body in bytes (default: 1 MiB)",
    )
    parser.add_argument(
        "--rate-limit",
        type=float,
        default=_DEFAULT.rate_limit,
        metavar="PER_SECOND",
        help="requests a second per client address (all of loopback, or an IPv6 /64, is "
        "one) and per principal, and ten times that from all clients together: each admits "
        "twice that (rounded) a 2-second sliding window (below 0.5: one a 1/PER_SECOND-second "
        "window, rounded up); counted in --state when given, so every worker and replica "
        "sharing it shares one limit, else in the process; 0: off",
    )
    parser.add_argument(
        "--max-branches",
        type=int,
        default=_DEFAULT.max_branches,
        help="branches kept, least recently used go",
    )
    parser.add_argument(
        "--branch-ttl",
        type=float,
        default=_DEFAULT.branch_ttl,
        metavar="SECONDS",
        help="drop a branch after this many seconds without a turn",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=_DEFAULT.request_timeout,
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
        default=_DEFAULT.max_connections_per_client,
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
        default=_DEFAULT.state_schema,
        metavar="NAME",
        help="with --state: the PostgreSQL schema, or the Redis key prefix",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=_DEFAULT.workers,
        metavar="N",
        help="serve with N processes on one socket; above 1 needs --state",
    )
    parser.add_argument(
        "--access-log",
        action="store_true",
        help="log every request: address, method, path, status, principal, time",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=_DEFAULT.log_format,
        help="json: the server's log and the access log as one JSON object a line on stderr "
        "(time, level, logger, message, and the request's client, method, path, route, "
        "status, principal, duration_ms, turn_id, trace_id), for a log shipper",
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
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="serve Prometheus metrics at /metrics behind the same token as the API: turns, "
        "providers, budget, audit lines, reloads (whatever the manifest's runtime.metrics) and "
        "HTTP requests by route; one true scrape across --workers (needs the metrics extra)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="with --metrics: also serve /metrics alone on this port of --host, WITHOUT a "
        "token, for a scraper that cannot send one (reach it only from inside the cluster)",
    )
    parser.add_argument(
        "--watch",
        action="store_true",
        help="follow MANIFEST's files (a ConfigMap's swapped folder too): an edit serves from "
        "each branch's next turn once it has settled; a broken edit keeps the last good "
        "manifest, said by /readyz, /metrics and the log with its file, line and column; each "
        "worker follows alike. SIGHUP reloads with or without it",
    )
    parser.add_argument(
        "--drain-delay",
        type=float,
        default=_DEFAULT.drain_delay,
        metavar="SECONDS",
        help="on SIGTERM, answer /readyz 503 and keep serving new connections this long "
        f"(at most {MAX_DRAIN_DELAY_S:g}) before the graceful stop, while a load balancer "
        "takes the server out (default: 0)",
    )


def run(args: argparse.Namespace, output: Output) -> int:
    from composer.cli.logs import log_access_to, log_records_to
    from composer.errors import ComposerError
    from composer.serve import run as serve
    from composer.serve.logs import event_line
    from composer.serve.reloading import log_masking

    json_lines = args.log_format == "json"

    def failed(message: str) -> None:
        if json_lines:  # the server's own records are JSON lines: so is why it stopped
            print(event_line(message, level="error"), file=output.err)
        else:
            output.error(f"composer serve: {message}")

    try:
        config = ServerConfig(**{name: getattr(args, name) for name in _FIELDS})
    except ServeError as e:
        failed(str(e))
        return USAGE
    missing = missing_modules(config)
    if missing:
        failed(f"{', '.join(missing)} not installed: {install_hint(missing)}")
        return FAILURE
    manifest = manifest_from(args, output)
    if manifest is None:
        return FAILURE
    redact = log_masking(manifest)  # the OTLP exporter's headers, a reload's secrets too

    def started(listening: Listening) -> None:
        if json_lines:
            print(event_line(str(listening), url=listening.url), file=output.out)
        else:
            output.print(f"composer serve: {listening}")
        output.out.flush()

    try:
        # JSON lines are written by the server itself (composer.serve.logs), for a program too
        with nullcontext() if json_lines else log_records_to(output, redact, live=True):
            if config.access_log and not config.mcp_stdio and not json_lines:
                log_access_to(output, redact)
            serve(manifest, config, started=started)
    except KeyboardInterrupt:
        return SUCCESS
    except ComposerError as e:
        failed(redact(str(e)))
        return FAILURE
    return SUCCESS
