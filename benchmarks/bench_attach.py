"""Attaching one loaded manifest to many branches, against building bare registries.

Run from the repository root:  .venv/bin/python benchmarks/bench_attach.py [--branches N]

For each bundled environment (dev: static, file_corpus, memory; prod: the same plus http),
the manifest is loaded once, then ``composer.attach`` gives N new branches each their own
registry (the engine builds and wraps one provider per entry). The baseline, in the same
process, builds N bare ADR ``ContextProviderRegistry`` objects and registers the same, already
built provider objects with the same priority, cap and name: the floor for "a registry per
branch". The ratio is attach / baseline; the engine's target is at most 20x. Figures are the
median of five rounds of N branches each.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import composer  # noqa: E402
from composer.build import ManifestRegistry  # noqa: E402

ROUNDS = 5
# prod reads these; attaching builds providers but makes no request, so any value will do
PLACEHOLDERS = {"STATUS_URL": "https://status.example.com", "STATUS_TOKEN": "placeholder"}


def _round(make: Callable[[], object], branches: int) -> float:
    start = time.perf_counter()
    for _ in range(branches):
        make()
    return time.perf_counter() - start


def measure(env: str, branches: int) -> tuple[float, float]:
    """Median seconds for ``branches`` attaches, and for as many bare registries."""
    manifest = composer.load_manifest(
        REPO / "configs", env=env, environ={**os.environ, **PLACEHOLDERS}
    )
    template = composer.build_registry(manifest)
    assert isinstance(template, ManifestRegistry)
    entries = [
        (m.provider, m.config.priority, m.config.max_tokens, m.name) for m in template.managed
    ]

    def attach() -> object:
        return composer.attach(composer.Branch("s"), manifest)

    def bare() -> object:
        branch = composer.Branch("s")
        registry = composer.ContextProviderRegistry(budget=manifest.budget)
        for provider, priority, max_tokens, name in entries:
            registry.register(provider, priority=priority, max_tokens=max_tokens, name=name)
        branch._context_providers = registry
        return registry

    attach(), bare()  # warm-up: compiled templates cached, shared state made
    attach_s = statistics.median(_round(attach, branches) for _ in range(ROUNDS))
    bare_s = statistics.median(_round(bare, branches) for _ in range(ROUNDS))
    asyncio.run(manifest.aclose())
    return attach_s, bare_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--branches", type=int, default=10_000)
    args = parser.parse_args()
    print(f"{args.branches} branches per round, median of {ROUNDS} rounds")
    print(f"{'manifest':<10}{'providers':>10}{'attach':>12}{'bare':>12}{'ratio':>8}")
    for env in ("dev", "prod"):
        manifest = composer.load_manifest(
            REPO / "configs", env=env, environ={**os.environ, **PLACEHOLDERS}
        )
        count = sum(1 for p in manifest.providers if p.enabled)
        attach_s, bare_s = measure(env, args.branches)
        print(
            f"{env:<10}{count:>10}{attach_s * 1000:>10.0f}ms{bare_s * 1000:>10.0f}ms"
            f"{attach_s / bare_s:>7.1f}x"
        )


if __name__ == "__main__":
    main()
