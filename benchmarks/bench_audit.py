"""What the audit log costs a turn: the same turns with ``runtime.audit`` off and on, one process.

Run from the repository root:  .venv/bin/python benchmarks/bench_audit.py [--quick] [--postgres DSN]

Two manifests, each in three variants that differ only in their ``runtime`` section: no audit
(the baseline), ``audit: {path: ...}``, and ``audit: {path: ..., keep_text: true}``; with
``--postgres DSN``, a fourth, ``audit: {postgres: {dsn: DSN, schema: ...}}`` (a schema of its
own, dropped afterwards).

1. The bundled dev environment (``configs/dev.yaml``: static, file_corpus, memory), copied to a
   temporary folder.
2. 20 static providers: the cheapest turn there is, where a fixed cost shows most.

Two measures, each variant on its own branch, rounds alternating between the variants and
rotating their order (so drift in the machine's load falls on all alike):

- latency: turns started on a fixed schedule that keeps the process about half busy (a
  service between model calls), each turn's ``prepare_turn`` timed; median and 99th
  percentile over all rounds. This is what a turn is slowed by: the writer makes its lines
  while the loop waits.
- CPU: turns back to back, the process's CPU time (every thread) until the writer has written
  their lines, per turn: what the whole of the audit log costs, the worst case for a process
  that is busy all the time (one interpreter: a microsecond spent making a line is one the
  turns do not get).

Afterwards every line must have been written: the writer kept up, nothing dropped or lost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import composer  # noqa: E402

VARIANTS = {
    "off": "",
    "audit": "runtime: {audit: {path: turns-audit.jsonl}}\n",
    "audit + keep_text": "runtime: {audit: {path: turns-text.jsonl, keep_text: true}}\n",
}


def variants(folder: Path, prefix: str, make: str) -> dict[str, Path]:
    """One manifest file per variant: ``make`` with the variant's runtime section in it."""
    paths = {}
    for name, runtime in VARIANTS.items():
        path = folder / f"{prefix}-{name.replace(' ', '').replace('+', '-')}.yaml"
        path.write_text(make.format(runtime=runtime))
        paths[name] = path
    return paths


def dev_manifests(folder: Path) -> dict[str, Path]:
    shutil.copytree(REPO / "configs", folder, dirs_exist_ok=True)
    return variants(folder, "bench", "extends: dev.yaml\n{runtime}")


def static_manifests(folder: Path) -> dict[str, Path]:
    providers = "".join(
        f"  - {{{{name: s{i}, type: static, text: 'Rule {i}: answer in English.'}}}}\n"
        for i in range(20)
    )
    return variants(folder, "static", "version: 1\nbudget: 4000\n{runtime}providers:\n" + providers)


async def setup(paths: dict[str, Path]) -> dict[str, tuple[composer.Manifest, composer.Branch]]:
    """A warmed branch per variant (indexes built, counts memoised, the writer started)."""
    ready = {}
    for name, path in paths.items():
        manifest = composer.load_manifest(path)
        branch = composer.Branch("You are the on-call assistant.\n", name="bench")
        await composer.attach(branch, manifest).warm_up()
        for _ in range(50):
            await composer.prepare_turn(branch, "The API returns 502 errors after the deploy")
        ready[name] = (manifest, branch)
    return ready


async def latency(branch: composer.Branch, turns: int, every_s: float) -> list[float]:
    """Each turn's time (ms), turns started every ``every_s`` seconds."""
    loop = asyncio.get_running_loop()
    times = []
    start = loop.time()
    for i in range(turns):
        await asyncio.sleep(max(0.0, start + i * every_s - loop.time()))
        began = time.perf_counter()
        await composer.prepare_turn(branch, f"The API returns 502 errors ({i % 7})")
        times.append((time.perf_counter() - began) * 1000)
    return times


async def saturated(manifest: composer.Manifest, branch: composer.Branch, turns: int) -> float:
    """CPU time (ms) per turn of ``turns`` turns back to back, the writing of their lines
    included (process time: every thread, not the writer's idle wait)."""
    began = time.process_time()
    for i in range(turns):
        await composer.prepare_turn(branch, f"The API returns 502 errors ({i % 7})")
    written(manifest)
    return (time.process_time() - began) * 1000 / turns


def written(manifest: composer.Manifest) -> None:
    """Wait until the manifest's audit log has written every queued line (if it has a log)."""
    observer = manifest.shared.get("observe")
    if observer is not None and observer.audit is not None:
        assert observer.audit.flush(60), "the writer did not finish"


async def measure(
    paths: dict[str, Path], turns: int, rounds: int
) -> dict[str, tuple[float, float, float]]:
    """Per variant: latency median and p99 (ms), saturated mean (ms); every line checked."""
    ready = await setup(paths)
    for manifest, _ in ready.values():
        written(manifest)
    cost = await saturated(*ready["off"], turns)
    every = 2 * cost / 1000  # the process about half busy
    paced: dict[str, list[float]] = {name: [] for name in ready}
    flat: dict[str, list[float]] = {name: [] for name in ready}
    order = list(ready)
    for round_ in range(rounds):
        shift = round_ % len(order)  # each variant in each place in turn: no order effect
        for name in order[shift:] + order[:shift]:
            manifest, branch = ready[name]
            paced[name] += await latency(branch, turns, every)
            written(manifest)  # this variant's lines are not written in the next one's time
            flat[name].append(await saturated(manifest, branch, turns))
    for manifest, _ in ready.values():
        observer = manifest.shared.get("observe")
        log = observer.audit if observer is not None else None
        if log is not None:
            expected = 50 + 2 * turns * rounds
            assert log.flush(60), "the writer did not finish"
            assert (log.written, log.dropped, log.failed) == (expected, 0, 0), log
        await manifest.aclose()
    return {
        name: (
            statistics.median(paced[name]),
            statistics.quantiles(paced[name], n=100)[98],
            statistics.median(flat[name]),
        )
        for name in ready
    }


def report(title: str, figures: dict[str, tuple[float, float, float]]) -> None:
    base = figures["off"]
    print(f"\n{title}")
    print(
        f"{'variant':<18} {'median ms':>9} {'ratio':>6} {'p99 ms':>8} {'ratio':>6}"
        f" {'CPU ms/turn':>12} {'ratio':>6}"
    )
    for name, (median, p99, flat) in figures.items():
        print(
            f"{name:<18} {median:>9.4f} {median / base[0]:>5.3f}x {p99:>8.4f} {p99 / base[1]:>5.3f}x"
            f" {flat:>12.4f} {flat / base[2]:>5.3f}x"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns (a smoke run)")
    parser.add_argument("--postgres", metavar="DSN", help="also audit to a table of this server")
    args = parser.parse_args()
    turns, rounds = (100, 3) if args.quick else (400, 10)
    schema = f"bench_audit_{os.getpid()}"
    if args.postgres:
        table = f"{{dsn: {json.dumps(args.postgres)}, schema: {schema}}}"
        VARIANTS["audit to postgres"] = f"runtime: {{audit: {{postgres: {table}}}}}\n"
    try:
        await run(turns, rounds)
    finally:
        if args.postgres:
            import psycopg

            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def run(turns: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        report(
            f"bundled dev manifest (static, file_corpus, memory): {turns} turns x {rounds} rounds",
            await measure(dev_manifests(folder / "dev"), turns, rounds),
        )
        (folder / "static").mkdir()
        report(
            f"20 static providers: {turns * 4} turns x {rounds} rounds",
            await measure(static_manifests(folder / "static"), turns * 4, rounds),
        )


if __name__ == "__main__":
    asyncio.run(main())
