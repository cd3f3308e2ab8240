"""A memory block holds the first items that fit its max_tokens, whole, through a real turn."""

from __future__ import annotations

import json
from pathlib import Path

import composer
from composer.tokens import count_tokens

ITEMS = [
    "Deploys freeze on Fridays.",
    "Deploy rollbacks " + "need two approvals from the on-call rota " * 12,
    "Deploy windows are posted in the ops channel.",
]


def manifest(tmp_path: Path, **options: object) -> composer.Manifest:
    memory = tmp_path / "memory.jsonl"
    memory.write_text("".join(json.dumps({"content": c}) + "\n" for c in ITEMS))
    provider = {
        "name": "mem",
        "type": "memory",
        "source": {"jsonl": str(memory)},
        "query": {"text": "deploy"},
        "header": "Remembered:",
        **options,
    }
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps({"version": 1, "budget": 100_000, "providers": [provider]}))
    return composer.load_manifest(path)


async def turn(m: composer.Manifest) -> composer.ProviderReport:
    branch = composer.Branch("sys\n")
    composer.attach(branch, m)
    prepared = await composer.prepare_turn(branch, composer.Instruction("deploy"))
    assert prepared.report is not None
    return prepared.report


def block(*items: str) -> str:
    return "Remembered:\n" + "\n".join(f"- {item}" for item in items)


async def test_items_that_fit_are_kept_and_a_later_smaller_one_too(tmp_path: Path) -> None:
    cap = count_tokens(block(ITEMS[0], ITEMS[2])) + 2
    assert count_tokens(block(ITEMS[0], ITEMS[1])) > cap
    report = await turn(manifest(tmp_path, max_tokens=cap))
    assert report.blocks == [block(ITEMS[0], ITEMS[2])]


async def test_nothing_when_the_first_item_does_not_fit(tmp_path: Path) -> None:
    report = await turn(manifest(tmp_path, max_tokens=3))
    assert report.blocks == []
    assert report.skipped == []


async def test_with_fit_off_the_registry_skips_the_block_whole(tmp_path: Path) -> None:
    cap = count_tokens(block(ITEMS[0], ITEMS[2])) + 2
    report = await turn(manifest(tmp_path, max_tokens=cap, fit=False))
    assert report.blocks == []
    assert report.skipped == ["mem"]


async def test_without_a_cap_every_item_is_returned(tmp_path: Path) -> None:
    report = await turn(manifest(tmp_path))
    assert report.blocks == [block(*ITEMS)]
