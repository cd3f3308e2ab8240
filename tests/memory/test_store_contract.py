"""What every store guarantees, JSONL, SQLite and PostgreSQL alike: own ids, one item per
(namespace, id), namespaces apart, tags any-of, filters by equality, expiry, order, counts."""

from __future__ import annotations

import time
from typing import Any

import pytest

from builtin_providers.stores import ItemStore, MemoryItem, MemoryQuery

ITEMS = [
    MemoryItem("Deploys freeze on Fridays", ["policy"], {"team": "ops"}, "m1"),
    MemoryItem("The DEPLOY bot is called Rex", ["trivia"], {"team": "dev"}, "m2"),
    MemoryItem("Rollbacks need two approvals", ["policy", "rollback"], {"level": 2}, "m3"),
    MemoryItem({"nested": "deploy data"}, [], {"team": "ops", "level": 2}, "m4"),
]


async def contents(store: ItemStore, **query: Any) -> list[Any]:
    return [item.content for item in await store.search(MemoryQuery(**query))]


async def test_items_keep_their_own_ids_and_fields(store: ItemStore) -> None:
    assert await store.add(ITEMS) == 4
    found = await store.retrieve("m3")
    assert found == ITEMS[2]
    assert found is not None
    assert found.id == "m3"
    assert (await store.retrieve("m4")) == ITEMS[3]  # structured content comes back as data
    assert await store.retrieve("nope") is None
    assert [item.id for item in await store.export()] == ["m1", "m2", "m3", "m4"]
    new_id = await store.store(MemoryItem("fresh", ["new"], {"k": 1}))
    again = await store.retrieve(new_id)
    assert again is not None
    assert (again.content, again.tags, again.metadata) == ("fresh", ["new"], {"k": 1})


async def test_an_id_is_stored_once_per_namespace(store: ItemStore) -> None:
    assert await store.add(ITEMS) == 4
    assert await store.add(ITEMS) == 0  # a retry stores nothing
    twin = MemoryItem("same id, other team", [], {}, "m1", "team-b")
    assert await store.add([twin, twin]) == 1
    assert await store.counts() == {"": 4, "team-b": 1}
    assert (await store.retrieve("m1", "team-b")) == twin
    assert (await store.retrieve("m1")) == ITEMS[0]


async def test_substring_tags_and_filters(store: ItemStore) -> None:
    await store.add(ITEMS)
    assert await contents(store, text="deploy") == [
        "Deploys freeze on Fridays",
        "The DEPLOY bot is called Rex",
        {"nested": "deploy data"},
    ]
    assert await contents(store, tags=["rollback", "trivia"]) == [
        "The DEPLOY bot is called Rex",
        "Rollbacks need two approvals",
    ]
    assert await contents(store, filters={"team": "ops", "level": 2}) == [{"nested": "deploy data"}]
    assert await contents(store, text="deploy", limit=1) == ["Deploys freeze on Fridays"]
    assert await contents(store, limit=0) == []
    assert await contents(store, text="nothing like this") == []


async def test_namespaces_never_see_each_other(store: ItemStore) -> None:
    await store.add([MemoryItem("alpha note", ["t"], {}, "a", "team-a")])
    await store.add([MemoryItem("beta note", ["t"], {}, "b", "team-b")])
    assert await contents(store, namespace="team-a") == ["alpha note"]
    assert await contents(store, namespace="team-b", tags=["t"]) == ["beta note"]
    assert await contents(store) == []  # the default namespace is a namespace too
    assert await store.retrieve("a", "team-b") is None
    assert [item.id for item in await store.export("team-a")] == ["a"]


async def test_expired_items_are_gone(store: ItemStore) -> None:
    past, future = time.time() - 1, time.time() + 3600
    await store.add(
        [
            MemoryItem("old", [], {}, "old", "", past),
            MemoryItem("current", [], {}, "current", "", future),
        ]
    )
    assert await contents(store) == ["current"]
    assert await store.retrieve("old") is None
    assert await store.counts() == {"": 1}
    assert [item.id for item in await store.export()] == ["current"]


@pytest.mark.parametrize("store", ["sqlite", "postgres"], indirect=True)
async def test_the_cap_keeps_the_newest_written_back_items(store: ItemStore) -> None:
    """``cap`` counts written-back items only: the seeded knowledge is never evicted."""
    await store.add(ITEMS)
    for turn in range(5):
        item = MemoryItem(f"written {turn}", ["wb"], {}, f"w{turn}")
        await store.add([item], written_back=True, cap=3)
    assert [item.id for item in await store.export()] == ["m1", "m2", "m3", "m4", "w2", "w3", "w4"]
    assert await contents(store, tags=["wb"]) == ["written 2", "written 3", "written 4"]


async def test_exists_says_whether_the_store_is_there_and_creates_nothing(
    store: ItemStore,
) -> None:
    assert await store.exists() is False
    assert await store.exists() is False  # looking did not make it
    await store.add([MemoryItem("a note", [], {}, "n1")])
    assert await store.exists() is True


async def test_items_keep_their_written_back_flag_and_times(store: ItemStore) -> None:
    """What an import carries: the flag by the item's own field, its time as given or now."""
    before = time.time()
    moved = MemoryItem("moved", [], {}, "moved", written_back=True, created_at=1700000000.25)
    await store.add([moved, MemoryItem("fresh", [], {}, "fresh")])
    await store.add([MemoryItem("result", [], {}, "result")], written_back=True)
    items = {item.id: item for item in await store.export()}
    assert {key: item.written_back for key, item in items.items()} == {
        "moved": True,
        "fresh": False,
        "result": True,
    }
    assert items["moved"].created_at == 1700000000.25
    for key in ("fresh", "result"):
        created = items[key].created_at
        assert created is not None
        assert abs(created - before) < 3600  # the store's clock (PostgreSQL's): about now
    found = await store.retrieve("result")
    assert found is not None
    assert found.written_back


async def test_another_librarys_item_keeps_its_creation_time(store: ItemStore) -> None:
    """``store`` takes LionAGI's items (a float ``created_at``) and others' (a datetime)."""
    from datetime import UTC, datetime

    stamped = {
        "content": "from elsewhere",
        "id": "e1",
        "created_at": datetime(2025, 1, 1, tzinfo=UTC),
    }
    await store.store(stamped)
    await store.store({"content": "lionagi's", "id": "e2", "created_at": 1735689600.5})
    await store.store({"content": "odd", "id": "e3", "created_at": "yesterday"})  # not a time
    times = [item.created_at for item in await store.export()]
    assert times[:2] == [1735689600.0, 1735689600.5]
    assert times[2] is not None
    assert times[2] > 1735689600.5  # stamped by the store instead
