"""Many writers, one store: 8 processes writing back at once lose and double nothing, and a
writer killed mid-stream leaves the store readable and writable, in every store."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from memory.workers import write_back, write_back_forever

from builtin_providers.stores import ItemStore, JsonlMemoryStore, SqliteMemoryStore
from builtin_providers.stores.postgres import PostgresMemoryStore

PROCESSES = 8
WRITEBACKS = 500


def source_and_store(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[Any, ItemStore]:
    if kind == "jsonl":
        path = tmp_path / "memory.jsonl"
        return {"jsonl": path}, JsonlMemoryStore(path)
    if kind == "sqlite":
        path = tmp_path / "memory.sqlite"
        return {"sqlite": path}, SqliteMemoryStore(path)
    dsn = request.getfixturevalue("postgres_dsn")
    schema = request.getfixturevalue("pg_schema")
    return {"postgres": {"dsn": dsn, "schema": schema}}, PostgresMemoryStore(dsn, schema=schema)


async def written(store: ItemStore) -> list[Any]:
    try:
        return [item.content for item in await store.export()]
    finally:
        await store.aclose()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
def test_eight_processes_lose_and_double_nothing(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    source, store = source_and_store(kind, tmp_path, request)
    spawn = multiprocessing.get_context("spawn")
    workers = [
        spawn.Process(target=write_back, args=(source, worker, WRITEBACKS))
        for worker in range(PROCESSES)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=600)  # a bound that only catches a hang
    assert [process.exitcode for process in workers] == [0] * PROCESSES
    contents = asyncio.run(written(store))
    assert len(contents) == PROCESSES * WRITEBACKS
    expected = {(w, n) for w in range(PROCESSES) for n in range(WRITEBACKS)}
    assert {(c["worker"], c["n"]) for c in contents} == expected


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
def test_a_killed_writer_leaves_the_store_readable(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    source, store = source_and_store(kind, tmp_path, request)
    process = multiprocessing.get_context("spawn").Process(
        target=write_back_forever, args=(source, 0)
    )
    process.start()
    try:
        deadline = time.monotonic() + 120
        while len(asyncio.run(written(store))) < 200:
            assert time.monotonic() < deadline, "the writer wrote nothing"
            assert process.is_alive()
            time.sleep(0.05)
    finally:
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
        process.join(timeout=60)
    assert process.exitcode == -signal.SIGKILL

    async def after() -> tuple[int, int]:
        try:
            before = sum((await store.counts()).values())
            if isinstance(store, SqliteMemoryStore):
                await store.check()  # file and full-text index consistent
            contents = [item.content for item in await store.export()]
            assert all(c == {"worker": 0, "n": i} for i, c in enumerate(contents))
            assert await store.store({"content": "after the crash"})
            return before, sum((await store.counts()).values())
        finally:
            await store.aclose()

    before, now = asyncio.run(after())
    assert before >= 200
    assert now == before + 1
