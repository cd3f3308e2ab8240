"""Writeback through the provider: idempotent per turn, expiry, a cap, namespaces from the
branch, and the manifest options each store can or cannot honour."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from memory.services import require_postgres_extra
from pydantic import ValidationError

from builtin_providers.memory import DEFAULT_MAX_ITEM_CHARS, MemoryConfig, WritebackMemoryProvider
from builtin_providers.stores import ItemStore, MemoryQuery
from composer.build import attach, build_registry
from composer.errors import ProviderError
from composer.hooks import WritebackCount
from composer.manifest import Manifest
from composer.turn import Branch, Instruction, prepare_turn


def source_of(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if kind == "jsonl":
        return {"jsonl": tmp_path / "m.jsonl"}
    if kind == "sqlite":
        return {"sqlite": tmp_path / "m.sqlite"}
    return {
        "postgres": {
            "dsn": request.getfixturevalue("postgres_dsn"),
            "schema": request.getfixturevalue("pg_schema"),
        }
    }


def provider_for(**options: Any) -> tuple[Manifest, WritebackMemoryProvider]:
    manifest = Manifest(version=1, providers=[MemoryConfig(name="mem", **options)])
    provider = build_registry(manifest).managed[0].provider
    assert isinstance(provider, WritebackMemoryProvider)
    return manifest, provider


def store_of(provider: object) -> ItemStore:
    assert isinstance(provider, WritebackMemoryProvider)
    assert provider.store is not None
    return provider.store


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_a_retried_writeback_stores_nothing_twice(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    manifest, provider = provider_for(
        source=source_of(kind, tmp_path, request), writeback={"tags": ["tool"]}
    )
    branch = Branch("system\n")
    responses = [{"function": "add", "output": 3}, None, "plain", "plain"]
    try:
        assert await provider.writeback(branch, responses) == 2  # the same content once a turn
        assert await provider.writeback(branch, responses) == 0  # a retry of the same turn
        await prepare_turn(branch, Instruction("next question"))  # a new turn of the branch
        assert await provider.writeback(branch, responses) == 2
        assert await provider.writeback(Branch("s"), responses) == 2  # another branch
        items = await store_of(provider).search(MemoryQuery(tags=["tool"], limit=100))
        assert [item.content for item in items] == [{"function": "add", "output": 3}, "plain"] * 3
        assert items[0].metadata == {
            "source": "writeback",
            "provider": "mem",
            "branch_id": branch.id,
        }
    finally:
        await manifest.aclose()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_a_structured_tool_result_is_searched_as_json(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """What a store searches of a tool's JSON result is JSON, not Python's repr of it."""
    manifest, provider = provider_for(
        source=source_of(kind, tmp_path, request), writeback=True, match="substring"
    )
    try:
        await provider.writeback(Branch("s"), [{"refund": "R-7", "state": "failed"}])
        store = store_of(provider)
        as_json = await store.search(MemoryQuery(text='"state": "failed"', match="substring"))
        as_repr = await store.search(MemoryQuery(text="'state': 'failed'", match="substring"))
    finally:
        await manifest.aclose()
    assert [item.content for item in as_json] == [{"refund": "R-7", "state": "failed"}]
    assert as_repr == []


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_written_items_expire_after_ttl_s(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    manifest, provider = provider_for(
        source=source_of(kind, tmp_path, request), writeback={"ttl_s": 3600}
    )
    try:
        before = time.time()
        await provider.writeback(Branch("s"), ["remember this"])
        [item] = await store_of(provider).export()
        assert item.expires_at is not None
        assert before + 3600 <= item.expires_at <= time.time() + 3600
    finally:
        await manifest.aclose()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_max_items_caps_what_one_namespace_keeps(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    manifest, provider = provider_for(
        source=source_of(kind, tmp_path, request),
        namespace="{{ branch.metadata.team }}",
        writeback={"max_items": 2},
    )
    ops, dev = Branch("s", metadata={"team": "ops"}), Branch("s", metadata={"team": "dev"})
    try:
        for n in range(4):
            await provider.writeback(ops, [f"ops {n}"])
        await provider.writeback(dev, ["dev 0"])
        store = store_of(provider)
        assert [i.content for i in await store.export("ops")] == ["ops 2", "ops 3"]
        assert [i.content for i in await store.export("dev")] == ["dev 0"]
    finally:
        await manifest.aclose()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_each_team_reads_and_writes_its_own_namespace(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    manifest, provider = provider_for(
        source=source_of(kind, tmp_path, request),
        namespace="{{ branch.metadata.team }}",
        query={"text": "note"},
        match="substring",
        writeback=True,
    )
    ops, dev = Branch("s", metadata={"team": "ops"}), Branch("s", metadata={"team": "dev"})
    try:
        await provider.writeback(ops, ["ops note"])
        await provider.writeback(dev, ["dev note"])
        assert await provider.provide(ops, Instruction("x")) == "- ops note"
        assert await provider.provide(dev, Instruction("x")) == "- dev note"
        assert (
            await provider.provide(Branch("s", metadata={"team": "qa"}), Instruction("x")) is None
        )
    finally:
        await manifest.aclose()


async def test_a_shared_store_needs_a_namespace_and_never_falls_back(tmp_path: Path) -> None:
    source = {"sqlite": tmp_path / "m.sqlite", "shared": True}
    with pytest.raises(ValidationError, match="a shared source needs a namespace"):
        MemoryConfig(name="mem", source=source)
    manifest, provider = provider_for(
        source=source, namespace="{{ branch.metadata.get('team', '') }}", writeback=True
    )
    try:
        with pytest.raises(ProviderError, match="namespace rendered empty"):
            await provider.provide(Branch("s"), Instruction("x"))
        with pytest.raises(ProviderError, match="namespace rendered empty"):
            await provider.writeback(Branch("s"), ["x"])
    finally:
        await manifest.aclose()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"source": {"jsonl": "m.jsonl"}, "match": "fulltext"}, "match: fulltext needs"),
        ({"source": "branch", "match": "fulltext"}, "match: fulltext needs"),
        ({"source": {"sqlite": "m.db"}, "match": "substring", "min_score": 1}, "min_score"),
        ({"source": {"jsonl": "m.jsonl"}, "min_score": 1}, "min_score"),
        ({"source": "branch", "namespace": "x"}, "namespace needs"),
        ({"source": {"jsonl": "m.jsonl"}, "writeback": {"max_items": 5}}, "max_items needs"),
        ({"source": "branch", "writeback": {"ttl_s": 5}}, "ttl_s needs"),
        ({"source": {"postgres": {"dsn": "x", "schema": "Bad-Name"}}}, "schema"),
    ],
)
def test_options_a_store_cannot_honour_are_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        MemoryConfig(name="mem", **options)


def test_the_provider_repr_never_shows_the_dsn() -> None:
    require_postgres_extra()  # psycopg parses the DSN that the repr shows without its password
    dsn = "postgresql://agent:hunter2@db.internal:5432/memory"
    _, provider = provider_for(source={"postgres": {"dsn": dsn}}, writeback=True)
    assert "hunter2" not in repr(provider)
    assert "db.internal:5432/memory" in repr(provider)


class Unreadable:
    """An action response whose dump fails: the one bad item of its batch."""

    def model_dump(self, **options: Any) -> Any:
        raise RuntimeError("cannot dump")


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_one_bad_item_costs_only_itself(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    """Every good item of a batch is stored; the bad one is a contained, named failure."""
    manifest, provider = provider_for(
        source=source_of(kind, tmp_path, request), writeback={"tags": ["tool"]}
    )
    branch = Branch("system\n")
    try:
        with pytest.raises(ProviderError, match=r"stored 2 new of 2 .*response 2 \(RuntimeError\)"):
            await provider.writeback(branch, ["first", Unreadable(), "third"])
        items = await store_of(provider).search(MemoryQuery(tags=["tool"], limit=10))
        assert [item.content for item in items] == ["first", "third"]
        # through the registry, as after a real tool call: contained and logged (ADR D7)
        registry = build_registry(manifest)
        await registry.gather_writeback(branch, ["fourth", Unreadable()])
        assert "writeback raised" in caplog.text
        items = await store_of(provider).search(MemoryQuery(tags=["tool"], limit=10))
        assert [item.content for item in items] == ["first", "third", "fourth"]
    finally:
        await manifest.aclose()


HUGE_ROWS = 8 * 1024 * 1024 // 32
"""Rows of a tool result of about 8 MB (32 characters a row)."""


def huge_result() -> str:
    return "".join(f"db{n % 100:02d} disk row {n:09d} is ok  \n" for n in range(HUGE_ROWS))


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_an_8_mb_tool_result_leaves_later_turns_memory_working(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    """Written back through the library's ``gather_writeback`` (ADR D7), the result is stored
    cut to ``writeback.max_item_chars`` with a note of its whole size, and a later turn's
    memory block renders (whole, it would be over the render cap and fail every turn)."""
    huge = huge_result()
    assert len(huge) >= 8 * 1024 * 1024
    manifest = Manifest(
        version=1,
        budget=20_000,
        providers=[
            MemoryConfig(name="mem", source=source_of(kind, tmp_path, request), writeback=True)
        ],
    )
    branch = Branch("system\n")
    registry = attach(branch, manifest)
    try:
        await registry.gather_writeback(branch, [huge, "db1 disk replaced in May"])
        later = await prepare_turn(branch, Instruction("what about the disks?"))
        [stored, small] = await store_of(registry.managed[0].provider).export()
    finally:
        await manifest.aclose()
    assert later.report is not None
    assert [(o.name, o.outcome) for o in later.report.outcomes] == [("mem", "fired")]
    assert "db1 disk replaced in May" in (later.guidance or "")
    assert f"the whole result had {len(huge):,}]" in (later.guidance or "")
    assert len(stored.content) == DEFAULT_MAX_ITEM_CHARS
    assert stored.content.startswith(huge[:1000])
    assert small.content == "db1 disk replaced in May"
    assert "1 written-back item(s) over writeback.max_item_chars (4,000) stored cut" in caplog.text


async def test_the_item_cap_is_per_provider_and_counted(tmp_path: Path) -> None:
    """``max_item_chars`` is the provider's own; structured content is cut as the JSON a
    search reads; the hook's count says how many it cut."""
    manifest, provider = provider_for(
        source={"sqlite": tmp_path / "m.sqlite"}, writeback={"max_item_chars": 1_000}
    )
    structured = {"rows": ["row"] * 1_000}
    try:
        stored = await provider.writeback(Branch("s"), ["short", "y" * 5_000, structured])
        results = await build_registry(manifest).writeback_results(Branch("t"), ["z" * 1_001])
        items = await store_of(provider).export()
    finally:
        await manifest.aclose()
    assert stored == 3
    assert isinstance(stored, WritebackCount)
    assert stored.cut == 2
    assert [(r.name, r.stored, r.error, r.cut) for r in results] == [("mem", 1, None, 1)]
    contents = [item.content for item in items]
    assert contents[0] == "short"
    assert all(len(text) == 1_000 for text in contents[1:])
    assert contents[2].startswith('{"rows": ["row", "row"')
    assert contents[2].endswith(f"the whole result had {len(json.dumps(structured)):,}]")


@pytest.mark.parametrize("cap", [999, 500_001])
def test_the_item_cap_is_bounded(cap: int) -> None:
    with pytest.raises(ValidationError, match="max_item_chars"):
        MemoryConfig(name="mem", source="branch", writeback={"max_item_chars": cap})
