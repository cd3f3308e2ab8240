"""A rolling update of two ``composer serve`` replicas sharing PostgreSQL (branch state and
the audit table, in a schema of the test's own), behind a round-robin proxy that probes
their readiness as a Kubernetes Service does (``serve.fleet``): clients send turns the whole
time while each replica in turn is stopped with SIGTERM and replaced. With ``--drain-delay``
a stopping replica says so on ``/readyz`` first while it still serves, the proxy lets go of
it, its turns in flight finish, and the next turns go to the other: every turn is answered,
and each is in the audit trail and the branch counters exactly once."""

from __future__ import annotations

import http.server
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from memory.services import postgres_schema
from memory.stores_fixtures import postgres_dsn

from composer.cli import main
from serve.conftest import STARTUP_S, Server, start_serve
from serve.fleet import Fleet, proxy_for, start_replicas

__all__ = ["postgres_dsn"]  # the replicas' store

REPLICAS = 2
CLIENTS = 4
DRAIN_S = 3.0
PROBE_S = 0.1
"""The proxy's readiness probe: well inside the drain delay, as a Deployment's
``readinessProbe`` period is inside its ``preStop`` sleep."""
UPSTREAM_S = 0.05
"""How long the upstream a provider calls takes: turns are in flight when SIGTERM comes."""

MANIFEST = """\
version: 1
runtime:
  audit: {{postgres: {{dsn: "{dsn}", schema: {schema}}}}}
providers:
  - {{name: policy, type: static, text: "answer briefly"}}
  - name: status
    type: http
    request: {{url: "{upstream}/status", timeout_s: 10}}
    response: {{template: "{{{{ text }}}}"}}
"""


class _Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(UPSTREAM_S)
        body = b"all systems nominal"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def upstream() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=STARTUP_S)


def eventually(test: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + STARTUP_S  # a bound that only catches a hang
    while not test():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def readiness(server: Server) -> tuple[int, str]:
    answer = httpx.get(f"{server.url}/readyz", timeout=STARTUP_S)
    return answer.status_code, answer.json()["status"]


def audited(dsn: str, schema: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The turn ids of the audit table, as ``composer audit list`` reads them."""
    capsys.readouterr()
    code = main(["audit", "list", dsn, "--schema", schema, "--limit", "10000", "--json"])
    listed = json.loads(capsys.readouterr().out)
    if code != 0:
        return []  # no line written yet
    return [turn["turn_id"] for turn in listed["turns"]]


def test_a_rolling_update_answers_every_turn_exactly_once(
    tmp_path: Path, postgres_dsn: str, upstream: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with postgres_schema(postgres_dsn) as schema:
        path = tmp_path / "m.yaml"
        path.write_text(MANIFEST.format(dsn=postgres_dsn, schema=schema, upstream=upstream))
        args = [str(path), "--state", "${ROLLING_STATE_DSN}", "--state-schema", schema]
        args += ["--rate-limit", "0", "--drain-delay", str(DRAIN_S)]
        env = {"ROLLING_STATE_DSN": postgres_dsn}
        replicas = start_replicas(args, REPLICAS, env)
        fleets = proxy_for(replicas, probe_s=PROBE_S)
        fleet = next(fleets)
        try:
            answers = roll(fleet, args, env)
        finally:
            fleets.close()
            for server in fleet.replicas:
                server.stop()

        turn_ids = [turn_id for branch in answers.values() for _, turn_id in branch]
        assert len(set(turn_ids)) == len(turn_ids)
        eventually(lambda: len(audited(postgres_dsn, schema, capsys)) >= len(turn_ids), "audit")
        listed = audited(postgres_dsn, schema, capsys)
        assert sorted(listed) == sorted(turn_ids)  # each answered turn once, no other

        import psycopg
        from psycopg import sql

        query = sql.SQL("SELECT branch_id, turns FROM {}.branches").format(sql.Identifier(schema))
        with psycopg.connect(postgres_dsn) as conn:
            counted: dict[str, int] = dict(conn.execute(query).fetchall())
        assert counted == {branch: len(turns) for branch, turns in answers.items()}


def roll(fleet: Fleet, args: list[str], env: dict[str, str]) -> dict[str, list[tuple[int, str]]]:
    """Clients' turns while each replica is stopped and replaced; each client's answers,
    (replica slot, turn id) in order."""
    answers: dict[str, list[tuple[int, str]]] = {f"c{n}": [] for n in range(CLIENTS)}
    failed: list[str] = []
    done = threading.Event()

    def client(branch: str) -> None:
        number = 0
        while not done.is_set():
            number += 1
            instruction = {"text": f"turn {number}"}
            body = {"branch": {"id": branch}, "system": "S\n", "instruction": instruction}
            try:
                answer = httpx.post(f"{fleet.url}/v1/turns", json=body, timeout=STARTUP_S)
            except httpx.TransportError as e:
                failed.append(f"{branch} turn {number}: {e!r}")
                return
            if answer.status_code != 200:
                failed.append(f"{branch} turn {number}: {answer.status_code} {answer.text}")
                return
            slot = int(answer.headers["x-replica"])
            answers[branch].append((slot, answer.json()["report"]["turn_id"]))

    def served() -> int:
        return sum(len(turns) for turns in answers.values())

    def update(slot: int) -> None:
        old = fleet.replicas[slot]
        old.process.send_signal(signal.SIGTERM)
        # readiness turns false first, while it still answers
        eventually(lambda: readiness(old) == (503, "stopping"), "readiness false")
        assert old.process.poll() is None
        ready = fleet.pool.ready
        assert ready is not None
        eventually(lambda: not ready[slot], "the proxy letting go")
        mark = len(fleet.pool.served)
        assert old.stop() == 0  # its turns in flight finished, then it left
        before = served()
        eventually(lambda: served() >= before + 10, "turns on the other replica alone")
        # once the proxy let go, only the turns already sent to it (one a client) were
        # answered there, though it went on serving for the rest of its drain
        sent = [s for _, s, _ in fleet.pool.served[mark:]]
        assert sent.count(slot) <= CLIENTS
        fleet.replace(slot, start_serve(args, env=env))
        eventually(
            lambda: any(s == slot for turns in answers.values() for s, _ in turns[-3:]),
            "turns on the replacement",
        )

    threads = [threading.Thread(target=client, args=(branch,)) for branch in answers]
    for thread in threads:
        thread.start()
    try:
        eventually(lambda: served() >= 20, "turns before the update")
        for slot in range(REPLICAS):
            update(slot)
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=STARTUP_S)
    assert not failed, failed
    statuses = {status for _, _, status in fleet.pool.served}
    assert statuses == {200}, "no request lost in flight (502) or refused"
    return answers


def test_a_second_sigterm_ends_a_drain_at_once(tmp_path: Path) -> None:
    """A drain is bounded (``--drain-delay`` at most 60 s) and a second signal cuts it short:
    an operator or a supervisor never waits on it."""
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\nproviders:\n  - {name: a, type: static, text: hello}\n")
    server = start_serve([str(path), "--drain-delay", "60", "--rate-limit", "0"])
    server.process.send_signal(signal.SIGTERM)
    eventually(lambda: readiness(server) == (503, "stopping"), "readiness false")
    body = {"branch": {"id": "b"}, "system": "S\n", "instruction": {"text": "x"}}
    answer = httpx.post(f"{server.url}/v1/turns", json=body, timeout=STARTUP_S)
    assert answer.status_code == 200  # still serving while it drains
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=STARTUP_S) == 0  # a bound that only catches a hang
    server.stop()
