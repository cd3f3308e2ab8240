"""A folder ``composer init`` wrote, served with ``composer serve --console``: the console
shows the first turn at once, with nothing added to the manifest (the scaffold writes its
``runtime.audit`` log under the folder)."""

from __future__ import annotations

from pathlib import Path

import httpx
from serve.conftest import start_serve

from composer.cli.main import main
from console.console_setup import post_turn, wait_for_lines


def test_the_console_of_a_fresh_scaffold_lists_its_first_turn(tmp_path: Path) -> None:
    folder = tmp_path / "ops-context"
    assert main(["init", str(folder), "--team", "payments"]) == 0
    server = start_serve([str(folder), "--env", "dev", "--console", "--rate-limit", "0"])
    try:
        empty = httpx.get(f"{server.url}/console/turns", timeout=30)
        assert empty.status_code == 200
        assert "0 turns" in empty.text
        post_turn(server.url, "The disk is almost full on the build server")
        wait_for_lines(folder / "turns.jsonl", 1)
        page = httpx.get(f"{server.url}/console/turns", timeout=30)
        assert "1 turn" in page.text
        assert "0 turns" not in page.text
    finally:
        assert server.stop() == 0
