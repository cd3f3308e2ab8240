"""A turn with one large static block against one with a 10-token block, in the same process.

Run from the repository root:  .venv/bin/python benchmarks/bench_gather.py [--static-tokens N]

A static block is the same text every turn, on every branch; its count is remembered whatever
its size (``composer.tokens``), so a turn with a 10k-token block should cost about what a turn
with a 10-token block costs. Each figure is the median gather of a manifest-built registry
(one ``static`` provider, budget large enough to admit it) over many rounds, with the block's
count made once before timing; the last column is what counting the block costs when it is
not remembered (``composer.tokens._count``), the cost every turn paid before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import composer  # noqa: E402
import composer.tokens  # noqa: E402

SENTENCE = "Answer in English, put the exact command first and say when a step is risky. "


def text_of(tokens: int) -> str:
    """A house-rules text of about ``tokens`` tokens."""
    per = composer.count_tokens(SENTENCE)
    return SENTENCE * max(1, tokens // per)


async def gather_us(folder: Path, text: str, rounds: int) -> float:
    path = folder / f"m{len(text)}.yaml"
    provider = {"name": "rules", "type": "static", "text": text}
    path.write_text(json.dumps({"version": 1, "budget": 10**7, "providers": [provider]}))
    registry = composer.build_registry(composer.load_manifest(path))
    branch, instruction = composer.Branch("sys\n"), composer.Instruction("q")
    for _ in range(20):
        await registry.gather(branch, instruction)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        report = await registry.gather(branch, instruction)
        samples.append(time.perf_counter() - start)
    assert report.fired, "the block must be admitted"
    return statistics.median(samples) * 1e6


def uncounted_us(text: str, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        composer.tokens._count(text)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--static-tokens", type=int, action="append")
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    sizes = args.static_tokens or [10_000, 100_000]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        small = await gather_us(folder, text_of(10), args.rounds)
        print(f"one static block of 10 tokens: {small:.1f} µs per gather (the baseline)")
        print("| static block | gather | ratio to 10 tokens | counting it, not remembered |")
        print("|---|---|---|---|")
        for tokens in sizes:
            text = text_of(tokens)
            large = await gather_us(folder, text, args.rounds)
            counting = uncounted_us(text, max(5, args.rounds // 200))
            print(
                f"| {composer.count_tokens(text):,} tokens | {large:.1f} µs | "
                f"{large / small:.2f}x | {counting / 1000:.2f} ms |"
            )


if __name__ == "__main__":
    asyncio.run(main())
