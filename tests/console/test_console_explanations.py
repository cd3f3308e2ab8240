"""The console's turn page shows an explained turn's candidates and what was left out, and
its compare view which candidates entered or left the text between two turns (in process,
the console's own routes over a real audit log)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import httpx
from starlette.applications import Starlette

import composer
from composer.console import TurnSource
from composer.console.app import Console, console_mount
from composer.observe.record import AuditLine, read_lines

CORPUS = {
    "deploy.md": "# Deploy\n\n## Rollback\nRun deployctl rollback to restore the release.\n\n"
    "## Canary\nShip the release to one zone first and watch the error rate.\n",
    "disk.md": "# Disk\n\n## Full disk\nDelete old logs under /var/log when the disk is full.\n",
}


async def explained_turns(folder: Path) -> list[AuditLine]:
    for name, text in CORPUS.items():
        (folder / "corpus").mkdir(exist_ok=True)
        (folder / "corpus" / name).write_text(text)
    manifest = {
        "version": 1,
        "runtime": {"audit": {"path": "turns.jsonl"}, "explain": True},
        "providers": [
            {"name": "runbooks", "type": "file_corpus", "root": "corpus", "top_k": 1},
        ],
    }
    (folder / "m.yaml").write_text(json.dumps(manifest))
    loaded = composer.load_manifest(folder / "m.yaml")
    branch = composer.Branch("You are on call.\n", name="ops")
    composer.attach(branch, loaded)
    for said in ("how do I roll back the release", "the disk is full"):
        await composer.prepare_turn(branch, said)
    await loaded.aclose()
    lines = [line for _, line in read_lines(folder / "turns.jsonl")]
    assert all(isinstance(line, AuditLine) for line in lines)
    return [line for line in lines if isinstance(line, AuditLine)]


def client(log: Path) -> httpx.AsyncClient:
    app = Starlette(routes=[console_mount(Console(TurnSource(log)))])
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def test_the_turn_page_lists_the_candidates_left_out_with_why(tmp_path: Path) -> None:
    first, _ = await explained_turns(tmp_path)
    async with client(tmp_path / "turns.jsonl") as http:
        page = await http.get(f"/console/turns/{first.turn_id}")
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert "Candidates, and what was left out" in text
    assert '<tr class="admitted"><td>admitted</td>' in text
    assert "deploy.md#Deploy > Rollback" in text
    # top_k 1: the other passages were considered and left out, each with its fate
    assert '<tr class="left-out"><td>beyond_top_k</td>' in text
    assert "deploy.md#Deploy > Canary" in text


async def test_a_turn_that_did_not_explain_has_no_candidates_section(tmp_path: Path) -> None:
    await explained_turns(tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "m.yaml").write_text(
        json.dumps(
            {
                "version": 1,
                "runtime": {"audit": {"path": "turns.jsonl"}},
                "providers": [{"name": "rules", "type": "static", "text": "Be brief."}],
            }
        )
    )
    loaded = composer.load_manifest(plain / "m.yaml")
    branch = composer.Branch("s\n")
    composer.attach(branch, loaded)
    report = (await composer.prepare_turn(branch, "x")).report
    await loaded.aclose()
    assert report is not None
    async with client(plain / "turns.jsonl") as http:
        page = await http.get(f"/console/turns/{report.turn_id}")
    assert page.status_code == 200
    assert "Candidates, and what was left out" not in page.text


async def test_compare_says_which_candidates_entered_and_left(tmp_path: Path) -> None:
    first, second = await explained_turns(tmp_path)
    async with client(tmp_path / "turns.jsonl") as http:
        page = await http.get(
            f"/console/turns/{first.turn_id}/compare", params={"with": second.turn_id}
        )
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert "+ runbooks: disk.md#Disk > Full disk entered the text" in text
    assert "- runbooks: deploy.md#Deploy > Rollback left the text" in text
