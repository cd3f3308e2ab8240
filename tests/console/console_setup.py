"""What the console's tests serve: a manifest whose audit log keeps text, a secret sentinel
that must never reach a page, and turns made by real requests to ``composer serve``."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
from serve.conftest import PYTHON, ROOT, STARTUP_S, stop, wait_for

SENTINEL = "SENTINEL-c0ns0le-7f3a"
"""A secret's value (``${CONSOLE_SECRET}``): no page, asset or header may ever hold it."""

TOKENS = {"team-a": "console-token-of-team-a-0123456789", "team-b": "console-token-of-b-987654"}

MANIFEST = """\
version: 1
budget: 60
runtime: {{audit: {{path: turns.jsonl, keep_text: true}}}}
providers:
  - {{name: rules, type: static, text: "Be brief. Key ${{CONSOLE_SECRET}}.", priority: 10}}
  - name: runbook
    type: static
    text: "Disk runbook: free space with logrotate, then check the volume."
    when: "'disk' in instruction.text"
  - {{name: echo, type: static, text: "Asked about {{{{ instruction.text }}}}"}}
  - name: huge
    type: static
    text: "{}"
""".format(("word " * 60).strip())

PRINCIPALS = """\
principals:
  - {name: team-a, token: "${TEAM_A_TOKEN}", metadata: {team: a}}
  - {name: team-b, token: "${TEAM_B_TOKEN}", metadata: {team: b}}
"""

ENV = {
    "CONSOLE_SECRET": SENTINEL,
    "TEAM_A_TOKEN": TOKENS["team-a"],
    "TEAM_B_TOKEN": TOKENS["team-b"],
}


def write_files(folder: Path) -> tuple[Path, Path]:
    """The manifest (``dev.yaml`` beside a ``prod.yaml``, two environments) and principals."""
    manifest = folder / "dev.yaml"
    manifest.write_text(MANIFEST)
    (folder / "prod.yaml").write_text(MANIFEST.replace("budget: 60", "budget: 80"))
    principals = folder / "access" / "principals.yaml"  # not beside them: not an environment
    principals.parent.mkdir()
    principals.write_text(PRINCIPALS)
    return manifest, principals


def post_turn(url: str, text: str, *, branch: str = "inc-7", token: str | None = None) -> None:
    """One real turn through ``POST /v1/turns`` (the server runs ``prepare_turn``)."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    body = {
        "branch": {"id": branch, "name": "payments"},
        "system": "You are the on-call assistant.",
        "instruction": {"text": text},
    }
    answer = httpx.post(f"{url}/v1/turns", json=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text


def wait_for_turn(log: Path, text: str) -> dict[str, Any]:
    """The audit line of the turn whose instruction was ``text``, once it is written."""
    deadline = time.monotonic() + STARTUP_S
    while True:
        for line in log.read_text().splitlines() if log.exists() else []:
            turn = json.loads(line)
            if (turn.get("instruction") or {}).get("text") == text:
                return cast(dict[str, Any], turn)
        if time.monotonic() > deadline:
            raise AssertionError(f"{log} holds no turn of {text!r}")
        time.sleep(0.05)


def wait_for_lines(log: Path, count: int) -> list[str]:
    """The audit log's lines once it holds ``count`` (its writer is a thread of its own)."""
    deadline = time.monotonic() + STARTUP_S
    while True:
        lines = log.read_text().splitlines() if log.exists() else []
        if len(lines) >= count:
            return lines
        if time.monotonic() > deadline:
            raise AssertionError(f"{log} holds {len(lines)} lines, not {count}")
        time.sleep(0.05)


@contextlib.contextmanager
def console_process(*args: str) -> Iterator[str]:
    """``composer console ARGS --port 0`` running; its console's URL. Stopped with SIGTERM
    after, which must end it cleanly."""
    process = subprocess.Popen(
        [PYTHON, "-m", "composer", "console", *args, "--port", "0"],
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
        yield url
    finally:
        assert stop(process) == 0
