"""The JSONL memory store against a hostile file: links, non-files, absurdly nested lines."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from builtin_providers.memory import MemoryConfig
from builtin_providers.memory_store import MAX_DEPTH, JsonlMemoryStore, MemoryItem, MemoryQuery
from composer.build import build_registry
from composer.errors import StoreError
from composer.manifest import Manifest
from composer.turn import Branch, Instruction


def nested(depth: int) -> str:
    """A JSONL line whose content nests ``depth - 1`` lists inside the record object."""
    return '{"content": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the manifest folder that a link in it points at."""
    target = tmp_path / "elsewhere" / "authorized_keys"
    target.parent.mkdir()
    target.write_text('{"content": "not yours"}\n')
    return target


@pytest.fixture
def linked(tmp_path: Path, outside: Path) -> Path:
    """memory.jsonl in the manifest folder, replaced by a symlink to ``outside``."""
    path = tmp_path / "manifest" / "memory.jsonl"
    path.parent.mkdir()
    os.symlink(outside, path)
    return path


async def test_writeback_never_appends_through_a_symlink(linked: Path, outside: Path) -> None:
    before = outside.read_bytes()
    manifest = Manifest(
        version=1,
        providers=[MemoryConfig(name="mem", source={"jsonl": linked}, writeback=True)],
    )
    provider = build_registry(manifest).providers[0]
    with pytest.raises(StoreError, match="symlink"):
        await provider.writeback(Branch("s"), [{"function": "add", "output": 3}])
    with pytest.raises(StoreError, match="symlink"):
        await JsonlMemoryStore(linked).store(MemoryItem("written through the link"))
    assert outside.read_bytes() == before
    assert os.path.islink(linked)


async def test_a_dangling_symlink_is_not_created_through(tmp_path: Path) -> None:
    """O_CREAT on a link to a missing file would create the file at the link's target."""
    target = tmp_path / "elsewhere.jsonl"
    path = tmp_path / "memory.jsonl"
    os.symlink(target, path)
    with pytest.raises(StoreError, match="symlink"):
        await JsonlMemoryStore(path).store(MemoryItem("x"))
    assert not target.exists()


async def test_reading_through_a_symlink_is_refused(linked: Path) -> None:
    provider = build_registry(
        Manifest(version=1, providers=[MemoryConfig(name="mem", source={"jsonl": linked})])
    ).providers[0]
    with pytest.raises(StoreError, match="symlink"):
        await provider.provide(Branch("s"), Instruction("x"))


async def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    os.mkfifo(path)
    store = JsonlMemoryStore(path)
    with pytest.raises(StoreError, match="not a regular file"):
        await store.search(MemoryQuery())
    with pytest.raises(StoreError, match="not a regular file"):
        await store.store(MemoryItem("x"))


async def test_an_absurdly_nested_line_is_skipped_like_a_bad_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_text(
        '{"content": "before"}\n' + nested(100_000) + "\n" + '{"content": "after"}\n',
    )
    store = JsonlMemoryStore(path)
    with caplog.at_level(logging.WARNING):
        items = await store.search(MemoryQuery())
    assert [item.content for item in items] == ["before", "after"]
    assert "line 2" in caplog.text
    assert "nested deeper than" in caplog.text
    provider = build_registry(
        Manifest(version=1, providers=[MemoryConfig(name="mem", source={"jsonl": path})])
    ).providers[0]
    assert await provider.provide(Branch("s"), Instruction("x")) == "- before\n- after"


async def test_depth_limit_is_exact(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A line nested MAX_DEPTH levels is kept; one level more is skipped, though json parses it."""
    path = tmp_path / "memory.jsonl"
    path.write_text(nested(MAX_DEPTH) + "\n" + nested(MAX_DEPTH + 1) + "\n")
    assert json.loads(nested(MAX_DEPTH + 1))  # within the interpreter's recursion limit
    with caplog.at_level(logging.WARNING):
        items = await JsonlMemoryStore(path).search(MemoryQuery())
    assert len(items) == 1
    assert "line 2" in caplog.text
    assert "line 1" not in caplog.text


async def test_wide_lines_are_not_mistaken_for_deep_ones(tmp_path: Path) -> None:
    """Many brackets side by side are fine: only nesting counts."""
    path = tmp_path / "memory.jsonl"
    content = [{"k": [i]} for i in range(5 * MAX_DEPTH)]
    path.write_text(json.dumps({"content": content, "tags": ["[[[{{{"]}) + "\n")
    items = await JsonlMemoryStore(path).search(MemoryQuery())
    assert [item.content for item in items] == [content]
