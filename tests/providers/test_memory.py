"""memory: the JSONL store, the provider on JSONL and branch stores, writeback, LionAGI's store."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from builtin_providers.memory import MemoryConfig, MemoryProvider
from builtin_providers.memory_store import JsonlMemoryStore, MemoryItem, MemoryQuery, item_id
from composer.build import build_registry
from composer.errors import ProviderError, StoreError
from composer.manifest import Manifest
from composer.turn import Branch, Instruction

RECORDS: list[dict[str, Any]] = [
    {"content": "Deploys freeze on Fridays", "tags": ["policy"], "metadata": {"team": "ops"}},
    {"content": "The DEPLOY bot is called Rex", "tags": ["trivia"], "metadata": {"team": "dev"}},
    {"content": "Rollbacks need two approvals", "tags": ["policy", "rollback"], "id": "r-1"},
    {"content": {"nested": "deploy data"}, "metadata": {"team": "ops", "level": 2}},
]


def write_jsonl(path: Path, records: list[Any], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


@pytest.fixture
def memfile(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "memory.jsonl", RECORDS)


def memory_provider(source: Any, **options: Any) -> MemoryProvider:
    manifest = Manifest(version=1, providers=[MemoryConfig(name="mem", source=source, **options)])
    provider = build_registry(manifest).managed[0].provider
    assert isinstance(provider, MemoryProvider)
    return provider


async def contents(store: Any, **query: Any) -> list[Any]:
    return [item.content for item in await store.search(MemoryQuery(**query))]


async def test_jsonl_search_semantics(memfile: Path) -> None:
    store = JsonlMemoryStore(memfile)
    assert await contents(store, text="deploy") == [
        "Deploys freeze on Fridays",
        "The DEPLOY bot is called Rex",
        {"nested": "deploy data"},
    ]
    assert await contents(store, tags=["rollback", "trivia"]) == [
        "The DEPLOY bot is called Rex",
        "Rollbacks need two approvals",
    ]
    assert await contents(store, filters={"team": "ops"}) == [
        "Deploys freeze on Fridays",
        {"nested": "deploy data"},
    ]
    assert await contents(store, text="deploy", filters={"team": "ops", "level": 2}) == [
        {"nested": "deploy data"}
    ]
    assert await contents(store, text="deploy", limit=1) == ["Deploys freeze on Fridays"]
    assert len(await contents(store)) == 4
    assert await contents(store, text="nothing like this") == []


async def test_jsonl_retrieve_and_store(memfile: Path) -> None:
    store = JsonlMemoryStore(memfile)
    found = await store.retrieve("r-1")
    assert found is not None
    assert found.content == "Rollbacks need two approvals"
    assert found.id == item_id("r-1")
    new_id = await store.store(MemoryItem("fresh fact", ["new"], {"k": 1}))
    again = await store.retrieve(new_id)
    assert again is not None
    assert (again.content, again.tags, again.metadata) == ("fresh fact", ["new"], {"k": 1})
    assert await store.retrieve("unknown") is None


async def test_bad_and_truncated_lines_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(
        '{"content": "good one"}\n'
        "not json\n"
        "[1, 2]\n"
        '{"tags": ["no content"]}\n'
        '{"content": "bad tags", "tags": "x"}\n'
        '{"content": "good two", "tags": ["t"]}\n'
        '{"content": "cut off in the mi'
    )
    store = JsonlMemoryStore(path)
    with caplog.at_level(logging.WARNING):
        assert await contents(store) == ["good one", "good two"]
    for where in ("line 2", "line 3", "line 4", "line 5", "truncated last line"):
        assert where in caplog.text
    await store.store(MemoryItem("after the cut"))
    lines = path.read_text().splitlines()
    assert lines[-2] == '{"content": "cut off in the mi'
    assert json.loads(lines[-1])["content"] == "after the cut"
    assert await contents(store) == ["good one", "good two", "after the cut"]


async def test_concurrent_appends_stay_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    stores = [JsonlMemoryStore(path) for _ in range(4)]  # separate objects, one file
    await asyncio.gather(
        *(stores[i % 4].store(MemoryItem(f"item {i} " + "x" * 5000)) for i in range(40))
    )
    lines = path.read_text().splitlines()
    assert len(lines) == 40
    assert all(json.loads(line)["content"].startswith("item ") for line in lines)


async def test_missing_file_is_an_empty_store(tmp_path: Path) -> None:
    assert await contents(JsonlMemoryStore(tmp_path / "none.jsonl")) == []


async def test_a_file_over_the_size_cap_fails_instead_of_being_read(memfile: Path) -> None:
    """A memory file grown past max_bytes is an error naming the limit, not a huge read."""
    size = memfile.stat().st_size
    assert await contents(JsonlMemoryStore(memfile, max_bytes=size))  # at the cap: fine
    with pytest.raises(StoreError, match=rf"is {size} bytes, over the {size - 1}-byte limit"):
        await contents(JsonlMemoryStore(memfile, max_bytes=size - 1))


async def test_provider_on_jsonl_with_templated_query(memfile: Path) -> None:
    provider = memory_provider(
        {"jsonl": memfile},
        query={"text": "{{ instruction.text }}", "filters": {"team": "{{ branch.metadata.team }}"}},
        template="{{ index }}. {{ item.content }} {{ item.tags }}",
        header="Memory:",
    )
    block = await provider.provide(Branch("s", metadata={"team": "ops"}), Instruction("deploy"))
    assert (
        block == "Memory:\n1. Deploys freeze on Fridays ['policy']\n2. {'nested': 'deploy data'} []"
    )


async def test_provider_tags_and_default_template(memfile: Path) -> None:
    provider = memory_provider({"jsonl": memfile}, query={"tags": ["{{ 'policy' }}"], "limit": 1})
    assert await provider.provide(Branch("s"), Instruction("x")) == "- Deploys freeze on Fridays"


async def test_no_hit_is_none(memfile: Path) -> None:
    provider = memory_provider({"jsonl": memfile}, query={"text": "{{ instruction.text }}"})
    assert await provider.provide(Branch("s"), Instruction("zeppelins")) is None


async def test_source_branch(memfile: Path) -> None:
    provider = memory_provider("branch", query={"text": "rex"})
    branch = Branch("s", memory=JsonlMemoryStore(memfile))
    assert await provider.provide(branch, Instruction("x")) == "- The DEPLOY bot is called Rex"
    with pytest.raises(ProviderError, match="branch has no memory store"):
        await provider.provide(Branch("s"), Instruction("x"))


async def test_writeback_off_means_no_attribute(memfile: Path) -> None:
    provider = memory_provider({"jsonl": memfile})
    assert getattr(provider, "writeback", None) is None


async def test_writeback_stores_action_responses(memfile: Path) -> None:
    manifest = Manifest(
        version=1,
        providers=[
            MemoryConfig(
                name="mem",
                source={"jsonl": memfile},
                query={"tags": ["tool"]},
                writeback={"tags": ["tool"], "metadata": {"env": "test"}},
            )
        ],
    )
    registry = build_registry(manifest)
    provider = registry.providers[0]
    branch = Branch("s")
    stored = await provider.writeback(branch, [{"function": "add", "output": 3}, None, "plain"])
    assert stored == 2
    await registry.gather_writeback(branch, [{"function": "mul", "output": 6}])
    items = await JsonlMemoryStore(memfile).search(MemoryQuery(tags=["tool"]))
    assert [i.content for i in items] == [
        {"function": "add", "output": 3},
        "plain",
        {"function": "mul", "output": 6},
    ]
    assert items[0].metadata == {
        "source": "writeback",
        "provider": "mem",
        "branch_id": branch.id,
        "env": "test",
    }
    block = await provider.provide(branch, Instruction("x"))
    assert block is not None
    assert "'function': 'mul'" in block


def test_repr_has_no_query_values(memfile: Path) -> None:
    provider = memory_provider({"jsonl": memfile}, query={"text": "secret-ish"})
    assert repr(provider) == f"<MemoryProvider 'mem' source={str(memfile)!r}>"


async def test_jsonl_store_matches_lionagi_in_memory_store(memfile: Path) -> None:
    memory = pytest.importorskip("lionagi.protocols.memory")
    theirs = memory.InMemoryStore()
    for record in RECORDS:
        await theirs.store(
            memory.MemoryItem(
                content=record["content"],
                tags=record.get("tags", []),
                metadata=record.get("metadata", {}),
            )
        )
    ours = JsonlMemoryStore(memfile)
    assert isinstance(ours, memory.MemoryStore)
    queries: list[dict[str, Any]] = [
        {"text": "deploy"},
        {"text": "DEPLOY", "limit": 2},
        {"tags": ["policy"]},
        {"tags": ["rollback", "trivia"]},
        {"filters": {"team": "ops"}},
        {"text": "deploy", "tags": ["trivia"], "filters": {"team": "dev"}},
        {},
        {"limit": 0},
    ]
    for query in queries:
        expected = [i.content for i in await theirs.search(memory.MemoryQuery(**query))]
        assert await contents(ours, **query) == expected, query


async def test_provider_and_writeback_on_lionagi_store() -> None:
    memory = pytest.importorskip("lionagi.protocols.memory")
    fields = pytest.importorskip("lionagi.operations.fields")
    store = memory.InMemoryStore()
    await store.store(memory.MemoryItem(content="Canary first, always", tags=["policy"]))
    manifest = Manifest(
        version=1,
        providers=[
            MemoryConfig(
                name="mem",
                query={"text": "{{ instruction.text }}"},
                writeback=True,
            )
        ],
    )
    provider = build_registry(manifest).providers[0]
    branch = Branch("s", memory=store)
    assert await provider.provide(branch, Instruction("canary")) == "- Canary first, always"
    response = fields.ActionResponseModel(function="lookup", arguments={"q": "x"}, output="42")
    assert await provider.writeback(branch, [response]) == 1
    found = await store.search(memory.MemoryQuery(tags=["action_response"]))
    assert len(found) == 1
    assert isinstance(found[0], memory.MemoryItem)
    assert found[0].content == {"function": "lookup", "arguments": {"q": "x"}, "output": "42"}
    assert found[0].metadata["branch_id"] == branch.id
