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


def configmap(folder: Path, files: dict[str, str], version: str = "..2026_01_01") -> Path:
    """``folder`` laid out as the kubelet mounts a ConfigMap: each file a link through
    ``..data`` to a hidden versioned folder beside it (``..data`` is swapped on an update)."""
    (folder / version).mkdir(parents=True)
    for name, text in files.items():
        (folder / version / name).write_text(text)
    data = folder / "..data"
    if data.is_symlink():
        (folder / "..data_tmp").symlink_to(version)
        os.replace(folder / "..data_tmp", data)
    else:
        data.symlink_to(version)
    for name in files:
        if not (folder / name).is_symlink():
            (folder / name).symlink_to(Path("..data") / name)
    return folder


def test_a_seed_is_read_through_a_configmaps_links(tmp_path: Path) -> None:
    folder = configmap(tmp_path / "mounted", {"seed.jsonl": '{"content": "roll back first"}\n'})
    assert os.path.islink(folder / "seed.jsonl")
    seed = JsonlMemoryStore(folder / "seed.jsonl", read_links=True)
    assert [item.content for item in seed.items()] == ["roll back first"]
    configmap(folder, {"seed.jsonl": '{"content": "page the DBA"}\n'}, "..2026_01_02")
    again = JsonlMemoryStore(folder / "seed.jsonl", read_links=True)
    assert [item.content for item in again.items()] == ["page the DBA"]
    with pytest.raises(StoreError, match="is a symlink"):  # a store's own file: never
        JsonlMemoryStore(folder / "seed.jsonl").items()


async def test_a_seeds_links_never_lead_out_of_its_folder(linked: Path, outside: Path) -> None:
    seed = JsonlMemoryStore(linked, read_links=True)
    with pytest.raises(StoreError, match=r"links out of its folder, to .*authorized_keys"):
        seed.items()
    with pytest.raises(StoreError, match="links out of its folder"):
        seed.broken_lines()
    before = outside.read_bytes()
    with pytest.raises(StoreError, match="is a symlink"):  # writing never follows a link
        await seed.store(MemoryItem("written through the link"))
    assert outside.read_bytes() == before


def test_a_seed_linked_to_a_folder_inside_is_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "seed.jsonl").symlink_to("folder")
    with pytest.raises(StoreError, match="not a regular file"):
        JsonlMemoryStore(tmp_path / "seed.jsonl", read_links=True).items()
