"""A question phrased as a sentence finds the relevant memories, best first, in SQLite and
PostgreSQL; LionAGI's substring match (still there as ``match: substring``) finds none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builtin_providers.memory import MemoryConfig, MemoryProvider
from builtin_providers.stores import ItemStore, MemoryItem, MemoryQuery
from composer.build import build_registry
from composer.manifest import Manifest
from composer.turn import Branch, Instruction

NOTES = [
    MemoryItem("Lunch is served at noon in the big kitchen.", ["office"], {}, "lunch"),
    MemoryItem(
        "After the Tuesday deploy the API returned 502 errors until the pods were rolled back.",
        ["incident"],
        {"team": "platform"},
        "deploy-502",
    ),
    MemoryItem("The VPN must be on before running deployctl.", ["deploy"], {}, "vpn"),
    MemoryItem(
        "Database failovers are drilled monthly; errors during a drill are expected.",
        ["database"],
        {"team": "data"},
        "drill",
    ),
    MemoryItem("Certificates renew automatically every sixty days.", ["tls"], {}, "tls"),
]

QUESTION = "What should I do when the API returns 502 errors after a deploy?"


async def ids(store: ItemStore, **query: Any) -> list[str]:
    return [item.id for item in await store.search(MemoryQuery(**query))]


async def test_a_sentence_finds_the_relevant_items_ranked(ranked_store: ItemStore) -> None:
    await ranked_store.add(NOTES)
    hits = await ranked_store.search(MemoryQuery(text=QUESTION, match="fulltext", limit=3))
    assert hits[0].id == "deploy-502"  # api, 502, errors, deploy: the most words in common
    assert "lunch" not in [hit.id for hit in hits]
    scores = [hit.score for hit in hits]
    assert all(score is not None for score in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert await ids(ranked_store, text=QUESTION, match="substring") == []


async def test_words_are_stemmed_and_stop_words_ignored(ranked_store: ItemStore) -> None:
    await ranked_store.add(NOTES)
    # "deploys" finds "deploy"; "failover" finds "failovers"; "renewing" finds "renew".
    assert await ids(ranked_store, text="deploys", match="fulltext") == ["deploy-502"]
    assert await ids(ranked_store, text="failover", match="fulltext") == ["drill"]
    assert await ids(ranked_store, text="renewing", match="fulltext") == ["tls"]
    # Only stop words: nothing to look for, so nothing matches (not everything).
    assert await ids(ranked_store, text="what is the", match="fulltext") == []


async def test_limit_tags_filters_and_min_score_apply(ranked_store: ItemStore) -> None:
    await ranked_store.add(NOTES)
    assert len(await ids(ranked_store, text=QUESTION, match="fulltext", limit=1)) == 1
    assert await ids(ranked_store, text="errors", match="fulltext", filters={"team": "data"}) == [
        "drill"
    ]
    assert await ids(ranked_store, text="errors", match="fulltext", tags=["incident"]) == [
        "deploy-502"
    ]
    hits = await ranked_store.search(MemoryQuery(text=QUESTION, match="fulltext", limit=5))
    best = hits[0].score
    assert best is not None
    above = await ids(ranked_store, text=QUESTION, match="fulltext", min_score=best)
    assert above == ["deploy-502"]
    assert await ids(ranked_store, text=QUESTION, match="fulltext", min_score=best * 2 + 1) == []


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_the_provider_ranks_the_instruction(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """With source sqlite or postgres, query.text of the instruction is full text by default;
    ``match: substring`` gives LionAGI's behaviour back (nothing, for a sentence)."""
    source: dict[str, Any]
    if kind == "sqlite":
        source = {"sqlite": tmp_path / "m.sqlite"}
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        source = {"postgres": {"dsn": dsn, "schema": request.getfixturevalue("pg_schema")}}
    query = {"text": "{{ instruction.text }}", "limit": 2}
    ranked = MemoryConfig(name="ranked", source=source, query=query, template="{{ item.id }}")
    plain = MemoryConfig(
        name="plain", source=source, query=query, template="{{ item.id }}", match="substring"
    )
    manifest = Manifest(version=1, providers=[ranked, plain])
    registry = build_registry(manifest)
    providers = [managed.provider for managed in registry.managed]
    assert all(isinstance(p, MemoryProvider) for p in providers)
    store = providers[0].store  # type: ignore[attr-defined]
    assert store is providers[1].store  # type: ignore[attr-defined]
    await store.add(NOTES)
    branch = Branch("system\n")
    try:
        block = await registry.managed[0].provide(branch, Instruction(QUESTION))
        assert block is not None
        assert block.splitlines()[0] == "deploy-502"
        assert await registry.managed[1].provide(branch, Instruction(QUESTION)) is None
    finally:
        await manifest.aclose()
