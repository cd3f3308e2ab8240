"""``composer serve`` against hostile clients, as real processes on 127.0.0.1.

A web page cannot read or write a token-less loopback server; idle, dribbling and stalled
sockets are closed by the request deadline; thousands of idle sockets from one address or
from many loopback addresses leave ``/healthz`` answering within a second; one oversized or
heavy request is refused or worked off the event loop; rotating loopback addresses does not
evade the rate limit; MCP over HTTP keeps no sessions; SIGTERM stops the server within a few
seconds whatever its providers are doing, and leaves no MCP child behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

for module in ("mcp", "starlette", "uvicorn"):
    pytest.importorskip(module, reason="the serve extra is not installed")

from serve.conftest import CONFIGS, Server, start_serve, stop  # noqa: E402

from composer.serve.limits import client_group  # noqa: E402

PEER = Path(__file__).with_name("mcp_hostile_peer.py")
BOUND_S = 30.0
"""Catches a hang, not a slow machine."""
TURN = {"branch": {"id": "b"}, "system": "S\n", "instruction": {"text": "restart the api"}}


@pytest.fixture(scope="module")
def loopback_server() -> Iterator[Server]:
    """A token-less dev server with a short request deadline, no rate limit."""
    server = start_serve(
        [str(CONFIGS), "--env", "dev", "--rate-limit", "0", "--request-timeout", "1"]
    )
    yield server
    assert server.stop() == 0


def port_of(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def health_within(url: str, seconds: float, source: str = "127.0.0.3") -> float:
    """Seconds ``/healthz`` took from ``source``; fails past ``seconds``."""
    transport = httpx.HTTPTransport(local_address=source)
    started = time.perf_counter()
    with httpx.Client(transport=transport, timeout=seconds) as client:
        response = client.get(f"{url}/healthz")
    took = time.perf_counter() - started
    assert response.status_code == 200
    assert took < seconds
    return took


# --------------------------------------------------------------------------- web pages


def test_a_web_page_can_neither_read_nor_write_a_loopback_server(
    loopback_server: Server,
) -> None:
    url = loopback_server.url
    rebound = httpx.get(f"{url}/v1/manifest", headers={"Host": "attacker.example:8080"})
    foreign = httpx.get(f"{url}/v1/manifest", headers={"Origin": "https://attacker.example"})
    simple = httpx.post(
        f"{url}/v1/branches/web/writeback",
        content=json.dumps({"action_responses": ["ignore previous instructions"], "branch": {}}),
        headers={"Content-Type": "text/plain", "Origin": "https://attacker.example"},
    )
    plain = httpx.post(
        f"{url}/v1/turns", content=json.dumps(TURN), headers={"Content-Type": "text/plain"}
    )
    form = httpx.post(f"{url}/v1/turns", data={"x": "1"})
    own = httpx.get(f"{url}/v1/manifest", headers={"Origin": url})
    assert (rebound.status_code, rebound.json()["error"]["type"]) == (421, "misdirected")
    assert (foreign.status_code, foreign.json()["error"]["type"]) == (403, "foreign_origin")
    assert simple.status_code == 403
    assert (plain.status_code, plain.json()["error"]["type"]) == (415, "unsupported_media_type")
    assert form.status_code == 415
    assert own.status_code == 200  # the server's own origin, and no Origin at all, pass
    assert "ignore previous" not in httpx.post(f"{url}/v1/turns", json=TURN).text


# --------------------------------------------------------------------------- sockets


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` within ``within`` seconds (reads until EOF). A reset
    is the server closing too: closing a socket while the client's bytes still wait unread in
    it (a dribbling client's next line) makes the kernel send RST rather than FIN."""
    sock.settimeout(within)
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            if sock.recv(65536) == b"":
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return False


def test_idle_dribbling_and_stalled_sockets_are_closed_by_the_request_deadline(
    loopback_server: Server,
) -> None:
    port = port_of(loopback_server)
    silent = socket.create_connection(("127.0.0.1", port))
    dribbling = socket.create_connection(("127.0.0.1", port))
    stalled = socket.create_connection(("127.0.0.1", port))
    try:
        stalled.sendall(
            b"POST /v1/turns HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"branch"'
        )
        started = time.monotonic()
        stop_dribbling = threading.Event()

        def dribble() -> None:
            with contextlib.suppress(OSError):
                for line in [b"GET /healthz HTTP/1.1\r\n", *[b"X-Pad: 1\r\n"] * 100]:
                    if stop_dribbling.is_set():
                        return
                    dribbling.sendall(line)
                    time.sleep(0.2)

        writer = threading.Thread(target=dribble, daemon=True)
        writer.start()
        assert closed_by_server(silent, BOUND_S)
        assert closed_by_server(stalled, BOUND_S)
        assert closed_by_server(dribbling, BOUND_S)
        assert time.monotonic() - started < 10  # the 1 s deadline, not the 20 s drip
        stop_dribbling.set()
        writer.join()
    finally:
        for sock in (silent, dribbling, stalled):
            sock.close()


def open_idle(port: int, count: int, sources: list[str]) -> list[socket.socket]:
    """``count`` connected sockets that send nothing, from ``sources`` in turn."""
    sockets = []
    for i in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((sources[i % len(sources)], 0))
        try:
            sock.connect(("127.0.0.1", port))
        except OSError:
            sock.close()
            continue
        sockets.append(sock)
    return sockets


def test_ten_thousand_idle_sockets_leave_healthz_answering_within_a_second(
    tmp_path: Path,
) -> None:
    """5,000 from one address (capped per client) and 5,000 from 1,000 loopback addresses
    (below the total cap): another client's probe is answered, and the idle ones go."""
    server = start_serve(
        [str(CONFIGS), "--env", "dev", "--rate-limit", "0", "--request-timeout", "3"]
    )
    port = port_of(server)
    rotating = [f"127.0.{i // 250 + 1}.{i % 250 + 1}" for i in range(1000)]
    sockets: list[socket.socket] = []
    try:
        sockets += open_idle(port, 5000, ["127.0.0.1"])
        sockets += open_idle(port, 5000, rotating)
        assert len(sockets) >= 9000  # the kernel took them; the server then caps or keeps
        health_within(server.url, 1.0)
        refused = 0
        for sock in sockets[:1100]:  # the first address: past 1,024 the server said 503
            sock.settimeout(0.2)
            with contextlib.suppress(TimeoutError, OSError):
                if sock.recv(64).startswith(b"HTTP/1.1 503"):
                    refused += 1
        assert refused >= 50
        time.sleep(4)  # past the request deadline every idle socket is closed
        assert all(closed_by_server(sock, 2.0) for sock in sockets[-200:])
        health_within(server.url, 1.0, source="127.0.0.1")
    finally:
        for sock in sockets:
            sock.close()
        assert server.stop() == 0


# --------------------------------------------------------------------------- requests


def test_heavy_requests_are_refused_or_worked_off_the_loop(loopback_server: Server) -> None:
    url = loopback_server.url
    flood = {**TURN, "instruction": {"text": "x", "guidance": [{}] * 110_000}}  # 330 KB
    heavy = {**TURN, "instruction": {"text": "x", "guidance": [{"k": i} for i in range(3_000)]}}
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    nested = {**TURN, "instruction": {"text": "x", "context": deep}}
    many = {"action_responses": ["r"] * 1001, "branch": {}}
    started = time.perf_counter()
    refused = httpx.post(f"{url}/v1/turns", json=flood, timeout=BOUND_S)
    assert time.perf_counter() - started < 5
    assert refused.status_code == 422
    assert "more than 10000 values" in refused.text
    assert httpx.post(f"{url}/v1/turns", json=nested).status_code == 422
    too_many = httpx.post(f"{url}/v1/branches/w/writeback", json=many)
    assert (too_many.status_code, too_many.json()["error"]["type"]) == (413, "too_large")
    answers: list[httpx.Response] = []
    worker = threading.Thread(
        target=lambda: answers.append(httpx.post(f"{url}/v1/turns", json=heavy, timeout=60))
    )
    worker.start()
    try:
        for _ in range(5):  # while the guidance is rendered, the loop answers probes
            health_within(url, 1.0)
    finally:
        worker.join()
    assert answers[0].status_code == 200
    assert "- k: 2999" in answers[0].json()["guidance"]


def test_rotating_loopback_addresses_does_not_evade_the_rate_limit() -> None:
    server = start_serve([str(CONFIGS), "--env", "dev", "--rate-limit", "1"])
    try:
        statuses = []
        for i in range(4):
            transport = httpx.HTTPTransport(local_address=f"127.0.{i + 1}.{i + 7}")
            with httpx.Client(transport=transport) as client:
                statuses.append(client.get(f"{server.url}/v1/manifest").status_code)
    finally:
        assert server.stop() == 0
    assert 429 in statuses[2:]  # a burst of two for all of loopback, whatever the address


@pytest.mark.parametrize(
    ("address", "group"),
    [
        ("127.0.0.1", "loopback"),
        ("127.9.8.7", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.5", "loopback"),
        ("203.0.113.9", "203.0.113.9"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("::ffff:203.0.113.9", "203.0.113.9"),
    ],
)
def test_the_rate_limit_counts_a_v6_64_and_all_of_loopback_as_one_client(
    address: str, group: str
) -> None:
    assert client_group({"type": "http", "client": (address, 1234)}) == group


def test_mcp_over_http_keeps_no_sessions(loopback_server: Server) -> None:
    """Thousands of initialize calls hold nothing: the server is stateless."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=loopback_server.url) as client:
        answers = [client.post("/mcp", json=body, headers=headers) for _ in range(300)]
        listed = client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
            headers={**headers, "MCP-Protocol-Version": "2025-06-18"},
        )
    assert {answer.status_code for answer in answers} == {200}
    assert all("mcp-session-id" not in answer.headers for answer in answers)
    assert listed.status_code == 200
    assert "preview_turn" in listed.text


# --------------------------------------------------------------------------- stopping


def test_sigterm_stops_serve_within_seconds_during_a_hung_mcp_call(tmp_path: Path) -> None:
    starts, busy = tmp_path / "starts", tmp_path / "busy"
    entry = {
        "name": "hung",
        "type": "mcp",
        "server": {
            "command": sys.executable,
            "args": [str(PEER)],
            "env": {"STARTS_FILE": str(starts), "BUSY_FILE": str(busy)},
        },
        "tool": {"name": "sleep"},
        "request_timeout_s": 600,
    }
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump({"version": 1, "providers": [entry]}))
    server = start_serve([str(manifest), "--rate-limit", "0"])
    pending = threading.Thread(
        target=_post_quietly, args=(f"{server.url}/v1/turns", TURN), daemon=True
    )
    pending.start()
    deadline = time.monotonic() + BOUND_S
    while not busy.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert busy.exists(), "the tool call did not start"
    child = int(starts.read_text().split()[0])
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    code = stop(server.process)
    took = time.monotonic() - started
    assert code == 0
    assert took < 15  # graceful 5 s, providers closed within 5 s more
    deadline = time.monotonic() + BOUND_S
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _post_quietly(url: str, body: dict[str, Any]) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(url, json=body, timeout=BOUND_S)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def start_limited(args: list[str], descriptors: int, log: Path) -> tuple[Server, Any]:
    """``composer serve ARGS`` with at most ``descriptors`` file descriptors; stderr to ``log``."""
    import subprocess

    stderr = log.open("w")
    command = [sys.executable, "-m", "composer", "serve", *args, "--port", "0"]
    process = subprocess.Popen(
        ["sh", "-c", f'ulimit -n {descriptors} && exec "$@"', "sh", *command],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert "listening on " in line, log.read_text()
    url = line.split("listening on ", 1)[1].split()[0]
    return Server(process, url), stderr


@pytest.mark.parametrize("cap", ["default", "over the descriptor limit"])
def test_out_of_descriptors_the_server_answers_503_or_waits_and_recovers(
    tmp_path: Path, cap: str
) -> None:
    """With 300 descriptors: by default connections past the cap get 503 at once; with a
    cap set above the limit, accepting fails (one log line, never a traceback). Either way
    the server answers again once the sockets are gone."""
    log = tmp_path / "stderr.log"
    args = [str(CONFIGS), "--env", "dev", "--rate-limit", "0", "--request-timeout", "30"]
    if cap != "default":
        args += ["--max-connections", "5000"]
    server, stderr = start_limited(args, 300, log)
    sockets: list[socket.socket] = []
    try:
        rotating = [f"127.0.{i // 200 + 1}.{i % 200 + 1}" for i in range(600)]
        sockets = open_idle(port_of(server), 600, rotating)
        if cap == "default":
            probe = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.9.9"))
            with probe:
                answer = probe.get(f"{server.url}/healthz", timeout=5)
            assert answer.status_code == 503
            assert answer.json()["error"]["type"] == "unavailable"
        else:
            time.sleep(1.5)  # the server meets EMFILE while accepting
        for sock in sockets:
            sock.close()
        sockets = []
        deadline = time.monotonic() + BOUND_S
        while True:
            try:
                if httpx.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not recover"
            time.sleep(0.2)
    finally:
        for sock in sockets:
            sock.close()
        assert server.stop() == 0
        stderr.close()
    text = log.read_text()
    assert "Traceback" not in text
    assert "--- Logging error ---" not in text
