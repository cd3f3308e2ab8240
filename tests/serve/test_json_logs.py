"""``composer serve --log-format json --access-log`` as a process: every line it writes, on
standard error and standard output, is one JSON object; the access lines carry the request's
fields, join the audit ``stdout`` sink's lines (left as they were) on ``turn_id`` and share
their ``time`` format; uvicorn's own lines are JSON too. Hostile: a path and headers full of
newlines, quotes, escapes, control and non-ASCII characters, thousands long, stay one valid
line, bounded."""

from __future__ import annotations

import datetime as dt
import json
import signal
from pathlib import Path
from typing import Any

import httpx

from composer.observe.record import AuditLine
from composer.serve.logs import MAX_LINE_BYTES
from serve.conftest import STARTUP_S, start_serve

MANIFEST = """\
version: 1
runtime: {audit: {stdout: true}}
providers:
  - {name: rules, type: static, text: "Answer in English.\\n"}
"""
TOKEN = "json-logs-token-3f9a1c"


def lines(text: str) -> list[dict[str, Any]]:
    """Each line of ``text`` as the JSON object it must be, within the bound."""
    parsed = []
    for line in text.splitlines():
        assert len(line.encode()) + 1 <= MAX_LINE_BYTES, line[:200]
        value = json.loads(line)
        assert isinstance(value, dict), line
        parsed.append(value)
    return parsed


def test_every_line_of_a_json_server_is_one_json_object_with_the_fields(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(MANIFEST)
    log = tmp_path / "stderr.log"
    env = {"COMPOSER_SERVE_TOKEN": TOKEN}
    hostile_path = "/v1/%0A%0D%22%5C%1B%00%E2%80%AE{}" + "p" * 6000
    agent = b'a"b\\c\td\xff\xfe{"level":"error"}' + b"u" * 6000
    with log.open("w") as stderr:
        server = start_serve(
            [str(tmp_path / "m.yaml"), "--log-format", "json", "--access-log"],
            env=env,
            stderr=stderr,
        )
        try:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            body = {"branch": {"id": "b1"}, "system": "S\n", "instruction": {"text": "x"}}
            turn = httpx.post(f"{server.url}/v1/turns", json=body, headers=auth, timeout=60)
            assert turn.status_code == 200
            missing = httpx.get(
                server.url + hostile_path,
                headers=[(b"Authorization", f"Bearer {TOKEN}".encode()), (b"User-Agent", agent)],
                timeout=60,
            )
            assert missing.status_code == 404
            refused = httpx.get(f"{server.url}/v1/manifest", timeout=60)
            assert refused.status_code == 401
        finally:
            server.process.send_signal(signal.SIGTERM)
            rest, _ = server.process.communicate(timeout=STARTUP_S)
    assert server.process.returncode == 0
    errors = lines(log.read_text())
    audited = lines(rest)  # past the listening line, which start_serve read (JSON too)
    # what the server itself said, uvicorn's included, on standard error
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in errors)
    said = {line["message"] for line in errors if line["logger"] == "uvicorn.error"}
    assert {"Application startup complete.", "Shutting down"} <= said
    assert TOKEN not in log.read_text()
    # one access line per request, with its fields
    access = [line for line in errors if line["logger"] == "composer.serve.access"]
    (served,) = [line for line in access if line["path"] == "/v1/turns"]
    assert served["method"] == "POST"
    assert served["route"] == "/v1/turns"
    assert served["status"] == 200
    assert served["principal"] == "default"
    assert served["duration_ms"] > 0
    assert served["turn_id"] == turn.json()["report"]["turn_id"]
    (hostile,) = [line for line in access if line["status"] == 404]
    assert "route" not in hostile  # no route took it: no template, and never its path
    assert hostile["path"].startswith('/v1/\\n\\r"\\\\x1b\\x00')  # escaped, never raw
    assert "\n" not in hostile["path"]
    assert "\n" not in hostile["user_agent"]
    assert "\t" not in hostile["user_agent"]
    assert len(hostile["path"]) < 1200
    assert len(hostile["user_agent"]) < 1200
    (unauthorised,) = [line for line in access if line["status"] == 401]
    assert "principal" not in unauthorised
    # the audit line on standard output is as it was, and joins the access line
    (line,) = [AuditLine.model_validate(a) for a in audited]
    assert line.turn_id == served["turn_id"]
    assert line.branch.principal == served["principal"]
    for stamp in (line.time, served["time"]):
        assert dt.datetime.fromisoformat(stamp).tzinfo == dt.UTC
    assert server.url.startswith("http://127.0.0.1:")
