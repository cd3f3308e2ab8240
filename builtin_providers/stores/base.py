"""What every memory store shares: the item and query shapes, the store contracts, records.

``MemoryStore`` is LionAGI's ``MemoryStore`` shape (``store``, ``retrieve``, ``search``),
without importing LionAGI; ``MemoryQuery`` and ``MemoryItem`` carry its field names, plus
what composer's own stores add: ``namespace`` (tenants and teams never see each other's
items), ``match`` and ``min_score`` on a query, ``score`` and ``expires_at`` on an item.
``ItemStore`` is the larger contract of composer's stores (JSONL, SQLite, PostgreSQL): an
idempotent batch ``add`` with a cap, ``export``, ``counts`` and ``exists`` for ``composer
memory``. Every store keeps, besides the fields, whether an item is an agent's writeback
(``written_back``: what a cap evicts) and when it was first stored (``created_at``), so an
item moved from one store to another is the same item.

Ids are strings, kept as written: a record whose ``id`` is ``"m1"`` is ``"m1"`` in every
store and in templates. An item is unique per ``(namespace, id)``; adding one whose id is
already there stores nothing, which is what makes a retried writeback harmless.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = [
    "CHUNK_CHARS",
    "CHUNK_ITEMS",
    "COMMON_WORD",
    "MAX_QUERY_WORDS",
    "ItemStore",
    "Match",
    "MemoryItem",
    "MemoryQuery",
    "MemoryStore",
    "as_query",
    "body_of",
    "canonical",
    "chunks",
    "created_now",
    "digest_of",
    "full_text",
    "item_from_record",
    "item_from_row",
    "item_id",
    "line_id",
    "live",
    "matches",
    "query_words",
    "record_of",
    "writeback_id",
]

Match = Literal["fulltext", "substring"]

_ID_NAMESPACE = uuid.UUID("6f1d2a4e-3c1b-4f57-9a0e-8f4d6c2b7a10")

MAX_QUERY_WORDS = 32
"""A full-text query keeps at most this many distinct words (a pasted log stays cheap)."""


COMMON_WORD = 1000
"""A word in at least this many items is left out of a full-text query that has rarer words.

Ranking costs one score per item matched, so a word found nearly everywhere would make every
query score most of the store; its weight in the ranking is small anyway (bm25's IDF). When
every word of a query is that common, an item must have them all. See ``full_text``.
"""


CHUNK_ITEMS = 500
"""A store writes a batch in runs of at most this many items, one transaction (and one hold
of its lock) each: a huge writeback never holds the store while other branches search it."""

CHUNK_CHARS = 1_000_000
"""...and of about this many characters of content (an item larger is a run of its own)."""


def chunks(items: Sequence[MemoryItem]) -> Iterator[Sequence[MemoryItem]]:
    """``items`` in runs of at most ``CHUNK_ITEMS`` items and about ``CHUNK_CHARS``
    characters, in order; no items are one empty run (an add still opens its store)."""
    start, chars = 0, 0
    for end, item in enumerate(items):
        size = len(body_of(item.content))
        if end > start and (end - start == CHUNK_ITEMS or chars + size > CHUNK_CHARS):
            yield items[start:end]
            start, chars = end, 0
        chars += size
    yield items[start:]


def full_text(counts: dict[str, int], any_of: str, all_of: str) -> str | None:
    """The search expression of a full-text query, from how many items (capped at
    ``COMMON_WORD``) each of its words matches: the rare words joined by ``any_of``, else the
    common ones by ``all_of``; None when no word matches anything."""
    found = [word for word, n in counts.items() if n > 0]
    rare = [word for word in found if counts[word] < COMMON_WORD]
    if rare:
        return any_of.join(rare)
    return all_of.join(found) or None


@dataclass(frozen=True)
class MemoryQuery:
    """Search parameters: LionAGI's ``MemoryQuery`` fields, then composer's own.

    ``match: fulltext`` ranks by relevance (words, stemmed, stop words ignored) where the
    store can; ``substring`` is LionAGI's case-insensitive substring of the content.
    """

    text: str | None = None
    tags: list[str] | None = None
    filters: dict[str, Any] | None = None
    limit: int = 20
    namespace: str = ""
    match: Match = "substring"
    min_score: float | None = None


@dataclass(frozen=True)
class MemoryItem:
    """One stored record, with LionAGI ``MemoryItem``'s fields and where it lives.

    ``score`` is the relevance a full-text search gave it (None otherwise); it takes no part
    in equality. ``expires_at`` (epoch seconds) hides the item once passed. ``written_back``
    marks an agent's writeback, the kind a cap evicts. ``created_at`` (epoch seconds, to the
    microsecond) is when a store first stored it, set by the store when None; it takes no
    part in equality (the same item stored twice is the same item).
    """

    content: Any = None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    namespace: str = ""
    expires_at: float | None = None
    score: float | None = field(default=None, compare=False)
    written_back: bool = False
    created_at: float | None = field(default=None, compare=False)


@runtime_checkable
class MemoryStore(Protocol):
    """Structural contract of a memory backend (LionAGI's ``MemoryStore``)."""

    async def store(self, item: Any) -> Any: ...

    async def retrieve(self, item_id: Any) -> Any: ...

    async def search(self, query: Any) -> list[Any]: ...


@runtime_checkable
class ItemStore(Protocol):
    """composer's own stores: LionAGI's three calls, namespaced, plus batch and admin calls."""

    async def store(self, item: Any) -> str: ...

    async def retrieve(self, item_id: Any, namespace: str = "") -> MemoryItem | None: ...

    async def search(self, query: Any) -> list[MemoryItem]: ...

    async def add(
        self, items: Sequence[MemoryItem], *, written_back: bool = False, cap: int | None = None
    ) -> int:
        """Store the items whose ``(namespace, id)`` is new; returns how many were new.

        ``written_back`` marks them all as an agent's writeback (an item whose own
        ``written_back`` is set is marked anyway); ``cap`` then keeps at most that many
        written-back items per namespace, the oldest going first. Each item keeps its
        ``created_at`` (now when None). A batch is written in runs (``chunks``), each one
        transaction: one that fails part-way keeps the runs before the failure, and retried
        stores only the rest.
        """
        ...

    async def export(self, namespace: str | None = None) -> list[MemoryItem]:
        """Every live item in insertion order (all namespaces when ``namespace`` is None),
        with ``written_back`` and ``created_at``. A record that cannot be read fails the
        export (``StoreError`` naming it) rather than being left out."""
        ...

    async def counts(self) -> dict[str, int]:
        """Live items per namespace."""
        ...

    async def exists(self) -> bool:
        """Whether the store is there to be read (its file; its schema and tables), found
        without creating anything: reading a store that is not there would create it."""
        ...

    async def aclose(self) -> None: ...


def item_id(value: Any) -> str:
    """An item id as stored: the text of ``value`` (a UUID as its canonical string)."""
    return str(value)


def writeback_id(branch_id: str, turn: str, content: Any) -> str:
    """The id of one written-back item: the same branch, turn and content give the same id,
    so a retried writeback stores nothing twice."""
    key = f"{branch_id}\x1f{turn}\x1f{canonical(content)}"
    return str(uuid.uuid5(_ID_NAMESPACE, key))


def canonical(value: Any) -> str:
    """``value`` as canonical JSON: how metadata filters compare values in the SQL stores."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def created_now() -> float:
    """Now, as a store records ``created_at``: epoch seconds to the microsecond, which is what
    PostgreSQL keeps, so the time reads the same from every store."""
    return round(time.time(), 6)


def body_of(content: Any) -> str:
    """The text a search looks in: a string as it is, structured content (a tool's JSON
    result) as JSON (not Python's repr, which no other reader of the store understands),
    anything else as ``str()``, as LionAGI's ``InMemoryStore`` does."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict | list):
        try:
            return json.dumps(content, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return str(content)
    return str(content)


def live(item: MemoryItem, now: float | None = None) -> bool:
    """Whether ``item`` has not expired."""
    return item.expires_at is None or item.expires_at > (time.time() if now is None else now)


def matches(item: MemoryItem, query: MemoryQuery) -> bool:
    """InMemoryStore's predicate: substring on text, any-of on tags, equality on filters."""
    if query.text and query.text.lower() not in body_of(item.content).lower():
        return False
    if query.tags and not set(query.tags) & set(item.tags):
        return False
    return not query.filters or all(item.metadata.get(k) == v for k, v in query.filters.items())


def as_query(query: Any) -> MemoryQuery:
    """Our ``MemoryQuery`` from any object with its fields (LionAGI's has the first four)."""
    if isinstance(query, MemoryQuery):
        return query
    return MemoryQuery(
        text=getattr(query, "text", None),
        tags=getattr(query, "tags", None),
        filters=getattr(query, "filters", None),
        limit=getattr(query, "limit", 20),
        namespace=getattr(query, "namespace", "") or "",
    )


@functools.cache
def _stop_words() -> frozenset[str]:
    # bm25s's English list (NLTK's), the one file_corpus uses; imported on the first query.
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


_WORD = re.compile(r"[^\W_]+")


def query_words(text: str | None) -> list[str]:
    """The words a full-text query looks for: letters and digits only (so nothing in them is
    query syntax for FTS5 or ``to_tsquery``), lower-cased, stop words left out, first
    ``MAX_QUERY_WORDS`` distinct ones."""
    stop = _stop_words()
    seen: dict[str, None] = {}
    for word in _WORD.findall((text or "").lower()):
        if word not in stop and word not in seen:
            seen[word] = None
            if len(seen) == MAX_QUERY_WORDS:
                break
    return list(seen)


def record_of(item: Any) -> dict[str, Any]:
    """The JSON object of one item (a MemoryItem, LionAGI's, or a mapping): what a JSONL line
    and ``composer memory export`` hold. ``namespace``, ``expires_at``, ``written_back`` and
    ``created_at`` only when set."""
    get = (
        item.get
        if isinstance(item, Mapping)
        else lambda name, default=None: getattr(item, name, default)
    )
    raw_id = get("id", None)
    record: dict[str, Any] = {
        "id": str(raw_id) if raw_id is not None else str(uuid.uuid4()),
        "content": get("content", None),
        "tags": list(get("tags", None) or []),
        "metadata": dict(get("metadata", None) or {}),
    }
    namespace = get("namespace", None)
    if namespace:
        record["namespace"] = str(namespace)
    expires = get("expires_at", None)
    if expires is not None:
        record["expires_at"] = float(expires)
    if get("written_back", False) is True:
        record["written_back"] = True
    created = get("created_at", None)
    if isinstance(created, datetime):  # another library's item may keep a datetime
        created = created.timestamp()
    if isinstance(created, int | float) and not isinstance(created, bool):
        record["created_at"] = float(created)
    return record


def item_from_record(record: Any, fallback_id: str) -> MemoryItem:
    """A validated item from one decoded JSON record; ValueError says what is wrong.

    ``fallback_id`` names a record that has no ``id`` of its own (a stable one, so that
    importing the same file twice adds nothing).
    """
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    if "content" not in record:
        raise ValueError("no 'content'")
    tags = record.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError("'tags' is not a list of strings")
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValueError("'metadata' is not an object")
    namespace = record.get("namespace") or ""
    if not isinstance(namespace, str):
        raise ValueError("'namespace' is not a string")
    expires = _number(record, "expires_at")
    created = _number(record, "created_at")
    written_back = record.get("written_back", False)
    if not isinstance(written_back, bool):
        raise ValueError("'written_back' is not true or false")
    raw_id = record.get("id")
    identity = item_id(raw_id) if raw_id is not None else fallback_id
    return MemoryItem(
        record["content"],
        list(tags),
        dict(metadata),
        identity,
        namespace,
        expires,
        written_back=written_back,
        created_at=created,
    )


def _number(record: dict[str, Any], name: str) -> float | None:
    """The optional number ``record[name]`` as a float; ValueError when it is another thing."""
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name!r} is not a number")
    return float(value)


def item_from_row(row: Sequence[Any]) -> MemoryItem:
    """An item from a SQL store's row: id, content (JSON text), tags and metadata (JSON text,
    or already decoded by the driver), namespace, expires_at, written_back, created_at and
    score, in that order."""
    item, content, tags, metadata, namespace, expires_at, written_back, created_at, score = row
    return MemoryItem(
        json.loads(content),
        json.loads(tags) if isinstance(tags, str) else list(tags),
        json.loads(metadata) if isinstance(metadata, str) else dict(metadata),
        str(item),
        str(namespace),
        expires_at,
        None if score is None else float(score),
        bool(written_back),
        None if created_at is None else float(created_at),
    )


def line_id(line: bytes) -> str:
    """The id of a JSONL line that has none: derived from the line, so it is stable."""
    return str(uuid.uuid5(_ID_NAMESPACE, line.hex()))


def digest_of(items: Sequence[MemoryItem]) -> str:
    """What identifies a seed file's content: its items as records, hashed."""
    digest = hashlib.sha256()
    for item in items:
        digest.update(canonical(record_of(item)).encode() + b"\n")
    return digest.hexdigest()
