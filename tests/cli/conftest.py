"""Shared fixtures for the command-line tests: a local status service, a clean environment."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from localserver import serving
from netblock import blocked_pythonpath

# Variables that would change what the bundled manifests load to; every test starts without them.
MANIFEST_VARIABLES = ("STATUS_URL", "STATUS_TOKEN", "COMPOSER_ENV", "COMPOSER_MANIFEST", "NO_COLOR")


@dataclass
class Request:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass
class StatusServer:
    """A status service on 127.0.0.1: ``GET /search?q=...`` answers ``results``, records requests."""

    port: int = 0
    results: list[dict[str, str]] = field(
        default_factory=lambda: [{"title": "Elevated 502s on the public API", "state": "open"}]
    )
    requests: list[Request] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _handler(state: StatusServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query, keep_blank_values=True)
            state.requests.append(Request(parts.path, query, dict(self.headers.items())))
            if parts.path == "/search":
                status, body = 200, json.dumps({"results": state.results}).encode()
            else:
                status, body = 404, b"{}"
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True


@pytest.fixture
def status_server() -> Iterator[StatusServer]:
    state = StatusServer()
    httpd = _Server(("127.0.0.1", 0), _handler(state))
    state.port = httpd.server_address[1]
    with serving(httpd):
        yield state


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No manifest variable from the caller's shell, and no ``.env`` in the working folder."""
    for name in MANIFEST_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def _run_composer(
    *args: str, cwd: Path, env: dict[str, str] | None = None, offline_dir: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m composer ARGS`` in a clean environment; ``offline_dir`` blocks sockets."""
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in MANIFEST_VARIABLES and not k.startswith("COMPOSER_")
    }
    if offline_dir is not None:
        base["PYTHONPATH"] = blocked_pythonpath(offline_dir, base.get("PYTHONPATH"))
        cache = offline_dir / "empty-tiktoken-cache"
        cache.mkdir(exist_ok=True)
        base["TIKTOKEN_CACHE_DIR"] = str(cache)
    return subprocess.run(
        [sys.executable, "-m", "composer", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def run_composer() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run_composer(*args, cwd=, env=, offline_dir=)``: the command in a real subprocess."""
    return _run_composer
