"""Store files are the agent's alone: a SQLite database (and its ``-wal`` and ``-shm``
files) and a JSONL file are created 0600 whatever the umask; a file that is already there
keeps the mode its owner gave it."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from builtin_providers.stores import JsonlMemoryStore, MemoryItem, SqliteMemoryStore


@pytest.fixture(params=[0o022, 0o000, 0o277], ids=["umask022", "umask000", "umask277"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process umask while the test runs: the usual one, none, and one that would take
    the owner's own write bit."""
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_sqlite_store_creates_its_files_0600(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "memory.sqlite"
    store = SqliteMemoryStore(path)
    try:
        await store.add([MemoryItem("a note", [], {}, "n1")])
        files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
        assert {file.name: mode(file) for file in files} == {file.name: 0o600 for file in files}
    finally:
        await store.aclose()


@pytest.mark.parametrize("write", ["add", "store"])
async def test_a_jsonl_store_creates_its_file_0600(tmp_path: Path, umask: int, write: str) -> None:
    path = tmp_path / "memory.jsonl"
    store = JsonlMemoryStore(path)
    if write == "add":
        await store.add([MemoryItem("a note", [], {}, "n1")])
    else:
        await store.store({"content": "a note"})
    assert mode(path) == 0o600
    assert [item.content for item in await store.export()] == ["a note"]


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_a_store_file_already_there_keeps_its_mode(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"memory.{kind}"
    path.touch()
    path.chmod(0o640)  # shared with a group on purpose
    store = SqliteMemoryStore(path) if kind == "sqlite" else JsonlMemoryStore(path)
    try:
        assert await store.add([MemoryItem("a note", [], {}, "n1")]) == 1
        assert mode(path) == 0o640
    finally:
        await store.aclose()
