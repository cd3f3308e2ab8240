"""Principals: who may call a shared server, and the branch metadata each one is bound to.

A principals file names every caller::

    principals:
      - name: team-a
        token: "${TEAM_A_TOKEN}"      # looked up like a manifest's ${VAR}
        metadata: {team: a}           # bound: merged over every branch team-a uses
      - name: ops
        token_file: /run/secrets/ops-token   # relative to this file

Each request authenticates to one principal by its bearer token (compared in constant time
with every token, so the time taken says nothing of which one nearly matched). A bound key
overrides what a client says about itself; a client that states another value for it is
refused. A single ``--token-file`` or ``$COMPOSER_SERVE_TOKEN`` is the one-principal form
(``default``), and a token-less loopback server has the one principal ``local``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import Field, ValidationError, model_validator

from composer.errors import ManifestError, RequestRefused, ServeError, SettingsError
from composer.manifest import StrictModel
from composer.manifest.settings import load_settings, read_settings_file
from composer.manifest.validation_errors import locate, translate
from composer.manifest.yamlnodes import Node, plain, read_yaml
from composer.principal import Principal

__all__ = [
    "DEFAULT_PRINCIPAL",
    "LOCAL_PRINCIPAL",
    "NAME_PATTERN",
    "PrincipalEntry",
    "Principals",
    "PrincipalsFile",
    "Scalar",
    "bind",
    "load_principals",
]

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"
"""Principal names appear in audit lines, spans and branch keys: no separators, no spaces."""

LOCAL_PRINCIPAL = Principal("local")
"""The one principal of a token-less server on a loopback address."""

DEFAULT_PRINCIPAL = Principal("default")
"""The one principal of a server with a single token."""

_VARIABLE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")

Scalar = str | int | float | bool


class PrincipalEntry(StrictModel):
    """One caller: a name, one credential, the metadata bound to it."""

    name: str = Field(pattern=NAME_PATTERN, description="Shown in audit lines, spans and logs.")
    token: str | None = Field(
        default=None,
        min_length=1,
        description="The bearer token, as `${VAR}` (environment, .env, secrets directory).",
    )
    token_file: str | None = Field(
        default=None, min_length=1, description="A file holding the token, relative to this file."
    )
    metadata: dict[str, Scalar] = Field(
        default_factory=dict,
        description="Branch metadata bound to this principal: merged over every branch it "
        "uses; a request stating another value for one of these keys is refused (403).",
    )

    @model_validator(mode="after")
    def _one_credential(self) -> PrincipalEntry:
        if (self.token is None) == (self.token_file is None):
            raise ValueError("give exactly one of token and token_file")
        if self.token is not None and not _VARIABLE.fullmatch(self.token):
            raise ValueError("token must be a ${VAR} reference (a token is never written here)")
        return self


class PrincipalsFile(StrictModel):
    """A principals file: every caller of one server."""

    principals: list[PrincipalEntry] = Field(min_length=1)


@dataclass(frozen=True)
class Principals:
    """The callers of one server, by token; ``principals`` in the file's order."""

    principals: tuple[Principal, ...]
    _tokens: tuple[bytes, ...]

    @classmethod
    def single(cls, token: str) -> Principals:
        """The one-principal form: ``--token-file`` or ``$COMPOSER_SERVE_TOKEN``."""
        return cls((DEFAULT_PRINCIPAL,), (token.encode("utf-8"),))

    def authenticate(self, given: bytes) -> Principal | None:
        """The principal whose token is ``given``; every token is compared, in constant time."""
        found: Principal | None = None
        for principal, token in zip(self.principals, self._tokens, strict=True):
            if hmac.compare_digest(given, token):
                found = principal
        return found

    def derived_key(self, name: str, context: bytes) -> tuple[Principal, bytes] | None:
        """The principal called ``name`` and ``SHA-256(context + its token)``, or None when no
        principal has that name: a key that changes with the token and gives it no way back
        (the console signs its session cookies with it)."""
        for principal, token in zip(self.principals, self._tokens, strict=True):
            if principal.name == name:
                return principal, hashlib.sha256(context + token).digest()
        return None

    def named(self, name: str | None) -> Principal:
        """The principal called ``name`` (None: the only one), for a server with one caller
        (``--mcp-stdio``); ``ServeError`` when there is no such one."""
        if name is None:
            if len(self.principals) != 1:
                names = ", ".join(p.name for p in self.principals)
                raise ServeError(f"the principals file names several; choose one of {names}")
            return self.principals[0]
        for principal in self.principals:
            if principal.name == name:
                return principal
        names = ", ".join(p.name for p in self.principals)
        raise ServeError(f"no principal {name!r} in the principals file; there are {names}")

    def __repr__(self) -> str:
        return f"Principals({[p.name for p in self.principals]!r})"  # never a token


def load_principals(path: str | Path, *, environ: Mapping[str, str] | None = None) -> Principals:
    """The principals file at ``path``; every mistake in it is a located ``ManifestError``."""
    display = str(path)
    file = Path(path).absolute()
    tree, errors = read_yaml(display, file)
    if errors:
        raise ManifestError.collect(errors)
    try:
        model = PrincipalsFile.model_validate(plain(tree))
    except ValidationError as e:
        raise ManifestError.collect(
            translate(e, tree, PrincipalsFile, "", unresolved=(), variables_of={})
        ) from None
    try:
        variables = load_settings(environ).variables()
    except SettingsError as e:
        raise ManifestError(display, 1, 1, str(e)) from e
    problems: list[ManifestError] = []
    principals: list[Principal] = []
    tokens: list[bytes] = []
    seen_names: dict[str, int] = {}
    for index, entry in enumerate(model.principals):
        at = _at(tree, index)
        if entry.name in seen_names:
            problems.append(
                at("name").error(
                    f"principal {entry.name!r} is named twice (first: entry "
                    f"{seen_names[entry.name] + 1})"
                )
            )
            continue
        seen_names[entry.name] = index
        token = _token(entry, file.parent, variables.get)
        if isinstance(token, str):
            problems.append(at("token" if entry.token is not None else "token_file").error(token))
            continue
        if token in tokens:
            other = model.principals[tokens.index(token)].name
            message = f"principal {entry.name!r} has the same token as {other!r}"
            problems.append(at("token" if entry.token is not None else "token_file").error(message))
            continue
        principals.append(Principal(entry.name, MappingProxyType(dict(entry.metadata))))
        tokens.append(token)
    if problems:
        raise ManifestError.collect(problems)
    return Principals(tuple(principals), tuple(tokens))


def _at(tree: Node, index: int) -> Any:
    """A finder of ``principals[index].key``'s mark in ``tree``."""

    def find(key: str) -> Any:
        return locate(tree, ("principals", index, key), key_of_last=False)[0]

    return find


def _token(entry: PrincipalEntry, folder: Path, lookup: Callable[[str], str | None]) -> bytes | str:
    """The entry's token as bytes, or what is wrong with it (never the token itself)."""
    if entry.token is not None:
        match = _VARIABLE.fullmatch(entry.token)
        assert match is not None  # the model checked it
        name = match.group(1)
        try:
            value: str | None = lookup(name)
        except (SettingsError, OSError) as e:
            return f"${{{name}}}: {e}"
        if value is None:
            return f"environment variable {name!r} is not set"
        where = f"${{{name}}}"
    else:
        assert entry.token_file is not None
        token_path = folder / entry.token_file
        try:
            value = read_settings_file(token_path, "token file")
        except (SettingsError, OSError) as e:
            return f"token file {str(token_path)!r}: {getattr(e, 'strerror', None) or e}"
        if value is None:
            return f"token file {str(token_path)!r} does not exist"
        where = f"token file {str(token_path)!r}"
    token = value.strip()
    if not token:
        return f"{where} is empty"
    return token.encode("utf-8")


def bind(principal: Principal, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` with the principal's bound keys merged over it.

    A client may repeat a bound value; stating another one is refused (``403``), so that a
    mistake or an attempt to act as another team shows instead of being silently corrected.
    """
    for key, value in principal.metadata.items():
        if key in metadata and metadata[key] != value:
            raise RequestRefused(
                403,
                "forbidden",
                f"branch metadata key {key!r} is bound to principal {principal.name!r} and "
                "may not be set to another value",
            )
    return {**metadata, **principal.metadata}
