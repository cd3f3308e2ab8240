"""composer's memory stores: one contract (``base``), three places to keep items.

``JsonlMemoryStore`` (a file, for compatibility), ``SqliteMemoryStore`` (the embedded
default, several processes on one machine), ``PostgresMemoryStore`` (agents on many
machines; needs the ``postgres`` extra, imported only when used). ``open_store`` picks one
from a short spec, as ``composer memory`` takes them.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from builtin_providers.stores.base import ItemStore, MemoryItem, MemoryQuery, MemoryStore
from builtin_providers.stores.jsonl import JsonlMemoryStore
from builtin_providers.stores.postgres import PostgresMemoryStore
from builtin_providers.stores.sqlite import SqliteMemoryStore

__all__ = [
    "ItemStore",
    "JsonlMemoryStore",
    "MemoryItem",
    "MemoryQuery",
    "MemoryStore",
    "PostgresMemoryStore",
    "SqliteMemoryStore",
    "open_store",
]

_SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


def open_store(spec: str, *, schema: str = "composer") -> ItemStore:
    """The store ``spec`` names: ``postgresql://...`` (or ``postgres://``), ``sqlite:PATH``,
    ``jsonl:PATH``, or a path whose suffix says which (``.jsonl``; ``.sqlite``, ``.sqlite3``,
    ``.db``). ValueError for anything else. A PostgreSQL URL's ``connect_timeout`` (seconds,
    up to 60) is how long a connection is waited for, 5 s without it."""
    if spec.startswith(("postgresql://", "postgres://")):
        waited = _connect_timeout(spec)
        if waited is None:
            return PostgresMemoryStore(spec, schema=schema)
        return PostgresMemoryStore(spec, schema=schema, connect_timeout_s=waited)
    kind, _, rest = spec.partition(":")
    if kind == "sqlite" and rest:
        return SqliteMemoryStore(rest)
    if kind == "jsonl" and rest:
        return JsonlMemoryStore(rest)
    suffix = Path(spec).suffix.lower()
    if suffix == ".jsonl":
        return JsonlMemoryStore(spec)
    if suffix in _SQLITE_SUFFIXES:
        return SqliteMemoryStore(spec)
    raise ValueError(
        f"{spec!r} names no store: give postgresql://..., sqlite:PATH, jsonl:PATH, "
        "or a path ending in .jsonl, .sqlite, .sqlite3 or .db"
    )


def _connect_timeout(url: str) -> float | None:
    """The URL's ``connect_timeout`` as libpq reads it (whole seconds, at least 2: libpq
    takes 1 as 2), bounded by 60; None when it gives none that is usable."""
    values = parse_qs(urlsplit(url).query).get("connect_timeout", [])
    try:
        seconds = int(values[-1]) if values else 0
    except ValueError:
        return None
    return float(min(60, max(2, seconds))) if seconds > 0 else None
