"""A principal's rate limit is one limit wherever its requests land.

``composer serve --rate-limit 0.05`` over a shared ``--state`` (real Redis and PostgreSQL)
admits one turn of a principal in any 20-second window: two worker processes on one socket,
or two replicas sharing the store, admit that one turn and refuse every other, where limits
of their own would admit one each. Each request goes on a new connection (so that the kernel
hands them to every worker) and names another client address (``X-Forwarded-For`` from a
trusted proxy), so the per-client limit never binds and what is measured is the principal's.
The requests go one after another, a handful, well inside one window whatever the machine's
load: counts, not timings. The limit's parts are checked directly too: the window a rate and
burst make, a store that does not answer (``503``, closed), and a key too long to be kept as
it is.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from memory.services import postgres_schema, redis_prefix_of
from psycopg import sql
from starlette.types import Message

from composer.serve.rates import MAX_KEY, RateLimit, rate_window
from composer.serve.state import ProcessState
from composer.serve.state.postgres import PostgresState
from serve.conftest import Server, start_serve
from serve.stores import postgres_dsn, redis_url, shared_store

__all__ = ["postgres_dsn", "redis_url", "shared_store"]  # the stores' fixtures

TOKENS = {"a": "token-of-team-a-0123456789", "b": "token-of-team-b-0123456789"}
MANIFEST = """\
version: 1
providers:
  - name: rules
    type: static
    text: "House rules for {{ branch.name }}"
"""
PRINCIPALS = """\
principals:
  - name: team-a
    token: "${TEAM_A_TOKEN}"
  - name: team-b
    token: "${TEAM_B_TOKEN}"
"""
RATE = "0.05"  # one turn in any 20-second window (a burst of 1)
TRIES = 8
AMOUNT = 10  # --rate-limit 5: 10 in any 2-second window


def serve(folder: Path, store: str, word: str, *extra: str) -> Server:
    (folder / "m.yaml").write_text(MANIFEST)
    (folder / "principals.yaml").write_text(PRINCIPALS)
    args = [str(folder / "m.yaml"), "--principals", str(folder / "principals.yaml")]
    args += ["--state", store, "--state-schema", word, "--rate-limit", RATE]
    args += ["--forwarded-allow-ips", "127.0.0.1", *extra]
    env = {"TEAM_A_TOKEN": TOKENS["a"], "TEAM_B_TOKEN": TOKENS["b"]}
    return start_serve(args, env=env)


def answers(urls: Sequence[str], team: str) -> list[tuple[str, int]]:
    """The URL and status of ``TRIES`` of ``team``'s turns, sent one after another to each of
    ``urls`` in turn, each on a new connection and from another client address."""
    answered = []
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(limits=limits, timeout=60) as http:
        for n, url in zip(range(1, TRIES + 1), itertools.cycle(urls), strict=False):
            headers = {"Authorization": f"Bearer {TOKENS[team]}", "X-Forwarded-For": f"10.0.0.{n}"}
            body = {"branch": {"id": "b1"}, "system": "S\n", "instruction": {"text": "x"}}
            answered.append(
                (url, http.post(f"{url}/v1/turns", json=body, headers=headers).status_code)
            )
    return answered


def test_two_workers_admit_a_principal_no_more_turns_than_one_worker(
    tmp_path: Path, shared_store: tuple[str, str]
) -> None:
    url, word = shared_store
    two = serve(tmp_path, url, word, "--workers", "2")
    try:
        statuses = [status for _, status in answers([two.url], "a")]
    finally:
        assert two.stop() == 0
    assert sorted(statuses) == [200] + [429] * (TRIES - 1), statuses  # a worker's own: 2


def test_two_replicas_sharing_the_state_share_one_limit(tmp_path: Path, redis_url: str) -> None:
    with redis_prefix_of(redis_url) as word:
        first = serve(tmp_path, redis_url, word)
        second = serve(tmp_path, redis_url, word)
        try:
            answered = answers([first.url, second.url], "a")
        finally:
            assert first.stop() == 0
            assert second.stop() == 0
    assert sorted(status for _, status in answered) == [200] + [429] * (TRIES - 1), answered
    # the replica that admitted nothing refuses all the same: the one limit is the store's
    assert {url for url, status in answered if status == 429} == {first.url, second.url}


@pytest.mark.parametrize(
    ("rate", "burst", "amount", "seconds"),
    [(5, 10, 10, 2), (100, 200, 200, 2), (0.5, 1, 1, 2), (0.3, 1, 1, 4), (1000, 2000, 2000, 2)],
)
def test_a_rate_and_burst_are_a_window_of_whole_seconds(
    rate: float, burst: int, amount: int, seconds: int
) -> None:
    item = rate_window(rate, burst, "client")
    assert (item.amount, item.get_expiry()) == (amount, seconds)
    assert item.amount / item.get_expiry() <= rate  # never more than asked, over time


async def answer(app: RateLimit, client: str) -> tuple[int, dict[str, str]]:
    """One request from ``client`` through ``app``: its status and headers."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/v1/turns", "method": "POST", "client": (client, 1)}
    scope |= {"headers": [], "query_string": b""}
    await app(scope, receive, send)
    start = sent[0]
    headers = {k.decode(): v.decode() for k, v in start.get("headers", [])}
    return start["status"], headers


async def ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def test_a_store_that_does_not_answer_closes_the_limit_with_a_503() -> None:
    gone = PostgresState("postgresql://nobody@127.0.0.1:1/none", timeout_s=1)
    app = RateLimit(ok, storage=gone.rate_storage, rate=5, burst=10)
    try:
        status, _ = await answer(app, "203.0.113.7")
    finally:
        await gone.aclose()
    assert status == 503


async def test_the_limit_admits_a_window_then_answers_429_with_retry_after() -> None:
    app = RateLimit(ok, storage=ProcessState(1).rate_storage, rate=5, burst=10)
    statuses = [(await answer(app, "203.0.113.7"))[0] for _ in range(AMOUNT)]
    refused, headers = await answer(app, "203.0.113.7")
    assert statuses == [200] * AMOUNT
    assert (refused, headers["retry-after"]) == (429, "1")
    assert (await answer(app, "203.0.113.8"))[0] == 200  # another client: its own limit


async def test_a_key_longer_than_the_bound_is_kept_by_its_digest() -> None:
    state = ProcessState(1)
    app = RateLimit(ok, storage=state.rate_storage, rate=5, burst=10)
    for n in range(3):
        assert (await answer(app, f"proxy-named-{n}-" + "x" * 100_000))[0] == 200
    storage: Any = state.rate_storage()
    assert len(storage.storage) == 3
    assert all(len(key) < MAX_KEY + 64 for key in storage.storage)


async def test_the_postgresql_storage_shifts_its_window_by_the_databases_clock(
    postgres_dsn: str,
) -> None:
    """The count of a window that ended weighs on the next by the share still covered; two
    windows without a hit start afresh, and the sweep deletes the keys idle that long."""
    with postgres_schema(postgres_dsn) as schema:
        state = PostgresState(postgres_dsn, schema=schema)
        try:
            storage = state.rate_storage()
            assert [await storage.acquire_sliding_window_entry("k", 3, 10) for _ in range(4)] == [
                True,
                True,
                True,
                False,
            ]
            previous, _, current, _ = await storage.get_sliding_window("k", 10)
            assert (previous, current) == (0, 3)
            with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # 17 s go by
                table = sql.Identifier(schema, "rate_windows")
                conn.execute(sql.SQL("UPDATE {} SET started = started - 17").format(table))
            previous, previous_ttl, current, _ = await storage.get_sliding_window("k", 10)
            assert (previous, current) == (3, 0)
            assert 2 < previous_ttl <= 3  # 3 s of the previous window are still covered
            admitted = [await storage.acquire_sliding_window_entry("k", 3, 10) for _ in range(4)]
            assert admitted == [True, True, True, False]  # floor(3 * 0.3 + 3) + 1 > 3
            with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # two windows go by
                conn.execute(sql.SQL("UPDATE {} SET started = started - 20").format(table))
            assert await storage.acquire_sliding_window_entry("k", 3, 10)
            previous, _, current, _ = await storage.get_sliding_window("k", 10)
            assert (previous, current) == (0, 1)  # afresh
            assert await storage.acquire_sliding_window_entry("idle", 3, 10)
            with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # idle two windows
                update = "UPDATE {} SET expires = expires - 21 WHERE key = 'idle'"
                conn.execute(sql.SQL(update).format(table))
            await state.sweep()  # the idle key's row is deleted, the other kept
            assert await storage.reset() == 1
        finally:
            await state.aclose()
