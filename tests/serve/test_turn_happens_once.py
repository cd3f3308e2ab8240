"""A served turn happens or it does not, whatever the state store does during it.

``composer serve --state``'s app (built in process) over a real PostgreSQL or Redis reached through a relay the test
cuts (the store going away), a real HTTP provider on 127.0.0.1 counting its calls, and the
audit log the turns are written to (and the console's turns list): a store that dies while the providers run makes the
turn a ``503`` whose audit line is marked unanswered; a store that is down makes it a ``503``
with no provider called and nothing audited; the client's retry, once the store is back, is
the one served turn.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx2
import pytest
from localserver import serving

from composer.cli.main import main
from composer.serve import ServerConfig
from serve.apps import served
from serve.conftest import STARTUP_S
from serve.relay import relaying
from serve.stores import postgres_dsn, redis_url, shared_store

__all__ = ["postgres_dsn", "redis_url", "shared_store"]  # the stores' fixtures

TURN = {
    "branch": {"id": "inc-1", "name": "ops"},
    "system": "S\n",
    "instruction": {"text": "the deploy failed"},
}


class Counting(BaseHTTPRequestHandler):
    """An HTTP provider's server: counts its calls; the first one waits for ``release``
    after setting ``called`` (the test cuts the store meanwhile)."""

    calls: ClassVar[int] = 0
    called: ClassVar[threading.Event] = threading.Event()
    release: ClassVar[threading.Event] = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        cls = type(self)
        cls.calls += 1
        if cls.calls == 1:
            cls.called.set()
            cls.release.wait(STARTUP_S)
        body = json.dumps({"results": [{"title": "payments degraded"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def provider() -> Iterator[str]:
    Counting.calls = 0
    Counting.called = threading.Event()
    Counting.release = threading.Event()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    with serving(httpd, before_stop=Counting.release.set):
        yield f"http://127.0.0.1:{httpd.server_address[1]}"


def manifest(folder: Path, provider: str) -> Path:
    path = folder / "m.yaml"
    path.write_text(
        "version: 1\n"
        "runtime: {audit: {path: turns.jsonl}}\n"
        "providers:\n"
        "  - name: status\n"
        "    type: http\n"
        f"    request: {{url: '{provider}/search', timeout_s: 60}}\n"
        "    response: {template: '{% for r in json.results %}{{ r.title }}{% endfor %}'}\n"
    )
    return path


def audit_lines(path: Path, count: int) -> list[dict[str, Any]]:
    """The audit file's lines once it holds ``count`` (the writer is a thread of its own)."""
    deadline = time.monotonic() + STARTUP_S
    while True:
        text = path.read_text() if path.exists() else ""
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)


def test_a_store_dying_during_a_turn_leaves_one_served_turn_after_the_retry(
    tmp_path: Path, provider: str, shared_store: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    real, word = shared_store
    parts = urlsplit(real)
    assert parts.hostname is not None
    assert parts.port is not None
    with relaying((parts.hostname, parts.port)) as relay:
        user = f"{parts.username}@" if parts.username else ""
        url = parts._replace(netloc=f"{user}127.0.0.1:{relay.port}").geturl()
        path = manifest(tmp_path, provider)
        config = ServerConfig(state=url, state_schema=word, console=True)
        audit = tmp_path / "turns.jsonl"
        with served(path, config) as client:
            answer: list[httpx2.Response] = []
            first = threading.Thread(
                target=lambda: answer.append(client.post("/v1/turns", json=TURN))
            )
            first.start()
            assert Counting.called.wait(STARTUP_S)  # the provider runs: the store goes
            relay.cut()
            Counting.release.set()
            first.join(STARTUP_S)
            assert answer[0].status_code == 503, answer[0].text
            assert answer[0].json()["error"]["type"] == "state_unavailable"
            assert Counting.calls == 1

            down = client.post("/v1/turns", json=TURN)  # the store is still down
            assert down.status_code == 503
            assert down.json()["error"]["type"] == "state_unavailable"
            assert Counting.calls == 1  # no provider called

            relay.restore()
            retried = client.post("/v1/turns", json=TURN)
            for _ in range(5):  # a pooled connection the cut killed answers 503 once
                if retried.status_code != 503:
                    break
                retried = client.post("/v1/turns", json=TURN)
            assert retried.status_code == 200, retried.text
            assert "payments degraded" in retried.json()["guidance"]
            audit_lines(audit, 2)
            page = client.get("/console/turns").text  # the console's turns list
            assert page.count(">unanswered</span>") == 1
    lines = audit_lines(audit, 2)
    assert len(lines) == 2  # the 503s before a provider ran wrote nothing
    assert [line.get("answered", True) for line in lines] == [False, True]
    assert Counting.calls == 2  # the unanswered turn's and the served retry's, as the guide says
    assert main(["audit", "list", str(audit)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert sum("unanswered" in line for line in listed) == 1
    assert sum("[+]" in line and "unanswered" not in line for line in listed) == 1
