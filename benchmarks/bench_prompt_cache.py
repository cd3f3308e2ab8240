"""How much of each model request a provider's prefix cache can serve, per placement.

A 20-turn conversation over the bundled ``configs/`` (dev, offline): each turn's instruction
asks about something else, so the corpus and memory blocks change every turn. Each turn is
prepared with ``prepare_turn`` and laid out as the chat-completions request an agent sends:

* ``adr`` (ADR-0008 D4): the folded system text (system + every block + guidance) first,
  then the history (each earlier user text and assistant answer), then the user's text;
* ``stable_prefix``: the system text with the stable blocks first, then the history, then the
  turn's context block and the user's text.

A request is serialised as role-tagged messages and counted with o200k_base. Its cacheable
share is the tokens it has in common with the start of the previous request (what a prefix
cache can serve), over its own tokens. The limit is the share that precedes the newest turn
(system text and history): no placement beats it while injected context stays ephemeral.
Cost: uncached tokens at 1, cached at a tenth (``--discount``), against all uncached.

    .venv/bin/python benchmarks/bench_prompt_cache.py [--turns 20] [--discount 10]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
from pathlib import Path

import composer
from composer.tokens import encoding

CONFIGS = Path(__file__).parents[1] / "configs"
SYSTEM = "You are the on-call assistant for the platform team. Answer briefly.\n"
QUESTIONS = [
    "The API returns 502 errors after the deploy, what do I do?",
    "How do I roll back a bad deploy with deployctl?",
    "The database failover drill is due, what are the steps?",
    "A certificate for an internal host expires tomorrow, how do I renew it?",
    "Who is on call this week and how do I page them?",
    "The api service keeps restarting in one zone, is that known?",
    "deployctl rollback hangs at waiting for health, why?",
    "How long did the last database failover take?",
    "DNS API token errors during certificate renewal, what now?",
    "What is the policy for paging at night?",
]


def request(messages: list[tuple[str, str]]) -> list[int]:
    """The request's tokens: each message as ``<|role|>content`` (roles are part of what a
    prefix cache compares)."""
    text = "".join(f"<|{role}|>{content}<|end|>" for role, content in messages)
    return encoding().encode(text, disallowed_special=())


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def load(placement: str, folder: Path) -> composer.Manifest:
    """The bundled dev manifest, with ``placement``: an overlay in a copy of ``configs/``."""
    copy = folder / placement
    shutil.copytree(CONFIGS, copy, ignore=shutil.ignore_patterns("memory.sqlite*"))
    (copy / "bench.yaml").write_text(
        f"extends: dev.yaml\nruntime: {{placement: {placement}}}\n", encoding="utf-8"
    )
    return composer.load_manifest(copy, env="bench")


async def conversation(placement: str, turns: int, folder: Path) -> list[tuple[float, float]]:
    """Per turn: the cacheable share of its request, and the limit."""
    manifest = load(placement, folder)
    branch = composer.Branch(SYSTEM, name="platform")
    registry = composer.attach(branch, manifest)
    history: list[tuple[str, str]] = []
    previous: list[int] | None = None
    shares: list[tuple[float, float]] = []
    try:
        for number in range(turns):
            question = QUESTIONS[number % len(QUESTIONS)] + f" (turn {number + 1})"
            turn = await composer.prepare_turn(branch, question)
            system = turn.guidance or SYSTEM
            user = question if turn.context is None else f"{turn.context}\n{question}"
            tokens = request([("system", system), *history, ("user", user)])
            # the limit: the system text as sent (with its stable blocks), then the history
            fixed = system if placement == "stable_prefix" else SYSTEM
            before_turn = len(request([("system", fixed), *history]))
            share = common_prefix(previous, tokens) / len(tokens) if previous else 0.0
            shares.append((share, before_turn / len(tokens)))
            previous = tokens
            history += [("user", question), ("assistant", f"Noted, step {number + 1}.")]
    finally:
        await registry.aclose()
        await manifest.aclose()
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--discount", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results = {
            p: asyncio.run(conversation(p, args.turns, Path(folder)))
            for p in ("adr", "stable_prefix")
        }
    print(f"{'turn':>4} {'adr':>7} {'stable_prefix':>14} {'limit':>7}")
    for number in range(args.turns):
        adr, _ = results["adr"][number]
        stable, limit = results["stable_prefix"][number]
        print(f"{number + 1:>4} {adr:>7.3f} {stable:>14.3f} {limit:>7.3f}")
    limit = results["stable_prefix"][-1][1]
    for placement, shares in results.items():
        cached = [share for share, _ in shares[1:]]
        mean = statistics.fmean(cached)
        cost = statistics.fmean([(1 - s) + s / args.discount for s in cached])
        print(
            f"{placement}: mean cacheable share {mean:.3f} (turns 2..{args.turns}), "
            f"turn {args.turns} {shares[-1][0]:.3f} against the limit {limit:.3f} "
            f"(gap {limit - shares[-1][0]:.3f}); cost {cost:.3f}x of uncached at a "
            f"{args.discount:g}x discount"
        )


if __name__ == "__main__":
    main()
