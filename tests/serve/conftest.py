"""Real peers for the serving tests: ``composer serve`` and a test MCP server, as processes.

Every server listens on 127.0.0.1 on a port the system picked, and is stopped with SIGTERM
(the signal a supervisor sends), so stopping is itself under test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import pytest

for module in ("mcp", "starlette", "uvicorn"):
    pytest.importorskip(module, reason="the serve extra is not installed")

ROOT = Path(__file__).parents[2]
CONFIGS = ROOT / "configs"
PEER = Path(__file__).with_name("mcp_peer.py")
PYTHON = sys.executable
STARTUP_S = 60  # a bound that only catches a server that never starts
RULES = """\
version: 1
providers:
  - name: rules
    type: static
    text: "House rules for {{ branch.name }}"
"""
"""A manifest whose turns need nothing but the server: one static provider."""


@pytest.fixture(autouse=True)
def switches_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server built with ``metrics`` (or with ``OTEL_*`` asking for traces) counts (traces)
    every manifest's turns for the rest of its process (``composer.observe.switch``): put
    back after each test, so that the tests of other folders see their manifests' own
    ``runtime.metrics`` and ``runtime.traces``."""
    monkeypatch.setattr("composer.observe.switch._metrics", False)
    monkeypatch.setattr("composer.observe.switch._traces", False)


def rules_manifest(folder: Path) -> Path:
    """``RULES`` written to ``folder/m.yaml``."""
    path = folder / "m.yaml"
    path.write_text(RULES)
    return path


def turn_body(branch: str) -> dict[str, object]:
    """A turn request's body for ``branch`` (named ``ops``)."""
    return {"branch": {"id": branch, "name": "ops"}, "system": "S\n", "instruction": {"text": "x"}}


@dataclass
class Server:
    """A running server process, the URL it said it listens on, and the whole line."""

    process: subprocess.Popen[str]
    url: str
    line: str = ""

    def stop(self) -> int:
        """SIGTERM, then the exit code (a server that does not stop is killed and fails)."""
        return stop(self.process)


def stop(process: subprocess.Popen[str]) -> int:
    """SIGTERM ``process``, then its exit code; one that does not stop is killed and fails."""
    try:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STARTUP_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise AssertionError("the process did not stop on SIGTERM") from None
        return process.returncode
    finally:
        if process.stdout is not None:
            process.stdout.close()


def start_serve(
    args: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    stderr: IO[str] | None = None,
) -> Server:
    """``composer serve ARGS --port 0`` in a new process, once it answers ``/healthz``;
    its stderr to ``stderr`` (else the test's)."""
    process = subprocess.Popen(
        [PYTHON, "-m", "composer", "serve", *args, "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        raise AssertionError(f"composer serve did not start: {line!r}")
    url = line.split("listening on ", 1)[1].split()[0]
    server = Server(process, url, line)
    wait_for(url + ("/readyz" if wait_ready else "/healthz"))
    return server


def wait_for(url: str) -> None:
    deadline = time.monotonic() + STARTUP_S
    while True:
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not answer 200")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def dev_server() -> Iterator[Server]:
    """``composer serve configs --env dev`` without a token, no rate limit."""
    server = start_serve([str(CONFIGS), "--env", "dev", "--rate-limit", "0"])
    yield server
    assert server.stop() == 0


@pytest.fixture(scope="module")
def http_peer() -> Iterator[str]:
    """The test MCP server over streamable HTTP on 127.0.0.1; its endpoint URL."""
    process = subprocess.Popen(
        [PYTHON, str(PEER), "http"], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("port "), line
    url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    yield url
    stop(process)


def peer_server(**extra: object) -> dict[str, object]:
    """The ``server:`` mapping of an ``mcp`` provider that starts the test server over stdio."""
    return {"command": PYTHON, "args": [str(PEER)], **extra}


def notes_entry(pid_file: Path) -> dict[str, object]:
    """An ``mcp`` provider reading ``notes://<instruction>`` from a test server over stdio
    that writes its process id to ``pid_file``."""
    return {
        "name": "notes",
        "type": "mcp",
        "server": peer_server(env={"PID_FILE": str(pid_file)}),
        "resource": "notes://{{ instruction.text }}",
    }


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (waiting up to a bound that only catches a hang)."""
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def children(pid: int) -> list[int]:
    """The process ids of ``pid``'s children (Linux: ``/proc``), its workers."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(word) for word in (task / "children").read_text().split()]
    return found
