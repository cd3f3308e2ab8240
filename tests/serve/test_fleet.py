"""A fleet of ``composer serve`` replicas behind a round-robin proxy (``serve.fleet``), sharing
this machine's PostgreSQL (memory, branch state and audit, in a schema of the test's own) and
Redis (the provider cache, under a key word of the test's own).

One branch's turns and writebacks alternate over the replicas and lose and double nothing;
the MCP resource and ``composer audit list`` see every turn whichever replica served it; a
replica killed mid-run loses only its requests in flight; a rolling restart onto a new
manifest version never serves a cached block of the other version.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextResourceContents
from memory.services import postgres_schema, redis_prefix_of
from memory.stores_fixtures import postgres_dsn, redis_url

from serve.conftest import PYTHON, ROOT, Server, start_serve
from serve.fleet import Fleet, proxy_for, start_replicas

__all__ = ["postgres_dsn", "redis_url"]  # the servers' fixtures

TOKENS = {"a": "fleet-token-of-team-a-0123", "b": "fleet-token-of-team-b-4567"}
REPLICAS = 3
TURNS = 9

MANIFEST = """\
version: 1
runtime:
  cache: {{redis: {{url: "{redis}", prefix: "{word}:cache:", timeout_s: 10}}}}
  audit: {{postgres: {{dsn: "{dsn}", schema: {schema}}}}}
providers:
  - name: policy
    type: static
    text: "policy {version} for team {{{{ branch.metadata.team }}}}"
    cache: {{ttl_s: 600}}
  - name: notes
    type: memory
    source: {{postgres: {{dsn: "{dsn}", schema: {schema}}}, shared: true}}
    namespace: "{{{{ branch.metadata.team }}}}"
    query: {{text: "{{{{ instruction.text }}}}", limit: 50}}
    match: substring
    writeback: true
"""
PRINCIPALS = """\
principals:
  - name: team-a
    token: "${FLEET_TOKEN_A}"
    metadata: {team: a}
  - name: team-b
    token: "${FLEET_TOKEN_B}"
    metadata: {team: b}
"""


@pytest.fixture(scope="module")
def stores(postgres_dsn: str, redis_url: str) -> Iterator[tuple[str, str, str, str]]:
    """The DSN, this test's schema, the Redis URL and this test's Redis key word."""
    with postgres_schema(postgres_dsn) as schema, redis_prefix_of(redis_url) as word:
        yield postgres_dsn, schema, redis_url, word


def write_manifest(path: Path, stores: tuple[str, str, str, str], version: str) -> None:
    dsn, schema, redis, word = stores
    text = MANIFEST.format(dsn=dsn, schema=schema, redis=redis, word=word, version=version)
    path.write_text(text)


def serve_args(folder: Path, stores: tuple[str, str, str, str]) -> list[str]:
    schema = stores[1]
    return [
        str(folder / "m.yaml"),
        "--principals",
        str(folder / "principals.yaml"),
        "--state",
        "${FLEET_STATE_DSN}",
        "--state-schema",
        schema,
        "--rate-limit",
        "0",
    ]


def fleet_env(stores: tuple[str, str, str, str]) -> dict[str, str]:
    return {
        "FLEET_TOKEN_A": TOKENS["a"],
        "FLEET_TOKEN_B": TOKENS["b"],
        "FLEET_STATE_DSN": stores[0],
    }


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fleet")


@pytest.fixture(scope="module")
def fleet(folder: Path, stores: tuple[str, str, str, str]) -> Iterator[Fleet]:
    """One fleet for the module's tests, in order: the last ones restart and kill replicas."""
    write_manifest(folder / "m.yaml", stores, "v1")
    (folder / "principals.yaml").write_text(PRINCIPALS)
    replicas = start_replicas(serve_args(folder, stores), REPLICAS, fleet_env(stores))
    try:
        yield from proxy_for(replicas)
    finally:
        for server in replicas:  # those in the fleet now: ``Fleet.replace`` swaps them here
            if server.process.poll() is None:
                server.process.kill()
                server.process.wait()
            if server.process.stdout is not None:
                server.process.stdout.close()


def as_team(team: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[team]}"}


def turn(fleet: Fleet, team: str, branch: str, text: str) -> httpx.Response:
    body = {"branch": {"id": branch, "name": "incident"}, "system": "S\n"}
    body["instruction"] = {"text": text}
    return httpx.post(f"{fleet.url}/v1/turns", json=body, headers=as_team(team), timeout=60)


def writeback(fleet: Fleet, team: str, branch: str, results: list[Any]) -> httpx.Response:
    return httpx.post(
        f"{fleet.url}/v1/branches/{branch}/writeback",
        json={"action_responses": results},
        headers=as_team(team),
        timeout=60,
    )


def written_back(stores: tuple[str, str, str, str], namespace: str) -> list[str]:
    import psycopg
    from psycopg import sql

    dsn, schema, _, _ = stores
    query = sql.SQL(
        "SELECT content FROM {}.items WHERE namespace = %s AND written_back ORDER BY seq"
    ).format(sql.Identifier(schema))
    with psycopg.connect(dsn) as conn:
        # a tool result is stored as its JSON text
        return [json.loads(row[0]) for row in conn.execute(query, (namespace,)).fetchall()]


async def read_context(fleet: Fleet, team: str, branch: str) -> str | None:
    """The MCP resource of the branch's last context; None when there is none."""
    async with (
        httpx2.AsyncClient(headers=as_team(team), timeout=60) as http,
        Client(streamable_http_client(f"{fleet.url}/mcp", http_client=http)) as client,
    ):
        try:
            read = await client.read_resource(f"composer://branches/{branch}/context")
        except MCPError as e:
            if "no composed turn yet" in str(e):
                return None
            raise
    (content,) = read.contents
    assert isinstance(content, TextResourceContents)
    return content.text


def audit_list(stores: tuple[str, str, str, str], branch: str) -> list[str]:
    """The turn ids ``composer audit list DSN --schema S`` shows for ``branch``."""
    dsn, schema, _, _ = stores
    listed = subprocess.run(
        [PYTHON, "-m", "composer", "audit", "list", dsn, "--schema", schema, "--limit", "1000"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    if listed.returncode == 1 and "holds no audit table" in listed.stderr:
        return []  # no replica's writer has written its first batch yet
    assert listed.returncode == 0, listed.stderr
    return [line.split()[1] for line in listed.stdout.splitlines() if f"  {branch} (" in line]


def audited(stores: tuple[str, str, str, str], branch: str, expected: int) -> list[str]:
    """The audit list of ``branch`` once it holds ``expected`` turns: each replica writes
    its lines off the turn's path, in batches (a bound that only catches lines never
    written)."""
    deadline = time.monotonic() + 60
    while True:
        listed = audit_list(stores, branch)
        if len(listed) >= expected or time.monotonic() > deadline:
            return listed
        time.sleep(0.2)


def test_one_branch_alternating_over_replicas_loses_and_doubles_nothing(
    fleet: Fleet, stores: tuple[str, str, str, str]
) -> None:
    turn_ids: list[str] = []
    guidance = ""
    turn_slots: set[int] = set()
    writeback_slots: set[int] = set()
    for number in range(1, TURNS + 1):
        answered = turn(fleet, "a", "inc-1", f"step {number}")
        assert answered.status_code == 200, answered.text
        turn_slots.add(int(answered.headers["x-replica"]))
        turn_ids.append(answered.json()["report"]["turn_id"])
        guidance = answered.json()["guidance"]
        results = [f"result of step {number}", "the same tool result every turn"]
        # No branch stated: the replica that took the writeback may not have served the turn
        first = writeback(fleet, "a", "inc-1", results)
        assert first.status_code == 200, first.text
        assert first.json()["stored"] == 2  # both, the repeated one too: a new turn
        # retries of this turn's writeback, on the next replicas (one or two: the turns move)
        retries = [writeback(fleet, "a", "inc-1", results) for _ in range(1 + number % 2)]
        assert [r.status_code for r in retries] == [200] * len(retries)
        assert [r.json()["stored"] for r in retries] == [0] * len(retries)
        slots = [int(r.headers["x-replica"]) for r in [first, *retries]]
        assert len(set(slots)) == len(slots)
        writeback_slots |= set(slots)
    assert turn_slots == writeback_slots == set(range(REPLICAS))

    stored = written_back(stores, "a")
    assert len(stored) == 2 * TURNS
    assert sorted(set(stored)) == sorted(
        {f"result of step {n}" for n in range(1, TURNS + 1)} | {"the same tool result every turn"}
    )
    assert stored.count("the same tool result every turn") == TURNS
    assert written_back(stores, "b") == []

    # The memory written back through every replica is found by any, for this team only
    recalled = turn(fleet, "a", "inc-1", "result of step 8")
    assert "result of step 8" in recalled.json()["guidance"]
    turn_ids.append(recalled.json()["report"]["turn_id"])
    guidance = recalled.json()["guidance"]
    theirs = turn(fleet, "b", "inc-1", "result of step 8")
    assert "result of step" not in theirs.json()["guidance"]
    turn_ids.append(theirs.json()["report"]["turn_id"])

    # The last context, as the MCP resource reads it, from whichever replica answers
    contexts = [asyncio.run(read_context(fleet, "a", "inc-1")) for _ in range(REPLICAS)]
    assert contexts == [guidance] * REPLICAS
    assert asyncio.run(read_context(fleet, "b", "inc-1")) == theirs.json()["guidance"]
    assert asyncio.run(read_context(fleet, "b", "inc-2")) is None

    # Another principal's branch of the same id is another branch, on every replica
    for _ in range(REPLICAS):
        refused = writeback(fleet, "b", "inc-2", ["team b's result"])
        assert refused.status_code == 409
    assert written_back(stores, "b") == []

    listed = audited(stores, "inc-1", len(turn_ids))
    assert sorted(listed) == sorted(turn_ids)  # every turn once, whoever served it


def test_a_rolling_restart_never_mixes_cached_blocks_of_two_versions(
    fleet: Fleet, stores: tuple[str, str, str, str], folder: Path
) -> None:
    version = dict.fromkeys(range(REPLICAS), "v1")
    seen: list[tuple[str, str, str]] = []

    def some_turns(count: int) -> None:
        for _ in range(count):
            answered = turn(fleet, "a", "roll", "what is the policy")  # one cache key
            assert answered.status_code == 200, answered.text
            slot = int(answered.headers["x-replica"])
            outcomes = {o["name"]: o["outcome"] for o in answered.json()["report"]["outcomes"]}
            seen.append((version[slot], answered.json()["guidance"], outcomes["policy"]))

    some_turns(REPLICAS * 2)
    # the block cached by one replica is served by the others: one shared cache
    assert [outcome for _, _, outcome in seen].count("fired") == 1

    write_manifest(folder / "m.yaml", stores, "v2")
    for slot in range(REPLICAS):  # one at a time, turns going on in between
        old = fleet.replicas[slot]
        old.process.send_signal(signal.SIGTERM)
        assert old.stop() == 0
        some_turns(2)  # served by the others while this slot is down
        new: Server = start_serve(serve_args(folder, stores), env=fleet_env(stores))
        fleet.replace(slot, new)
        version[slot] = "v2"
        some_turns(REPLICAS)

    for served_version, guidance, _ in seen:
        other = "v2" if served_version == "v1" else "v1"
        assert f"policy {served_version} for team a" in guidance
        assert f"policy {other}" not in guidance
    assert {v for v, _, _ in seen} == {"v1", "v2"}
    v2_outcomes = [outcome for v, _, outcome in seen if v == "v2"]
    assert v2_outcomes.count("fired") == 1  # v2 computed its own block once, then shared it


def test_a_killed_replica_loses_only_its_requests_in_flight(
    fleet: Fleet, stores: tuple[str, str, str, str]
) -> None:
    """Four clients send turns on their own branches while replica 0 is killed (SIGKILL):
    what failed was in flight there; every turn answered is counted once in the state."""
    answered: dict[str, list[int]] = {f"c{n}": [] for n in range(4)}
    failed: list[tuple[str, int]] = []
    killed = threading.Event()

    def client(branch: str) -> None:
        for number in range(1, 16):
            if number == 4 and branch == "c0":
                os.kill(fleet.replicas[0].process.pid, signal.SIGKILL)
                killed.set()
            response = turn(fleet, "a", branch, f"turn {number}")
            if response.status_code == 200:
                answered[branch].append(number)
            else:
                failed.append((branch, int(response.headers["x-replica"])))

    threads = [threading.Thread(target=client, args=(branch,)) for branch in answered]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert killed.is_set()
    assert len(failed) <= len(answered)  # at most one in flight per client
    assert all(slot == 0 for _, slot in failed)  # only the killed replica's
    after = [s for s in fleet.pool.served if s[0] == "POST /v1/turns"][-8:]
    assert all(slot != 0 for _, slot, _ in after)  # nothing more reached it

    import psycopg
    from psycopg import sql

    dsn, schema, _, _ = stores
    query = sql.SQL("SELECT branch_id, turns FROM {}.branches WHERE principal = %s").format(
        sql.Identifier(schema)
    )
    with psycopg.connect(dsn) as conn:
        counted: dict[str, int] = dict(conn.execute(query, ("team-a",)).fetchall())
    for branch, numbers in answered.items():
        lost = sum(1 for name, _ in failed if name == branch)
        assert len(numbers) + lost == 15
        # a turn lost in flight may have been counted before the kill: never more
        assert len(numbers) <= counted[branch] <= len(numbers) + lost
