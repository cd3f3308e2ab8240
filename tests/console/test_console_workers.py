"""The console behind ``composer serve --workers 2``: one login holds on whichever worker the
kernel hands each new connection to (the session is a signed cookie, not a table in one
process), and a logout is remembered by the worker that served it."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from memory.services import postgres_schema
from memory.stores_fixtures import postgres_dsn
from serve.conftest import Server, children, process_gone, rules_manifest, start_serve

from composer.console.sessions import Sessions
from composer.principal import Principal
from composer.serve.principals import load_principals
from console.console_setup import ENV, PRINCIPALS, TOKENS

__all__ = ["postgres_dsn"]  # the server's fixture

COOKIE = "composer_console"
ENOUGH = 4
"""Answers each worker must give before a test trusts what it saw of both."""
MOST = 200
"""New connections tried before giving up on the kernel spreading them."""


def worker_of(answer: httpx.Response, workers: list[int]) -> int:
    """The worker process holding the server side of ``answer``'s (still open) connection:
    its socket's inode, found by the two ports in ``/proc/net/tcp``, among the workers' fds."""
    stream = answer.extensions["network_stream"]
    client_port = stream.get_extra_info("client_addr")[1]
    server_port = stream.get_extra_info("server_addr")[1]
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        columns = line.split()
        local, remote = int(columns[1].split(":")[1], 16), int(columns[2].split(":")[1], 16)
        if (local, remote) == (server_port, client_port):
            inodes.add(f"socket:[{columns[9]}]")
    for pid in workers:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) in inodes:
                    return pid
            except OSError:  # closed meanwhile
                continue
    raise AssertionError(f"no worker holds the connection from port {client_port}")


def on_new_connections(
    server: Server, workers: list[int], cookie: str | None
) -> list[tuple[int, httpx.Response]]:
    """``GET /console/turns`` on a new connection each time, until every worker answered
    ``ENOUGH`` times: (the worker, its answer) of each."""
    seen: list[tuple[int, httpx.Response]] = []
    while min(Counter(pid for pid, _ in seen)[w] for w in workers) < ENOUGH:
        assert len(seen) < MOST, f"the kernel gave every connection to one worker: {seen}"
        cookies = {COOKIE: cookie} if cookie else None
        with httpx.Client(base_url=server.url, timeout=60, cookies=cookies) as client:
            answer = client.get("/console/turns")
            seen.append((worker_of(answer, workers), answer))
    return seen


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc (Linux)")
def test_one_login_holds_on_every_worker_and_logout_on_the_worker_that_served_it(
    tmp_path: Path, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)  # this test signs a cookie too
    principals = tmp_path / "principals.yaml"
    principals.write_text(PRINCIPALS)
    with postgres_schema(postgres_dsn) as schema:
        server = start_serve(
            [
                str(rules_manifest(tmp_path)),
                "--console",
                "--principals",
                str(principals),
                "--workers",
                "2",
                "--state",
                postgres_dsn,
                "--state-schema",
                schema,
                "--rate-limit",
                "0",
            ],
            env=ENV,
        )
        workers = children(server.process.pid)
        try:
            assert len(workers) == 2
            with httpx.Client(base_url=server.url, timeout=60) as client:
                login = client.post(
                    "/console/login",
                    data={"token": TOKENS["team-a"]},
                    headers={"origin": server.url},
                )
                assert login.status_code == 303
                cookie = client.cookies[COOKIE]
            answers = on_new_connections(server, workers, cookie)
            assert len({pid for pid, _ in answers}) == 2  # both workers answered ...
            for pid, answer in answers:  # ... and each knew the login the other made
                assert answer.status_code == 200, (pid, answer.headers.get("location"))
                assert "team-a" in answer.text
            for _, answer in on_new_connections(server, workers, None):
                assert answer.status_code == 303  # no cookie: not logged in anywhere
            # a session last seen 10 minutes ago is re-issued with a new "seen" (sliding idle)
            ago = Sessions(clock=lambda: time.time() - 600)
            older = ago.open(Principal("team-a"), load_principals(principals))
            for _, answer in on_new_connections(server, workers, older):
                assert answer.status_code == 200
                renewed = answer.cookies[COOKIE]
                assert renewed.split(":")[2] == older.split(":")[2]  # the same login time
                assert int(renewed.split(":")[3]) >= int(older.split(":")[3]) + 600
                left = int(answer.headers["set-cookie"].lower().split("max-age=")[1].split(";")[0])
                assert left <= 8 * 3600 - 600  # the browser keeps it no longer than it is valid

            with httpx.Client(base_url=server.url, timeout=60) as client:
                client.cookies.set(COOKIE, cookie, path="/console")
                logout = client.post("/console/logout", headers={"origin": server.url})
                assert logout.status_code == 303
                assert 'composer_console=""' in logout.headers["set-cookie"]  # deleted
                assert "max-age=0" in logout.headers["set-cookie"].lower()
                served_logout = worker_of(logout, workers)
            # A copy of the cookie kept after logout: the worker that logged it out refuses it;
            # the other still accepts it until it expires (revocation is per process).
            for pid, answer in on_new_connections(server, workers, cookie):
                if pid == served_logout:
                    assert answer.status_code == 303
                    assert answer.headers["location"] == "/console/login"
                else:
                    assert answer.status_code == 200
        finally:
            assert server.stop() == 0
        assert all(process_gone(pid) for pid in workers)
