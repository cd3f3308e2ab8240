"""Provider result caches: the interface the engine uses, and the in-process implementation.

A provider with ``cache: {ttl_s: ...}`` in its manifest entry is served from its cache while
an entry for the turn's key is fresh; the engine stores only results the provider actually
returned (text or nothing), never failures or timeouts. One cache per provider per loaded
manifest, shared by every branch built from it. A cache shared between processes implements
the same ``ContextCache`` Protocol.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Final, Protocol

__all__ = ["MISS", "ContextCache", "InProcessCache"]


class _Miss:
    def __repr__(self) -> str:
        return "MISS"


MISS: Final = _Miss()
"""What ``get`` returns for no fresh entry (``None`` is a cached empty result)."""


class ContextCache(Protocol):
    """Where cached results live; keys are opaque strings made by the engine."""

    async def get(self, key: str) -> str | _Miss | None: ...

    async def set(self, key: str, value: str | None, ttl_s: float) -> None: ...


class InProcessCache:
    """A bounded least-recently-used map with per-entry expiry, for one process."""

    def __init__(self, max_entries: int = 1024) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, str | None]] = OrderedDict()

    async def get(self, key: str) -> str | _Miss | None:
        entry = self._entries.get(key)
        if entry is None:
            return MISS
        expires, value = entry
        if expires <= time.monotonic():
            del self._entries[key]
            return MISS
        self._entries.move_to_end(key)
        return value

    async def set(self, key: str, value: str | None, ttl_s: float) -> None:
        self._entries[key] = (time.monotonic() + ttl_s, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
