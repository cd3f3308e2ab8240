"""A server's turn lines are held until it knows whether its client was answered.

Inside ``holding_audit`` the audit line of a turn waits; it is written when the block ends,
marked ``"answered": false`` unless the block said the turn was answered, and whichever way
the block ends (an exception included). Outside one, lines are written as always, and a line
without the mark reads as answered (every line written before the mark existed).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import composer
from composer.cli.main import main
from composer.observe.audit.held import holding_audit
from composer.observe.record import parse_line


async def test_a_held_line_is_marked_unless_the_turn_was_answered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\nruntime: {audit: {path: turns.jsonl}}\n"
        "providers:\n  - {name: rules, type: static, text: house rules}\n"
    )
    manifest = composer.load_manifest(path)
    branch = composer.Branch("sys\n", name="one")
    composer.attach(branch, manifest)
    await composer.prepare_turn(branch, "in process")
    with holding_audit() as held:
        await composer.prepare_turn(branch, "answered")
        assert held.lines  # waiting, not queued
        held.answered = True

    async def failing_after_the_providers() -> None:
        with holding_audit():
            await composer.prepare_turn(branch, "failed after the providers ran")
            raise RuntimeError("the state store went away")

    with pytest.raises(RuntimeError):
        await failing_after_the_providers()
    await manifest.aclose()
    raw = (tmp_path / "turns.jsonl").read_text().splitlines()
    assert [json.loads(line).get("answered") for line in raw] == [None, None, False]
    lines = [parse_line(line) for line in raw]
    assert [getattr(line, "answered", None) for line in lines] == [True, True, False]
    assert main(["audit", "list", str(tmp_path / "turns.jsonl")]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [("unanswered" in line) for line in listed[:3]] == [True, False, False]  # newest first
