"""A gather's cost against its floor, in the same process: large constant blocks, then small ones.

Run from the repository root:
    .venv/bin/python benchmarks/bench_gather.py [--static-tokens N ...] [--providers N]

1. A static block is the same text every turn, on every branch; its count is remembered
   whatever its size (``composer.tokens``), so a turn with a 10k-token block should cost about
   what a turn with a 10-token block costs. Each figure is the median gather of a
   manifest-built registry (one ``static`` provider, budget large enough to admit it) over
   many rounds, with the block's count made once before timing; the last column is what
   counting the block costs when it is not remembered (``composer.tokens._count``), the cost
   every turn paid before.
2. N small ``static`` providers (10 by default) attached to a branch: the registry's gather and
   the whole pre-turn path (``prepare_turn``: gather, typed outcomes, report, slot, fold)
   against the memoised floor, the same work written by hand on the same provider objects:
   call each, count each text once (a dict), sort by priority, admit under the budget, build
   the fired list, join the blocks. Blocks of rounds alternate between the three so that the
   machine's load falls on each alike; the ratio is the median of the blocks' ratios.
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
from typing import Any

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


class Floor:
    """The per-turn work of N static providers written by hand: call, count once (memoised),
    sort, admit, build the fired list, join."""

    def __init__(self, providers: list[tuple[Any, int, str]], budget: int) -> None:
        self.providers = providers
        self.budget = budget
        self.counts: dict[str, int] = {}

    async def turn(self, branch: Any, instruction: Any) -> tuple[str, list[dict[str, Any]]]:
        counts = self.counts
        results = []
        for index, (provider, priority, name) in enumerate(self.providers):
            text = await provider.provide(branch, instruction)
            if text:
                tokens = counts.get(text)
                if tokens is None:
                    tokens = counts[text] = composer.count_tokens(text)
                results.append((index, priority, name, text, tokens))
        kept = set()
        total = 0
        for index, _priority, _name, _text, tokens in sorted(
            results, key=lambda r: r[1], reverse=True
        ):
            if total + tokens <= self.budget:
                total += tokens
                kept.add(index)
        blocks = []
        fired = []
        for index, _priority, name, text, tokens in results:
            if index in kept:
                blocks.append(text)
                fired.append({"provider_name": name, "tokens": tokens})
        return "\n".join(blocks), fired


async def small_providers(folder: Path, count: int, blocks: int, rounds: int) -> None:
    path = folder / f"small{count}.yaml"
    providers = [
        {"name": f"s{i}", "type": "static", "text": f"Static block number {i} of the bench."}
        for i in range(count)
    ]
    path.write_text(json.dumps({"version": 1, "budget": 100_000, "providers": providers}))
    manifest = composer.load_manifest(path)
    branch, instruction = composer.Branch("sys\n"), composer.Instruction("q")
    registry = composer.attach(branch, manifest)
    floor = Floor([(m.provider, m.config.priority, m.name) for m in registry.managed], 100_000)

    async def gather() -> object:
        return await registry.gather(branch, instruction)

    async def turn() -> object:
        return await composer.prepare_turn(branch, instruction)

    async def hand_written() -> object:
        return await floor.turn(branch, instruction)

    sides = {"gather": gather, "prepare_turn": turn, "floor": hand_written}
    medians: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(blocks):
        for name, side in sides.items():
            samples = []
            for _ in range(rounds):
                start = time.perf_counter()
                await side()
                samples.append(time.perf_counter() - start)
            medians[name].append(statistics.median(samples) * 1e6)
            branch.messages.clear()  # prepare_turn records each instruction
    report = await gather()
    assert isinstance(report, composer.ProviderReport)
    assert len(report.fired) == count, "every block must be admitted"
    floor_us = statistics.median(medians["floor"])
    print(f"\n{count} small static providers, {blocks} blocks of {rounds} rounds per side")
    print("| path | median per turn | ratio to the floor (median of blocks) |")
    print("|---|---|---|")
    print(f"| floor, hand-written | {floor_us:.2f} µs | 1.00x |")
    for name in ("gather", "prepare_turn"):
        ratios = [a / b for a, b in zip(medians[name], medians["floor"], strict=True)]
        print(
            f"| {name} | {statistics.median(medians[name]):.2f} µs | "
            f"{statistics.median(ratios):.2f}x |"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--static-tokens", type=int, action="append")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--providers", type=int, default=10, help="small static providers")
    parser.add_argument("--blocks", type=int, default=30, help="alternating blocks, part 2")
    args = parser.parse_args()
    sizes = args.static_tokens or [10_000, 100_000]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        composer.count_tokens("warm up the tokenizer")
        await small_providers(folder, args.providers, args.blocks, max(50, args.rounds // 4))
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
