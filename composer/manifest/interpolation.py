"""``${VAR}`` in a manifest string: the references it makes, and its text once substituted.

Written ``${NAME}``, ``${NAME:-default}`` (the default also stands for an empty value) and
``$${`` for a literal ``${``; a ``$`` before anything else is itself. Pure: values come from
the ``lookup`` the caller passes, and what was found (the variables used, the values that are
secrets, the problems) is returned, not recorded, so the loader decides what a problem means
where it is (inside a disabled provider an unset variable is none) and locates it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from composer.manifest.settings import VARIABLE_NAME

__all__ = ["Malformed", "Piece", "Reference", "Substituted", "scan", "substitute"]


@dataclass(frozen=True, slots=True)
class Reference:
    """A well-formed ``${NAME}`` or ``${NAME:-default}``, at ``raw[start:end]``."""

    name: str
    default: str | None  # None: written without ":-"
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Malformed:
    """A ``${`` that is not a reference: the message says why."""

    message: str


Piece = str | Reference | Malformed
"""What a string is made of, in order: literal text, references, mistakes."""


def scan(raw: str) -> list[Piece]:
    """``raw`` as literal text (``$${`` already ``${``), references and mistakes, in order."""
    pieces: list[Piece] = []
    i = 0
    while (j := raw.find("$", i)) >= 0:
        pieces.append(raw[i:j])
        if raw.startswith("$${", j):
            pieces.append("${")
            i = j + 3
            continue
        if not raw.startswith("${", j):
            pieces.append("$")
            i = j + 1
            continue
        end = raw.find("}", j + 2)
        if end < 0:
            pieces.append(Malformed('unclosed "${" (write "$${" for a literal "${")'))
            pieces.append(raw[j:])
            return pieces
        name, has_default, default = raw[j + 2 : end].partition(":-")
        i = end + 1
        if VARIABLE_NAME.fullmatch(name):
            pieces.append(Reference(name, default if has_default else None, j, i))
        else:
            pieces.append(
                Malformed(f'bad variable reference "${{{name}}}"; a name is letters, digits and _')
            )
    pieces.append(raw[i:])
    return pieces


_URL_ORIGIN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@]+")
"""``scheme://host[:port]``, without a user or password: what a URL's variable may show."""
_AFTER_ORIGIN = ("", "/", "?", "#")


def _is_secret(raw: str, reference: Reference, value: str) -> bool:
    """A value from a variable is a secret, except a URL's origin: a variable at the start of
    the string whose value is exactly ``scheme://host[:port]``, which a failure must be able
    to name."""
    return (
        reference.start > 0
        or not _URL_ORIGIN.fullmatch(value)
        or raw[reference.end : reference.end + 1] not in _AFTER_ORIGIN
    )


@dataclass(frozen=True, slots=True)
class Substituted:
    """``raw`` with its variables substituted, and what that found."""

    text: str
    used: tuple[str, ...]  # the variables whose values went in
    secrets: tuple[str, ...]  # the values that went in and are secrets
    references: tuple[Reference, ...]  # every well-formed reference, set or not
    problems: tuple[str, ...]  # in order, as messages
    unknown: bool  # without a lookup, a variable without a default: nothing can be said


def substitute(
    raw: str,
    lookup: Callable[[str], str | None] | None,
    *,
    stand_in: str | None = None,
    lenient: bool = False,
) -> Substituted:
    """``raw`` with each reference replaced by its value from ``lookup``.

    An unset variable without a default is kept as written (so no follow-on error about the
    value) and is a problem unless ``lenient``; a lookup raising ``OSError`` (a secret file)
    is a problem. With no ``lookup`` nothing is read: a default applies, and an unset variable
    becomes ``stand_in`` if given, else stays as written.
    """
    out: list[str] = []
    used: list[str] = []
    secrets: list[str] = []
    references: list[Reference] = []
    problems: list[str] = []
    unknown = False
    for piece in scan(raw):
        if isinstance(piece, str):
            out.append(piece)
            continue
        if isinstance(piece, Malformed):
            problems.append(piece.message)
            continue
        references.append(piece)
        name, default = piece.name, piece.default
        try:
            value = lookup(name) if lookup is not None else None
        except OSError as e:
            problems.append(f'cannot read secret "{name}": {e.strerror}')
            continue
        if value is None or (default is not None and value == ""):
            if default is not None:
                out.append(default)
            elif lookup is None:
                unknown = True
                out.append(raw[piece.start : piece.end] if stand_in is None else stand_in)
            else:
                out.append(raw[piece.start : piece.end])
                if not lenient:
                    problems.append(
                        f'environment variable "{name}" is not set (use ${{{name}:-default}} '
                        "for a default)"
                    )
            continue
        out.append(value)
        used.append(name)
        if _is_secret(raw, piece, value):
            secrets.append(value)
    return Substituted(
        "".join(out), tuple(used), tuple(secrets), tuple(references), tuple(problems), unknown
    )
