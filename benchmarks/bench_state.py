"""What ``composer serve --state`` costs a turn in the server's own CPU: the store's calls
alone, in PostgreSQL and Redis, against the process's own state, in the same run.

Run from the repository root:  .venv/bin/python benchmarks/bench_state.py [--turns N] [--rounds R]

Each turn does what ``ContextService.turn`` does with the store: ``begin`` (the count, before
the providers), a yield to the event loop (the providers), ``finish`` (its composed text, a
2,000-character text with the report's summary, before the answer). N turns (3,000 by
default) over 50 branches, at most 16 in flight, one lock per branch as the server holds;
every store is warmed by one turn per branch first. Reported, per store: this process's CPU
per turn (``time.process_time``: the client library, the event loop, the driver), the excess
over the in-process store (what ``--state`` adds a turn), and the round trips a turn on the
wire (a relay on 127.0.0.1 in front of the real server counts request/response exchanges).
The rounds alternate the stores, so that the machine's load falls on each alike; the
figures are the medians of the rounds. ``COMPOSER_BENCH_POSTGRES_DSN`` and
``COMPOSER_BENCH_REDIS_URL`` name the servers (default: this machine's, as the tests use); a
server that does not answer on its port is left out, and said so.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from serve.relay import Relay  # noqa: E402

from composer.serve.state import StateStore, open_state  # noqa: E402

POSTGRES = os.environ.get(
    "COMPOSER_BENCH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS = os.environ.get("COMPOSER_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
BRANCHES = 50
CONCURRENCY = 16
TEXT = ("Runbook: roll back the deploy, then check the queue. " * 40)[:2000]
REPORT = {
    "fired": ["house-rules", "runbooks", "team-memory"],
    "skipped": [],
    "failed": [],
    "turn_id": "0" * 32,
    "budget": 4000,
    "tokens_used": 812,
}


async def turns(store: StateStore, count: int) -> None:
    """``count`` turns over the branches, CONCURRENCY at once, a lock per branch."""
    locks = {f"branch-{i}": asyncio.Lock() for i in range(BRANCHES)}
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        branch = f"branch-{i % BRANCHES}"
        async with gate, locks[branch]:
            slot = await store.begin("bench", branch, "ops", {"team": "a"})
            await asyncio.sleep(0)
            await store.finish("bench", branch, slot, TEXT, REPORT)

    await asyncio.gather(*(one(i) for i in range(count)))


async def measure(store: StateStore, count: int) -> float:
    """CPU seconds per turn of ``count`` turns, after a warm-up turn per branch."""
    await turns(store, BRANCHES)
    cpu = time.process_time()
    await turns(store, count)
    return (time.process_time() - cpu) / count


def relayed(url: str, relay: Relay) -> str:
    """``url`` through ``relay`` (its host and port replaced)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")
    host = f"127.0.0.1:{relay.port}"
    return parts._replace(netloc=f"{netloc[0]}@{host}" if netloc[1] else host).geturl()


def target(url: str, port: int) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or port


async def round_trips(url: str, default_port: int, schema: str, count: int) -> float:
    """Round trips a turn on the wire, through a counting relay."""
    relay = Relay(target(url, default_port))
    store = open_state(relayed(url, relay), schema=schema)
    try:
        await turns(store, BRANCHES)
        before = relay.exchanges
        await turns(store, count)
        return (relay.exchanges - before) / count
    finally:
        await store.aclose()
        relay.stop()


def reachable(url: str, port: int) -> bool:
    """Whether a server answers on the host and port of ``url`` (within a second)."""
    try:
        socket.create_connection(target(url, port), timeout=1).close()
    except OSError:
        return False
    return True


async def drop(schema: str, servers: set[str]) -> None:
    if "PostgreSQL" in servers:
        import psycopg
        from psycopg import sql

        async with await psycopg.AsyncConnection.connect(POSTGRES, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
    if "Redis" in servers:
        import redis.asyncio as redis

        client = redis.Redis.from_url(REDIS)
        try:
            keys = [key async for key in client.scan_iter(match=f"*{schema}*")]
            if keys:
                await client.delete(*keys)
        finally:
            await client.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    schema = f"bench_state_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    servers = {"PostgreSQL": (POSTGRES, 5432), "Redis": (REDIS, 6379)}
    for name, (url, port) in list(servers.items()):
        if not reachable(url, port):
            print(f"{name}: nothing answers at {target(url, port)}; left out")
            del servers[name]
    urls = {"in-process": None, **{name: url for name, (url, _) in servers.items()}}
    stores = {name: open_state(url, schema=schema) for name, url in urls.items()}
    cpu: dict[str, list[float]] = {name: [] for name in stores}
    try:
        for _ in range(args.rounds):
            for name, store in stores.items():
                cpu[name].append(await measure(store, args.turns))
        trips = {
            name: await round_trips(url, port, schema, 600) for name, (url, port) in servers.items()
        }
        lone = {name: await lone_trips(url, port, schema) for name, (url, port) in servers.items()}
    finally:
        for store in stores.values():
            await store.aclose()
        await drop(schema, set(servers))
    base = statistics.median(cpu["in-process"])
    print(
        f"{args.turns} turns over {BRANCHES} branches, {CONCURRENCY} in flight, "
        f"median of {args.rounds} rounds"
    )
    print(f"{'store':12}{'CPU ms/turn':>13}{'added':>10}{'  rounds (ms)':<38} round trips a turn")
    for name, figures in cpu.items():
        median = statistics.median(figures)
        rounds = " ".join(f"{value * 1000:.3f}" for value in figures)
        added = f"{(median - base) * 1000:+.3f}" if name != "in-process" else ""
        trip = f"{trips[name]:.2f} ({lone[name]:.0f} alone)" if name in trips else ""
        print(f"{name:12}{median * 1000:>13.3f}{added:>10}  {rounds:<36} {trip}")


async def lone_trips(url: str, default_port: int, schema: str) -> float:
    """Round trips of one turn with nothing else in flight."""
    relay = Relay(target(url, default_port))
    store = open_state(relayed(url, relay), schema=schema)
    try:
        slot = await store.begin("bench", "alone", "ops", {})
        await store.finish("bench", "alone", slot, TEXT, REPORT)
        before = relay.exchanges
        slot = await store.begin("bench", "alone", "ops", {})
        await store.finish("bench", "alone", slot, TEXT, REPORT)
        return float(relay.exchanges - before)
    finally:
        await store.aclose()
        relay.stop()


if __name__ == "__main__":
    asyncio.run(main())
