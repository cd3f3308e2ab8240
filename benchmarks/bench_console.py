"""The console's reads of a large audit log, against ``composer audit list``'s reader.

Writes an audit file of ``--turns`` lines (copies of lines that real ``prepare_turn`` calls
wrote with ``keep_text``, each with its own turn id, two principals, four branches), then, in
this process, times and measures the peak memory (tracemalloc) of:

- **baseline**: ``read_turns(path, limit=50)``, what ``composer audit list`` runs;
- the console's **turns page** (``TurnSource.newest``: one principal's newest 50), unfiltered
  and filtered by a provider's outcome (a filter applied per line);
- the **providers page** (``provider_stats`` over one principal's turns);
- **everything held**: every line parsed and kept, what an unbounded reader would hold.

Run: ``.venv/bin/python benchmarks/bench_console.py [--turns 50000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import composer
from composer.console import TurnSource
from composer.console.views import provider_stats
from composer.observe.audit.reader import read_turns
from composer.observe.record import read_lines
from composer.principal import Principal, current_principal

MANIFEST = """\
version: 1
budget: 60
runtime: {audit: {path: seed.jsonl, keep_text: true}}
providers:
  - {name: rules, type: static, text: "Be brief and cite the runbook.", priority: 10}
  - {name: runbook, type: static, text: "Disk runbook: free space with logrotate.", when: "'disk' in instruction.text"}
  - {name: echo, type: static, text: "Asked about {{ instruction.text }}"}
  - {name: huge, type: static, text: "HUGE"}
""".replace("HUGE", " ".join(["word"] * 60))


async def seed(folder: Path) -> list[dict[str, Any]]:
    """Four real turns' audit lines."""
    (folder / "m.yaml").write_text(MANIFEST)
    manifest = composer.load_manifest(folder / "m.yaml")
    branch = composer.Branch("You are on call.\n", name="payments")
    composer.attach(branch, manifest)
    token = current_principal.set(Principal("team-a"))
    try:
        for text in ("the disk is full", "latency after deploy", "disk again", "p95 dashboards"):
            await composer.prepare_turn(branch, text)
    finally:
        current_principal.reset(token)
        await manifest.aclose()
    return [json.loads(line) for line in (folder / "seed.jsonl").read_text().splitlines()]


def write_log(path: Path, lines: list[dict[str, Any]], turns: int) -> None:
    with path.open("w") as out:
        for n in range(turns):
            line = dict(lines[n % len(lines)])
            line["turn_id"] = f"{n:032x}"
            line["branch"] = {
                "id": f"inc-{n % 4}",
                "name": "payments",
                "principal": "team-a" if n % 2 else "team-b",
            }
            out.write(json.dumps(line, separators=(",", ":")) + "\n")


def measure(run: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median seconds over ``repeat`` runs, and the peak MiB of one traced run."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    tracemalloc.start()
    run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        lines = asyncio.run(seed(folder))
        log = folder / "turns.jsonl"
        write_log(log, lines, args.turns)
        source = TurnSource(log)

        def outcome(line: Any) -> bool:
            found = line.provider("runbook")
            return found is not None and found.outcome == "fired"

        cases: dict[str, Callable[[], object]] = {
            "baseline: read_turns(limit=50) (audit list)": lambda: read_turns(log, limit=50),
            "turns page: newest 50 of one principal": lambda: source.newest(
                None, limit=50, principal="team-a"
            ),
            "turns page: filtered by provider outcome": lambda: source.newest(
                outcome, limit=50, principal="team-a"
            ),
            "providers page: counts of one principal": lambda: provider_stats(
                source.lines(principal="team-a")
            ),
            "everything held (unbounded reader)": lambda: [line for _, line in read_lines(log)],
        }
        size = log.stat().st_size / 2**20
        print(f"# {args.turns} turns, {size:.1f} MiB; median of {args.repeat}, peak of one run")
        base_s = base_mib = 0.0
        for name, run in cases.items():
            seconds, mib = measure(run, args.repeat)
            if not base_s:
                base_s, base_mib = seconds, mib
            print(
                f"{name:45s} {seconds:7.2f} s ({seconds / base_s:4.2f}x)  "
                f"{mib:7.1f} MiB ({mib / base_mib:5.2f}x)"
            )


if __name__ == "__main__":
    main()
