"""One exception tree for everything composer raises on purpose.

    ComposerError
    ├── ManifestError(ComposerError, ValueError)   a manifest is wrong; located at path:line:column
    ├── SettingsError                              COMPOSER_* settings, .env or secrets dir unusable
    ├── PluginError                                a provider type cannot be loaded or is malformed
    │   └── UnknownProviderType(PluginError, KeyError)   no installed package provides that type
    ├── TemplateError                              a Jinja template failed to compile or render
    ├── ProviderError                              a provider failed at run time (the registry contains it)
    │   └── StoreError                             a memory store could not be read or written
    ├── TokenizerError                             the vendored o200k_base file is missing or corrupt
    ├── AuditReadError                             an audit log (a file or a table) cannot be read
    └── ServeError                                 `composer serve` cannot start as configured
        └── RequestRefused                         a served request is refused (its .status: 403, 409)

Catch ``ComposerError`` to handle every one of them in a single clause. A plugin that cannot be
loaded fails only the manifests that name its type, as a located ``ManifestError`` naming the
entry point.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "AuditReadError",
    "ComposerError",
    "ManifestError",
    "PluginError",
    "ProviderError",
    "RequestRefused",
    "ServeError",
    "SettingsError",
    "StoreError",
    "TemplateError",
    "TokenizerError",
    "UnknownProviderType",
]


class ComposerError(Exception):
    """Base of every error composer raises deliberately."""


class ManifestError(ComposerError, ValueError):
    """A manifest is invalid; ``str()`` is ``path:line:column: message``, one line per error.

    A file with several mistakes raises one ManifestError whose ``errors`` lists them
    all (the first is the error itself), so a user fixes everything in one pass.
    """

    def __init__(
        self,
        path: str | Path,
        line: int,
        column: int,
        message: str,
        *,
        others: Iterable[ManifestError] = (),
    ) -> None:
        self.path = str(path)
        self.line = line
        self.column = column
        self.message = message
        self.errors: list[ManifestError] = [self]
        for other in others:
            self.errors.extend(e for e in other.errors if e is not self)
        super().__init__(str(self))

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"

    def __str__(self) -> str:
        return "\n".join(f"{e.location}: {e.message}" for e in self.errors)

    @classmethod
    def collect(cls, errors: Iterable[ManifestError]) -> ManifestError:
        """One error carrying all of ``errors`` (which must not be empty), in file order."""
        flat = [leaf for e in errors for leaf in e.errors]
        flat.sort(key=lambda e: (e.path, e.line, e.column))
        first, *rest = flat
        return cls(first.path, first.line, first.column, first.message, others=rest)


class SettingsError(ComposerError):
    """composer's own settings (``COMPOSER_*``, the ``.env`` file, the secrets directory) are
    unusable, or no manifest was named; no manifest file is at fault, so there is no location."""


class PluginError(ComposerError):
    """A provider type could not be loaded from its entry point, or is not a ``ProviderType``."""

    def __init__(self, message: str, *, entry_point: str | None = None) -> None:
        self.entry_point = entry_point
        super().__init__(message)


class UnknownProviderType(PluginError, KeyError):
    """A manifest names a type no installed package provides; ``known`` lists those that are."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown provider type {name!r}; known types: {', '.join(known)}")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class TemplateError(ComposerError):
    """A Jinja template did not compile, referenced an unknown name, or failed while rendering."""

    def __init__(self, message: str, *, lineno: int | None = None) -> None:
        self.lineno = lineno
        super().__init__(message)


class ProviderError(ComposerError):
    """A provider could not produce its block this turn; the registry records it as failed."""


class StoreError(ProviderError):
    """A memory store could not be read or written (the file's ``OSError`` is the cause)."""


class TokenizerError(ComposerError):
    """The vendored tokenizer file could not be loaded or did not match its SHA-256."""


class AuditReadError(ComposerError):
    """An audit log cannot be read: a missing file, an unreachable database, no audit table
    in the schema; the message names the location masked (a DSN by its host and database)."""


class ServeError(ComposerError):
    """``composer serve`` cannot start as asked: a non-loopback address without a token, an
    empty or unreadable token file, an address it cannot listen on."""


class RequestRefused(ServeError):
    """A request the server will not carry out; ``status`` and ``kind`` are its HTTP answer
    (``403 forbidden``: a bound metadata key stated otherwise; ``409 unknown_branch``)."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
