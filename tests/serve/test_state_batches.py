"""The shared state's calls on the wire: a lone turn is two round trips, concurrent turns share
them (``composer.serve.state.batch``), counted by a relay in front of the real PostgreSQL and
Redis; and what a hostile turn holds (a NUL, a text no encoding takes) fails no other turn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from composer import load_manifest
from composer.serve.models import TurnRequest
from composer.serve.service import ContextService
from composer.serve.state import StateStore, TurnSlot, open_state
from composer.serve.state.batch import Batcher
from serve.relay import Relay, relaying
from serve.stores import postgres_dsn, redis_url, shared_store

__all__ = ["postgres_dsn", "redis_url", "shared_store"]  # the stores' fixtures

HOSTILE = "nul \x00 here, a private-use \ue000 and its escape \ue0000 \ue000\ue000 end"


def through(url: str, relay: Relay) -> str:
    """``url`` with its host and port those of ``relay``."""
    parts = urlsplit(url)
    user, at, _ = parts.netloc.rpartition("@")
    return parts._replace(netloc=f"{user}{at}127.0.0.1:{relay.port}").geturl()


@pytest.fixture
def relay(shared_store: tuple[str, str]) -> Iterator[Relay]:
    url = urlsplit(shared_store[0])
    default = 5432 if url.scheme.startswith("postgres") else 6379
    with relaying((url.hostname or "127.0.0.1", url.port or default)) as relay:
        yield relay


@pytest.fixture
async def store(shared_store: tuple[str, str], relay: Relay) -> AsyncIterator[StateStore]:
    """A store reached through ``relay``, warm: connected, its statement prepared, its
    script loaded (each a round trip or more, once)."""
    url, schema = shared_store
    state = open_state(through(url, relay), schema=schema)
    for _ in range(6):
        await turn(state, "warm")
    yield state
    await state.aclose()


async def turn(store: StateStore, branch: str, text: str = "composed") -> TurnSlot:
    """What a served turn asks of the store: its count, then (providers ran) its text."""
    slot = await store.begin("a", branch, "ops", {"team": "a"})
    await asyncio.sleep(0)
    await store.finish("a", branch, slot, f"{text} {slot.count}", {"fired": ["rules"]})
    return slot


async def test_a_lone_turn_is_two_round_trips(store: StateStore, relay: Relay) -> None:
    """The count before the providers, the text before the answer: neither can wait."""
    before = relay.exchanges
    slot = await turn(store, "inc-1")
    assert relay.exchanges - before == 2
    record = await store.recall("a", "inc-1")
    assert record is not None
    assert (record.turns, record.guidance) == (slot.count, f"composed {slot.count}")


async def test_twelve_turns_at_once_share_four_round_trips(store: StateStore, relay: Relay) -> None:
    before = relay.exchanges
    slots = await asyncio.gather(*(turn(store, f"b{n}") for n in range(12)))
    assert relay.exchanges - before <= 4  # one at a time: 24
    assert [slot.count for slot in slots] == [1] * 12
    for number, slot in enumerate(slots):
        record = await store.recall("a", f"b{number}")
        assert record is not None
        assert (record.epoch, record.guidance) == (slot.epoch, "composed 1")


async def test_one_branch_counted_at_once_gets_each_number_once(store: StateStore) -> None:
    """A batch holds a branch once; its other calls go in later batches, in order."""
    slots = await asyncio.gather(*(turn(store, "inc-1") for _ in range(20)))
    assert sorted(slot.count for slot in slots) == list(range(1, 21))
    record = await store.recall("a", "inc-1")
    assert record is not None
    assert record.guidance == "composed 20"  # a later turn's text is never hidden


async def test_a_nul_is_kept_as_given_and_fails_nothing(store: StateStore) -> None:
    """PostgreSQL's text and jsonb refuse a NUL: the store escapes it, and reads it back."""
    slot = await store.begin("a", "inc-1", HOSTILE, {"key \x00": [HOSTILE, {"\ue000": 1}]})
    await store.finish("a", "inc-1", slot, HOSTILE, {"fired": [HOSTILE], "turn_id": "\ue0000"})
    record = await store.recall("a", "inc-1")
    assert record is not None
    assert record.name == HOSTILE
    assert record.metadata == {"key \x00": [HOSTILE, {"\ue000": 1}]}
    assert record.guidance == HOSTILE
    assert record.report == {"fired": [HOSTILE], "turn_id": "\ue0000"}


async def test_a_call_the_store_cannot_take_fails_alone(store: StateStore) -> None:
    """PostgreSQL refuses a lone surrogate (Redis keeps it, escaped in JSON): in a batch
    with others, only its own turn fails."""
    unencodable = "lone \ud800 surrogate"

    async def hostile() -> TurnSlot | Exception:
        try:
            return await store.begin("a", "bad", unencodable, {})
        except Exception as e:
            return e

    results = await asyncio.gather(hostile(), *(turn(store, f"b{n}") for n in range(8)))
    assert all(isinstance(slot, TurnSlot) and slot.count == 1 for slot in results[1:])
    if store.kind == "postgres":
        assert isinstance(results[0], Exception)


async def test_a_served_turn_whose_text_holds_a_nul_is_answered_and_kept(
    tmp_path: Path, shared_store: tuple[str, str]
) -> None:
    """Before, PostgreSQL refused the write: the turn was a 503 and readiness failed."""
    url, schema = shared_store
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\n"
        "providers:\n"
        "  - {name: echo, type: static, text: 'Asked: {{ instruction.text }}'}\n"
    )
    body = {
        "branch": {"id": "inc-1", "name": HOSTILE, "metadata": {"team": HOSTILE}},
        "system": "S\n",
        "instruction": {"text": HOSTILE},
    }
    service = ContextService(load_manifest(path), state=open_state(url, schema=schema))
    async with service:
        answer = await service.turn(TurnRequest.model_validate(body))
        assert HOSTILE in answer["guidance"]
        record = await service.last_turn("inc-1")
        assert record is not None
        assert record.guidance == answer["guidance"]
        assert (record.name, record.metadata) == (HOSTILE, {"team": HOSTILE})
        await service.check_state()
        assert service.state_error is None


async def test_a_batch_holds_at_most_its_bound_and_a_key_once() -> None:
    """Each call answered in order whatever the batches; none bigger than ``max_batch``."""
    sizes: list[int] = []

    async def send(calls: Sequence[tuple[str, int]]) -> list[int | Exception]:
        sizes.append(len(calls))
        assert len({key for key, _ in calls}) == len(calls)  # a key once a batch
        await asyncio.sleep(0.001)
        return [number if number != 13 else ValueError("thirteen") for _, number in calls]

    batcher: Batcher[tuple[str, int], int] = Batcher(send, key=lambda call: call[0], max_batch=8)

    async def one(key: str, number: int) -> int | str:
        try:
            return await batcher.call((key, number))
        except ValueError as e:
            return str(e)

    calls = [(f"k{number % 30}", number) for number in range(60)]
    answers = await asyncio.gather(*(one(key, number) for key, number in calls))
    assert answers == [number if number != 13 else "thirteen" for _, number in calls]
    assert (max(sizes), sum(sizes)) == (8, 60)


async def test_a_caller_cancelled_before_its_batch_goes_is_left_out() -> None:
    sent: list[int] = []

    async def send(calls: Sequence[int]) -> list[int | Exception]:
        sent.extend(calls)
        await asyncio.sleep(0.01)
        return list(calls)

    batcher: Batcher[int, int] = Batcher(send)
    first = asyncio.ensure_future(batcher.call(1))
    await asyncio.sleep(0.001)  # the first is out; the next two wait for it
    waiting = [asyncio.ensure_future(batcher.call(number)) for number in (2, 3)]
    await asyncio.sleep(0)
    waiting[0].cancel()
    assert (await first, await waiting[1]) == (1, 3)
    assert sent == [1, 3]
