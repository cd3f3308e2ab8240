"""``composer console AUDIT_FILE``: the console's pages over an audit log alone, on 127.0.0.1,
with the turns real ``prepare_turn`` calls wrote."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import httpx
import pytest
from cli.test_audit_list import write_turns
from repofiles import CONFIGS

from composer.cli.main import main
from console.console_setup import console_process


async def test_it_serves_the_logs_turns_on_loopback_only(tmp_path: Path) -> None:
    log = await write_turns(tmp_path, keep_text=True)
    with console_process(str(log)) as url:
        page = httpx.get(url + "/turns", timeout=30)
        assert "2 turns" in page.text
        assert "second one, much longer than the eight words ..." in page.text
        assert "team-a" in page.text
        assert httpx.get(url + "/manifest", timeout=30).status_code == 404  # no manifest here
        # a rebound name (DNS rebinding to 127.0.0.1) never reaches a page
        foreign = httpx.get(url + "/turns", headers={"host": "evil.example"}, timeout=30)
        assert foreign.status_code == 421


def test_an_unreachable_database_or_a_missing_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = "postgresql://console:hunter2-pw@127.0.0.1:9/audit?connect_timeout=2"
    assert main(["console", dsn]) == 1
    said = capsys.readouterr().err
    assert "composer console: " in said
    assert "hunter2-pw" not in said  # a DSN is shown by its host, port and database only
    assert main(["console", str(tmp_path / "nope.jsonl")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_without_the_signing_library_the_console_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console's session cookies are signed by itsdangerous (the serve extra): without it
    both ways of starting the console say what to install, before serving anything."""
    monkeypatch.setitem(sys.modules, "itsdangerous", None)  # as if it were not installed
    log = tmp_path / "turns.jsonl"
    log.write_text("")
    hint = "itsdangerous not installed: pip install 'context-composer[serve]'"
    assert main(["console", str(log)]) == 1
    assert hint in capsys.readouterr().err
    assert main(["serve", str(CONFIGS), "--env", "dev", "--console"]) == 1
    assert hint in capsys.readouterr().err


async def test_a_line_nested_50000_deep_leaves_the_good_turns_on_the_page(
    tmp_path: Path,
) -> None:
    """The console starts over a log holding one hostile line, lists the good turns, says
    one line was skipped, and serves each good turn's page."""
    log = await write_turns(tmp_path, keep_text=True)
    with log.open("ab") as appended:
        appended.write(b"[" * 50_000 + b"]" * 50_000 + b"\n")
    with console_process(str(log)) as url:
        page = httpx.get(url + "/turns", timeout=30)
        assert page.status_code == 200
        assert "2 turns" in page.text
        assert "1 line of the log is not an audit line: skipped." in page.text
        assert "first question about disks" in page.text
        assert "Traceback" not in page.text
        turn = re.search(r'href="/console/turns/([^"]+)"', page.text)
        assert turn is not None
        assert httpx.get(f"{url}/turns/{turn.group(1)}", timeout=30).status_code == 200
        assert httpx.get(url + "/providers?window=all", timeout=30).status_code == 200
