"""The audit log: one JSON line per turn, written by a thread, read back by ``composer audit``.

Every test writes a real file (or tries /dev/full) and runs real turns; the line is read
back with the same model ``composer audit`` uses, or through the command itself.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import composer
from composer.cli import main
from composer.observe.audit import AuditLog, open_audit_log, release_audit_log
from composer.observe.audit.reader import find_turn
from composer.observe.record import AuditLine, read_lines

from .conftest import turns, write

MANIFEST = """\
    version: 1
    budget: 40
    runtime:
      audit: {{path: {path}, keep_text: {keep}}}
    providers:
      - {{name: rules, type: static, priority: 9, text: "Answer in English.\\n"}}
      - {{name: quiet, type: static, text: "never", when: "'deploy' not in instruction.text"}}
      - {{name: long, type: static, max_tokens: 10, text: "{{{{ 'word ' * 30 }}}}"}}
      - {{name: filler, type: static, text: "{{{{ 'a b ' * 20 }}}}"}}
      - {{name: broken, type: static, text: "{{{{ instruction.context.ticket.id }}}}"}}
"""


def manifest_at(
    folder: Path, *, path: str = "turns.jsonl", keep: bool = False
) -> composer.Manifest:
    text = MANIFEST.format(path=json.dumps(path), keep="true" if keep else "false")
    return composer.load_manifest(write(folder / "m.yaml", text))


def lines_of(path: Path) -> list[AuditLine]:
    found = [line for _, line in read_lines(path)]
    assert all(isinstance(line, AuditLine) for line in found), found
    return [line for line in found if isinstance(line, AuditLine)]


async def test_each_turn_writes_one_line_with_its_outcomes_and_block_hashes(tmp_path: Path) -> None:
    manifest = manifest_at(tmp_path)
    reports = await turns(manifest, 3)
    await manifest.aclose()  # the last user of the log: what is queued is written
    lines = lines_of(tmp_path / "turns.jsonl")
    assert [line.turn_id for line in lines] == [r.turn_id for r in reports]
    line, report = lines[0], reports[0]
    assert line.branch.name == "payments"
    assert line.manifest.path == str(tmp_path / "m.yaml")
    assert line.manifest.env == "m"
    assert (line.budget, line.tokens_used) == (report.budget, report.tokens_used) == (40, 4)
    assert [(p.name, p.outcome, p.tokens) for p in line.providers] == [
        (o.name, o.outcome, o.tokens) for o in report.outcomes
    ]
    assert [p.outcome for p in line.providers] == [
        "fired",
        "guarded",
        "over_max_tokens",
        "over_budget",
        "failed",
    ]
    rules = line.provider("rules")
    assert rules is not None
    assert rules.block is not None
    assert rules.block.sha256 == hashlib.sha256(b"Answer in English.\n").hexdigest()
    assert rules.block.tokens == 4
    assert rules.block.text is None  # no keep_text: hashes and counts only
    assert line.instruction is not None
    assert line.instruction.text is None
    assert line.instruction.sha256 == hashlib.sha256(b"deploy 0").hexdigest()
    broken = line.provider("broken")
    assert broken is not None
    assert broken.error_type is not None
    assert (line.skipped, line.failed) == (report.skipped, report.failed)


async def test_keep_text_writes_the_texts_the_model_saw(tmp_path: Path) -> None:
    manifest = manifest_at(tmp_path, keep=True)
    await turns(manifest, 1)
    await manifest.aclose()
    (line,) = lines_of(tmp_path / "turns.jsonl")
    assert line.instruction is not None
    assert line.instruction.text == "deploy 0"
    assert line.system is not None
    assert line.system.text == "You are on call.\n"
    rules = line.provider("rules")
    assert rules is not None
    assert rules.block is not None
    assert rules.block.text == "Answer in English.\n"


async def test_audit_show_prints_the_turn_as_preview_prints_a_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = manifest_at(tmp_path, keep=True)
    reports = await turns(manifest, 2)
    await manifest.aclose()
    log = str(tmp_path / "turns.jsonl")
    turn_id = reports[0].turn_id
    assert turn_id is not None
    assert main(["audit", "show", log, turn_id]) == 0
    out = capsys.readouterr().out
    assert f"turn: {turn_id} at " in out
    assert f"manifest: {tmp_path / 'm.yaml'} (env m)" in out
    assert 'instruction: "deploy 0"' in out
    assert re.search(r"^rules +static +9 +- +fired +4 ", out, re.MULTILINE)
    for expected in (
        "empty: its `when` is false",
        "skipped: over its max_tokens",
        "skipped: over the budget",
        "failed",
    ):
        assert expected in out, expected
    assert "budget: 4 of 40 tokens used" in out
    assert "You are on call.\nAnswer in English.\n" in out

    assert main(["audit", "show", log, turn_id, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(p["name"], p["outcome"], p["tokens"]) for p in document["providers"]] == [
        ("rules", "fired", 4),
        ("quiet", "guarded", None),
        ("long", "over_max_tokens", 31),
        ("filler", "over_budget", 41),
        ("broken", "failed", None),
    ]
    assert document["report"]["fired"] == [{"provider_name": "rules", "tokens": 4}]
    assert document["budget"] == {"total": 40, "used": 4}

    assert main(["audit", "show", log]) == 0  # the last turn
    assert f"turn: {reports[1].turn_id} at " in capsys.readouterr().out


async def test_audit_show_without_text_names_blocks_by_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = manifest_at(tmp_path)
    await turns(manifest, 1)
    await manifest.aclose()
    assert main(["audit", "show", str(tmp_path / "turns.jsonl")]) == 0
    out = capsys.readouterr().out
    sha = hashlib.sha256(b"Answer in English.\n").hexdigest()
    assert f"[rules: sha256 {sha}, 4 tokens]" in out
    assert 'instruction: "(not kept: sha256 ' in out
    assert "deploy 0" not in out


async def test_audit_diff_names_what_changed_between_two_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path / "m.yaml",
        """\
        version: 1
        runtime: {audit: {path: turns.jsonl, keep_text: true}}
        providers:
          - {name: rules, type: static, text: "{{ instruction.text }}\\nalways\\n"}
          - {name: deploys, type: static, text: "deploy notes", when: "'deploy' in instruction.text"}
        """,
    )
    manifest = composer.load_manifest(path)
    branch = composer.Branch("sys\n", name="one")
    composer.attach(branch, manifest)
    first = await composer.prepare_turn(branch, "deploy now")
    second = await composer.prepare_turn(branch, "status")
    await manifest.aclose()
    assert first.report is not None
    assert second.report is not None
    log = str(tmp_path / "turns.jsonl")
    first_id, second_id = first.report.turn_id, second.report.turn_id
    assert first_id is not None
    assert second_id is not None
    assert main(["audit", "diff", log, first_id, second_id]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"# turn {first_id} -> turn {second_id}: 5 differences"
    assert "~ instruction: 'deploy now' -> 'status'" in out
    assert "~ deploys: outcome fired -> guarded" in out
    assert any(line.startswith("~ rules: block changed (sha256 ") for line in out)
    assert "    -deploy now" in out
    assert "    +status" in out
    assert main(["audit", "diff", log, first_id, first_id]) == 0
    assert capsys.readouterr().out.startswith(
        f"# turn {first_id} -> turn {first_id}: 0 differences"
    )


async def test_unknown_ambiguous_and_torn_lines_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = manifest_at(tmp_path)
    reports = await turns(manifest, 2)
    await manifest.aclose()
    log = tmp_path / "turns.jsonl"
    with log.open("a") as handle:
        handle.write('{"version": 1, "time": "2026-')  # a writer killed mid-line
    assert main(["audit", "show", str(log), "zzzz"]) == 1
    assert "no turn zzzz" in capsys.readouterr().err
    line, skipped = find_turn(log, None)
    assert line.turn_id == reports[1].turn_id
    assert [number for number, _ in skipped] == [3]
    first = reports[0].turn_id or ""
    twin = first[:8] + "f" * 24  # another turn whose id starts as the first's does
    with log.open("a") as handle:
        handle.write("\n" + log.read_text().splitlines()[0].replace(first, twin) + "\n")
    assert main(["audit", "show", str(log), first[:8]]) == 1
    assert "2 turns start with" in capsys.readouterr().err
    assert main(["audit", "show", str(tmp_path / "missing.jsonl")]) == 1


async def test_an_unwritable_path_is_a_warning_and_a_count_never_a_failed_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "not-a-folder").write_text("a file")
    manifest = manifest_at(tmp_path, path="not-a-folder/turns.jsonl")
    caplog.set_level(logging.WARNING, logger="composer")
    reports = await turns(manifest, 5)
    assert all(r.failed == ["broken"] for r in reports)  # the turns themselves are unharmed
    log = manifest.shared["observe"].audit
    assert log.flush()
    assert (log.written, log.failed) == (0, 5)
    warnings = [r.getMessage() for r in caplog.records if "audit log" in r.getMessage()]
    assert len(warnings) == 1  # one warning per minute per kind, not one per turn
    assert "lines lost" in warnings[0]
    await manifest.aclose()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
async def test_a_device_at_the_path_is_refused_with_a_warning_and_a_count_never_a_failed_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = manifest_at(tmp_path, path="/dev/full")
    caplog.set_level(logging.WARNING, logger="composer")
    reports = await turns(manifest, 3)
    assert len(reports) == 3
    log = manifest.shared["observe"].audit
    assert log.flush()
    assert log.written == 0
    assert log.failed == 3
    assert any("not a regular file: refused" in r.getMessage() for r in caplog.records)
    await manifest.aclose()


async def test_a_writer_that_cannot_keep_up_drops_lines_and_the_turn_never_waits(
    tmp_path: Path,
) -> None:
    """The writer is held in its counter hook after its first line: the queue fills, turns go
    on."""
    text = MANIFEST.format(path='"turns.jsonl"', keep="false").replace(
        "keep_text: false}", "keep_text: false, queue: 2}"
    )
    manifest = composer.load_manifest(write(tmp_path / "m.yaml", text))
    reports = await turns(manifest, 1)
    log = manifest.shared["observe"].audit
    release = threading.Event()

    def stuck(kind: str, n: int) -> None:
        if threading.current_thread().name.startswith("composer-audit"):
            release.wait(10)

    log.on_count = stuck
    reports += await turns(manifest, 19)
    assert len(reports) == 20
    assert log.dropped > 0
    release.set()
    await manifest.aclose()
    assert log.written + log.dropped + log.failed == 20
    assert len(lines_of(tmp_path / "turns.jsonl")) == log.written


async def test_the_file_is_rotated_before_it_grows_past_max_bytes(tmp_path: Path) -> None:
    text = MANIFEST.format(path='"turns.jsonl"', keep="false").replace(
        "keep_text: false}", "keep_text: false, max_bytes: 4096, backups: 2}"
    )
    manifest = composer.load_manifest(write(tmp_path / "m.yaml", text))
    reports = await turns(manifest, 30)
    await manifest.aclose()
    files = sorted(p.name for p in tmp_path.glob("turns.jsonl*"))
    assert files == ["turns.jsonl", "turns.jsonl.1", "turns.jsonl.2"]
    kept = []
    for name in ("turns.jsonl.2", "turns.jsonl.1", "turns.jsonl"):
        assert (tmp_path / name).stat().st_size <= 4096
        kept += [line.turn_id for line in lines_of(tmp_path / name)]
    assert kept == [r.turn_id for r in reports][-len(kept) :]  # the newest, in order
    assert oct((tmp_path / "turns.jsonl").stat().st_mode & 0o777) == "0o600"


async def test_manifests_sharing_a_file_share_one_writer(tmp_path: Path) -> None:
    first = manifest_at(tmp_path)
    second = composer.load_manifest(tmp_path / "m.yaml")  # a reload of the same file
    await turns(first, 3, name="a")
    await turns(second, 3, name="b")
    assert first.shared["observe"].audit is second.shared["observe"].audit
    await first.aclose()
    await turns(second, 1, name="b")  # the log stays open for its other user
    await second.aclose()
    lines = lines_of(tmp_path / "turns.jsonl")
    assert [line.branch.name for line in lines] == ["a"] * 3 + ["b"] * 4


def test_a_closed_log_drops_and_counts(tmp_path: Path) -> None:
    log = open_audit_log(
        tmp_path / "x.jsonl",
        functools.partial(AuditLog, max_bytes=4096, backups=1, queue_size=4),
    )
    release_audit_log(log)
    log.put(Unwritable())
    assert (log.dropped, log.written) == (1, 0)
    assert not (tmp_path / "x.jsonl").exists()


class Unwritable:
    """Not a snapshot: a closed log must not try to write it."""


def test_lines_queued_at_exit_are_written(tmp_path: Path) -> None:
    """A process that ends without closing its manifest still writes every turn's line."""
    path = manifest_at(tmp_path).path
    code = f"""
import asyncio, composer
async def main():
    m = composer.load_manifest({str(path)!r})
    b = composer.Branch("sys\\n")
    composer.attach(b, m)
    for i in range(5):
        await composer.prepare_turn(b, f"deploy {{i}}")
asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert len(lines_of(tmp_path / "turns.jsonl")) == 5
