"""file_corpus over 10,000 passages: index build time, per-query latency, peak memory.

Run from the repository root:  .venv/bin/python benchmarks/bench_corpus.py [--passages N]

Everything is generated in a temporary folder (deterministic, seed 8) and removed afterwards.
Each figure is also given as a ratio to a baseline measured in the same process on the same
passages: a naive scan that lower-cases every passage once and, per query, counts the query
words found as substrings in each passage and keeps the best three.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from builtin_providers.file_corpus import (
    CorpusIndex,
    FileCorpusConfig,
    FileCorpusProvider,
)
from composer.tokens import encoding
from composer.turn import Branch, Instruction

SECTIONS_PER_FILE = 20
WORDS_PER_SECTION = (40, 120)
VOCABULARY = 20_000
QUERIES = 300


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
            texts.append(body)
            sections.append(f"## Section {f}-{s}\n\n{body}\n")
        folder = root / f"team{f % 25:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"runbook{f:04d}.md").write_text("\n".join(sections))
    return texts


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    gc.collect()
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def traced(fn: Callable[[], Any]) -> tuple[Any, int, int]:
    """Result, peak and retained bytes traced by tracemalloc (numpy arrays included).

    Run apart from ``timed``: tracing slows Python code several times over.
    """
    gc.collect()
    tracemalloc.start()
    result = fn()
    gc.collect()
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, peak, retained


def latencies(fn: Callable[[str], Any], queries: list[str]) -> list[float]:
    times = []
    for query in queries:
        started = time.perf_counter()
        fn(query)
        times.append(time.perf_counter() - started)
    return times


def naive_prepare(root: Path) -> list[str]:
    return [
        section.lower()
        for path in sorted(root.rglob("*.md"))
        for section in path.read_text().split("\n## ")
    ]


def naive_search(passages: list[str], query: str) -> list[int]:
    terms = query.lower().split()
    scores = [(sum(term in text for term in terms), -i) for i, text in enumerate(passages)]
    best = sorted(scores, reverse=True)[:3]
    return [-i for score, i in best if score > 0]


def _built(config: FileCorpusConfig) -> CorpusIndex:
    index = CorpusIndex(config)
    index.refresh(force=True)
    return index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=10_000)
    args = parser.parse_args()
    rng = random.Random(8)
    encoding()  # load the tokenizer once, outside every measurement

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        generate(root, args.passages, rng)
        config = FileCorpusConfig(
            name="bench", root=root, include=["**/*.md"], chunk_tokens=400, refresh_s=3600
        )
        index = CorpusIndex(config)
        stats, build_s = timed(lambda: index.refresh(force=True))
        kept_index, build_peak, index_kept = traced(lambda: _built(config))
        del kept_index
        corpus_mb = stats.bytes / 1e6
        naive, naive_build_s = timed(lambda: naive_prepare(root))
        _, naive_peak, naive_kept = traced(lambda: naive_prepare(root))

        sample = zipf_sampler(vocabulary(random.Random(8)), rng)
        queries = [" ".join(sample(rng.randint(2, 5))) for _ in range(QUERIES)]
        for query in queries[:10]:  # warm caches
            index.search(query, 3)
            naive_search(naive, query)
        bm25 = latencies(lambda q: index.search(q, 3), queries)
        scan = latencies(lambda q: naive_search(naive, q), queries)

        provider = FileCorpusProvider(config, index)
        branch = Branch("bench")

        async def through_provider() -> list[float]:
            times = []
            for query in queries:
                started = time.perf_counter()
                await provider.provide(branch, Instruction(query))
                times.append(time.perf_counter() - started)
            return times

        full = asyncio.run(through_provider())
        hits = sum(1 for q in queries if index.search(q, 3))

    ms = 1000.0
    rows = [
        ("passages indexed", f"{stats.passages}", f"{len(naive)}", ""),
        ("files / corpus size", f"{stats.files} / {corpus_mb:.1f} MB", "", ""),
        (
            "build (read, chunk, count tokens, index)",
            f"{build_s:.2f} s",
            f"{naive_build_s:.2f} s",
            f"{build_s / naive_build_s:.1f}x",
        ),
        (
            "build peak memory (tracemalloc)",
            f"{build_peak / 1e6:.0f} MB",
            f"{naive_peak / 1e6:.0f} MB",
            f"{build_peak / naive_peak:.1f}x",
        ),
        (
            "memory kept by the built index",
            f"{index_kept / 1e6:.0f} MB",
            f"{naive_kept / 1e6:.0f} MB",
            f"{index_kept / naive_kept:.1f}x",
        ),
        (
            "query median (index.search)",
            f"{statistics.median(bm25) * ms:.2f} ms",
            f"{statistics.median(scan) * ms:.2f} ms",
            f"{statistics.median(bm25) / statistics.median(scan):.3f}x",
        ),
        (
            "query p95 (index.search)",
            f"{percentile(bm25, 0.95) * ms:.2f} ms",
            f"{percentile(scan, 0.95) * ms:.2f} ms",
            f"{percentile(bm25, 0.95) / percentile(scan, 0.95):.3f}x",
        ),
        (
            "turn median (provider.provide: template, thread hop)",
            f"{statistics.median(full) * ms:.2f} ms",
            "",
            "",
        ),
        ("turn p95 (provider.provide)", f"{percentile(full, 0.95) * ms:.2f} ms", "", ""),
        ("queries with a hit", f"{hits}/{len(queries)}", "", ""),
        (
            "process max RSS",
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3:.0f} MB",
            "",
            "",
        ),
    ]
    print(
        f"file_corpus benchmark: {args.passages} passages, {QUERIES} queries, "
        f"Python {sys.version.split()[0]}"
    )
    print("| measure | file_corpus (bm25s) | naive scan | ratio |\n|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
