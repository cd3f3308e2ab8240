"""composer's memory stores: one contract (``base``), three places to keep items.

``JsonlMemoryStore`` (a file, for compatibility), ``SqliteMemoryStore`` (the embedded
default, several processes on one machine), ``PostgresMemoryStore`` (agents on many
machines; needs the ``postgres`` extra, imported only when used). ``open_store`` picks one
from a short spec, as ``composer memory`` takes them.
"""

from __future__ import annotations

from pathlib import Path

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
    ``.db``). ValueError for anything else."""
    if spec.startswith(("postgresql://", "postgres://")):
        return PostgresMemoryStore(spec, schema=schema)
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
