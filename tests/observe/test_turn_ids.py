"""Turn ids a person can type: the first 8 characters of a process's recent turn ids differ, so
8 characters name a turn to ``composer audit show`` and ``audit diff``, which both take it
after LOG (``show --turn ID``, the spelling before, still works and warns)."""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

import pytest

import composer
from composer import outcomes
from composer.cli import main

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
    """Even when chance repeats them: the randomness (read ahead for many ids at once) is
    forced to repeat here."""
    ids = [
        "0123abcd" + "e" * 24,
        "0123abcd" + "0" * 24,
        "0123abcd" + "1" * 24,
        "4567cdef" + "f" * 24,
    ]
    monkeypatch.setattr(secrets, "token_hex", lambda size: "".join(ids))
    monkeypatch.setattr(outcomes._LEADS, "_pool", "")  # nothing read ahead before the test
    first, second = outcomes.new_turn_id(), outcomes.new_turn_id()
    assert (first, second) == (ids[0], ids[3])


def test_only_the_recent_turns_are_remembered() -> None:
    """The set the first characters are checked against stays bounded, however many turns."""
    for _ in range(outcomes.RECENT_TURNS + 50):
        outcomes.new_turn_id()
    held = outcomes._LEADS
    assert len(held._held) == len(held._order) == outcomes.RECENT_TURNS


def test_a_forked_child_draws_its_own_ids() -> None:
    """The random characters read ahead stay with the process that read them."""
    outcomes.new_turn_id()  # the parent has ids read ahead
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe, then leaves
        os.write(writer, outcomes.new_turn_id().encode())
        os._exit(0)
    os.close(writer)
    os.waitpid(child, 0)
    with os.fdopen(reader) as pipe:
        theirs = pipe.read()
    assert re.fullmatch(r"[0-9a-f]{32}", theirs)
    assert outcomes.new_turn_id() != theirs  # the parent's next id is not the child's


async def _log_of(folder: Path, count: int) -> tuple[str, list[str]]:
    manifest = composer.load_manifest(write(folder / "m.yaml", MANIFEST))
    reports = await turns(manifest, count)
    await manifest.aclose()
    return str(folder / "turns.jsonl"), [report.turn_id or "" for report in reports]


async def test_8_characters_name_a_turn_to_show_and_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, ids = await _log_of(tmp_path, 200)
    for turn_id in (ids[0], ids[99], ids[-1]):
        assert main(["audit", "show", log, turn_id[:8]]) == 0
        assert capsys.readouterr().out.startswith(f"turn: {turn_id} at ")
    assert main(["audit", "diff", log, ids[0][:8], ids[1][:8]]) == 0
    assert capsys.readouterr().out.startswith(f"# turn {ids[0]} -> turn {ids[1]}: ")
    assert main(["audit", "show", log, "--schema", "audit", ids[5][:8], "--json"]) == 0
    assert '"instruction": "deploy 5"' in capsys.readouterr().out  # ID after an option


async def test_turn_as_an_option_still_works_and_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, ids = await _log_of(tmp_path, 2)
    assert main(["audit", "show", log, "--turn", ids[0][:8]]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"turn: {ids[0]} at ")
    assert err == (
        "composer audit show: --turn is deprecated and will be removed: give the turn after "
        "LOG (composer audit show LOG ID)\n"
    )
    assert main(["audit", "show", log, ids[1], "--turn", ids[0]]) == 2
    assert "give the turn once" in capsys.readouterr().err
    assert main(["audit", "show", "--help"]) == 0
    assert "--turn" not in capsys.readouterr().out
