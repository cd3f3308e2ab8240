"""Namespaces are isolated, whatever the items and however they are spread: a search, a
full-text search, a retrieve and an export in one namespace see exactly its own items."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory.services import open_kind

from builtin_providers.stores import ItemStore, MemoryItem, MemoryQuery

WORDS = ["deploy", "rollback", "database", "latency", "cache", "token"]

placements = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from(WORDS), st.sampled_from(["a", "b"])),
    max_size=25,
)


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
def test_namespaces_never_leak(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    store = open_kind(kind, tmp_path, request)
    ranked = kind != "jsonl"
    with asyncio.Runner() as runner:  # one loop: one connection pool for every example

        @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(placements)
        def check(spread: list[tuple[int, str, str]]) -> None:
            # Fresh namespace names per example: earlier examples' items are other tenants.
            prefix = uuid.uuid4().hex[:8]
            items = [
                MemoryItem(f"{word} note {i}", [tag], {"n": i}, f"id{i % 5}", f"{prefix}-{ns}")
                for i, (ns, word, tag) in enumerate(spread)
            ]
            runner.run(store.add(items))
            for ns in range(4):
                runner.run(isolated(store, items, f"{prefix}-{ns}", ranked))

        try:
            check()
        finally:
            runner.run(store.aclose())


async def isolated(store: ItemStore, items: list[MemoryItem], namespace: str, ranked: bool) -> None:
    mine: dict[str, MemoryItem] = {}
    for item in items:  # the first of an id in a namespace is the one kept
        if item.namespace == namespace:
            mine.setdefault(item.id, item)
    expected = list(mine.values())
    assert await store.export(namespace) == expected
    assert await store.search(MemoryQuery(namespace=namespace, limit=1000)) == expected
    assert await store.search(MemoryQuery(tags=["a"], namespace=namespace, limit=1000)) == [
        item for item in expected if "a" in item.tags
    ]
    for item_id in {item.id for item in items}:
        assert await store.retrieve(item_id, namespace) == mine.get(item_id)
    if ranked:
        found = await store.search(
            MemoryQuery(text="note", match="fulltext", namespace=namespace, limit=1000)
        )
        assert sorted(item.id for item in found) == sorted(mine)
