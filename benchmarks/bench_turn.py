"""The turn path: what composer adds to a model turn, against hand-written glue.

Run from the repository root:  .venv/bin/python benchmarks/bench_turn.py [--turns N]

Three measurements, each against a baseline run in the same process on the same providers:

- bundled dev manifest (static, file_corpus over configs/corpus, JSONL memory): a full
  ``prepare_turn`` (gather, o200k token counts, budget admission, report, fold) against glue
  that awaits the same providers and joins their text with no counting, budget or report;
- twenty static providers: the registry's own overhead per provider, same baseline;
- a branch with no providers: ``prepare_turn`` against building the guidance string by hand
  (ADR-0008 P1: no registry must mean no work).

It also times ``load_manifest`` and ``build_registry`` on the bundled prod manifest. Figures are
medians and 95th percentiles over N turns after a warm-up; ratios are composer / baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import composer  # noqa: E402
from builtin_providers.static import StaticConfig, StaticProvider  # noqa: E402
from composer.tokens import encoding  # noqa: E402

INSTRUCTIONS = [
    "The API returns 502 errors after the deploy, what do I do?",
    "How do I fail over the database?",
    "A certificate expires in ten days",
    "Roll back the payments release",
    "Who posts to the status page during an incident?",
]


async def _timed(turns: int, run: Callable[[str], Awaitable[Any]]) -> list[float]:
    for text in INSTRUCTIONS:  # warm-up: indexes, caches, compiled templates
        await run(text)
    samples: list[float] = []
    for i in range(turns):
        text = INSTRUCTIONS[i % len(INSTRUCTIONS)]
        start = time.perf_counter()
        await run(text)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1]


def _glue(providers: list[Any]) -> Callable[[str], Awaitable[str]]:
    """What a hand-written integration does: call each source, join what came back."""

    async def run(text: str) -> str:
        branch = composer.Branch("sys\n")
        instruction = composer.Instruction(text)
        parts = [await p.provide(branch, instruction) for p in providers]
        return "sys\n" + "\n".join(part for part in parts if part)

    return run


def _composer(manifest_or_registry: Any) -> Callable[[str], Awaitable[Any]]:
    async def run(text: str) -> Any:
        branch = composer.Branch("sys\n")
        if isinstance(manifest_or_registry, composer.ContextProviderRegistry):
            branch._context_providers = manifest_or_registry
        elif manifest_or_registry is not None:
            composer.attach(branch, manifest_or_registry)
        return await composer.prepare_turn(branch, composer.Instruction(text))

    return run


async def measure(turns: int) -> list[tuple[str, list[float], list[float]]]:
    os.chdir(REPO)
    dev = composer.load_manifest("configs", env="dev")
    dev_registry = composer.build_registry(dev)
    statics = [
        StaticProvider(StaticConfig(name=f"s{i}", text=f"Rule {i}: keep answers short.\n"))
        for i in range(20)
    ]
    static_registry = composer.ContextProviderRegistry()
    for provider in statics:
        static_registry.register(provider)

    async def no_provider_glue(text: str) -> str:
        branch = composer.Branch("sys\n")  # the same objects the composer side makes
        instruction = composer.Instruction(text)
        return (branch.system or "") + (instruction.guidance or "")

    return [
        (
            "dev manifest turn (3 providers)",
            await _timed(turns, _composer(dev_registry)),
            await _timed(turns, _glue(dev_registry.providers)),
        ),
        (
            "20 static providers",
            await _timed(turns, _composer(static_registry)),
            await _timed(turns, _glue(statics)),
        ),
        (
            "no providers",
            await _timed(turns, _composer(None)),
            await _timed(turns, no_provider_glue),
        ),
    ]


def load_figures(repeats: int) -> tuple[float, float]:
    env = {**os.environ, "STATUS_TOKEN": "benchmark-token"}
    loads: list[float] = []
    builds: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        manifest = composer.load_manifest(REPO / "configs", env="prod", environ=env)
        loads.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        composer.build_registry(manifest)
        builds.append((time.perf_counter() - start) * 1000)
    return statistics.median(loads), statistics.median(builds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    encoding()  # the tokenizer is loaded once per process; keep it out of the figures
    rows = asyncio.run(measure(args.turns))
    print(f"turns per measurement: {args.turns}; times in ms; ratio = composer / baseline")
    print(f"{'measure':34} {'median':>8} {'p95':>8} {'base med':>9} {'base p95':>9} {'ratio':>6}")
    for name, ours, base in rows:
        ratio = statistics.median(ours) / statistics.median(base)
        print(
            f"{name:34} {statistics.median(ours):8.3f} {_p95(ours):8.3f} "
            f"{statistics.median(base):9.3f} {_p95(base):9.3f} {ratio:6.2f}"
        )
    load_ms, build_ms = load_figures(20)
    print(f"load_manifest(configs, env=prod): {load_ms:.1f} ms median of 20")
    print(f"build_registry(prod manifest):    {build_ms:.2f} ms median of 20")


if __name__ == "__main__":
    main()
