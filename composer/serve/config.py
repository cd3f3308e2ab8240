"""``ServerConfig``: every option of ``composer serve``, for the command line and a library
alike (``composer.serve.run``, ``composer.serve.create_app``).

The command line fills one from its arguments; a program makes one itself. Either way the
rules between options (``--console-preview`` needs ``--console``, ``--workers`` above 1 needs
``--state``, ...) and the bounds of each value are checked here, once, when the config is
made: a mistake is a ``ServeError`` naming the option as the command line spells it, so both
front-ends say the same thing. What needs the world outside (the token's variable or file, the
principals file, the state store) is read when the server is built (``composer.serve.app``).

Importing this module imports no web framework.
"""

from __future__ import annotations

import importlib.util
import math
import os
from dataclasses import dataclass, fields
from pathlib import Path

from composer.errors import ServeError
from composer.serve.logs import LOG_FORMATS
from composer.serve.workers import MAX_WORKERS

__all__ = [
    "EXTRA_HINT",
    "MAX_DRAIN_DELAY_S",
    "METRICS_HINT",
    "TOKEN_VARIABLE",
    "ServerConfig",
    "install_hint",
    "missing_modules",
]

TOKEN_VARIABLE = "COMPOSER_SERVE_TOKEN"
"""Where the single bearer token is looked up by default (``--token-var``)."""

EXTRA_HINT = "pip install 'context-composer[serve]'"
"""What installs everything a server imports."""

METRICS_HINT = "pip install 'context-composer[metrics]'"

MAX_DRAIN_DELAY_S = 60.0
"""The longest ``--drain-delay``: past this a stop is a hang, whatever a load balancer lags."""
"""What ``--metrics`` needs besides: prometheus_client."""

_OPTIONAL = frozenset(
    {
        "token_file",
        "principals",
        "principal",
        "max_connections",
        "forwarded_allow_ips",
        "state",
        "env",
        "metrics_port",
    }
)
"""The fields that may be None."""


def _option(field: str) -> str:
    """The command line's spelling of a field: ``max_body_bytes`` is ``--max-body-bytes``."""
    return "--" + field.replace("_", "-")


@dataclass(frozen=True)
class ServerConfig:
    """How ``composer serve`` runs. Each field is the option of the same name
    (``max_body_bytes`` is ``--max-body-bytes``) with the same default; ``composer serve
    --help`` and the serving guide say what each does."""

    host: str = "127.0.0.1"
    """The address to listen on; without a token, only a loopback one is taken."""
    port: int = 8080
    """0: any free port."""
    mcp_stdio: bool = False
    """Serve MCP on stdin and stdout instead of HTTP (``run`` only)."""
    token_var: str = TOKEN_VARIABLE
    """The variable holding the single bearer token, looked up like ``${NAME}``."""
    token_file: Path | None = None
    """Read the single bearer token from this file instead."""
    principals: Path | None = None
    """A principals file: one token per caller, each with its bound metadata."""
    principal: str | None = None
    """With ``mcp_stdio`` and ``principals``: the principal the one client is."""
    max_body_bytes: int = 1 << 20
    rate_limit: float = 100.0
    """Requests a second per client, per principal (ten times that in all); 0: off."""
    max_branches: int = 1000
    branch_ttl: float = 3600.0
    """Seconds without a turn after which a branch is dropped."""
    request_timeout: float = 10.0
    """Seconds a connection has to send a whole request (``run`` only)."""
    max_connections: int | None = None
    """Open connections in all (``run`` only; default: the descriptor limit less 512)."""
    max_connections_per_client: int = 1024
    """Open connections from one address (``run`` only)."""
    forwarded_allow_ips: str | None = None
    """The reverse proxies whose ``X-Forwarded-For`` names the client (``run`` only)."""
    state: str | None = None
    """``postgresql://...`` or ``redis://...`` (or ``${NAME}``, read from that variable):
    branch state and rate limits shared by every replica; None: in the process."""
    state_schema: str = "composer_state"
    workers: int = 1
    """Processes serving one socket (``run`` only); above 1 needs ``state``."""
    access_log: bool = False
    """Log every request (logger ``composer.serve.access``) with its principal."""
    log_format: str = "text"
    """``text``: lines for people; ``json``: ``run`` writes the server's log as one JSON
    object a line on standard error (``composer.serve.logs``)."""
    console: bool = False
    """Serve the read-only web console at ``/console`` as well."""
    console_preview: bool = False
    """With ``console``: its form that runs one real turn."""
    env: str | None = None
    """The environment the manifest was loaded for, as ``/v1/manifest`` and the console
    show it."""
    metrics: bool = False
    """Serve Prometheus metrics at ``/metrics``, behind the API's authentication, counting
    every manifest's turns whatever its ``runtime.metrics`` (the metrics extra)."""
    metrics_port: int | None = None
    """With ``metrics``: also serve ``/metrics`` alone, without authentication, on this port
    of ``host``, for a scraper that cannot send a token (``run`` only; 0: any free port)."""
    watch: bool = False
    """Follow the manifest's files: an edit serves from each branch's next turn once it has
    settled, a broken one keeps the last good manifest (``/readyz`` and ``/metrics`` say so);
    ``run`` reloads on SIGHUP with or without it (``composer.serve.reloading``)."""
    drain_delay: float = 0.0
    """Seconds between SIGTERM and the graceful stop (``run`` only): ``/readyz`` answers
    ``503 stopping`` and new connections are still served meanwhile, while a load balancer
    takes the replica out."""

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name in _PATHS and isinstance(value, str | os.PathLike):
                value = Path(value)
                object.__setattr__(self, field.name, value)
            wrong = _wrong_kind(field.name, value)
            if wrong is not None:
                raise ServeError(f"{_option(field.name)} {wrong}")
        refused = _refusal(self)
        if refused is not None:
            raise ServeError(refused)


def _wrong_kind(name: str, value: object) -> str | None:
    """What is wrong with ``value`` as field ``name``'s kind of value, or None."""
    kind = _KINDS[name]  # a new field without a kind fails every config made
    if value is None:
        return None if name in _OPTIONAL else "must be given"
    if kind == "flag":
        return None if isinstance(value, bool) else "is a flag: True or False"
    if kind == "text":
        return None if isinstance(value, str) else "must be text"
    if kind == "path":
        return None if isinstance(value, Path) else "must be a path"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "must be a number"  # bool is an int to Python, never a count or a port
    if kind == "whole":
        return None if isinstance(value, int) else "must be a whole number"
    return "must be a number" if math.isnan(value) else None


def _refusal(config: ServerConfig) -> str | None:
    """Why ``config`` cannot be served as it is, or None: the bounds, then the rules
    between options."""
    if not 0 <= config.port <= 65535:
        return "--port must be between 0 and 65535"
    if not config.host.strip():
        return "--host must name an address"
    positive = (config.max_branches, config.max_body_bytes, config.max_connections_per_client)
    if (
        min(positive) < 1
        or config.rate_limit < 0
        or config.request_timeout <= 0
        or (config.max_connections is not None and config.max_connections < 1)
    ):
        return (
            "--max-branches, --max-body-bytes, --request-timeout and the connection limits "
            "must be positive, --rate-limit at least 0"
        )
    if config.branch_ttl <= 0:
        return "--branch-ttl must be positive"
    if config.log_format not in LOG_FORMATS:
        return f"--log-format must be one of {', '.join(LOG_FORMATS)}"
    if config.principals is not None and config.token_file is not None:
        return "give --principals or --token-file, not both"
    if config.console_preview and not config.console:
        return "--console-preview goes with --console"
    if config.principal is not None and not (config.mcp_stdio and config.principals is not None):
        return "--principal goes with --mcp-stdio and --principals"
    if not 0 <= config.drain_delay <= MAX_DRAIN_DELAY_S:
        return f"--drain-delay must be between 0 and {MAX_DRAIN_DELAY_S:g} seconds"
    if config.watch and config.mcp_stdio:
        return "--watch goes with HTTP, not --mcp-stdio"
    return _metrics_refused(config) or _workers_refused(config)


def _metrics_refused(config: ServerConfig) -> str | None:
    """Why ``metrics`` and ``metrics_port`` cannot be as asked, or None."""
    port = config.metrics_port
    if port is not None:
        if not 0 <= port <= 65535:
            return "--metrics-port must be between 0 and 65535"
        if not config.metrics:
            return "--metrics-port goes with --metrics"
        if port == config.port != 0:
            return "--metrics-port must differ from --port"
    if config.metrics and config.mcp_stdio:
        return "--metrics goes with HTTP, not --mcp-stdio"
    return None


def _workers_refused(config: ServerConfig) -> str | None:
    """Why ``workers`` cannot be as asked, or None."""
    if not 1 <= config.workers <= MAX_WORKERS:
        return f"--workers must be between 1 and {MAX_WORKERS}"
    if config.workers == 1:
        return None
    if config.state is None:
        return (
            "--workers above 1 needs --state postgresql://... or redis://...: each worker is a "
            "process of its own, and a branch's turns must be counted in one place"
        )
    if config.mcp_stdio:
        return "--workers goes with HTTP, not --mcp-stdio"
    if not hasattr(os, "fork"):
        return "--workers needs fork(), which this platform lacks; run several servers"
    return None


_PATHS = ("token_file", "principals")
_KINDS = {
    "host": "text",
    "port": "whole",
    "mcp_stdio": "flag",
    "token_var": "text",
    "token_file": "path",
    "principals": "path",
    "principal": "text",
    "max_body_bytes": "whole",
    "rate_limit": "number",
    "max_branches": "whole",
    "branch_ttl": "number",
    "request_timeout": "number",
    "max_connections": "whole",
    "max_connections_per_client": "whole",
    "forwarded_allow_ips": "text",
    "state": "text",
    "state_schema": "text",
    "workers": "whole",
    "access_log": "flag",
    "log_format": "text",
    "console": "flag",
    "console_preview": "flag",
    "env": "text",
    "metrics": "flag",
    "metrics_port": "whole",
    "watch": "flag",
    "drain_delay": "number",
}
"""Each field's kind of value, checked before any rule (a field missing here fails every
config made, so a new option cannot go unchecked)."""


def missing_modules(config: ServerConfig) -> list[str]:
    """The modules that serving ``config`` needs and this environment lacks: the serve
    extra's (the console's signed sessions need ``itsdangerous`` besides), and with
    ``metrics`` the metrics extra's ``prometheus_client`` (``install_hint`` names both)."""
    needed = ["mcp", "starlette", "uvicorn", "limits"]
    if config.console:
        needed.append("itsdangerous")
    if config.metrics:
        needed.append("prometheus_client")
    return [name for name in needed if importlib.util.find_spec(name) is None]


def install_hint(missing: list[str]) -> str:
    """What installs the ``missing`` modules: the serve extra, the metrics extra, or both."""
    extras = ["serve"] if set(missing) - {"prometheus_client"} else []
    if "prometheus_client" in missing:
        extras.append("metrics")
    return f"pip install 'context-composer[{','.join(extras or ['serve'])}]'"
