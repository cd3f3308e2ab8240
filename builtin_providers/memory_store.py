"""The memory-store shape LionAGI defines, without importing LionAGI, and a JSONL-backed store.

``MemoryStore`` mirrors ``lionagi.protocols.memory.MemoryStore``: ``store(item) -> id``,
``retrieve(id) -> item | None``, ``search(MemoryQuery) -> list[item]``. ``MemoryQuery`` and
``MemoryItem`` carry the same field names as LionAGI's, so a provider can talk to either kind
of store (LionAGI is an optional extra; ``memory.py`` builds LionAGI's own classes when the
store is LionAGI's).

``JsonlMemoryStore`` keeps one JSON object per line: ``content``, optional ``tags``,
``metadata`` and ``id``. Its search is ``InMemoryStore``'s: case-insensitive substring of
``str(content)``, any-of on tags, equality on metadata filters, file order, then ``limit``.
A bad or truncated line is skipped with a warning, and so is one nested deeper than
``MAX_DEPTH``; an append is one ``write()`` on an ``O_APPEND`` descriptor under an exclusive
``flock``, so concurrent writers, in this process or another, never interleave within a line
nor glue a record onto a truncated one. The file is opened with ``O_NOFOLLOW`` and must be a
regular file: a ``memory.jsonl`` replaced by a symlink is refused, never read or appended to.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import stat
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, TypeVar, runtime_checkable

from composer.plugin import StoreError

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: appends are still single writes
    fcntl = None

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_DEPTH",
    "JsonlMemoryStore",
    "MemoryItem",
    "MemoryQuery",
    "MemoryStore",
    "item_id",
    "matches",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO in the file's place cannot block open()

_ID_NAMESPACE = uuid.UUID("6f1d2a4e-3c1b-4f57-9a0e-8f4d6c2b7a10")


def item_id(value: Any) -> uuid.UUID:
    """A UUID for ``value``: itself when it is one, else a stable UUID derived from it."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return uuid.uuid5(_ID_NAMESPACE, str(value))


@dataclass(frozen=True)
class MemoryQuery:
    """Search parameters, field for field LionAGI's ``MemoryQuery``."""

    text: str | None = None
    tags: list[str] | None = None
    filters: dict[str, Any] | None = None
    limit: int = 20


@dataclass(frozen=True)
class MemoryItem:
    """One stored record, with LionAGI ``MemoryItem``'s fields."""

    content: Any = None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    id: uuid.UUID = field(default_factory=uuid.uuid4)


@runtime_checkable
class MemoryStore(Protocol):
    """Structural contract of a memory backend (LionAGI's ``MemoryStore``)."""

    async def store(self, item: Any) -> Any: ...

    async def retrieve(self, item_id: Any) -> Any: ...

    async def search(self, query: Any) -> list[Any]: ...


def matches(item: MemoryItem, query: MemoryQuery) -> bool:
    """InMemoryStore's predicate: substring on text, any-of on tags, equality on filters."""
    if query.text and query.text.lower() not in str(item.content).lower():
        return False
    if query.tags and not set(query.tags) & set(item.tags):
        return False
    return not query.filters or all(item.metadata.get(k) == v for k, v in query.filters.items())


MAX_DEPTH = 100
"""Deepest nesting of lists and objects a line may have (deeper lines are skipped)."""


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and dicts more than ``limit`` levels (no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        elif not isinstance(node, list):
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in node)
    return False


def _parse_line(line: bytes) -> MemoryItem:
    try:
        record = json.loads(line)
    except RecursionError:  # the C parser gives up at the interpreter's recursion limit
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    # Only a line with more openers than the limit can be too deep: count before walking.
    if line.count(b"[") + line.count(b"{") > MAX_DEPTH and _deeper_than(record, MAX_DEPTH):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
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
    raw_id = record.get("id")
    identity = item_id(raw_id) if raw_id is not None else uuid.uuid5(_ID_NAMESPACE, line.hex())
    return MemoryItem(record["content"], list(tags), dict(metadata), identity)


DEFAULT_MAX_BYTES = 64 * 1024 * 1024


class JsonlMemoryStore:
    """A MemoryStore in a JSONL file; reads are cached until the file changes.

    The whole file is read when it changes, so it is capped (``max_bytes``): a file grown past
    it fails the provider with a clear error instead of exhausting memory.
    """

    def __init__(self, path: Path | str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._cache: tuple[tuple[int, int, int], list[MemoryItem]] | None = None

    def __repr__(self) -> str:
        return f"JsonlMemoryStore({str(self.path)!r})"

    async def store(self, item: Any) -> uuid.UUID:
        """Append ``item`` (a MemoryItem, or anything with its fields) as one line."""
        record = _record(item)
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        await self._io(self._append, line.encode())
        return item_id(record["id"])

    async def retrieve(self, item_id_: Any) -> MemoryItem | None:
        wanted = item_id(item_id_)
        items = await self._io(self.items)
        return next((item for item in items if item.id == wanted), None)

    async def search(self, query: Any) -> list[MemoryItem]:
        items = await self._io(self.items)
        spec = MemoryQuery(
            text=getattr(query, "text", None),
            tags=getattr(query, "tags", None),
            filters=getattr(query, "filters", None),
            limit=getattr(query, "limit", 20),
        )
        return [item for item in items if matches(item, spec)][: max(spec.limit, 0)]

    async def _io(self, work: Callable[..., _T], *args: Any) -> _T:
        """``work`` off the event loop; a failing file is the provider's ``StoreError``."""
        try:
            return await asyncio.to_thread(work, *args)
        except OSError as e:
            message = f"memory file {self.path}: {e.strerror}" if e.strerror else str(e)
            raise StoreError(message) from e

    def items(self) -> list[MemoryItem]:
        """Every well-formed item in file order (bad lines logged and skipped)."""
        with self._lock:
            try:
                fd = self._open(os.O_RDONLY)
            except FileNotFoundError:
                return []
            with os.fdopen(fd, "rb") as handle:
                info = os.fstat(handle.fileno())
                key = (info.st_ino, info.st_size, info.st_mtime_ns)
                if self._cache is not None and self._cache[0] == key:
                    return self._cache[1]
                if info.st_size > self.max_bytes:
                    raise OSError(
                        f"memory file {self.path} is {info.st_size} bytes, over the "
                        f"{self.max_bytes}-byte limit"
                    )
                data = handle.read(self.max_bytes + 1)
                if len(data) > self.max_bytes:
                    raise OSError(f"memory file {self.path} grew past {self.max_bytes} bytes")
            items = self._parse(data)
            self._cache = (key, items)
            return items

    def _open(self, flags: int) -> int:
        """A descriptor on the memory file itself: never through a link, never a non-file."""
        try:
            fd = os.open(self.path, flags | _NOFOLLOW | _NONBLOCK | _CLOEXEC, 0o600)
        except OSError as e:
            if e.errno != errno.ENOENT and os.path.islink(self.path):
                raise StoreError(
                    f"memory file {self.path} is a symlink (links are not followed)"
                ) from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise StoreError(f"memory file {self.path} is not a regular file")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _parse(self, data: bytes) -> list[MemoryItem]:
        items: list[MemoryItem] = []
        lines = data.split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                items.append(_parse_line(line))
            except (ValueError, UnicodeDecodeError) as e:
                where = "truncated last line" if number == len(lines) else f"line {number}"
                logger.warning("memory file %s: skipped %s: %s", self.path, where, e)
        return items

    def _append(self, line: bytes) -> None:
        with self._lock:
            fd = self._open(os.O_RDWR | os.O_APPEND | os.O_CREAT)
            try:
                if fcntl is not None:  # other writers, other processes: check and write as one
                    fcntl.flock(fd, fcntl.LOCK_EX)
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line  # never glue a record onto a truncated last line
                written = os.write(fd, line)
                if written != len(line):
                    raise OSError(f"short write to {self.path}: {written} of {len(line)} bytes")
            finally:
                os.close(fd)


def _record(item: Any) -> dict[str, Any]:
    """The JSON object of one item, read from a MemoryItem, LionAGI's, or a mapping."""
    get = (
        item.get
        if isinstance(item, Mapping)
        else lambda name, default=None: getattr(item, name, default)
    )
    return {
        "id": str(get("id", None) or uuid.uuid4()),
        "content": get("content", None),
        "tags": list(get("tags", None) or []),
        "metadata": dict(get("metadata", None) or {}),
    }
