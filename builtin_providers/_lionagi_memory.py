"""A ``memory`` provider on a LionAGI store (``source: branch`` on a lionagi Branch).

Such a store takes LionAGI's own ``MemoryQuery`` and ``MemoryItem``
(``lionagi.protocols.memory``), imported only when one is met, so that composer never imports
lionagi otherwise. Its items carry no namespace and no expiry.
"""

from __future__ import annotations

import importlib
import uuid
from typing import Any

__all__ = ["is_lionagi", "lionagi_query", "store_lionagi"]


def is_lionagi(store: Any) -> bool:
    """Whether ``store`` is one of LionAGI's (it then takes LionAGI's query and items)."""
    return type(store).__module__.split(".", 1)[0] == "lionagi"


def _memory() -> Any:
    return importlib.import_module("lionagi.protocols.memory")


def lionagi_query(
    text: str | None, tags: list[str] | None, filters: dict[str, Any] | None, limit: int
) -> Any:
    """LionAGI's ``MemoryQuery`` for one turn."""
    return _memory().MemoryQuery(text=text, tags=tags, filters=filters, limit=limit)


async def store_lionagi(
    store: Any,
    contents: list[Any],
    ids: list[str],
    tags: list[str],
    metadata: dict[str, Any],
) -> tuple[int, list[tuple[str, Exception]]]:
    """Store each content as a ``MemoryItem`` with its idempotent id, unless an item with that
    id is there already; how many were new, and each item id that failed with its error (one
    failure costs only its item)."""
    make = _memory().MemoryItem
    stored = 0
    failures: list[tuple[str, Exception]] = []
    for content, item_id in zip(contents, ids, strict=True):
        try:
            if await store.retrieve(uuid.UUID(item_id)) is None:
                item = make(
                    content=content,
                    tags=list(tags),
                    metadata=dict(metadata),
                    id=uuid.UUID(item_id),
                )
                await store.store(item)
                stored += 1
        except Exception as e:
            failures.append((item_id, e))
    return stored, failures
