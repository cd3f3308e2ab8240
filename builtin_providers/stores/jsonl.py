"""A memory store in a JSONL file: one JSON object per line, appended, never rewritten.

Kept for compatibility and for a file a person edits by hand; SQLite is the embedded default.
Each line is ``content``, optional ``tags``, ``metadata``, ``id``, ``namespace``,
``expires_at``, ``written_back`` and ``created_at`` (the store writes the last two: an agent's
writeback is marked, and every line it appends is stamped); a line's ``id`` is kept as written
(a line without one gets an id derived from the line). Search is LionAGI ``InMemoryStore``'s: case-insensitive substring of
``str(content)``, any-of on tags, equality on metadata filters, file order, stopping at
``limit``. Lower-cased text, tags (and an index by tag) are computed once, when a line is
parsed; a file grown by an append is read from where it was, anything else (smaller,
replaced, rewritten before its end) is read again whole.

Hardening: a bad or truncated line is skipped with a warning (the first ``MAX_WARNINGS``),
and so is one nested deeper than ``MAX_DEPTH`` (``export``, which must leave nothing out, fails on the first instead,
naming its line); the file is opened with ``O_NOFOLLOW`` and must be a regular file (a
``memory.jsonl`` replaced by a symlink is refused, never read or appended to); the whole file
is capped at ``max_bytes``; a file the store creates is 0600, whatever the umask. An append
is one ``write()`` on an ``O_APPEND`` descriptor under an exclusive ``flock``, after reading
what other writers appended, so concurrent writers in this process or another never
interleave within a line, never glue a record onto a truncated one, and never store an id
twice. A batch is appended in runs (``chunks``), each one such write, so a huge writeback
never holds the file while another branch searches it.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import stat
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from builtin_providers.stores.base import (
    MemoryItem,
    MemoryQuery,
    as_query,
    body_of,
    chunks,
    created_now,
    item_from_record,
    line_id,
    live,
    record_of,
)
from composer.plugin import StoreError

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: appends are still single writes
    fcntl = None

__all__ = ["DEFAULT_MAX_BYTES", "MAX_DEPTH", "MAX_WARNINGS", "JsonlMemoryStore", "parse_line"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO in the file's place cannot block open()

MAX_DEPTH = 100
"""Deepest nesting of lists and objects a line may have (deeper lines are skipped)."""

DEFAULT_MAX_BYTES = 64 * 1024 * 1024

MAX_WARNINGS = 20
"""Skipped lines logged one by one per reading of a file; then one line says more were
skipped: a hostile file of a million bad lines is not a million lines of log."""

_GUARD = 64  # bytes before the read position that must be unchanged for a tail-only read


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


def _read_exactly(fd: int, size: int, offset: int) -> bytes:
    """``size`` bytes at ``offset`` (fewer only at the end of the file)."""
    parts: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, size, offset)
        if not chunk:
            break
        parts.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)


def parse_line(line: bytes) -> MemoryItem:
    """One JSONL line as an item; ValueError (or UnicodeDecodeError) says what is wrong."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:  # its own "line 1" would be the wrong line's number
        raise ValueError(f"not JSON: {e.msg} (column {e.colno})") from None
    except RecursionError:  # the C parser gives up at the interpreter's recursion limit
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    # Only a line with more openers than the limit can be too deep: count before walking.
    if line.count(b"[") + line.count(b"{") > MAX_DEPTH and _deeper_than(record, MAX_DEPTH):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    named = isinstance(record, dict) and record.get("id") is not None
    return item_from_record(record, "" if named else line_id(line))


@dataclass
class _Parsed:
    """What has been read of the file, and the indexes built once per line."""

    ident: tuple[int, int] | None = None  # (st_dev, st_ino)
    checked: tuple[int, int] | None = None  # (st_size, st_mtime_ns) when last looked at
    offset: int = 0  # bytes parsed; always just after a newline
    guard: bytes = b""  # the bytes just before offset, to notice a rewrite
    lines: int = 0
    items: list[MemoryItem] = field(default_factory=list)
    folded: list[str] = field(default_factory=list)
    by_tag: dict[str, list[int]] = field(default_factory=dict)
    by_id: dict[tuple[str, str], int] = field(default_factory=dict)
    tail: MemoryItem | None = None  # a last line with no newline yet: shown, not committed
    bad: tuple[str, str] | None = None  # the first line skipped as unreadable: where, why
    bad_lines: int = 0
    bad_tail: tuple[str, str] | None = None  # the last line, when it is unreadable
    warned: int = 0  # lines skipped so far, logged or not

    def add(self, item: MemoryItem) -> bool:
        key = (item.namespace, item.id)
        if key in self.by_id:
            return False
        position = len(self.items)
        self.by_id[key] = position
        self.items.append(item)
        self.folded.append(body_of(item.content).lower())
        for tag in dict.fromkeys(item.tags):
            self.by_tag.setdefault(tag, []).append(position)
        return True


class JsonlMemoryStore:
    """A MemoryStore in a JSONL file; reads are incremental and cached until the file changes.

    The file is capped (``max_bytes``): a file grown past it fails the provider with a clear
    error instead of exhausting memory. Items can expire (``expires_at``) but are never
    deleted: a cap on written-back items needs SQLite or PostgreSQL.

    The file is never opened through a symlink, except for reading with ``read_links`` (a seed,
    which is only read: a Kubernetes ConfigMap's files are links into a hidden folder beside
    them), and then only to a file inside the folder that holds the link. It must be a regular
    file.
    """

    def __init__(
        self, path: Path | str, *, max_bytes: int = DEFAULT_MAX_BYTES, read_links: bool = False
    ) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.read_links = read_links
        self._lock = threading.Lock()
        self._parsed = _Parsed()
        self._broken: list[tuple[int, str]] | None = None  # skipped lines, kept, not logged

    def __repr__(self) -> str:
        return f"JsonlMemoryStore({str(self.path)!r})"

    # ------------------------------------------------------------------ the store contract

    async def store(self, item: Any) -> str:
        """Append ``item`` (a MemoryItem, LionAGI's, or a mapping) as one line; its id."""
        record = record_of(item)
        await self._io(self._append, [record], False)
        return str(record["id"])

    async def add(
        self, items: Sequence[MemoryItem], *, written_back: bool = False, cap: int | None = None
    ) -> int:
        if cap is not None:
            raise StoreError(f"memory file {self.path}: a JSONL store cannot cap its items")
        new = 0
        for run in chunks(items):  # the lock is free, and the loop runs, between runs
            new += await self._io(self._append, run, written_back)
        return new

    async def retrieve(self, item_id_: Any, namespace: str = "") -> MemoryItem | None:
        key = (namespace, str(item_id_))

        def find() -> MemoryItem | None:
            parsed = self._read()
            position = parsed.by_id.get(key)
            if position is not None:
                item = parsed.items[position]
            elif parsed.tail is not None and (parsed.tail.namespace, parsed.tail.id) == key:
                item = parsed.tail
            else:
                return None
            return item if live(item) else None

        return await self._io(find)

    async def search(self, query: Any) -> list[MemoryItem]:
        """Substring search, whatever ``match`` asks: a JSONL file has no full-text index."""
        return await self._io(self._search, as_query(query))

    async def export(self, namespace: str | None = None) -> list[MemoryItem]:
        """Every live item, or StoreError naming the first unreadable line (and how many
        there are): an export or import that left lines out would pass for complete."""

        def every() -> list[MemoryItem]:
            parsed = self._read()
            bad = parsed.bad or parsed.bad_tail
            if bad is not None:
                more = parsed.bad_lines + (parsed.bad_tail is not None) - 1
                others = f" (and {more} more unreadable lines)" if more else ""
                raise StoreError(
                    f"memory file {self.path}, {bad[0]}: {bad[1]}{others}; fix or remove the line"
                )
            return [
                item
                for item in self.items()
                if live(item) and (namespace is None or item.namespace == namespace)
            ]

        return await self._io(every)

    async def exists(self) -> bool:
        def look() -> bool:
            try:
                os.close(self._open(os.O_RDONLY))
            except FileNotFoundError:
                return False
            return True

        return await self._io(look)

    async def counts(self) -> dict[str, int]:
        items = await self._io(self.items)
        return dict(Counter(item.namespace for item in items if live(item)))

    async def aclose(self) -> None:
        """Nothing is held open between calls."""

    # ------------------------------------------------------------------ reading

    def items(self) -> list[MemoryItem]:
        """Every well-formed item in file order (bad lines logged and skipped)."""
        parsed = self._read()
        return parsed.items + ([parsed.tail] if parsed.tail is not None else [])

    def broken_lines(self) -> list[tuple[int, str]]:
        """Each line a read skips (its number, why), from a fresh read of the whole file: what
        ``composer validate`` reports of a seed. Raises as a read does (OSError, StoreError)."""
        fresh = JsonlMemoryStore(self.path, max_bytes=self.max_bytes, read_links=self.read_links)
        fresh._broken = []
        fresh._read()
        return fresh._broken

    def _search(self, spec: MemoryQuery) -> list[MemoryItem]:
        text, tags, filters, limit = spec.text, spec.tags, spec.filters, spec.limit
        if limit <= 0:
            return []
        parsed = self._read()
        candidates: Sequence[int]
        if tags:
            candidates = sorted({i for tag in tags for i in parsed.by_tag.get(tag, ())})
        else:
            candidates = range(len(parsed.items))
        needle = text.lower() if text else None
        namespace = spec.namespace
        hits: list[MemoryItem] = []
        for position in candidates:
            item = parsed.items[position]
            if item.namespace != namespace or (needle and needle not in parsed.folded[position]):
                continue
            if filters and not all(item.metadata.get(k) == v for k, v in filters.items()):
                continue
            if live(item):
                hits.append(item)
                if len(hits) == limit:
                    return hits
        tail = parsed.tail
        if tail is not None and tail.namespace == namespace and live(tail):
            if needle and needle not in body_of(tail.content).lower():
                return hits
            if tags and not set(tags) & set(tail.tags):
                return hits
            if filters and not all(tail.metadata.get(k) == v for k, v in filters.items()):
                return hits
            hits.append(tail)
        return hits

    def _read(self) -> _Parsed:
        with self._lock:
            try:
                fd = self._open(os.O_RDONLY)
            except FileNotFoundError:
                self._parsed = _Parsed()
                return self._parsed
            try:
                return self._refresh(fd)
            finally:
                os.close(fd)

    def _refresh(self, fd: int) -> _Parsed:
        """Bring the parsed state up to the file's content (the lock is held)."""
        info = os.fstat(fd)
        parsed = self._parsed
        ident = (info.st_dev, info.st_ino)
        checked = (info.st_size, info.st_mtime_ns)
        if parsed.ident == ident and parsed.checked == checked:
            return parsed
        if info.st_size > self.max_bytes:
            raise OSError(
                f"memory file {self.path} is {info.st_size} bytes, over the "
                f"{self.max_bytes}-byte limit"
            )
        if (
            parsed.ident != ident
            or info.st_size < parsed.offset
            or os.pread(fd, len(parsed.guard), parsed.offset - len(parsed.guard)) != parsed.guard
        ):
            parsed = self._parsed = _Parsed(ident=ident)
        data = _read_exactly(fd, info.st_size - parsed.offset, parsed.offset)
        end = data.rfind(b"\n") + 1
        self._parse(parsed, data[:end].split(b"\n")[:-1], last=False)
        parsed.tail = parsed.bad_tail = None
        if data[end:].strip():
            self._parse(parsed, [data[end:]], last=True)
        parsed.offset += end
        parsed.guard = (parsed.guard + data[:end])[-_GUARD:]
        parsed.checked = checked
        return parsed

    def _parse(self, parsed: _Parsed, lines: list[bytes], *, last: bool) -> None:
        for line in lines:
            number = parsed.lines + 1
            if not last:
                parsed.lines = number
            if not line.strip():
                continue
            try:
                item = parse_line(line)
            except (ValueError, UnicodeDecodeError) as e:
                where = f"truncated last line {number}" if last else f"line {number}"
                self._skipped(parsed, number, where, str(e))
                if last:
                    parsed.bad_tail = (where, str(e))
                else:
                    parsed.bad = parsed.bad or (where, str(e))
                    parsed.bad_lines += 1
                continue
            if last:
                parsed.tail = None if (item.namespace, item.id) in parsed.by_id else item
            elif not parsed.add(item):
                why = f"id {item.id!r:.80} is already there"
                self._skipped(parsed, number, f"line {number}", why)

    def _skipped(self, parsed: _Parsed, number: int, where: str, why: str) -> None:
        """Keep a skipped line for ``broken_lines``, or log it: the first ``MAX_WARNINGS`` of
        a reading of the file one by one, then once."""
        if self._broken is not None:
            self._broken.append((number, why))
            return
        parsed.warned += 1
        if parsed.warned <= MAX_WARNINGS:
            logger.warning("memory file %s: skipped %s: %s", self.path, where, why)
        elif parsed.warned == MAX_WARNINGS + 1:
            logger.warning("memory file %s: more lines skipped, not logged one by one", self.path)

    # ------------------------------------------------------------------ writing

    def _append(self, items: Sequence[Any], written_back: bool) -> int:
        """Append the items whose id is new, as one write under the file lock; how many.
        Each is stamped (``created_at``) unless it has a time, and marked as an agent's
        writeback when ``written_back``."""
        records = [record_of(item) for item in items]
        now = created_now()
        for record in records:
            if written_back:
                record["written_back"] = True
            record.setdefault("created_at", now)
        with self._lock:
            fd = self._open_for_append()
            try:
                if fcntl is not None:  # other writers, other processes: check and write as one
                    fcntl.flock(fd, fcntl.LOCK_EX)
                parsed = self._refresh(fd)
                seen: set[tuple[str, str]] = set()  # this run's, beside the file's by_id
                if parsed.tail is not None:
                    seen.add((parsed.tail.namespace, parsed.tail.id))
                lines: list[bytes] = []
                for record in records:
                    key = (record.get("namespace", ""), record["id"])
                    if key not in seen and key not in parsed.by_id:
                        seen.add(key)
                        text = json.dumps(record, ensure_ascii=False, default=str) + "\n"
                        lines.append(text.encode())
                if not lines:
                    return 0
                data = b"".join(lines)
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # never glue a record onto a truncated last line
                written = os.write(fd, data)
                if written != len(data):
                    raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
                return len(lines)
            finally:
                os.close(fd)

    # ------------------------------------------------------------------ the file

    async def _io(self, work: Callable[..., _T], *args: Any) -> _T:
        """``work`` off the event loop; a failing file is the provider's ``StoreError``."""
        try:
            return await asyncio.to_thread(work, *args)
        except OSError as e:
            message = f"memory file {self.path}: {e.strerror}" if e.strerror else str(e)
            raise StoreError(message) from e

    def _open_for_append(self) -> int:
        """A descriptor to append to, the file created 0600 if it is not there."""
        try:
            fd = self._open(os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL)
        except FileExistsError:  # also a symlink: opened below, with O_NOFOLLOW, refused
            return self._open(os.O_RDWR | os.O_APPEND)
        try:
            os.fchmod(fd, 0o600)  # the umask may have taken bits off
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _inside_its_folder(self) -> Path:
        """Where the links from ``path`` lead, when that is inside the folder holding it."""
        folder = Path(os.path.realpath(self.path.parent))
        target = Path(os.path.realpath(self.path))
        if not target.is_relative_to(folder):
            raise StoreError(
                f"memory file {self.path} links out of its folder, to {target}: a seed's links "
                "are followed only inside it, as a ConfigMap's are (name the file itself)"
            )
        return target

    def _open(self, flags: int) -> int:
        """A descriptor on the memory file itself: never through a link (but to read one with
        ``read_links``), never a non-file."""
        path = self.path
        if self.read_links and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) == 0:
            path = self._inside_its_folder()
        try:
            fd = os.open(path, flags | _NOFOLLOW | _NONBLOCK | _CLOEXEC, 0o600)
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
