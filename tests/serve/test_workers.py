"""``composer serve --state URL`` and ``--workers N``: the flags' refusals, readiness naming
the store (never its password), a store that goes away (503, not a wrong answer), and two
worker processes on one socket counting one branch's turns in one place."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from memory.services import postgres_schema, redis_prefix_of
from memory.stores_fixtures import postgres_dsn, redis_url
from psycopg import sql

from composer.cli.main import main
from serve.conftest import Server, children, process_gone, rules_manifest, start_serve, turn_body

__all__ = ["postgres_dsn", "redis_url"]  # the servers' fixtures


def test_workers_without_shared_state_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", str(rules_manifest(tmp_path)), "--port", "0", "--workers", "2"]) == 2
    error = capsys.readouterr().err
    assert "--workers above 1 needs --state" in error
    assert main(["serve", str(rules_manifest(tmp_path)), "--port", "0", "--workers", "0"]) == 2
    assert "--workers must be between 1 and 64" in capsys.readouterr().err


def test_a_state_store_that_does_not_answer_fails_the_start_without_its_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BROKEN_STATE", "postgresql://app:pw-7781-secret@127.0.0.1:1/x")
    args = ["serve", str(rules_manifest(tmp_path)), "--port", "0", "--state", "${BROKEN_STATE}"]
    assert main(args) == 1
    error = capsys.readouterr().err
    assert "the store did not answer" in error
    assert "app:***@127.0.0.1:1/x" in error
    assert "pw-7781-secret" not in error
    assert main([*args[:-1], "mysql://app:pw-7781-secret@h/x"]) == 1
    error = capsys.readouterr().err
    assert "give a postgresql:// or redis:// URL" in error
    assert "pw-7781-secret" not in error
    monkeypatch.delenv("BROKEN_STATE")
    assert main(args) == 1
    assert "--state ${BROKEN_STATE}: the variable is not set" in capsys.readouterr().err


def test_readiness_names_the_store_and_a_store_gone_is_a_503(
    tmp_path: Path, postgres_dsn: str
) -> None:
    with postgres_schema(postgres_dsn) as schema:
        server = start_serve(
            [str(rules_manifest(tmp_path)), "--state", postgres_dsn, "--state-schema", schema]
        )
        try:
            ready = httpx.get(f"{server.url}/readyz", timeout=60)
            assert ready.status_code == 200
            state = ready.json()["state"]
            assert state["kind"] == "postgres"
            assert state["shared"] is True
            assert state["where"].endswith(f"schema {schema}")
            assert httpx.post(f"{server.url}/v1/turns", json=turn_body("x"), timeout=60).is_success
            with psycopg.connect(postgres_dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
            refused = httpx.post(f"{server.url}/v1/turns", json=turn_body("x"), timeout=60)
            assert refused.status_code == 503
            assert refused.json()["error"]["type"] == "state_unavailable"
            gone = httpx.get(f"{server.url}/readyz", timeout=60)
            assert gone.status_code == 503
            assert gone.json()["state"]["error"].endswith("the state store did not answer")
        finally:
            assert server.stop() == 0


def two_workers(tmp_path: Path, redis_url: str, word: str, *extra: str) -> Server:
    """``composer serve --workers 2`` over the Redis state under the key word ``word``."""
    command = [str(rules_manifest(tmp_path)), "--workers", "2", "--state", redis_url]
    return start_serve([*command, "--state-schema", word, *extra])


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
def test_two_workers_on_one_socket_count_one_branch_in_one_place(
    tmp_path: Path, redis_url: str
) -> None:
    with redis_prefix_of(redis_url) as word:
        server = two_workers(tmp_path, redis_url, word, "--rate-limit", "0")
        workers = children(server.process.pid)
        try:
            assert len(workers) == 2
            for _ in range(20):  # a new connection each: the kernel spreads them
                answer = httpx.post(f"{server.url}/v1/turns", json=turn_body("inc-1"), timeout=60)
                assert answer.status_code == 200
            import redis

            client = redis.Redis.from_url(redis_url)
            try:
                turns = client.hget("{" + word + "}:b:local/inc-1", "turns")
            finally:
                client.close()
            assert turns == b"20"  # whichever worker served each, counted once
        finally:
            assert server.stop() == 0
        assert all(process_gone(pid) for pid in workers)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="--workers forks")
def test_a_worker_that_dies_stops_the_server_with_a_failure(tmp_path: Path, redis_url: str) -> None:
    with redis_prefix_of(redis_url) as word:
        server = two_workers(tmp_path, redis_url, word)
        workers = children(server.process.pid)
        os.kill(workers[0], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while server.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.stop() == 1
        assert process_gone(workers[1])
