"""A writeback of 110,000 tiny responses (about 1 MiB) never holds its store: the store
writes it in runs, releasing its lock (and the event loop) between them, so a search of the
same store from another branch, in the same loop, is answered while the writeback has most
of its runs still to go, in every store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from memory.services import postgres_schema, postgres_server

from builtin_providers.stores import (
    ItemStore,
    JsonlMemoryStore,
    MemoryItem,
    MemoryQuery,
    PostgresMemoryStore,
    SqliteMemoryStore,
)

RESPONSES = 110_000


@pytest.fixture(scope="module")
def postgres_dsn() -> Iterator[str]:
    with postgres_server() as dsn:
        yield dsn


def open_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> ItemStore:
    if kind == "jsonl":
        return JsonlMemoryStore(tmp_path / "memory.jsonl")
    if kind == "sqlite":
        return SqliteMemoryStore(tmp_path / "memory.sqlite")
    dsn = request.getfixturevalue("postgres_dsn")
    schema = request.getfixturevalue("schema")
    return PostgresMemoryStore(dsn, schema=schema)


@pytest.fixture
def schema(postgres_dsn: str) -> Iterator[str]:
    with postgres_schema(postgres_dsn) as name:
        yield name


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_a_search_is_answered_while_a_huge_writeback_is_stored(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = open_store(kind, tmp_path, request)
    try:
        await store.add([MemoryItem("the deploy runbook", ["doc"], {}, "doc")])
        responses = [MemoryItem({"ok": n}, [], {}, f"r{n}") for n in range(RESPONSES)]
        async with asyncio.timeout(300):  # a bound that only catches a hang
            adding = asyncio.create_task(store.add(responses, written_back=True))
            while await store.retrieve("r0") is None:  # the writeback's first run is in
                await asyncio.sleep(0.01)
            found = await store.search(MemoryQuery(text="runbook"))
            assert [item.id for item in found] == ["doc"]
            assert not adding.done()
            assert await store.retrieve(f"r{RESPONSES - 1}") is None  # its last run is not
            assert await adding == RESPONSES
        assert await store.counts() == {"": RESPONSES + 1}
    finally:
        await store.aclose()
