"""The ``mcp`` provider against servers that flood, hang, die or lie: every turn ends, in time,
with an error that names what failed, and no server process outlives composer.

The stdio servers are real processes (``mcp_hostile_peer.py`` beside this file, standard
library only); the HTTP ones are ``http.server`` handlers on 127.0.0.1. Process checks go by
process id: a process counts as gone once it has exited (a zombie waiting for its parent to
reap it runs nothing). Time bounds only catch a hang.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from localserver import serving

from composer import Branch, Instruction, load_manifest, prepare_turn
from composer.build import attach
from composer.manifest import Manifest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

PEER = Path(__file__).with_name("mcp_hostile_peer.py")
REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
BOUND_S = 30.0
"""Catches a hang, not a slow machine."""
MIB = 1 << 20


def write_manifest(folder: Path, *providers: dict[str, Any]) -> Path:
    path = folder / "manifest.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "providers": list(providers)}))
    return path


def hostile(name: str = "h", env: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
    """An ``mcp`` provider entry whose server is the hostile peer over stdio."""
    server = {"command": PYTHON, "args": [str(PEER)], "env": env or {}}
    server.update(fields.pop("server", {}))
    return {"name": name, "type": "mcp", "server": server, **fields}


async def one_turn(manifest: Manifest, text: str = "x") -> Any:
    branch = Branch("SYSTEM\n", name="ops")
    attach(branch, manifest)
    async with asyncio.timeout(BOUND_S):
        return await prepare_turn(branch, Instruction(text))


def pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def gone(pid: int, within: float = BOUND_S) -> bool:
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + BOUND_S
    while not path.exists() or not path.read_text().strip():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} was not written")
        time.sleep(0.02)


def error_of(turn: Any) -> str:
    record = turn.report.outcomes[0]
    assert record.outcome == "failed", record
    assert record.error is not None
    assert "ExceptionGroup" not in record.error
    assert "TaskGroup" not in record.error
    return str(record.error)


# --------------------------------------------------------------------------- floods


async def test_a_50_mib_resource_over_stdio_is_refused_quickly_and_memory_stays_flat(
    tmp_path: Path,
) -> None:
    starts = tmp_path / "starts"
    entry = hostile(env={"STARTS_FILE": str(starts)}, resource="peer://{{ instruction.text }}")
    manifest = load_manifest(write_manifest(tmp_path, entry))
    try:
        assert (await one_turn(manifest, "text:warm")).report.blocks == ["warm"]
        tracemalloc.start()
        try:
            started = time.monotonic()
            turn = await one_turn(manifest, f"big:{50 * MIB}")
            elapsed = time.monotonic() - started
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        await manifest.aclose()
    error = error_of(turn)
    assert f"the server sent a message over {MIB} bytes (max_response_bytes)" in error
    assert peak < 16 * MIB, f"peak {peak / MIB:.1f} MiB"
    assert elapsed < BOUND_S
    assert len(pids(starts)) == 1, "the refused read is not retried on a new server"
    assert gone(pids(starts)[0]), "the server that flooded is stopped"


async def test_an_endless_line_is_cut_at_max_response_bytes_and_its_server_stopped(
    tmp_path: Path,
) -> None:
    starts = tmp_path / "starts"
    entry = hostile(
        env={"STARTS_FILE": str(starts)},
        server={"max_response_bytes": 65536},
        resource="peer://endless",
    )
    manifest = load_manifest(write_manifest(tmp_path, entry))
    try:
        turn = await one_turn(manifest)
        assert gone(pids(starts)[0], within=5), "the writer of the endless line burns no CPU"
    finally:
        await manifest.aclose()
    assert "over 65536 bytes" in error_of(turn)


class McpOverHttp(BaseHTTPRequestHandler):
    """Just enough streamable HTTP MCP to connect; ``resources/read`` answers ``ANSWER``:
    ``declared`` (a 50 MiB Content-Length), ``streamed`` (50 MiB, no length) or ``text``; a
    404 for every request with ``NOT_FOUND``, and for a session id not in ``SESSIONS``."""

    protocol_version = "HTTP/1.1"
    ANSWER: ClassVar[str] = "streamed"
    NOT_FOUND: ClassVar[bool] = False
    SESSIONS: ClassVar[set[str]] = set()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def reply(self, status: int, body: bytes = b"", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.reply(404 if self.NOT_FOUND else 405)

    def do_DELETE(self) -> None:
        self.reply(200)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        session = self.headers.get("mcp-session-id")
        if self.NOT_FOUND or (session is not None and session not in self.SESSIONS):
            return self.reply(404, b"no such endpoint or session")
        request_id, method = message.get("id"), message.get("method")
        headers = {"Content_Type": "application/json"}
        if request_id is None:
            return self.reply(202)
        if method == "resources/read" and self.ANSWER != "text":
            return self.flood()
        if method == "resources/read":
            contents = [{"uri": "a://b", "text": f"session {len(self.SESSIONS)}"}]
            body = {"jsonrpc": "2.0", "id": request_id, "result": {"contents": contents}}
        elif method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"resources": {}},
                "serverInfo": {"name": "flood", "version": "1"},
            }
            body = {"jsonrpc": "2.0", "id": request_id, "result": result}
            headers["Mcp_Session_Id"] = f"s{len(self.SESSIONS) + 1}"
            self.SESSIONS.add(headers["Mcp_Session_Id"])
        else:
            body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no"}}
        self.reply(200, json.dumps(body).encode(), **headers)

    def flood(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.ANSWER == "declared":
            self.send_header("Content-Length", str(50 * MIB))
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        chunk = b"a" * MIB
        try:
            for _ in range(50):
                self.wfile.write(chunk)
        except OSError:
            pass  # the client stopped reading, as it should
        self.close_connection = True


@pytest.fixture
def http_server() -> Iterator[str]:
    McpOverHttp.SESSIONS = set()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), McpOverHttp)
    httpd.daemon_threads = True
    with serving(httpd):
        yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"


@pytest.mark.parametrize("answer", ["declared", "streamed"])
async def test_a_50_mib_http_response_is_refused_and_memory_stays_flat(
    tmp_path: Path, http_server: str, answer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(McpOverHttp, "ANSWER", answer)
    entry = {"name": "h", "type": "mcp", "server": {"url": http_server}, "resource": "a://b"}
    manifest = load_manifest(write_manifest(tmp_path, entry))
    import builtin_providers._mcp_http  # noqa: F401  (imported before memory is traced)

    tracemalloc.start()
    try:
        turn = await one_turn(manifest)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        await manifest.aclose()
    error = error_of(turn)
    assert f"the response from {http_server} is over {MIB} bytes" in error
    assert ("(declared" in error) == (answer == "declared")
    assert peak < 40 * MIB, f"peak {peak / MIB:.1f} MiB"


async def test_an_http_session_the_server_forgot_is_replaced_within_the_turn(
    tmp_path: Path, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that restarted answers the old session id with 404: the read is made again
    on a new session, as for a stdio server that died."""
    monkeypatch.setattr(McpOverHttp, "ANSWER", "text")
    entry = {"name": "h", "type": "mcp", "server": {"url": http_server}, "resource": "a://b"}
    manifest = load_manifest(write_manifest(tmp_path, entry))
    try:
        first = await one_turn(manifest)
        McpOverHttp.SESSIONS.clear()  # as after a restart
        second = await one_turn(manifest)
    finally:
        await manifest.aclose()
    assert first.report.blocks == ["session 1"]
    assert second.report.blocks == ["session 1"]  # the one session the server knows now


# --------------------------------------------------------------------------- hangs


async def test_a_resource_that_never_answers_fails_at_the_default_deadline_then_a_new_session(
    tmp_path: Path,
) -> None:
    """No ``request_timeout_s`` in the manifest: the default bounds the turn."""
    starts = tmp_path / "starts"
    entry = hostile(env={"STARTS_FILE": str(starts)}, resource="peer://{{ instruction.text }}")
    manifest = load_manifest(write_manifest(tmp_path, entry))
    try:
        hung = await one_turn(manifest, "hang")
        after = await one_turn(manifest, "text:fresh")
    finally:
        await manifest.aclose()
    assert "no answer within 10 s" in error_of(hung)
    assert after.report.blocks == ["fresh"]
    first, second = pids(starts)
    assert first != second
    assert not alive(first), "the hung server was stopped with its session"


async def test_a_server_slower_than_connect_timeout_is_kept_and_used_by_a_later_turn(
    tmp_path: Path,
) -> None:
    starts, delay = tmp_path / "starts", 1.5
    entry = hostile(
        env={"STARTS_FILE": str(starts), "START_DELAY_S": str(delay)},
        server={"connect_timeout_s": 0.5},
        resource="peer://text:up",
    )
    manifest = load_manifest(write_manifest(tmp_path, entry))
    try:
        first = await one_turn(manifest)
        await asyncio.sleep(delay)
        second = await one_turn(manifest)
    finally:
        await manifest.aclose()
    assert "did not start within 0.5 s" in error_of(first)
    assert second.report.blocks == ["up"]
    assert len(pids(starts)) == 1, "the slow server was not killed and started again"


async def test_aclose_stops_a_server_that_ignores_sigterm_and_what_it_started(
    tmp_path: Path,
) -> None:
    starts, grandchild = tmp_path / "starts", tmp_path / "grandchild"
    env = {
        "STARTS_FILE": str(starts),
        "IGNORE_SIGTERM": "1",
        "IGNORE_EOF": "1",
        "GRANDCHILD_FILE": str(grandchild),
    }
    manifest = load_manifest(write_manifest(tmp_path, hostile(env=env, resource="peer://text:a")))
    try:
        assert (await one_turn(manifest)).report.blocks == ["a"]
    finally:
        started = time.monotonic()
        await manifest.aclose()
        took = time.monotonic() - started
    assert took < 10, f"aclose took {took:.1f} s"
    assert not alive(pids(starts)[0])
    assert gone(int(grandchild.read_text()), within=5), "the server's own child went with it"


# --------------------------------------------------------------------------- deaths


def test_composer_killed_with_sigkill_leaves_no_server_behind(tmp_path: Path) -> None:
    starts, busy = tmp_path / "starts", tmp_path / "busy"
    env = {"STARTS_FILE": str(starts), "BUSY_FILE": str(busy)}
    path = write_manifest(tmp_path, hostile(env=env, tool={"name": "sleep"}))
    script = textwrap.dedent(
        f"""
        import asyncio, composer
        manifest = composer.load_manifest({str(path)!r})
        branch = composer.Branch("S")
        composer.attach(branch, manifest)
        asyncio.run(composer.prepare_turn(branch, composer.Instruction("x")))
        """
    )
    process = subprocess.Popen([PYTHON, "-c", script], cwd=REPO)
    try:
        wait_for(busy)
        server = pids(starts)[0]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=BOUND_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert gone(server), f"server {server} outlived composer"


def test_sigterm_to_preview_during_a_long_tool_call_stops_the_server_first(
    tmp_path: Path,
) -> None:
    starts, busy, stop = tmp_path / "starts", tmp_path / "busy", tmp_path / "stop"
    env = {"STARTS_FILE": str(starts), "BUSY_FILE": str(busy), "STOP_FILE": str(stop)}
    path = write_manifest(tmp_path, hostile(env=env, tool={"name": "sleep"}))
    process = subprocess.Popen(
        [PYTHON, "-m", "composer", "preview", str(path), "--instruction", "x"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        wait_for(busy)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=BOUND_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    text = err.decode()
    assert process.returncode == 143, text
    assert "Traceback" not in text
    assert text.strip().splitlines()[-1] == "composer: terminated"
    assert stop.read_text() == "SIGTERM", "preview stopped the server before it exited"
    assert not alive(pids(starts)[0])


def test_sigterm_to_composer_test_stops_the_server(tmp_path: Path) -> None:
    starts, busy, stop = tmp_path / "starts", tmp_path / "busy", tmp_path / "stop"
    env = {"STARTS_FILE": str(starts), "BUSY_FILE": str(busy), "STOP_FILE": str(stop)}
    write_manifest(tmp_path, hostile(env=env, tool={"name": "sleep"}))
    tests = tmp_path / "tests.yaml"
    tests.write_text(
        yaml.safe_dump({"manifest": "manifest.yaml", "tests": [{"name": "t", "instruction": "x"}]})
    )
    process = subprocess.Popen(
        [PYTHON, "-m", "composer", "test", str(tests)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        wait_for(busy)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=BOUND_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 143, err.decode()
    assert stop.read_text() == "SIGTERM"
    assert not alive(pids(starts)[0])


# --------------------------------------------------------------------------- errors


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_refused_connection_names_the_url(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/mcp"
    entry = {"name": "h", "type": "mcp", "server": {"url": url}, "resource": "a://b"}
    manifest = load_manifest(write_manifest(tmp_path, entry))
    try:
        turn = await one_turn(manifest)
    finally:
        await manifest.aclose()
    assert error_of(turn).endswith(f"cannot start the MCP server: connection refused by {url}")


async def test_a_wrong_url_names_the_http_status(
    tmp_path: Path, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(McpOverHttp, "NOT_FOUND", True)
    url = f"{http_server}?token=s3cret"
    entry = {"name": "h", "type": "mcp", "server": {"url": url}, "resource": "a://b"}
    manifest = load_manifest(write_manifest(tmp_path, entry))
    try:
        turn = await one_turn(manifest)
    finally:
        await manifest.aclose()
    error = error_of(turn)
    assert error.endswith(f"cannot start the MCP server: HTTP 404 at {http_server}?token=***")
    assert "s3cret" not in error


async def test_a_server_that_exits_at_once_names_its_code_and_last_stderr_line(
    tmp_path: Path,
) -> None:
    lines = "starting up\nfatal: no API token given"
    entry = hostile(env={"EXIT_CODE": "3", "STDERR_LINES": lines}, resource="peer://text:a")
    manifest = load_manifest(write_manifest(tmp_path, entry))
    try:
        turn = await one_turn(manifest)
    finally:
        await manifest.aclose()
    assert error_of(turn).endswith(
        "cannot start the MCP server: the server process exited with code 3; "
        "its last stderr line: fatal: no API token given"
    )


def test_forged_stderr_lines_are_escaped_prefixed_and_rate_limited(tmp_path: Path) -> None:
    forged = "\x1b[2J\x1b]0;owned\x07composer: error: forged by the server"
    lines = "\n".join([forged, *(f"chatter {n}" for n in range(500))])
    entry = hostile("noisy", env={"STDERR_LINES": lines}, resource="peer://text:a")
    path = write_manifest(tmp_path, entry)
    result = subprocess.run(
        [PYTHON, "-m", "composer", "preview", str(path), "--instruction", "x"],
        capture_output=True,
        cwd=REPO,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=BOUND_S * 2,
    )
    err = result.stderr.decode()
    assert result.returncode == 0, err
    assert "\x1b" not in err
    assert "\x07" not in err
    lines_out = err.splitlines()
    forged_out = [line for line in lines_out if "forged by the server" in line]
    assert forged_out == [
        "composer: warning: mcp 'noisy': \\x1b[2J\\x1b]0;owned\\x07composer: error: forged by "
        "the server"
    ]
    assert not any(line.startswith("composer: error:") for line in lines_out)
    chatter = [line for line in lines_out if "chatter" in line]
    assert 0 < len(chatter) < 100, len(chatter)
    assert any("more stderr lines not shown" in line for line in lines_out)


def test_stderr_is_escaped_by_the_same_rule_as_everything_composer_prints() -> None:
    from builtin_providers import _mcp_stdio
    from composer.manifest import yamlnodes

    assert _mcp_stdio._UNSAFE.pattern == yamlnodes._UNSAFE.pattern
