"""The memory-store API under its first name: the shapes, the contract and the JSONL store.

The stores themselves live in ``builtin_providers.stores`` (``base``, ``jsonl``, ``sqlite``,
``postgres``); this module keeps the names code already imports from here.
"""

from __future__ import annotations

from builtin_providers.stores.base import (
    ItemStore,
    MemoryItem,
    MemoryQuery,
    MemoryStore,
    item_id,
    matches,
)
from builtin_providers.stores.jsonl import DEFAULT_MAX_BYTES, MAX_DEPTH, JsonlMemoryStore

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_DEPTH",
    "ItemStore",
    "JsonlMemoryStore",
    "MemoryItem",
    "MemoryQuery",
    "MemoryStore",
    "item_id",
    "matches",
]
