"""The JSONL store reads incrementally: an append is parsed alone, a rewrite is read whole, a
search stops at its limit, and a record keeps its own id, up to the template."""

from __future__ import annotations

import json
from pathlib import Path

from builtin_providers.memory import MemoryConfig
from builtin_providers.stores import JsonlMemoryStore, MemoryQuery
from composer.build import build_registry
from composer.manifest import Manifest
from composer.turn import Branch, Instruction


def line(**record: object) -> str:
    return json.dumps(record) + "\n"


async def test_an_append_is_read_from_where_the_file_was(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(line(id="a", content="first") + line(id="b", content="second"))
    store = JsonlMemoryStore(path)
    before = store.items()
    with path.open("a") as handle:  # another writer, not through this store
        handle.write(line(id="c", content="third"))
    after = store.items()
    assert [item.id for item in after] == ["a", "b", "c"]
    assert after[0] is before[0]  # parsed once: the old lines were not read again
    assert after[1] is before[1]


async def test_a_rewritten_file_is_read_again_whole(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(line(id="a", content="first") + line(id="b", content="second"))
    store = JsonlMemoryStore(path)
    assert [item.id for item in store.items()] == ["a", "b"]
    path.write_text(
        line(id="x", content="other")
        + line(id="b", content="second")
        + line(id="y", content="more")
    )
    assert [item.id for item in store.items()] == ["x", "b", "y"]
    path.write_text(line(id="z", content="short"))
    assert [item.id for item in store.items()] == ["z"]


class Counting:
    """A filter value that counts how many items it was compared with."""

    def __init__(self) -> None:
        self.compared = 0

    def __eq__(self, other: object) -> bool:
        self.compared += 1
        return True

    __hash__ = None  # type: ignore[assignment]


async def test_the_scan_stops_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text("".join(line(content=f"note {i}", metadata={"k": i}) for i in range(1000)))
    store = JsonlMemoryStore(path)
    probe = Counting()
    hits = await store.search(MemoryQuery(filters={"k": probe}, limit=3))
    assert len(hits) == 3
    assert probe.compared == 3


async def test_tags_are_looked_up_not_scanned(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    records = [
        line(content=f"n{i}", tags=["rare"] if i in (5, 900) else ["common"]) for i in range(1000)
    ]
    path.write_text("".join(records))
    probe = Counting()
    hits = await JsonlMemoryStore(path).search(
        MemoryQuery(tags=["rare"], filters={"x": probe}, limit=10)
    )
    assert [hit.content for hit in hits] == ["n5", "n900"]
    assert probe.compared == 2  # only the two tagged items were looked at


async def test_a_record_keeps_its_own_id_up_to_the_template(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(line(id="m1", content="kept") + line(id=7, content="numeric id"))
    manifest = Manifest(
        version=1,
        providers=[
            MemoryConfig(
                name="mem", source={"jsonl": path}, template="{{ item.id }}: {{ item.content }}"
            )
        ],
    )
    provider = build_registry(manifest).managed[0]
    assert await provider.provide(Branch("s"), Instruction("x")) == "m1: kept\n7: numeric id"
    store = JsonlMemoryStore(path)
    found = await store.retrieve("m1")
    assert found is not None
    assert found.id == "m1"
