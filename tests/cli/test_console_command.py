"""``composer console AUDIT_FILE``: the console's pages over an audit log alone, on 127.0.0.1,
with the turns real ``prepare_turn`` calls wrote."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
from cli.test_audit_list import write_turns
from serve.conftest import PYTHON, ROOT, stop, wait_for

from composer.cli.main import main


async def test_it_serves_the_logs_turns_on_loopback_only(tmp_path: Path) -> None:
    log = await write_turns(tmp_path, keep_text=True)
    process = subprocess.Popen(
        [PYTHON, "-m", "composer", "console", str(log), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "(127.0.0.1 only)" in line, line
        url = line.split(" at ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        wait_for(url + "/turns")
        page = httpx.get(url + "/turns", timeout=30)
        assert "2 turns" in page.text
        assert "second one, much longer than the eight words ..." in page.text
        assert "team-a" in page.text
        assert httpx.get(url + "/manifest", timeout=30).status_code == 404  # no manifest here
        # a rebound name (DNS rebinding to 127.0.0.1) never reaches a page
        foreign = httpx.get(url + "/turns", headers={"host": "evil.example"}, timeout=30)
        assert foreign.status_code == 421
    finally:
        assert stop(process) == 0


def test_a_database_address_or_a_missing_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["console", "postgresql://localhost/audit"]) == 2
    assert "give the audit log's file" in capsys.readouterr().err
    assert main(["console", str(tmp_path / "nope.jsonl")]) == 1
    assert "no such file" in capsys.readouterr().err
