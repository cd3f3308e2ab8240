"""The runtime options beyond ADR-0008, each against its baseline in the same process.

Run from the repository root:  .venv/bin/python benchmarks/bench_runtime.py [--quick]

1. Sequential against concurrent gather, with 1, 2, 5 and 10 providers that each answer
   after 100 ms (``asyncio.sleep``): turn time, median of 5 turns.
2. A hung provider among four answering in 0.4 s, ``gather: concurrent`` and ``timeout_s:
   0.5``: turn time, outcomes.
3. A cached provider (100 ms) : the first turn, then the second turn served from the cache.
4. Gather of 1, 10, 100 and 1000 static providers through a manifest-built registry, against
   lionagi 0.36's own ``ContextProviderRegistry`` holding the same provider objects (it counts
   tokens on every turn with the same o200k_base), and against the floor: the same awaits and
   priority sort with no counting, budget or report. Median per gather over many rounds.

lionagi is read offline: its tokenizer cache is primed from composer's vendored o200k_base.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import composer  # noqa: E402
from builtin_providers.static import provider_type as static_type  # noqa: E402
from composer.catalog import ProviderTypes  # noqa: E402
from composer.lionagi_support import prime_tiktoken_cache  # noqa: E402
from composer.plugin import ProviderConfig, ProviderType  # noqa: E402


class SleepConfig(ProviderConfig):
    type: Literal["sleep"] = "sleep"
    seconds: float = 0.1
    hang: bool = False


class Sleep:
    def __init__(self, config: SleepConfig) -> None:
        self.config = config

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        if self.config.hang:
            await asyncio.Event().wait()
        await asyncio.sleep(self.config.seconds)
        return f"answer of {self.config.name}"


TYPES = ProviderTypes([ProviderType("sleep", SleepConfig, lambda c, ctx: Sleep(c)), static_type])


def manifest_of(folder: Path, text: str) -> composer.Manifest:
    path = folder / f"m{abs(hash(text))}.yaml"
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return composer.load_manifest(path, types=TYPES)


async def turn_ms(manifest: composer.Manifest) -> tuple[float, composer.ProviderReport]:
    branch = composer.Branch("sys\n")
    composer.attach(branch, manifest)
    start = time.perf_counter()
    prepared = await composer.prepare_turn(branch, "q")
    assert prepared.report is not None
    return (time.perf_counter() - start) * 1000, prepared.report


async def concurrency(folder: Path) -> None:
    print("\n1. sequential vs concurrent, providers answering in 100 ms (median of 5 turns)")
    print(f"{'providers':>10}{'sequential':>14}{'concurrent':>14}{'ratio':>8}")
    for count in (1, 2, 5, 10):
        body = "\n".join(f"  - {{name: p{i}, type: sleep}}" for i in range(count))
        times = {}
        for mode in ("sequential", "concurrent"):
            manifest = manifest_of(
                folder, f"version: 1\nruntime: {{gather: {mode}}}\nproviders:\n{body}\n"
            )
            times[mode] = statistics.median([(await turn_ms(manifest))[0] for _ in range(5)])
        ratio = times["concurrent"] / times["sequential"]
        print(
            f"{count:>10}{times['sequential']:>12.0f}ms{times['concurrent']:>12.0f}ms{ratio:>7.2f}x"
        )


async def hung(folder: Path) -> None:
    body = "\n".join(f"  - {{name: p{i}, type: sleep, seconds: 0.4}}" for i in range(4))
    manifest = manifest_of(
        folder,
        f"version: 1\nruntime: {{gather: concurrent, timeout_s: 0.5}}\nproviders:\n{body}\n"
        "  - {name: hung, type: sleep, hang: true}\n",
    )
    ms, report = await turn_ms(manifest)
    kinds = [o.outcome for o in report.outcomes]
    print(
        f"\n2. four providers of 0.4 s and one hung, concurrent, timeout_s 0.5: {ms:.0f} ms; {kinds}"
    )


async def cached(folder: Path) -> None:
    manifest = manifest_of(
        folder, "version: 1\nproviders:\n  - {name: c, type: sleep, cache: {ttl_s: 60}}\n"
    )
    first, _ = await turn_ms(manifest)
    second, report = await turn_ms(manifest)
    print(
        f"\n3. a cached provider of 100 ms: first turn {first:.1f} ms, second {second:.2f} ms "
        f"({report.outcomes[0].outcome}), ratio {second / first:.4f}x"
    )


class Floor:
    """The same awaits and priority sort as a registry, with no counting, budget or report."""

    def __init__(self, providers: list[Any]) -> None:
        self.providers = providers

    async def gather(self, branch: Any, instruction: Any) -> list[str]:
        results = [(i, await p.provide(branch, instruction)) for i, p in enumerate(self.providers)]
        kept = sorted((r for r in results if r[1]), key=lambda r: 0, reverse=True)
        return [text for _, text in sorted(kept)]


async def per_gather_us(gather: Callable[[], Awaitable[Any]], rounds: int) -> float:
    for _ in range(min(rounds, 50)):
        await gather()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await gather()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


async def statics(folder: Path, quick: bool) -> None:
    from lionagi.protocols.context_providers import ContextProviderRegistry as LionagiRegistry

    print("\n4. gather of N static providers (median microseconds per gather)")
    print(f"{'N':>6}{'composer':>12}{'lionagi':>12}{'floor':>10}{'vs lionagi':>12}{'vs floor':>10}")
    for count in (1, 10, 100, 1000):
        body = "\n".join(
            f"  - {{name: s{i}, type: static, text: 'Static block number {i} of the bench.'}}"
            for i in range(count)
        )
        manifest = manifest_of(folder, f"version: 1\nbudget: 100000\nproviders:\n{body}\n")
        ours = composer.build_registry(manifest)
        theirs: Any = LionagiRegistry(budget=100000)  # takes lionagi's own Branch type
        for m in ours.managed:
            theirs.register(m.provider, priority=m.config.priority, name=m.name)
        floor = Floor([m.provider for m in ours.managed])
        branch, instruction = composer.Branch("s"), composer.Instruction("q")
        rounds = max(20, (200 if quick else 2000) // count)
        a = await per_gather_us(functools.partial(ours.gather, branch, instruction), rounds)
        b = await per_gather_us(functools.partial(theirs.gather, branch, instruction), rounds)
        c = await per_gather_us(functools.partial(floor.gather, branch, instruction), rounds)
        print(f"{count:>6}{a:>12.1f}{b:>12.1f}{c:>10.1f}{a / b:>11.2f}x{a / c:>9.2f}x")


async def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder / "tiktoken")
        prime_tiktoken_cache(folder / "tiktoken")
        composer.count_tokens("warm up the tokenizer")
        await concurrency(folder)
        await hung(folder)
        await cached(folder)
        await statics(folder, quick)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds in part 4")
    asyncio.run(main(parser.parse_args().quick))
