"""``composer audit list``: the turns of an audit log, newest first, one line each, written by
real turns."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import composer
from composer.cli.main import main
from composer.principal import Principal, current_principal


async def write_turns(tmp_path: Path, keep_text: bool) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            budget: 50
            runtime: {{audit: {{path: turns.jsonl, keep_text: {str(keep_text).lower()}}}}}
            providers:
              - {{name: rules, type: static, text: "Be brief."}}
              - {{name: quiet, type: static, text: "x", when: "'never' in instruction.text"}}
              - {{name: huge, type: static, text: "{"word " * 80}"}}
            """
        )
    )
    manifest = composer.load_manifest(path)
    branch = composer.Branch("S\n", name="payments")
    composer.attach(branch, manifest)
    for text in (
        "first question about disks",
        "second one, much longer than the eight words shown here",
    ):
        token = current_principal.set(Principal("team-a"))
        try:
            await composer.prepare_turn(branch, text)
        finally:
            current_principal.reset(token)
    await manifest.aclose()
    return tmp_path / "turns.jsonl"


async def test_each_turn_is_one_line_newest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = await write_turns(tmp_path, keep_text=True)
    assert main(["audit", "list", str(log)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    newest, oldest, summary = lines
    assert '"second one, much longer than the eight words ..."' in newest
    assert '"first question about disks"' in oldest
    for line in (newest, oldest):
        assert "(payments)" in line
        assert " team-a " in line
        assert "[+wb]" in line  # fired, guarded, over the budget
        assert f"{composer.count_tokens('Be brief.')}/50" in line
    assert summary == "# 2 turns"
    assert main(["audit", "list", str(log), "--limit", "1"]) == 0
    limited = capsys.readouterr().out.splitlines()
    assert limited[0] == newest
    assert limited[1] == "# the newest 1 of 2 turns"


async def test_without_kept_text_the_instruction_is_its_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = await write_turns(tmp_path, keep_text=False)
    assert main(["audit", "list", str(log)]) == 0
    out = capsys.readouterr().out
    assert "disks" not in out
    assert "(sha256 " in out


def test_a_missing_log_or_a_bad_limit_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "list", str(tmp_path / "none.jsonl")]) == 1
    assert "none.jsonl" in capsys.readouterr().err
    assert main(["audit", "list", str(tmp_path / "none.jsonl"), "--limit", "0"]) == 2


async def test_an_unnamed_branch_is_named_by_its_id_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A branch without a name, a turn without an error or a principal: never ``None``."""
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\n"
        "runtime: {audit: {path: turns.jsonl}}\n"
        "providers: [{name: rules, type: static, text: Be brief.}]\n"
    )
    manifest = composer.load_manifest(path)
    unnamed, named = composer.Branch("S\n"), composer.Branch("S\n", name="payments")
    for branch in (unnamed, named):
        composer.attach(branch, manifest)
    token = current_principal.set(Principal("team-a"))
    try:
        first = await composer.prepare_turn(unnamed, "one")
    finally:
        current_principal.reset(token)
    second = await composer.prepare_turn(named, "two")
    await manifest.aclose()
    assert first.report is not None
    assert second.report is not None
    log = str(tmp_path / "turns.jsonl")
    ids = [first.report.turn_id or "", second.report.turn_id or ""]
    assert main(["audit", "diff", log, *ids]) == 0
    out = capsys.readouterr().out
    assert "None" not in out
    assert f"~ branch: {unnamed.id} -> {named.id} (payments)\n" in out
    assert "~ principal: team-a -> -\n" in out
    assert main(["audit", "show", log, ids[0]]) == 0
    shown = capsys.readouterr().out.splitlines()[0]
    assert shown.endswith(f", branch {unnamed.id}")
    assert main(["audit", "list", log]) == 0
    assert "None" not in capsys.readouterr().out


def test_a_line_nested_50000_deep_leaves_the_good_turns_listed(tmp_path: Path) -> None:
    """One hostile line appended to a good log: `composer audit list` and `audit show`, run
    as a user runs them, print the good turns, warn of the line, and exit 0, no traceback."""
    log = asyncio.run(write_turns(tmp_path, keep_text=True))
    with log.open("ab") as appended:
        appended.write(b"[" * 50_000 + b"]" * 50_000 + b"\n")
    listed, shown = (
        subprocess.run(
            [sys.executable, "-m", "composer", "audit", action, str(log)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        for action in ("list", "show")
    )
    for done in (listed, shown):
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert f"{log}:3: not an audit line (1 problem); skipped" in done.stderr
    newest, oldest, summary = listed.stdout.splitlines()
    assert '"second one, much longer than the eight words ..."' in newest
    assert '"first question about disks"' in oldest
    assert summary == "# 2 turns"
    assert "second one, much longer than the eight words shown here" in shown.stdout
