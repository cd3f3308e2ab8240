"""``composer audit list``: the turns of an audit log, newest first, one line each, written by
real turns."""

from __future__ import annotations

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
