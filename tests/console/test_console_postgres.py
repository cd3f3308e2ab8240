"""The console over an audit table in the real PostgreSQL: ``composer serve --console`` reads
the manifest's ``runtime.audit.postgres`` table with each principal's turns its own, and
``composer console DSN --schema S`` serves the same table on 127.0.0.1."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from memory.services import postgres_schema, postgres_server
from serve.conftest import STARTUP_S, Server, start_serve

from composer.errors import AuditReadError
from composer.observe.audit.reader import read_turns
from console.console_setup import (
    ENV,
    MANIFEST,
    SENTINEL,
    TOKENS,
    console_process,
    post_turn,
    write_files,
)


@pytest.fixture(scope="module")
def table() -> Iterator[tuple[str, str]]:
    with postgres_server() as dsn, postgres_schema(dsn) as schema:
        yield dsn, schema


@pytest.fixture(scope="module")
def served(table: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    dsn, schema = table
    folder = tmp_path_factory.mktemp("console-postgres")
    manifest, principals = write_files(folder)
    audit = f"runtime: {{audit: {{postgres: {{dsn: {json.dumps(dsn)}, schema: {schema}}}, keep_text: true}}}}"
    manifest.write_text(
        MANIFEST.replace("runtime: {audit: {path: turns.jsonl, keep_text: true}}", audit)
    )
    server = start_serve([str(manifest), "--principals", str(principals), "--console"], env=ENV)
    try:
        _post_turns(server, dsn, schema)
        yield server
    finally:
        assert server.stop() == 0


def _post_turns(server: Server, dsn: str, schema: str) -> None:
    post_turn(server.url, "team a: the disk is full", token=TOKENS["team-a"])
    post_turn(server.url, f"team a: rotate {SENTINEL}", token=TOKENS["team-a"])
    post_turn(server.url, "team b: payroll run failed", branch="pay-9", token=TOKENS["team-b"])
    deadline = time.monotonic() + STARTUP_S
    while _landed(dsn, schema) < 3:
        assert time.monotonic() < deadline, "the audit rows never landed"
        time.sleep(0.1)


def _landed(dsn: str, schema: str) -> int:
    """The turns in the table so far; none before the writer's first batch creates it."""
    try:
        return read_turns(dsn, schema=schema, limit=1).total
    except AuditReadError:
        return 0


def test_each_principal_reads_its_own_turns_from_the_table(
    served: Server, table: tuple[str, str]
) -> None:
    dsn, schema = table
    a = {"authorization": f"Bearer {TOKENS['team-a']}"}
    page = httpx.get(f"{served.url}/console/turns", headers=a, timeout=30).text
    assert "2 turns" in page
    assert "team a: the disk is full" in page
    assert "payroll" not in page
    assert SENTINEL.lower() not in page.lower()
    filtered = httpx.get(
        f"{served.url}/console/turns?provider=runbook&outcome=fired", headers=a, timeout=30
    ).text
    assert "1 turn," in filtered
    theirs = read_turns(dsn, schema=schema, principal="team-b", limit=1).lines[0].turn_id
    mine = read_turns(dsn, schema=schema, principal="team-a", limit=2).lines
    assert (
        httpx.get(f"{served.url}/console/turns/{theirs}", headers=a, timeout=30).status_code == 403
    )
    turn = httpx.get(f"{served.url}/console/turns/{mine[1].turn_id}", headers=a, timeout=30)
    assert turn.status_code == 200
    assert 'data-provider="runbook"' in turn.text
    compared = httpx.get(
        f"{served.url}/console/turns/{mine[1].turn_id}/compare?with={mine[0].turn_id}",
        headers=a,
        timeout=30,
    ).text
    assert "~ runbook: outcome fired -&gt; guarded" in compared
    providers = httpx.get(f"{served.url}/console/providers", headers=a, timeout=30).text
    assert "2 turns in the window" in providers


def test_composer_console_serves_a_table_by_its_dsn(served: Server, table: tuple[str, str]) -> None:
    dsn, schema = table
    with console_process(dsn, "--schema", schema) as url:
        page = httpx.get(url + "/turns", timeout=30).text
        assert "3 turns" in page  # no principals here: the whole table
        assert "payroll run failed" in page
