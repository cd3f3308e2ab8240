"""Every masking of a database URL, in one place: ``dsn_secrets``, ``describe_dsn``, ``mask_url``.

libpq and psycopg_pool quote a DSN's parts in their errors and warnings (``invalid
percent-encoded token: "p%sk..."``, ``role "..." does not exist``), and a DSN written without
``${VAR}`` is no secret to the loader; so a config that holds a DSN (the memory provider's
source, ``runtime.audit.postgres``) names its secret parts (``dsn_secrets``: password, user,
options, read without libpq) and the loader masks them wherever they are shown. The parse is
forgiving on purpose: a DSN that libpq refuses (a stray ``%``) is exactly the one whose parts
end up in its message.

Where a message names a database, it says ``describe_dsn`` (host, port and database: a memory
store, an audit table), or, where the URL as written is what the operator checks (``composer
serve --state``, PostgreSQL or Redis), ``mask_url`` (the URL without its password and query).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["describe_dsn", "dsn_secrets", "mask_url"]

_PASSWORDS = frozenset({"password", "sslpassword"})
_NAMES = frozenset({"user", "options"})
_TRIVIAL = frozenset({"postgres", "on", "off", "true", "false", "yes", "no"})
"""Values that are no secret (the default role, named in every message about the store;
a setting's switch), which masking would strip from every message instead."""
_NUMBER = re.compile(r"[-+]?\d+(\.\d+)?[a-z]{0,3}", re.IGNORECASE)  # 5000, 5s, 64kB

_SCHEMES = ("postgresql://", "postgres://")
_PAIR = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*")


def dsn_secrets(dsn: str) -> list[str]:
    """The password, user and options of ``dsn`` (URL or key=value), as written and decoded,
    and each value of a ``-c name=value`` in the options; a password always, a name unless
    it is trivial (``postgres``, ``off``, a number)."""
    pairs = _url_pairs(dsn) if dsn.startswith(_SCHEMES) else _keyword_pairs(dsn)
    found: list[str] = []
    for key, written, value in pairs:
        if key in _PASSWORDS:
            found.extend(v for v in (written, value) if v)
        elif key in _NAMES:
            names = [written, value]
            if key == "options":  # a value shorter than 4 characters is no one's secret
                settings = (word.partition("=")[2] for word in _words(value))
                names.extend(v for v in settings if len(v.strip()) >= 4)
            found.extend(v for v in names if not _trivial(v))
    return list(dict.fromkeys(found))


def _trivial(value: str) -> bool:
    text = value.strip().lower()
    return not text or text in _TRIVIAL or _NUMBER.fullmatch(text) is not None


def _words(options: str) -> list[str]:
    """``options`` split as the server splits it: at whitespace a backslash does not escape."""
    words: list[str] = []
    word: list[str] = []
    escaped = False
    for char in options:
        if escaped:
            word.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char.isspace():
            if word:
                words.append("".join(word))
            word = []
        else:
            word.append(char)
    if word:
        words.append("".join(word))
    return words


def _url_pairs(dsn: str) -> list[tuple[str, str, str]]:
    """``postgresql://user:password@host/db?key=value&...``, read as libpq reads it (the
    credentials end at the first ``@`` before a ``/``) and up to the last ``@`` as well: with
    a raw ``/`` in a password, libpq takes its start for a port and quotes it."""
    rest = dsn.split("://", 1)[1]
    pairs: list[tuple[str, str, str]] = []
    head = rest.split("/", 1)[0]
    if "@" in head:
        pairs.extend(_credentials(head.split("@", 1)[0]))
    if "@" in rest:
        user, password = _credentials(rest.rsplit("@", 1)[0])
        pairs.extend((user, password))
        port = re.split(r"[/?]", password[1], maxsplit=1)[0]
        if port != password[1] and len(port) >= 4:  # a shorter start is no one's secret
            pairs.append(("password", port, unquote(port)))
    for item in rest.partition("?")[2].split("&"):
        key, _, value = item.partition("=")
        pairs.append((unquote(key), value, unquote(value)))
    return pairs


def _credentials(userinfo: str) -> list[tuple[str, str, str]]:
    """The user and password of ``user[:password]``, as written and percent-decoded."""
    user, _, password = userinfo.partition(":")
    return [("user", user, unquote(user)), ("password", password, unquote(password))]


def _keyword_pairs(dsn: str) -> list[tuple[str, str, str]]:
    """``key=value key='quoted \\' value'``: libpq's rules, where a backslash escapes the next
    character in a quoted or a bare value."""
    pairs: list[tuple[str, str, str]] = []
    at = 0
    while (match := _PAIR.match(dsn, at)) is not None:
        at = match.end()
        quoted = dsn.startswith("'", at)
        start = at + 1 if quoted else at
        value: list[str] = []
        at = start
        while at < len(dsn):
            char = dsn[at]
            if char == "\\" and at + 1 < len(dsn):
                value.append(dsn[at + 1])
                at += 2
                continue
            if (quoted and char == "'") or (not quoted and char.isspace()):
                break
            value.append(char)
            at += 1
        pairs.append((match.group(1), dsn[start:at], "".join(value)))
        at += 1 if quoted else 0
    return pairs


def describe_dsn(dsn: str) -> str:
    """``dsn`` for messages: host, port and database, never a password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:
        return "postgres"
    where = f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}"
    return f"postgres {where}/{parts.get('dbname') or ''}"


def mask_url(url: str) -> str:
    """``url`` without its password (and without a query, which may hold one)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return url.partition("://")[0] + "://***"
    if ":" in host:
        host = f"[{host}]"
    user = f"{parts.username}:***@" if parts.password is not None else ""
    if parts.password is None and parts.username:
        user = f"{parts.username}@"
    port = f":{parts.port}" if _port(parts) else ""
    return urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, "", ""))


def _port(parts: Any) -> int | None:
    try:
        port: int | None = parts.port
    except ValueError:
        return None
    return port
