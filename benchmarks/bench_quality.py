"""Is it the right context: the bundled configs and questions, with and without dedup and fill.

Run from the repository root:  .venv/bin/python benchmarks/bench_quality.py

``composer eval`` (``composer.inspect.evaluation.evaluate``) of ``configs/questions.yaml`` on a
copy of ``configs/`` whose team memory also holds three incident notes that repeat runbook
passages word for word (as a note written back after an incident does), in four settings:
ADR admission, ``runtime.dedup: exact``, ``runtime.admission: fill`` and both; at the bundled
budget (1,200 tokens) and at a tight one (200), where the ADR drops whole blocks. Per setting:
injected recall and relevant token share of the runbooks and the team memory, and the mean
tokens admitted per question. Then what explaining costs a turn: the 23 questions gathered
with explain off and on, as a ratio to off (``benchmarks/bench_explain.py`` holds off and on
against the code before explanations existed).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import composer  # noqa: E402
from composer.inspect.evaluation import Scores, evaluate  # noqa: E402
from composer.inspect.questions import load_questions  # noqa: E402
from composer.outcomes import explain_turns  # noqa: E402

CONFIGS = REPO / "configs"
REPEATS = [  # incident notes that repeat a runbook passage word for word
    ("r1", "runbooks/api-outage.md", "## Symptoms"),
    ("r2", "runbooks/deploy-rollback.md", "## How to roll back"),
    ("r3", "runbooks/certificate-renewal.md", "## Manual renewal"),
]
SETTINGS = {
    "ADR admission": {},
    "dedup: exact": {"dedup": "exact"},
    "admission: fill": {"admission": "fill"},
    "dedup + fill": {"dedup": "exact", "admission": "fill"},
}


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` up to the next heading."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    return "\n".join(lines[start:end]).strip()


def folder_with_repeats(root: Path) -> Path:
    folder = root / "configs"
    shutil.copytree(CONFIGS, folder, ignore=shutil.ignore_patterns("*.sqlite*"))
    with (folder / "memory.jsonl").open("a", encoding="utf-8") as seed:
        for item, path, heading in REPEATS:
            text = section(folder / "corpus" / path, heading)
            seed.write(json.dumps({"id": item, "content": text}) + "\n")
    return folder


def overlay(folder: Path, name: str, budget: int, runtime: dict[str, str]) -> str:
    """An environment over the bundled dev one with ``budget`` and ``runtime``."""
    env = f"bench-{name.replace(' ', '-').replace(':', '').replace('+', 'and')}-{budget}"
    text = {"extends": "dev.yaml", "budget": budget, "runtime": runtime}
    (folder / f"{env}.yaml").write_text(json.dumps(text), encoding="utf-8")
    return env


def row(name: str, budget: int, scores: Scores) -> str:
    runbooks, memory = scores.providers["runbooks"], scores.providers["team-memory"]
    return (
        f"| {budget} | {name} | {runbooks.injected_recall:.3f} | "
        f"{runbooks.relevant_token_share:.3f} | {memory.injected_recall:.3f} | "
        f"{memory.relevant_token_share:.3f} | {scores.overall.injected_recall:.3f} | "
        f"{scores.tokens:.1f} |"
    )


async def quality(folder: Path) -> None:
    questions = load_questions(str(folder / "questions.yaml"))
    print("| budget | setting | runbooks injected recall | runbooks relevant tokens |", end="")
    print(" memory injected recall | memory relevant tokens | overall injected recall |", end="")
    print(" tokens per question |")
    print("|---|---|---|---|---|---|---|---|")
    for budget in (1200, 200):
        for name, runtime in SETTINGS.items():
            env = overlay(folder, name, budget, runtime)
            scores = await evaluate(questions, env=env)
            assert not scores.problems, scores.problems
            print(row(name, budget, scores))


async def explain_cost(folder: Path, rounds: int = 15) -> None:
    """Mean µs per gather over the 23 questions, explain off and on, median of ``rounds``."""
    questions = load_questions(str(folder / "questions.yaml"))
    manifest = composer.load_manifest(folder, env="dev", variables={"STATUS_TOKEN": "x"})
    registry = composer.build_registry(manifest)
    turns = [
        (composer.Branch("sys\n", name=q.branch.name), composer.Instruction(q.instruction))
        for q in questions.model.questions
    ]

    async def once(explain: bool) -> float:
        start = time.perf_counter()
        with explain_turns(explain):
            for branch, instruction in turns:
                await registry.gather(branch, instruction)
        return (time.perf_counter() - start) / len(turns) * 1e6

    await once(False)  # the index and the store, warm
    times: dict[bool, list[float]] = {False: [], True: []}
    for n in range(rounds):
        for explain in (n % 2 == 0, n % 2 != 0):  # alternating order
            times[explain].append(await once(explain))
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(f"\nexplain off: {off:.0f} µs per gather; on: {on:.0f} µs ({on / off:.2f}x off)")
    await registry.aclose()
    await manifest.aclose()


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = folder_with_repeats(Path(tmp))
        await quality(folder)
        await explain_cost(folder)


if __name__ == "__main__":
    asyncio.run(main())
