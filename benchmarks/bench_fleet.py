"""``composer serve --workers N --state URL``: served turns a second over shared branch state,
against one worker with the state in its process.

Run from the repository root:  .venv/bin/python benchmarks/bench_fleet.py [--turns N] [--single]

Each configuration is ``composer serve configs --env dev`` as its own process on 127.0.0.1
(no token, rate limit off), driven by an httpx client in this process with the turns of
``bench_serve.py`` (N turns, 1,500 by default, over 50 branches, at most 16 in flight):

* the baseline: one worker, the branch state in the process (the default);
* one worker with ``--state`` in PostgreSQL, and in Redis: what the shared state costs a turn
  (one counting statement before the turn, one write of its context after);
* 2 and 4 workers with ``--state`` in PostgreSQL: what more processes buy on this machine.
* the in-process, PostgreSQL and Redis single workers again with the rate limits on (at
  ``--rate-limit 100000``, which admits every turn): what counting them costs a turn (three
  round trips to a shared store: the ceiling, the client, the principal).

``--single`` runs the first three only (what the shared state costs a turn, in a minute).

Reported for each: turns a second, the ratio to the baseline, p50 and p99 latency, and the
CPU the server's processes used per turn (the database's own CPU is not counted: it runs
beside them on the same cores). The state lives in a schema (PostgreSQL) and under a key
prefix (Redis) of this run's own, dropped at the end. ``COMPOSER_BENCH_POSTGRES_DSN`` and
``COMPOSER_BENCH_REDIS_URL`` name the servers (default: this machine's, as the tests use).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import uuid
from pathlib import Path

import httpx
from bench_serve import (
    BRANCHES,
    CONCURRENCY,
    SYSTEM,
    cpu_s,
    drive,
    percentile,
    requests,
    start_server,
)

REPO = Path(__file__).resolve().parent.parent
POSTGRES = os.environ.get(
    "COMPOSER_BENCH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS = os.environ.get("COMPOSER_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
LIMITED = ["--rate-limit", "100000"]  # on, admitting every turn: only their cost shows


def processes(pid: int) -> list[int]:
    """``pid`` and its children (the workers), from /proc (Linux)."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(word) for word in (task / "children").read_text().split()]
    return found


async def load(turns: list[tuple[str, str]], url: str, pids: list[int]) -> dict[str, float]:
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=0)
    # no keep-alive: each turn a new connection, which the kernel hands to any worker
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def call(branch: str, text: str) -> None:
            body = {"branch": {"id": branch}, "system": SYSTEM, "instruction": {"text": text}}
            response = await client.post("/v1/turns", json=body)
            response.raise_for_status()

        await drive(requests(BRANCHES * 4), call)  # every worker warm, every branch made
        cpu = sum(cpu_s(pid) for pid in pids)
        wall, latencies = await drive(turns, call)
        cpu = sum(cpu_s(pid) for pid in pids) - cpu
    return {
        "rate": len(turns) / wall,
        "p50": percentile(latencies, 0.5),
        "p99": percentile(latencies, 0.99),
        "cpu": cpu / len(turns),
    }


def run(turns: list[tuple[str, str]], extra: list[str]) -> dict[str, float]:
    process, url = start_server(extra)
    try:
        return asyncio.run(load(turns, url, processes(process.pid)))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        if process.stdout is not None:
            process.stdout.close()


def drop(schema: str, word: str) -> None:
    import psycopg
    import redis
    from psycopg import sql

    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    client = redis.Redis.from_url(REDIS)
    try:
        keys = list(client.scan_iter(match=f"*{word}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1500)
    parser.add_argument("--single", action="store_true", help="the single-worker states only")
    args = parser.parse_args()
    turns = requests(args.turns)
    schema = word = f"bench_fleet_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    postgres = ["--state", POSTGRES, "--state-schema", schema]
    runs = {
        "1 worker, in-process state": [],
        "1 worker, PostgreSQL state": postgres,
        "1 worker, Redis state": ["--state", REDIS, "--state-schema", word],
        "2 workers, PostgreSQL state": [*postgres, "--workers", "2"],
        "4 workers, PostgreSQL state": [*postgres, "--workers", "4"],
        "1 worker, in-process, limits": [*LIMITED],
        "1 worker, PostgreSQL, limits": [*postgres, *LIMITED],
        "1 worker, Redis, limits": ["--state", REDIS, "--state-schema", word, *LIMITED],
    }
    if args.single:
        runs = dict(list(runs.items())[:3])
    results: dict[str, dict[str, float]] = {}
    try:
        for name, extra in runs.items():
            results[name] = run(turns, extra)
    finally:
        drop(schema, word)

    base = results["1 worker, in-process state"]
    print(
        f"{args.turns} turns over {BRANCHES} branches, {CONCURRENCY} in flight, configs --env dev"
    )
    print(f"{'':30}{'turns/s':>9}{'ratio':>8}{'p50 ms':>9}{'p99 ms':>9}{'CPU ms/turn':>13}")
    for name, figures in results.items():
        ratio = figures["rate"] / base["rate"]
        p50, p99, cpu = (figures[key] * 1000 for key in ("p50", "p99", "cpu"))
        print(f"{name:30}{figures['rate']:>9.0f}{ratio:>7.2f}x{p50:>9.1f}{p99:>9.1f}{cpu:>13.2f}")
    for store in ("PostgreSQL", "Redis"):
        shared = results[f"1 worker, {store} state"]
        wall = (1 / shared["rate"] - 1 / base["rate"]) * 1000
        cpu = (shared["cpu"] - base["cpu"]) * 1000
        print(f"{store} state per turn: {wall:+.2f} ms of wall time, {cpu:+.2f} ms of server CPU")
    for store, unlimited in (("in-process", base), ("PostgreSQL", None), ("Redis", None)):
        if args.single:
            break
        plain = unlimited or results[f"1 worker, {store} state"]
        limited = results[f"1 worker, {store}, limits"]
        wall = (1 / limited["rate"] - 1 / plain["rate"]) * 1000
        cpu = (limited["cpu"] - plain["cpu"]) * 1000
        print(f"rate limits in {store}, per turn: {wall:+.2f} ms of wall time, {cpu:+.2f} ms CPU")
    print(f"cores: {os.cpu_count()}; the client, the workers and the databases share them")


if __name__ == "__main__":
    main()
