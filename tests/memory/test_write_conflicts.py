"""Writers that meet on the same rows: many processes capping one namespace (``max_items``)
evict its oldest items at once, and a batch the PostgreSQL server aborts as a deadlock's
victim is tried again; every batch is stored, whole, once."""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from memory.workers import write_back_capped

from builtin_providers.stores import ItemStore, MemoryItem, PostgresMemoryStore, SqliteMemoryStore

PROCESSES = 6
WRITEBACKS = 100
SIZE = 5
CAP = 50


def source_and_store(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[Any, ItemStore]:
    if kind == "sqlite":
        path = tmp_path / "memory.sqlite"
        return {"sqlite": path}, SqliteMemoryStore(path)
    dsn = request.getfixturevalue("postgres_dsn")
    schema = request.getfixturevalue("pg_schema")
    return {"postgres": {"dsn": dsn, "schema": schema}}, PostgresMemoryStore(dsn, schema=schema)


async def counted(store: ItemStore) -> dict[str, int]:
    try:
        return await store.counts()
    finally:
        await store.aclose()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_capped_batches_from_six_processes_all_succeed(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    source, store = source_and_store(kind, tmp_path, request)
    spawn = multiprocessing.get_context("spawn")
    workers = [
        spawn.Process(target=write_back_capped, args=(source, worker, WRITEBACKS, SIZE, CAP))
        for worker in range(PROCESSES)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=600)  # a bound that only catches a hang
    assert [process.exitcode for process in workers] == [0] * PROCESSES
    assert asyncio.run(counted(store)) == {"": CAP}


async def lock_waiters(dsn: str, schema: str) -> int:
    """How many sessions wait for a row lock in a statement on ``schema``."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND strpos(query, %s) > 0",
            (f'"{schema}"',),
        )
        row = await cursor.fetchone()
        return int(row[0]) if row else 0


async def test_a_batch_aborted_as_a_deadlock_victim_is_stored_on_a_retry(
    postgres_dsn: str, pg_schema: str
) -> None:
    """Another session holds ``y`` and then wants ``x``, which the batch ``[x, y]`` took
    first: a lock cycle, whose victim is the batch (only its session checks for deadlocks
    soon). Its transaction is rolled back and tried again, and stores both items."""
    import psycopg

    store = PostgresMemoryStore(postgres_dsn, schema=pg_schema)
    other = await psycopg.AsyncConnection.connect(postgres_dsn)
    try:
        await store.counts()  # the schema is there
        if (await (await other.execute("SHOW is_superuser")).fetchone()) != ("on",):
            pytest.skip("choosing the deadlock's victim (SET deadlock_timeout) needs a superuser")
        await other.execute("SET deadlock_timeout = '60s'")  # the batch's session detects it
        insert = (
            f'INSERT INTO "{pg_schema}".items (namespace, id, content, body, tags, metadata)'
            " VALUES ('', %s, '\"theirs\"', 'theirs', '{}', '{}')"
        )
        await other.execute(insert, ("y",))
        batch = [MemoryItem("mine x", [], {}, "x"), MemoryItem("mine y", [], {}, "y")]
        adding = asyncio.create_task(store.add(batch))  # takes x, then waits for y
        async with asyncio.timeout(30):
            while await lock_waiters(postgres_dsn, pg_schema) == 0:
                await asyncio.sleep(0.01)
            await other.execute(insert, ("x",))  # waits for the batch: the cycle; then gets x
        await other.rollback()  # nothing of theirs is kept: the retried batch gets both
        async with asyncio.timeout(30):
            assert await adding == 2
        assert [item.content for item in await store.export()] == ["mine x", "mine y"]
    finally:
        await other.close()
        await store.aclose()
