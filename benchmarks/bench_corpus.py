"""file_corpus at 1,000, 10,000 and 100,000 passages against bm25s used directly.

Run from the repository root:  .venv/bin/python benchmarks/bench_corpus.py [--passages 1000,10000]

Everything is generated in a temporary folder (deterministic, seed 8) and removed afterwards:
Markdown files of 20 ``##`` sections each (one section = one passage), 40 to 120 words per
section from a 20,000-word synthetic vocabulary with Zipf frequencies. Per size:

- build: ``CorpusIndex.refresh`` (walk, confined reads, Markdown sections, o200k counts,
  Snowball terms, BM25 matrix) against bm25s direct on the same section texts
  (``bm25s.tokenize`` with English stop words and PyStemmer, ``BM25().index``), alternated
  ``--rounds`` times, the best of each in CPU time (the process's, which other work on a
  shared machine moves less than wall time) and in wall time; the ratio is of CPU times.
  Token counts remembered by a previous round are forgotten first;
- query p50/p95: ``CorpusIndex.search`` against bm25s's ``get_scores`` plus the same top-3
  selection, 300 queries of 2 to 5 words;
- memory: what the built index keeps allocated (tracemalloc, a separate build): file_corpus
  keeps the passages' text and each file's term ids for the next refresh, bm25s direct only
  its matrix and vocabulary;
- one-file refresh: one file rewritten, ``CorpusIndex.refresh`` (re-reads that file, reuses
  the others' cached terms, rebuilds the matrix) against bm25s direct rebuilt from scratch.

Then, at ``--turn-passages`` (10,000), turns during a refresh: a manifest with one
``file_corpus`` provider, turns through ``prepare_turn`` one every 2 ms (a turn is followed by
a model call in real use, so the loop is never saturated), alternating windows: a quiet one,
then one where a file has changed and the turn that notices it starts the background refresh.
Reported: p50/p95 of quiet turns and of turns issued while a refresh ran, and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import Stemmer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import composer
import composer.tokens
from builtin_providers.file_corpus import CorpusIndex, FileCorpusConfig, FileCorpusProvider
from composer.tokens import encoding

SECTIONS_PER_FILE = 20
WORDS_PER_SECTION = (40, 120)
VOCABULARY = 20_000
QUERIES = 300
TURN_GAP_S = 0.002
REFRESH_WINDOWS = 12


def vocabulary(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ra", "te", "su", "no", "vi", "de", "po", "an", "el", "or"]
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def zipf_sampler(words: list[str], rng: random.Random) -> Callable[[int], list[str]]:
    weights = [1 / (rank + 1) for rank in range(len(words))]
    return lambda k: rng.choices(words, weights, k=k)


def generate(root: Path, passages: int, rng: random.Random) -> list[str]:
    """Markdown files of SECTIONS_PER_FILE headed sections; returns the section texts."""
    words = vocabulary(rng)
    sample = zipf_sampler(words, rng)
    texts: list[str] = []
    files = (passages + SECTIONS_PER_FILE - 1) // SECTIONS_PER_FILE
    for f in range(files):
        sections = []
        for s in range(min(SECTIONS_PER_FILE, passages - f * SECTIONS_PER_FILE)):
            body = " ".join(sample(rng.randint(*WORDS_PER_SECTION))) + "."
            texts.append(f"Section {f}-{s}\n{body}")
            sections.append(f"## Section {f}-{s}\n\n{body}\n")
        folder = root / f"team{f % 25:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"runbook{f:04d}.md").write_text("\n".join(sections))
    return texts


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def retained(build: Callable[[], Any]) -> int:
    """Bytes still allocated, as tracemalloc sees them (numpy arrays included), while what
    ``build`` returned is alive. A run of its own: tracing slows Python code down."""
    gc.collect()
    tracemalloc.start()
    kept = build()
    gc.collect()
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return current


def built(config: FileCorpusConfig) -> CorpusIndex:
    index = CorpusIndex(config)
    index.refresh()
    return index


def cpu_timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """What ``fn`` returned, its wall time and the CPU time the process spent on it."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    gc.collect()
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def latencies(fn: Callable[[str], Any], queries: list[str]) -> list[float]:
    times = []
    for query in queries:
        started = time.perf_counter()
        fn(query)
        times.append(time.perf_counter() - started)
    return times


class Direct:
    """bm25s used directly, as its README shows: tokenize with PyStemmer, index, score."""

    def __init__(self, texts: list[str]) -> None:
        self.stem = Stemmer.Stemmer("english").stemWords
        self.retriever = bm25s.BM25()
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=self.stem, show_progress=False)
        self.retriever.index(tokens, show_progress=False)

    def search(self, query: str) -> list[int]:
        tokens = bm25s.tokenize(
            [query], stopwords="en", stemmer=self.stem, show_progress=False, return_ids=False
        )[0]
        known = [t for t in tokens if t in self.retriever.vocab_dict]
        if not known:
            return []
        scores = self.retriever.get_scores(known)
        best = np.argpartition(-scores, 2)[:3]
        return sorted(best.tolist(), key=lambda i: -scores[i])


def touch(path: Path, n: int) -> None:
    """Rewrite one file with new words and a new mtime."""
    path.write_text(path.read_text() + f"\n## Added {n}\n\nzeppelin{n} airship{n}\n")
    os.utime(path, ns=(10**9 * (n + 1), 10**9 * (n + 1)))


def scale(passages: int, rng: random.Random, rounds: int) -> list[tuple[str, str, str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        texts = generate(root, passages, rng)
        config = FileCorpusConfig(
            name="bench",
            root=root,
            include=["**/*.md"],
            chunk_tokens=400,
            refresh_s=0,
            max_total_bytes=1 << 30,
        )
        builds, directs = [], []
        for _ in range(rounds):
            composer.tokens._count_memoised.cache_clear()  # each round counts afresh
            index = CorpusIndex(config)
            stats, *build = cpu_timed(index.refresh)
            direct, *rebuilt = cpu_timed(lambda: Direct(texts))
            builds.append(build)
            directs.append(rebuilt)
        build_s, build_cpu = (min(column) for column in zip(*builds, strict=True))
        direct_s, direct_cpu = (min(column) for column in zip(*directs, strict=True))
        index_bytes = retained(lambda: built(config))
        direct_bytes = retained(lambda: Direct(texts))

        sample = zipf_sampler(vocabulary(random.Random(8)), rng)
        queries = [" ".join(sample(rng.randint(2, 5))) for _ in range(QUERIES)]
        for query in queries[:10]:
            index.search(query, 3)
            direct.search(query)
        ours = latencies(lambda q: index.search(q, 3), queries)
        theirs = latencies(direct.search, queries)

        files = sorted(root.rglob("*.md"))
        refreshes, rebuilds = [], []
        for n in range(3):
            touch(files[n], n)
            _, seconds = timed(index.refresh)  # refresh_s 0: checks the files now
            refreshes.append(seconds)
            texts.append(f"Added {n}\nzeppelin{n} airship{n}")
            _, seconds = timed(lambda: Direct(texts))
            rebuilds.append(seconds)
    ms = 1000.0
    refresh_s, rebuild_s = statistics.median(refreshes), statistics.median(rebuilds)
    return [
        ("passages indexed / files", f"{stats.passages} / {stats.files}", f"{len(texts) - 3}", ""),
        (
            f"build, best of {rounds}: CPU (wall)",
            f"{build_cpu:.2f} s ({build_s:.2f} s)",
            f"{direct_cpu:.2f} s ({direct_s:.2f} s)",
            f"{build_cpu / direct_cpu:.2f}x ({build_s / direct_s:.2f}x)",
        ),
        (
            "query p50",
            f"{statistics.median(ours) * ms:.2f} ms",
            f"{statistics.median(theirs) * ms:.2f} ms",
            f"{statistics.median(ours) / statistics.median(theirs):.2f}x",
        ),
        (
            "query p95",
            f"{percentile(ours, 0.95) * ms:.2f} ms",
            f"{percentile(theirs, 0.95) * ms:.2f} ms",
            f"{percentile(ours, 0.95) / percentile(theirs, 0.95):.2f}x",
        ),
        (
            "memory kept by the index (tracemalloc)",
            f"{index_bytes / 1e6:.0f} MB",
            f"{direct_bytes / 1e6:.0f} MB",
            f"{index_bytes / max(direct_bytes, 1):.2f}x",
        ),
        (
            "one file changed: refresh / full rebuild (median of 3)",
            f"{refresh_s * ms:.0f} ms",
            f"{rebuild_s * ms:.0f} ms",
            f"{refresh_s / rebuild_s:.2f}x",
        ),
    ]


def turns_during_refresh(passages: int, rng: random.Random) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "corpus"
        root.mkdir()
        texts = generate(root, passages, rng)
        path = Path(tmp) / "manifest.yaml"
        provider = {
            "name": "docs",
            "type": "file_corpus",
            "root": str(root),
            "include": ["**/*.md"],
            "chunk_tokens": 400,
            "refresh_s": 3600,
        }
        path.write_text(json.dumps({"version": 1, "budget": 2000, "providers": [provider]}))
        manifest = composer.load_manifest(path)
        branch = composer.Branch("You are the ops assistant.\n")
        registry = composer.attach(branch, manifest)
        corpus = registry.managed[0].provider
        assert isinstance(corpus, FileCorpusProvider)
        index = corpus.index
        words = " ".join(texts[:200]).split()
        files = sorted(root.rglob("*.md"))

        async def turn() -> float:
            query = " ".join(rng.sample(words, 3))
            started = time.perf_counter()
            await composer.prepare_turn(branch, composer.Instruction(query))
            elapsed = time.perf_counter() - started
            await asyncio.sleep(TURN_GAP_S)
            return elapsed

        async def run() -> tuple[list[float], list[float], list[float]]:
            await turn()  # the first build
            quiet: list[float] = []
            busy: list[float] = []
            refreshes: list[float] = []
            for n in range(REFRESH_WINDOWS):
                for _ in range(40):
                    quiet.append(await turn())
                touch(files[n], n)
                index._checked_at = float("-inf")  # the next turn finds a check due
                started = time.perf_counter()
                busy.append(await turn())  # starts the refresh, served by the old index
                thread = index._background
                while thread is not None and thread.is_alive():
                    busy.append(await turn())
                refreshes.append(time.perf_counter() - started)
            return quiet, busy, refreshes

        quiet, busy, refreshes = asyncio.run(run())
    ms = 1000.0
    ratio = percentile(busy, 0.95) / percentile(quiet, 0.95)
    return [
        f"turns through prepare_turn, one every {TURN_GAP_S * ms:.0f} ms, {passages} passages, "
        f"{REFRESH_WINDOWS} refreshes of one changed file (median {statistics.median(refreshes) * ms:.0f} ms "
        "while turns ran)",
        "| turns | count | p50 | p95 |",
        "|---|---|---|---|",
        f"| quiet | {len(quiet)} | {statistics.median(quiet) * ms:.2f} ms | {percentile(quiet, 0.95) * ms:.2f} ms |",
        f"| during a refresh | {len(busy)} | {statistics.median(busy) * ms:.2f} ms | {percentile(busy, 0.95) * ms:.2f} ms |",
        f"p95 during a refresh / p95 quiet: {ratio:.2f}x",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--passages", default="1000,10000,100000")
    parser.add_argument("--turn-passages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3, help="builds of each side, best kept")
    args = parser.parse_args()
    encoding()  # the tokenizer loads once, outside every measurement
    sizes = [int(n) for n in args.passages.split(",") if n]
    print(
        f"file_corpus benchmark, Python {sys.version.split()[0]}, load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    for size in sizes:
        rows = scale(size, random.Random(8), args.rounds)
        print(f"\n{size} passages\n")
        print("| measure | file_corpus | bm25s direct | ratio |\n|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    if args.turn_passages:
        print()
        print("\n".join(turns_during_refresh(args.turn_passages, random.Random(9))))


if __name__ == "__main__":
    main()
