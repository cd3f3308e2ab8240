"""Values as read from a manifest file: each remembers where it was written.

The YAML reader (``yamlnodes.py``) makes these, the loader records ``Origin``s, and the models
(``models.py``) resolve relative paths with them; none of this knows what a manifest means.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "MASK",
    "KeyPath",
    "Origin",
    "Secret",
    "SourceFloat",
    "SourceInt",
    "SourceStr",
    "VariableUse",
]

MASK = "***"
"""What a secret is shown as."""

KeyPath = tuple[str | int, ...]
"""Where a value sits in a manifest: keys and list indexes, providers addressed by name."""


class SourceStr(str):
    """A string read from a manifest file, remembering where it stood.

    The loader hands every YAML string to validation as a SourceStr, so a ``ManifestPath``
    can resolve a relative path against the folder of the file that holds it, even after
    overlays merged values from several files; the models keep it, so a template that fails
    at run time can say which field of which file it is (``where``).
    """

    path: Path
    line: int
    column: int
    display: str  # the file as the user named it
    label: str  # whose value it is, e.g. 'provider "runbooks"' ("" at the top level)
    keys: KeyPath  # where below that, e.g. ("request", "url")

    def __new__(
        cls,
        value: str,
        path: Path,
        line: int,
        column: int,
        display: str = "",
        label: str = "",
        keys: KeyPath = (),
    ) -> SourceStr:
        obj = super().__new__(cls, value)
        obj.path = path
        obj.line = line
        obj.column = column
        obj.display = display or str(path)
        obj.label = label
        obj.keys = keys
        return obj

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle: every attribute is an argument
        state = (self.path, self.line, self.column, self.display, self.label, self.keys)
        return (type(self), (str.__str__(self), *state))

    @property
    def field(self) -> str:
        """What the value is: ``provider "runbooks": request.url``, ``runtime.wrap``."""
        dotted = ""
        for key in self.keys:
            dotted += f"[{key}]" if isinstance(key, int) else (f".{key}" if dotted else key)
        return f"{self.label}: {dotted}" if self.label and dotted else self.label or dotted

    @property
    def where(self) -> str:
        """``field (file:line:col)``: how a run-time failure of this value names it.

        Made once per value and kept on it: every branch built from the manifest compiles
        the same values, so they share this one string rather than each making its own.
        """
        known: str | None = self.__dict__.get("_where")
        if known is None:
            location = f"{self.display}:{self.line}:{self.column}"
            field = self.field
            known = self.__dict__["_where"] = f"{field} ({location})" if field else location
        return known


class Secret(SourceStr):
    """A manifest string that a ``${VAR}`` went into: a secret wherever it ends up.

    It is the string itself where it is used (a header, a URL, a template source), but its
    ``repr`` is ``'***'``, and the manifest models serialise it as ``***``, so printing a
    manifest, a config or a provider, or dumping them to JSON, shows no secret. ``str()`` of it
    is its value (paths and URLs are built with ``str()``); composer's own messages and logs
    mask values through ``Manifest.redact``.
    """

    def __repr__(self) -> str:
        return repr(MASK)


class SourceInt(int):
    """An integer read from a manifest; ``str()`` is its text as written (``007``, ``0x1F``).

    Where a string field receives a number, validation uses ``str()`` of it (see
    ``StrictModel``), so the value stays what the file says.
    """

    text: str

    def __new__(cls, value: int, text: str) -> SourceInt:
        obj = super().__new__(cls, value)
        obj.text = text
        return obj

    def __str__(self) -> str:
        return self.text


class SourceFloat(float):
    """A float read from a manifest; ``str()`` is its text as written, so ``1.10`` stays ``1.10``."""

    text: str

    def __new__(cls, value: float, text: str) -> SourceFloat:
        obj = super().__new__(cls, value)
        obj.text = text
        return obj

    def __str__(self) -> str:
        return self.text


class Origin(NamedTuple):
    """Where a manifest value was written: file, 1-based line and column, and its raw text.

    ``raw`` is the scalar as written before ``${VAR}`` interpolation (None for a mapping or a
    list); ``variables`` names the variables substituted into it. A value with variables is a
    secret: show ``raw``, never the value. (A tuple: one is made for every value of a file.)
    """

    path: str
    line: int
    column: int
    raw: str | None = None
    variables: tuple[str, ...] = ()

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"

    @property
    def is_secret(self) -> bool:
        return bool(self.variables)


@dataclass(frozen=True)
class VariableUse:
    """One ``${NAME}`` in the effective manifest: where it is written and whether it must be set.

    ``required`` is false when the reference has a default (``${NAME:-x}``) or sits in a
    disabled provider, where an unset variable is no error.
    """

    name: str
    location: str
    has_default: bool
    required: bool
