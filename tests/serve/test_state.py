"""The shared branch state (``composer.serve.state``) in the real PostgreSQL and Redis: two
store objects stand for two replicas, and agree on every turn's key whatever the order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from memory.services import postgres_schema, redis_prefix_of
from memory.stores_fixtures import postgres_dsn, redis_url

from builtin_providers.stores import SqliteMemoryStore
from composer import load_manifest
from composer.errors import ServeError
from composer.manifest.dsn import mask_url
from composer.serve.models import TurnRequest, WritebackRequest
from composer.serve.service import ContextService
from composer.serve.state import NO_TURN, StateStore, open_state
from composer.serve.state.postgres import PostgresState


@pytest.fixture
def state_url(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """A store's URL and a schema (PostgreSQL) or key prefix (Redis) no other test uses."""
    if request.param == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        with postgres_schema(dsn) as schema:
            yield dsn, schema
        return
    url = request.getfixturevalue("redis_url")
    with redis_prefix_of(url) as prefix:
        yield url, prefix


__all__ = ["postgres_dsn", "redis_url"]  # the servers' fixtures

KINDS = pytest.mark.parametrize("state_url", ["postgres", "redis"], indirect=True)


@pytest.fixture
async def replicas(state_url: tuple[str, str]) -> AsyncIterator[tuple[StateStore, StateStore]]:
    """Two stores on the same URL and schema: what two replicas hold."""
    url, schema = state_url
    one = open_state(url, schema=schema, max_records=5, ttl_s=3600)
    two = open_state(url, schema=schema, max_records=5, ttl_s=3600)
    yield one, two
    await one.aclose()
    await two.aclose()


@KINDS
async def test_two_replicas_counting_one_branch_at_once_get_every_number_once(
    replicas: tuple[StateStore, StateStore],
) -> None:
    one, two = replicas
    slots = await asyncio.gather(
        *(store.begin("a", "inc-1", "ops", {"team": "a"}) for store in [one, two] * 20)
    )
    assert sorted(slot.count for slot in slots) == list(range(1, 41))
    assert len({slot.epoch for slot in slots}) == 1  # one record, one epoch
    assert await one.current("a", "inc-1") == await two.current("a", "inc-1")
    assert await two.current("a", "inc-1") == f"{slots[0].epoch}:40"


@KINDS
async def test_a_record_belongs_to_its_principal(replicas: tuple[StateStore, StateStore]) -> None:
    one, two = replicas
    slot = await one.begin("a", "inc-1", "ops", {"team": "a"})
    await one.finish("a", "inc-1", slot, "team a's context", {"fired": []})
    assert await two.recall("b", "inc-1") is None
    assert await two.current("b", "inc-1") == NO_TURN
    record = await two.recall("a", "inc-1")
    assert record is not None
    assert (record.principal, record.name, record.metadata) == ("a", "ops", {"team": "a"})
    assert record.guidance == "team a's context"
    # b's own branch of the same id is another record, counted from 1 with its own epoch
    theirs = await two.begin("b", "inc-1", "ops", {"team": "b"})
    assert theirs.count == 1


@KINDS
async def test_a_turn_finished_late_never_hides_a_later_ones_context(
    replicas: tuple[StateStore, StateStore],
) -> None:
    one, two = replicas
    first = await one.begin("a", "inc-1", None, {})
    second = await two.begin("a", "inc-1", None, {})
    await two.finish("a", "inc-1", second, "second", None)
    await one.finish("a", "inc-1", first, "first", None)  # the slower replica ends last
    record = await one.recall("a", "inc-1")
    assert record is not None
    assert record.guidance == "second"


@KINDS
async def test_over_the_bound_the_least_recently_used_go_and_come_back_in_a_new_epoch(
    replicas: tuple[StateStore, StateStore],
) -> None:
    one, two = replicas
    first = await one.begin("a", "b0", None, {})
    for number in range(1, 8):
        await two.begin("a", f"b{number}", None, {})
        await asyncio.sleep(0.002)  # distinct last-use times, for the order of the trim
    await one.sweep()
    kept = [n for n in range(8) if await two.recall("a", f"b{n}") is not None]
    assert kept == [3, 4, 5, 6, 7]  # max_records=5, the oldest went
    again = await one.begin("a", "b0", None, {})
    # counted from 1 again, but never taken for the old turn 1: a new epoch
    assert again.count == 1
    assert again.key != first.key


async def test_the_url_is_never_shown_with_its_password() -> None:
    url = "postgresql://app:s3cret-pw@db.example:5432/composer?sslpassword=other"
    store = open_state(url, schema="fleet")
    assert "s3cret-pw" not in store.describe()
    assert "other" not in store.describe()
    assert store.describe() == "postgresql://app:***@db.example:5432/composer schema fleet"
    assert "s3cret" not in mask_url("redis://:s3cret@cache:6379/2")
    assert "s3cret" not in repr(open_state("redis://:s3cret@cache:6379/2"))


def test_a_store_it_cannot_use_is_refused_by_name() -> None:
    with pytest.raises(ServeError, match="postgresql:// or redis://"):
        open_state("mysql://u:pw@h/db")
    with pytest.raises(ServeError, match="lower-case SQL identifier"):
        open_state("postgresql://h/db", schema='x"; DROP TABLE y; --')


def served_manifest(folder: Path) -> Path:
    """A manifest whose memory is split by the branch's name: where a writeback lands says
    which name the server gave its branch."""
    path = folder / "m.yaml"
    path.write_text(
        "version: 1\n"
        "providers:\n"
        "  - name: notes\n"
        "    type: memory\n"
        "    source: {sqlite: notes.sqlite}\n"
        '    namespace: "{{ branch.name }}"\n'
        '    query: {text: "{{ instruction.text }}"}\n'
        "    writeback: true\n"
    )
    return path


async def test_a_writeback_follows_the_last_turn_whichever_replica_served_it(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """Replica one keeps the branch as its own turn left it; a later turn on replica two
    renamed it; a writeback on replica one without ``branch`` is the later turn's."""
    path = served_manifest(tmp_path)
    with postgres_schema(postgres_dsn) as schema:
        one = ContextService(load_manifest(path), state=open_state(postgres_dsn, schema=schema))
        two = ContextService(load_manifest(path), state=open_state(postgres_dsn, schema=schema))
        async with one, two:
            await one.turn(TurnRequest.model_validate(turn_of("first")))
            await two.turn(TurnRequest.model_validate(turn_of("second")))
            request = WritebackRequest(action_responses=["the result"])
            status, answer = await one.writeback("inc-1", request)
            assert (status, answer["stored"]) == (200, 1)
            retried = await two.writeback("inc-1", request)
            assert retried[1]["stored"] == 0  # the same turn, on the other replica
        items = SqliteMemoryStore(tmp_path / "notes.sqlite")
        try:
            assert [item.namespace for item in await items.export()] == ["second"]
        finally:
            await items.aclose()


def turn_of(name: str) -> dict[str, object]:
    return {"branch": {"id": "inc-1", "name": name}, "system": "S\n", "instruction": {"text": "x"}}


async def test_readiness_asks_a_shared_store_at_most_once_a_second(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """``/readyz`` is open to anyone: a flood of probes is one question to the store."""

    class Counted(PostgresState):
        checks = 0

        async def check(self) -> None:
            Counted.checks += 1
            await super().check()

    with postgres_schema(postgres_dsn) as schema:
        service = ContextService(
            load_manifest(served_manifest(tmp_path)), state=Counted(postgres_dsn, schema=schema)
        )
        async with service:
            for _ in range(200):
                await service.check_state()
                assert service.readiness().state is not None
        assert Counted.checks == 1
