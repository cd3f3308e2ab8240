"""Who may call the server: bearer tokens, each one a principal, and where a server may
listen without one.

A single token comes from a variable (looked up like a manifest's ``${VAR}``: the environment,
``.env``, then the secrets directory) or a file; several come from a principals file
(``composer.serve.principals``). Without a token the server listens only on a loopback
address: anything else would hand the manifest's context to the network. The middleware
puts the request's principal in its ASGI scope (``principal_of``), where the routes and the
MCP server read it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection
from pathlib import Path

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from composer.errors import ServeError, SettingsError
from composer.manifest.settings import load_settings, read_settings_file
from composer.principal import Principal
from composer.serve.config import TOKEN_VARIABLE
from composer.serve.paths import route_path
from composer.serve.principals import LOCAL_PRINCIPAL, Principals
from composer.serve.responses import error_response

__all__ = [
    "PRINCIPAL_KEY",
    "TOKEN_VARIABLE",
    "BearerAuth",
    "check_bind",
    "is_loopback",
    "load_token",
    "principal_of",
]

PRINCIPAL_KEY = "composer.principal"
"""The ASGI scope key holding the request's ``Principal``."""


def principal_of(scope: Scope) -> Principal:
    """The principal the request authenticated as (``local`` on a token-less server)."""
    principal = scope.get(PRINCIPAL_KEY)
    return principal if isinstance(principal, Principal) else LOCAL_PRINCIPAL


def load_token(*, variable: str = TOKEN_VARIABLE, file: Path | None = None) -> str | None:
    """The bearer token from ``file`` when given, else the variable; None when neither has one.

    An empty token is refused (a server "protected" by the empty string is not).
    """
    try:
        if file is not None:
            text = read_settings_file(file, "token file")
            if text is None:
                raise ServeError(f"token file {str(file)!r} does not exist")
        else:
            text = load_settings().variables().get(variable)
            if text is None:
                return None
    except SettingsError as e:
        raise ServeError(str(e)) from e
    except OSError as e:
        raise ServeError(f"token file {str(file)!r}: {e.strerror or e}") from e
    token = text.strip()
    if not token:
        where = f"token file {str(file)!r}" if file is not None else f"${variable}"
        raise ServeError(f"{where} is empty")
    return token


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen on a non-loopback ``host`` without a token."""
    if token is None and not is_loopback(host):
        raise ServeError(
            f"refusing to listen on {host} without a token: set ${TOKEN_VARIABLE} (or "
            "--token-file), or listen on 127.0.0.1"
        )


class BearerAuth:
    """ASGI middleware: every HTTP request outside ``open_paths`` needs a principal's bearer
    token; the principal goes into the request's scope (``principal_of``)."""

    def __init__(
        self,
        app: ASGIApp,
        principals: Principals,
        *,
        open_paths: Collection[str],
        own_auth: str | None = None,
    ) -> None:
        self.app = app
        self._principals = principals
        self._open = frozenset(open_paths)
        self._own = own_auth  # a path prefix whose routes check their caller themselves

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = route_path(scope) if scope["type"] == "http" else ""
        if scope["type"] != "http" or path in self._open or self._owns(path):
            await self.app(scope, receive, send)
            return
        principal = self._principal(scope)
        if principal is not None:
            scope[PRINCIPAL_KEY] = principal
            await self.app(scope, receive, send)
            return
        refusal = error_response(
            401,
            "unauthorized",
            "a valid bearer token is required (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": 'Bearer realm="composer"'},
        )
        await refusal(scope, receive, send)

    def _owns(self, path: str) -> bool:
        own = self._own
        return own is not None and (path == own or path.startswith(own + "/"))

    def _principal(self, scope: Scope) -> Principal | None:
        header = Headers(scope=scope).get("authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        given = value.strip().encode("latin-1")  # header bytes as sent
        return self._principals.authenticate(given)
