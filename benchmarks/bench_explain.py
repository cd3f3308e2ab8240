"""What explanations cost a gather: explain off and on, against the code before them.

Run from the repository root:  .venv/bin/python benchmarks/bench_explain.py [--rounds N]

"Before" is the engine and the ranking providers as they were at ``--before`` (default: the
commit before candidates, dedup and fill), loaded from git into this process under other
module names (``outcomes``, ``registry``, ``build``, ``_fitting``, ``file_corpus``, ``memory``;
everything else is shared), so the three sides run the same manifest, the same corpus index,
the same memory store and the same tokenizer in the same process:

- **before**: the registry that manifest builds with the old modules;
- **off**: today's ``build_registry`` (no dedup, fill or explain asked: the ADR's admission);
- **on**: the same registry inside ``explain_turns()`` (each ranking provider searches a
  second time, twice as deep, and every candidate is counted and explained).

Three manifests: the bundled dev manifest (static, file_corpus, SQLite memory), 20 static
providers, one static provider (where a fixed cost per gather shows most). Each round times
a batch of gathers, the sides taking turns gather by gather in a rotating order (so that the
machine's load falls on all three alike); the figure is the median over rounds of the mean
time per gather, and the ratios are off / before and on / before.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench_turn import INSTRUCTIONS  # noqa: E402

import composer  # noqa: E402
from builtin_providers.static import provider_type as static_type  # noqa: E402
from composer.catalog import ProviderTypes  # noqa: E402
from composer.outcomes import explain_turns  # noqa: E402
from composer.tokens import encoding  # noqa: E402

BEFORE = "db8f440"
"""The commit before candidates, dedup and fill (the base of that work)."""

CHANGED = {  # in import order: each may import the ones above it
    "composer.outcomes": "composer/outcomes.py",
    "composer.registry": "composer/registry.py",
    "composer.build": "composer/build.py",
    "builtin_providers._fitting": "builtin_providers/_fitting.py",
    "builtin_providers.file_corpus": "builtin_providers/file_corpus.py",
    "builtin_providers.memory": "builtin_providers/memory.py",
}


def load_before(rev: str) -> dict[str, types.ModuleType]:
    """The changed modules as they were at ``rev``, as modules ``before_<name>``, each
    importing the others' old versions."""
    alias = {name: "before_" + name.replace(".", "_") for name in CHANGED}
    loaded: dict[str, types.ModuleType] = {}
    for name, path in CHANGED.items():
        source = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{rev}:{path}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for other, renamed in alias.items():
            source = re.sub(
                rf"^(\s*from ){re.escape(other)}( import)", rf"\g<1>{renamed}\2", source, flags=re.M
            )
        module = types.ModuleType(alias[name])
        module.__file__ = f"{rev}:{path}"
        sys.modules[alias[name]] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        loaded[name] = module
    return loaded


Gather = Callable[[int], Awaitable[Any]]


def gatherer(registry: Any, explain: bool = False) -> Gather:
    """One gather of ``registry`` for the ``i``-th instruction (inside ``explain_turns``
    when ``explain``)."""
    branch = composer.Branch("sys\n")
    instructions = [composer.Instruction(text) for text in INSTRUCTIONS]

    async def plain(i: int) -> None:
        await registry.gather(branch, instructions[i % len(instructions)])

    async def explained(i: int) -> None:
        with explain_turns():
            await registry.gather(branch, instructions[i % len(instructions)])

    return explained if explain else plain


async def measure(sides: dict[str, Gather], rounds: int, batch: int) -> dict[str, float]:
    """Median over rounds of the mean µs per gather. Within a round the sides take turns
    gather by gather (the order rotating), so that a change in the machine's load falls on
    all of them alike."""
    names = list(sides)
    for name in names:  # warm-up: the index, the store, compiled templates, memos
        for i in range(len(INSTRUCTIONS) * 4):
            await sides[name](i)
    clock = time.perf_counter
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        spent = dict.fromkeys(names, 0.0)
        for i in range(batch):
            shift = (r + i) % len(names)
            for name in names[shift:] + names[:shift]:
                gather = sides[name]
                start = clock()
                await gather(i)
                spent[name] += clock() - start
        for name in names:
            samples[name].append(spent[name] / batch * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def statics(folder: Path, count: int) -> Path:
    lines = ["version: 1", "providers:"]
    lines += [
        f"  - {{name: s{i}, type: static, text: 'Rule {i}: keep answers short.'}}"
        for i in range(count)
    ]
    path = folder / f"statics{count}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def run(rounds: int, before_rev: str) -> list[tuple[str, dict[str, float]]]:
    old = load_before(before_rev)
    old_types = ProviderTypes(
        [
            static_type,
            old["builtin_providers.file_corpus"].provider_type,
            old["builtin_providers.memory"].provider_type,
        ]
    )
    old_build = old["composer.build"].build_registry
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        manifests = [
            ("dev manifest (static, file_corpus, memory)", REPO / "configs", "dev", 200),
            ("20 static providers", statics(Path(tmp), 20), None, 500),
            ("1 static provider", statics(Path(tmp), 1), None, 2000),
        ]
        for label, path, env, batch in manifests:
            manifest = composer.load_manifest(path, env=env)
            async with manifest:
                sides = {
                    "before": gatherer(old_build(manifest, types=old_types)),
                    "off": gatherer(composer.build_registry(manifest)),
                    "on": gatherer(composer.build_registry(manifest), explain=True),
                }
                results.append((label, await measure(sides, rounds, batch)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--before", default=BEFORE, help="the revision measured as before")
    args = parser.parse_args()
    encoding()  # the tokenizer loads once per process; keep it out of the figures
    rows = asyncio.run(run(args.rounds, args.before))
    print(f"µs per gather, median of {args.rounds} rounds; before = {args.before}")
    print(
        f"{'manifest':44} {'before':>9} {'off':>9} {'on':>9} {'off/before':>11} {'on/before':>10}"
    )
    for label, figures in rows:
        before, off, on = figures["before"], figures["off"], figures["on"]
        print(
            f"{label:44} {before:9.1f} {off:9.1f} {on:9.1f} {off / before:11.2f} {on / before:10.2f}"
        )


if __name__ == "__main__":
    main()
