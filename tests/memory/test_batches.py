"""A batch larger than one run (``chunks``) is written run by run and still behaves as one
add: every item once, in order, a retry (even of a batch cut short) storing only the rest,
and a cap keeping the newest written-back items."""

from __future__ import annotations

import pytest

from builtin_providers.stores import ItemStore, MemoryItem
from builtin_providers.stores.base import CHUNK_CHARS, CHUNK_ITEMS, chunks

BATCH = [MemoryItem(f"item {n}", ["batch"], {"n": n}, f"b{n}") for n in range(2 * CHUNK_ITEMS + 1)]


def test_runs_hold_a_bounded_count_and_size_of_items_in_order() -> None:
    assert [len(run) for run in chunks(BATCH)] == [CHUNK_ITEMS, CHUNK_ITEMS, 1]
    big = MemoryItem("x" * (CHUNK_CHARS // 2 + 1))
    huge = MemoryItem("y" * (CHUNK_CHARS + 1))
    items = [big, big, huge, BATCH[0], BATCH[1]]
    assert [list(run) for run in chunks(items)] == [[big], [big], [huge], BATCH[:2]]
    assert [list(run) for run in chunks([])] == [[]]  # an empty add still opens its store


async def test_a_batch_of_many_runs_is_stored_once_in_order(store: ItemStore) -> None:
    assert await store.add(BATCH[: CHUNK_ITEMS + 7]) == CHUNK_ITEMS + 7  # a batch cut short
    assert await store.add(BATCH) == len(BATCH) - CHUNK_ITEMS - 7  # retried: only the rest
    assert await store.add(BATCH) == 0
    assert [item.id for item in await store.export()] == [item.id for item in BATCH]
    assert await store.counts() == {"": len(BATCH)}


@pytest.mark.parametrize("store", ["sqlite", "postgres"], indirect=True)
async def test_a_cap_keeps_the_newest_of_a_batch_of_many_runs(store: ItemStore) -> None:
    seeded = MemoryItem("seeded knowledge", [], {}, "seed")
    await store.add([seeded])
    assert await store.add(BATCH, written_back=True, cap=CHUNK_ITEMS + 3) == len(BATCH)
    kept = [item.id for item in await store.export()]
    assert kept == ["seed"] + [item.id for item in BATCH[-(CHUNK_ITEMS + 3) :]]
