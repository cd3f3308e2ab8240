"""A turn while the database restarts: the memory provider fails (contained, the turn goes on)
and the next turn, once the server is back, fires again. Against a throwaway cluster started
here on its own port, never the shared server other tests use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from memory.services import PostgresCluster, require_postgres_extra, throwaway_postgres

from builtin_providers.memory import MemoryConfig
from builtin_providers.stores import MemoryItem, PostgresMemoryStore
from composer.build import attach
from composer.manifest import Manifest
from composer.turn import Branch, Instruction, prepare_turn


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    require_postgres_extra()
    with throwaway_postgres() as started:
        yield started


async def test_a_turn_during_a_restart_fails_alone_and_the_next_recovers(
    cluster: PostgresCluster,
) -> None:
    seeded = PostgresMemoryStore(cluster.dsn, schema="composer")
    await seeded.add([MemoryItem("Roll back first, debug after.", ["deploy"], {}, "m1")])
    await seeded.aclose()
    config = MemoryConfig(
        name="mem",
        source={"postgres": {"dsn": cluster.dsn, "connect_timeout_s": 2}},
        query={"text": "{{ instruction.text }}"},
    )
    manifest = Manifest(version=1, providers=[config])
    branch = Branch("system\n")
    attach(branch, manifest)
    question = Instruction("how do we roll back a deploy?")
    try:
        first = await prepare_turn(branch, question)
        assert "Roll back first" in (first.guidance or "")
        assert branch.last_context_report is not None
        assert branch.last_context_report.failed == []

        cluster.stop()
        during = await prepare_turn(branch, question)
        report = branch.last_context_report
        assert report is not None
        assert report.failed == ["mem"]  # contained: the turn itself went on
        assert during.guidance == "system\n"

        cluster.start()
        after = await prepare_turn(branch, question)
        assert "Roll back first" in (after.guidance or "")
        assert branch.last_context_report is not None
        assert branch.last_context_report.failed == []
    finally:
        await manifest.aclose()
