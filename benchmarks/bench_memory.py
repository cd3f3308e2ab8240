"""Memory stores at 1,000, 10,000 and 100,000 items against the JSONL scan they replace.

Per size and store: query p50 and p95 (SQLite and PostgreSQL rank a question of about ten
words by full text; the JSONL stores look for one word as a substring, which is all they
can do), the ratio of each p50 to the baseline measured in the same process, writeback
throughput through the provider, and the query right after a write (the old store read the
whole file again after any write). The baseline is the JSONL store as it was: every change
re-reads and re-parses the whole file, and every query filters every item before ``limit``.

    .venv/bin/python benchmarks/bench_memory.py                      # 1k, 10k, 100k
    .venv/bin/python benchmarks/bench_memory.py --sizes 1000 --queries 50
    COMPOSER_BENCH_POSTGRES_DSN=postgresql://... (default: postgres@127.0.0.1:5432/test)

PostgreSQL is measured in a schema of its own, dropped at the end; without a server it is
left out and said so. Figures: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from builtin_providers.memory import MemoryConfig
from builtin_providers.stores import (
    ItemStore,
    JsonlMemoryStore,
    MemoryItem,
    MemoryQuery,
    PostgresMemoryStore,
    SqliteMemoryStore,
)
from builtin_providers.stores.base import matches, record_of
from builtin_providers.stores.jsonl import parse_line
from composer.build import build_registry
from composer.manifest import Manifest
from composer.turn import Branch

VOCABULARY = 20_000
STOP = ["the", "a", "of", "to", "and", "in", "is", "it", "what", "do", "i", "after", "when"]


class OldJsonlScan:
    """The baseline: the JSONL store before this change, reduced to its read path."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: tuple[tuple[int, int, int], list[MemoryItem]] | None = None

    def items(self) -> list[MemoryItem]:
        info = os.stat(self.path)
        key = (info.st_ino, info.st_size, info.st_mtime_ns)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        items = [parse_line(line) for line in self.path.read_bytes().split(b"\n") if line.strip()]
        self._cache = (key, items)
        return items

    async def search(self, query: MemoryQuery) -> list[MemoryItem]:
        items = await asyncio.to_thread(self.items)
        return [item for item in items if matches(item, query)][: query.limit]


_WEIGHTS = [1 / rank for rank in range(1, VOCABULARY + 1)]
_WORDS = [f"w{rank}" for rank in range(1, VOCABULARY + 1)]


def words(rng: random.Random, n: int) -> list[str]:
    # Zipf frequencies over 20,000 words, as in bench_corpus.py: the first few are in
    # nearly every item (like stop words), most are rare.
    return rng.choices(_WORDS, _WEIGHTS, k=n)


def make_items(count: int, seed: int = 14) -> list[MemoryItem]:
    rng = random.Random(seed)
    return [
        MemoryItem(
            " ".join(words(rng, rng.randint(12, 40))),
            [f"tag{rng.randint(0, 50)}"],
            {"team": f"team{rng.randint(0, 9)}"},
            f"item-{i}",
        )
        for i in range(count)
    ]


def make_questions(count: int, seed: int = 15) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(STOP, 4) + words(rng, rng.randint(4, 7))) for _ in range(count)]


async def timed(call: Callable[[], Awaitable[Any]], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def p(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[int(q) - 1]


async def query_samples(store: Any, ranked: bool, questions: list[str]) -> list[float]:
    rng = random.Random(16)
    samples = []
    for question in questions:
        if ranked:
            query = MemoryQuery(text=question, match="fulltext", limit=5)
        else:
            query = MemoryQuery(text=rng.choice(question.split()[4:]), limit=5)
        started = time.perf_counter()
        await store.search(query)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def writeback_rate(source: dict[str, Any], count: int) -> float:
    manifest = Manifest(
        version=1, providers=[MemoryConfig(name="m", source=source, writeback=True)]
    )
    provider: Any = build_registry(manifest).managed[0]
    branch = Branch("s\n")
    started = time.perf_counter()
    for n in range(count):
        await provider.writeback(branch, [{"bench": n}])
    elapsed = time.perf_counter() - started
    await manifest.aclose()
    return count / elapsed


async def after_write(
    store: Any, write: Callable[[int], Awaitable[Any]], ranked: bool, questions: list[str]
) -> float:
    """p50 of one query issued right after one write, over 20 writes."""
    samples = []
    for n in range(20):
        await write(n)
        question = questions[n % len(questions)]
        query = (
            MemoryQuery(text=question, match="fulltext", limit=5)
            if ranked
            else MemoryQuery(text=question.split()[-1], limit=5)
        )
        started = time.perf_counter()
        await store.search(query)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def measure(size: int, queries: int, folder: Path, dsn: str | None) -> list[list[str]]:
    items = make_items(size)
    questions = make_questions(queries)
    path = folder / f"m{size}.jsonl"
    path.write_text("".join(json.dumps(record_of(item)) + "\n" for item in items), encoding="utf-8")
    rows: list[list[str]] = []

    baseline = OldJsonlScan(path)
    await baseline.search(MemoryQuery(text="w1"))  # parsed once, as after a first turn
    base = await query_samples(baseline, False, questions)
    base_p50 = statistics.median(base)

    async def old_write(n: int) -> None:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"content": f"written {n}"}) + "\n")

    base_after = await after_write(baseline, old_write, False, questions)
    rows.append(row("JSONL scan (baseline)", size, base, base_p50, base_after, None))

    stores: list[tuple[str, ItemStore, dict[str, Any], bool]] = []
    jsonl = JsonlMemoryStore(path)
    await jsonl.search(MemoryQuery(text="w1"))
    stores.append(("JSONL (new)", jsonl, {"jsonl": folder / f"wb{size}.jsonl"}, False))
    sqlite = SqliteMemoryStore(folder / f"m{size}.sqlite")
    for start in range(0, size, 5000):
        await sqlite.add(items[start : start + 5000])
    stores.append(("SQLite", sqlite, {"sqlite": folder / f"m{size}.sqlite"}, True))
    schema = None
    if dsn is not None:
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        postgres = PostgresMemoryStore(dsn, schema=schema)
        for start in range(0, size, 5000):
            await postgres.add(items[start : start + 5000])
        source = {"postgres": {"dsn": dsn, "schema": schema}}
        stores.append(("PostgreSQL", postgres, source, True))

    for name, store, source, ranked in stores:
        await query_samples(store, ranked, questions[:10])  # warm: connections, caches
        samples = await query_samples(store, ranked, questions)

        async def write(n: int, store: ItemStore = store) -> None:
            await store.add([MemoryItem(f"written w1 {n}", [], {}, f"new-{uuid.uuid4()}")])

        latest = await after_write(store, write, ranked, questions)
        rate = await writeback_rate(source, 500)
        rows.append(row(name, size, samples, base_p50, latest, rate))

    for _, store, _, _ in stores:
        if isinstance(store, PostgresMemoryStore):
            await store.drop_schema()
        await store.aclose()
    return rows


def row(
    name: str, size: int, samples: list[float], base: float, after: float, rate: float | None
) -> list[str]:
    p50 = statistics.median(samples)
    return [
        f"{size:,}",
        name,
        f"{p50:.2f} ms",
        f"{p(samples, 95):.2f} ms",
        f"{p50 / base:.3f}x",
        f"{after:.2f} ms",
        "" if rate is None else f"{rate:,.0f}/s",
    ]


def postgres_dsn() -> str | None:
    dsn = os.environ.get("COMPOSER_BENCH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=3):
            return dsn
    except Exception as e:
        print(f"PostgreSQL left out: {type(e).__name__}: {e}")
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    dsn = postgres_dsn()
    header = [
        "items",
        "store",
        "query p50",
        "query p95",
        "p50 vs baseline",
        "query after a write",
        "writebacks",
    ]
    rows = [header]
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            rows += asyncio.run(measure(size, args.queries, Path(folder), dsn))
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for cells in rows[1:]:
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
