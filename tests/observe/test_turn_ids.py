"""Turn ids a person can type: the first 8 characters of a process's recent turn ids differ."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import composer
from composer import outcomes

from .conftest import turns, write

MANIFEST = """\
    version: 1
    runtime: {audit: {path: turns.jsonl, keep_text: true}}
    providers:
      - {name: rules, type: static, text: "Answer in English."}
"""


async def test_the_first_8_characters_of_many_turn_ids_of_one_process_differ(
    tmp_path: Path,
) -> None:
    manifest = composer.load_manifest(write(tmp_path / "m.yaml", MANIFEST))
    reports = await turns(manifest, 2_000)
    await manifest.aclose()
    ids = [report.turn_id or "" for report in reports]
    assert all(re.fullmatch(r"[0-9a-f]{32}", turn_id) for turn_id in ids)
    assert len({turn_id[:8] for turn_id in ids}) == len(ids)


def test_a_first_8_characters_already_taken_are_drawn_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Even when chance repeats them: the randomness is forced to repeat here."""
    drawn = iter(["0123abcd", "e" * 24, "0123abcd", "0123abcd", "4567cdef", "f" * 24])
    monkeypatch.setattr(outcomes.secrets, "token_hex", lambda size: next(drawn))
    first, second = outcomes.new_turn_id(), outcomes.new_turn_id()
    assert (first, second) == ("0123abcd" + "e" * 24, "4567cdef" + "f" * 24)


def test_only_the_recent_turns_are_remembered() -> None:
    """The set the first characters are checked against stays bounded, however many turns."""
    for _ in range(outcomes.RECENT_TURNS + 50):
        outcomes.new_turn_id()
    held = outcomes._LEADS
    assert len(held._held) == len(held._order) == outcomes.RECENT_TURNS
