"""The audit log in PostgreSQL (``runtime.audit.postgres``) and on standard output.

Real turns (``prepare_turn``) write to the real server of tests/memory/services.py, each test
in a schema of its own; ``composer audit`` reads the table through the command itself, and
``read_turns`` reads a table and a file alike. The hostile tests take the server away: a
port nothing listens on, the writer's connection killed by the server, a throwaway cluster
stopped mid-run.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memory.services import free_port, postgres_schema, throwaway_postgres
from memory.stores_fixtures import postgres_dsn

import composer
from composer.cli.main import main
from composer.errors import AuditReadError, ManifestError
from composer.observe.audit.postgres import PostgresAuditLog
from composer.observe.audit.reader import find_turn, read_turns
from composer.observe.audit.table import INDEXED_CHARS
from composer.observe.record import AuditLine
from composer.principal import Principal, current_principal
from composer.registry import ProviderReport
from composer.serve.service import ContextService

__all__ = ["postgres_dsn"]  # the server's fixture

PROVIDERS = """\
providers:
  - {name: rules, type: static, priority: 9, text: "Answer in English.\\n"}
  - {name: deploys, type: static, text: "deploy notes", when: "'deploy' in instruction.text"}
"""


@pytest.fixture
def schema(postgres_dsn: str) -> Iterator[str]:
    with postgres_schema(postgres_dsn) as name:
        yield name


def manifest_at(folder: Path, audit: str, *, keep: bool = False) -> composer.Manifest:
    """``m.yaml`` in ``folder`` whose ``runtime.audit`` is ``audit`` (a flow mapping's body)."""
    text = (
        f"version: 1\nbudget: 40\nruntime: {{audit: {{{audit}, keep_text: {str(keep).lower()}}}}}\n"
    )
    (folder / "m.yaml").write_text(text + PROVIDERS)
    return composer.load_manifest(folder / "m.yaml")


def table(dsn: str, schema: str, *, max_rows: int | None = None, age: str = "") -> str:
    rows = "" if max_rows is None else f", max_rows: {max_rows}"
    return f"postgres: {{dsn: {json.dumps(dsn)}, schema: {schema}{rows}{age}}}"


async def run_turns(
    manifest: composer.Manifest,
    texts: list[str],
    *,
    branch: composer.Branch | None = None,
    principal: str | None = None,
) -> list[ProviderReport]:
    """One turn per text on ``branch`` (a new one, named payments, by default)."""
    if branch is None:
        branch = composer.Branch("You are on call.\n", name="payments")
    composer.attach(branch, manifest)
    reports = []
    for text in texts:
        token = current_principal.set(Principal(principal)) if principal else None
        try:
            turn = await composer.prepare_turn(branch, text)
        finally:
            if token is not None:
                current_principal.reset(token)
        assert turn.report is not None
        reports.append(turn.report)
        branch.messages.clear()
    return reports


def sink(manifest: composer.Manifest) -> PostgresAuditLog:
    log = manifest.shared["observe"].audit
    assert isinstance(log, PostgresAuditLog)
    return log


def rows(dsn: str, schema: str, query: str = "SELECT turn_id FROM {s}.audit_turns") -> list[Any]:
    """What ``query`` answers (``{s}``: the schema); nothing for a statement without rows."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(query.replace("{s}", f'"{schema}"'))
        return cursor.fetchall() if cursor.description else []


def audit_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("composer.observe")]


# -- turns land once each, and are read back as a file's are


async def test_turns_land_once_each_and_are_listed_newest_first(
    tmp_path: Path, postgres_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = manifest_at(tmp_path, table(postgres_dsn, schema))
    first = await run_turns(manifest, ["deploy 1", "status 2"], principal="team-a")
    other = composer.Branch("S\n", name="search")
    other.id = "branch-b"
    second = await run_turns(manifest, ["deploy 3"], branch=other, principal="team-b")
    assert sink(manifest).flush(30)
    ready = ContextService(manifest).readiness().model_dump(mode="json")
    assert ready["audit"] == {"kind": "postgres", "writing": True, "lost": 0}
    await manifest.aclose()  # the last user of the sink: what is queued is written
    ids = [r.turn_id or "" for r in first + second]
    assert sorted(row[0] for row in rows(postgres_dsn, schema)) == sorted(ids)  # once each

    assert main(["audit", "list", postgres_dsn, "--schema", schema]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in out[:-1]] == ids[::-1]  # newest first
    assert out[-1] == "# 3 turns"
    assert " team-b " in out[0]
    assert "branch-b (search)" in out[0]
    assert "[++]" in out[-2]
    assert "[+w]" in out[-3]

    assert main(["audit", "list", postgres_dsn, "--schema", schema, "--limit", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "# the newest 1 of 3 turns"
    assert main(["audit", "list", postgres_dsn, "--schema", schema, "--principal", "team-a"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in listed[:-1]] == ids[1::-1]


async def test_show_and_diff_name_turns_by_id_or_prefix(
    tmp_path: Path, postgres_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = manifest_at(tmp_path, table(postgres_dsn, schema), keep=True)
    reports = await run_turns(manifest, ["deploy now", "status please"])
    await manifest.aclose()
    first, second = (r.turn_id for r in reports)
    assert first is not None
    assert second is not None
    location = [postgres_dsn, "--schema", schema]

    assert main(["audit", "show", *location, second[:8]]) == 0
    shown = capsys.readouterr().out
    assert f"turn: {second} at " in shown
    assert "status please" in shown  # kept text
    assert main(["audit", "show", *location]) == 0  # the newest
    assert f"turn: {second} at " in capsys.readouterr().out

    assert main(["audit", "diff", *location, first, second]) == 0
    diff = capsys.readouterr().out
    assert diff.startswith(f"# turn {first} -> turn {second}: ")
    assert "~ deploys: outcome fired -> guarded" in diff

    # a row whose id starts as the first's does, for 8 characters only (its 9th differs)
    twin = first[:8] + ("0" if first[8] == "f" else "f") * 24
    rows(
        postgres_dsn,
        schema,
        "INSERT INTO {s}.audit_turns (time, turn_id, branch_id, tokens_used, bytes, line) "
        f"SELECT time, '{twin}', branch_id, tokens_used, bytes, replace(line, '{first}', "
        f"'{twin}') FROM {{s}}.audit_turns WHERE turn_id = '{first}'",
    )
    assert main(["audit", "show", *location, first[:8]]) == 1
    assert "2 turns start with" in capsys.readouterr().err
    assert main(["audit", "show", *location, first[:9]]) == 0
    assert f"turn: {first} at " in capsys.readouterr().out
    assert main(["audit", "show", *location, "zz"]) == 1
    assert "no turn zz" in capsys.readouterr().err
    line, skipped = find_turn(postgres_dsn, first[:-1] + first[-1], schema=schema)
    assert (line.turn_id, skipped) == (first, [])


@pytest.mark.parametrize("kind", ["file", "postgres"])
async def test_read_turns_filters_and_pages_a_table_as_a_file(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The one reader: the same turns, the same answers, whichever sink wrote them."""
    if kind == "file":
        manifest = manifest_at(tmp_path, "path: turns.jsonl")
        location: str | Path = tmp_path / "turns.jsonl"
        schema = "composer"
    else:
        location = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("schema")
        manifest = manifest_at(tmp_path, table(str(location), schema))
    reports = await run_turns(manifest, [f"deploy {i}" for i in range(5)], principal="team-a")
    other = composer.Branch("S\n")
    other.id = "other"
    reports += await run_turns(manifest, ["status"], branch=other, principal="team-b")
    await manifest.aclose()
    ids = [r.turn_id for r in reports]

    page = read_turns(location, schema=schema, limit=2, offset=1)
    assert ([line.turn_id for line in page.lines], page.total) == (ids[-2:-4:-1], 6)
    page = read_turns(location, schema=schema, principal="team-a", limit=10)
    assert [line.turn_id for line in page.lines] == ids[4::-1]
    page = read_turns(location, schema=schema, branch="other")
    assert ([line.turn_id for line in page.lines], page.total) == ([ids[5]], 1)
    times = [line.time for line in read_turns(location, schema=schema, limit=10).lines]
    import datetime as dt

    middle = dt.datetime.fromisoformat(sorted(times)[3])
    later = read_turns(location, schema=schema, since=middle, limit=10)
    earlier = read_turns(location, schema=schema, until=middle, limit=10)
    assert later.total + earlier.total == 6
    assert all(dt.datetime.fromisoformat(line.time) >= middle for line in later.lines)
    assert read_turns(location, schema=schema, turn="no-such").total == 0


# -- retention


async def test_retention_deletes_rows_past_their_age_and_beyond_the_count(
    tmp_path: Path, postgres_dsn: str, schema: str
) -> None:
    manifest = manifest_at(tmp_path, table(postgres_dsn, schema))
    old = await run_turns(manifest, ["deploy 1", "deploy 2"])
    await manifest.aclose()
    rows(postgres_dsn, schema, "UPDATE {s}.audit_turns SET written = written - interval '31 days'")
    # a new writer retains at its first batch: the default age is 30 days
    manifest = manifest_at(tmp_path, table(postgres_dsn, schema))
    kept = await run_turns(manifest, ["deploy 3", "deploy 4", "deploy 5"])
    await manifest.aclose()
    left = {row[0] for row in rows(postgres_dsn, schema)}
    assert left == {r.turn_id for r in kept}
    assert not left & {r.turn_id for r in old}

    manifest = manifest_at(tmp_path, table(postgres_dsn, schema, max_rows=2))
    newest = await run_turns(manifest, ["deploy 6"])
    await manifest.aclose()
    assert {row[0] for row in rows(postgres_dsn, schema)} == {
        kept[-1].turn_id,
        newest[0].turn_id,
    }


async def test_retention_leaves_another_writers_rows(
    tmp_path: Path, postgres_dsn: str, schema: str
) -> None:
    """Two manifests share one table: the one keeping 3 rows deletes none of the other's.
    Two manifests naming one ``writer`` (replicas whose paths differ) keep 3 between them."""
    (tmp_path / "b").mkdir()
    other = manifest_at(tmp_path / "b", table(postgres_dsn, schema))
    others = await run_turns(other, [f"deploy {i}" for i in range(12)])
    await other.aclose()
    (tmp_path / "a").mkdir()
    small = manifest_at(tmp_path / "a", table(postgres_dsn, schema, max_rows=3))
    mine = await run_turns(small, [f"status {i}" for i in range(5)])
    sink(small).retain_now()
    mine += await run_turns(small, ["status 5"])
    await small.aclose()
    left = {row[0] for row in rows(postgres_dsn, schema)}
    assert left == {r.turn_id for r in others + mine[-3:]}  # all 12 of the other writer's
    by_writer = dict(
        rows(postgres_dsn, schema, "SELECT writer, count(*) FROM {s}.audit_turns GROUP BY 1")
    )
    assert by_writer == {str(tmp_path / "b" / "m.yaml"): 12, str(tmp_path / "a" / "m.yaml"): 3}

    rows(postgres_dsn, schema, "TRUNCATE {s}.audit_turns")
    named = table(postgres_dsn, schema, max_rows=3, age=", writer: payments")
    for folder, count in (("r1", 4), ("r2", 2)):
        (tmp_path / folder).mkdir()
        replica = manifest_at(tmp_path / folder, named)
        await run_turns(replica, [f"deploy {i}" for i in range(count)])
        sink(replica).retain_now()
        await run_turns(replica, ["deploy last"])
        await replica.aclose()
    assert rows(
        postgres_dsn, schema, "SELECT writer, count(*) FROM {s}.audit_turns GROUP BY 1"
    ) == [("payments", 3)]


async def test_a_writer_whose_clock_is_behind_keeps_its_fresh_rows(
    tmp_path: Path, postgres_dsn: str, schema: str
) -> None:
    """Ages are the server's: a writer 2 days behind writes lines dated 2 days ago, and its
    1-day retention leaves them; a row the server stamped 2 days ago is deleted."""
    manifest = manifest_at(tmp_path, table(postgres_dsn, schema, age=", max_age_days: 1"))
    await run_turns(manifest, ["deploy 0"])  # on time: the sink is made at the first turn
    log = sink(manifest)
    put = log.put

    def behind(snapshot: Any) -> None:  # the writer's clock: 2 days behind the server's
        put(snapshot._replace(time=snapshot.time - 2 * 86_400))

    log.put = behind  # type: ignore[method-assign]
    reports = await run_turns(manifest, ["deploy 1", "deploy 2", "deploy 3"])
    assert log.flush(30)
    log.retain_now()
    await run_turns(manifest, ["deploy 4"])
    assert log.flush(30)
    page = read_turns(postgres_dsn, schema=schema, limit=10)
    assert page.total == 5
    import datetime as dt

    oldest = min(dt.datetime.fromisoformat(line.time) for line in page.lines)
    assert oldest < dt.datetime.now(dt.UTC) - dt.timedelta(days=1)  # the writer's own clock
    rows(
        postgres_dsn,
        schema,
        "UPDATE {s}.audit_turns SET written = now() - interval '2 days'"
        f" WHERE turn_id = '{reports[0].turn_id}'",
    )
    log.retain_now()
    await run_turns(manifest, ["deploy 5"])
    await manifest.aclose()
    left = {row[0] for row in rows(postgres_dsn, schema)}
    assert len(left) == 5
    assert reports[0].turn_id not in left


PREVIOUS_TABLE = """CREATE TABLE {s}.audit_turns (
    seq bigserial PRIMARY KEY, time timestamptz NOT NULL, turn_id text, branch_id text NOT NULL,
    branch_name text, principal text, manifest text, tokens_used integer NOT NULL,
    budget integer, bytes integer NOT NULL, line text NOT NULL)"""


async def test_a_previous_versions_table_is_upgraded_and_its_rows_kept_or_aged_out(
    tmp_path: Path, postgres_dsn: str, schema: str
) -> None:
    """The previous version's table gains ``writer`` and ``written``; its rows, which name no
    writer, are deleted by age (their own time) by the writer of their manifest only, and
    count toward no writer's ``max_rows``."""
    path = str(tmp_path / "m.yaml")
    rows(postgres_dsn, schema, "CREATE SCHEMA {s}")
    rows(postgres_dsn, schema, PREVIOUS_TABLE)
    for turn, manifest_path, days in (
        ("mine-old", path, 40),
        ("mine-new", path, 1),
        ("theirs-old", "/elsewhere/m.yaml", 40),
    ):
        rows(
            postgres_dsn,
            schema,
            "INSERT INTO {s}.audit_turns (time, turn_id, branch_id, manifest, tokens_used,"
            f" bytes, line) VALUES (now() - interval '{days} days', '{turn}', 'b',"
            f" '{manifest_path}', 0, 2, '{{}}')",
        )
    manifest = manifest_at(tmp_path, table(postgres_dsn, schema, max_rows=2))
    reports = await run_turns(manifest, ["deploy 1", "deploy 2", "deploy 3"])
    sink(manifest).retain_now()
    await run_turns(manifest, ["deploy 4"])
    await manifest.aclose()
    left = rows(
        postgres_dsn, schema, "SELECT turn_id, writer, written IS NOT NULL FROM {s}.audit_turns"
    )
    assert {row[0] for row in left if row[1] is None} == {"mine-new", "theirs-old"}
    assert {row[0] for row in left if row[1] is not None} >= {reports[2].turn_id}
    assert [row[1:] for row in left if row[1] is not None] == [(path, True)] * 2


async def test_a_role_that_may_not_upgrade_a_previous_table_is_told_what_to_run(
    tmp_path: Path, postgres_dsn: str, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A writer whose role may only insert, on the previous version's table: its lines are
    lost and counted, and the warning says the table needs its owner's upgrade."""
    import uuid

    rows(postgres_dsn, schema, "CREATE SCHEMA {s}")
    rows(postgres_dsn, schema, PREVIOUS_TABLE)
    role = f"audit_writer_{uuid.uuid4().hex[:10]}"
    try:
        for grant in (
            f"CREATE ROLE {role} LOGIN",
            f"GRANT USAGE ON SCHEMA {{s}} TO {role}",
            f"GRANT INSERT ON {{s}}.audit_turns TO {role}",
        ):
            rows(postgres_dsn, schema, grant)
        from psycopg.conninfo import make_conninfo

        manifest = manifest_at(tmp_path, table(make_conninfo(postgres_dsn, user=role), schema))
        with caplog.at_level(logging.WARNING):
            await run_turns(manifest, ["deploy 1"])
            log = sink(manifest)
            await manifest.aclose()
        assert (log.written, log.failed) == (0, 1)
        said = " ".join(r.getMessage() for r in audit_warnings(caplog))
        assert "of a previous version (no writer and written columns)" in said
    finally:
        rows(postgres_dsn, schema, f"DROP OWNED BY {role}")
        rows(postgres_dsn, schema, f"DROP ROLE {role}")


# -- hostile: no server, a killed connection, a stopped server, huge and strange values


async def test_an_unreachable_server_loses_lines_counted_and_warned_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    password = "Sekr1t-audit-pass"
    dsn = f"postgresql://postgres:{password}@127.0.0.1:{free_port()}/test"
    manifest = manifest_at(tmp_path, table(dsn, "audit") + ", queue: 3")
    with caplog.at_level(logging.WARNING):
        reports = await run_turns(manifest, [f"deploy {i}" for i in range(12)])
        log = sink(manifest)
        assert log.flush(30)
        status = ContextService(manifest).readiness().model_dump_json()
        await manifest.aclose()
    assert [r.fired[0]["provider_name"] for r in reports] == ["rules"] * 12  # turns unharmed
    assert (log.written, log.failed + log.dropped) == (0, 12)
    assert log.failed >= 1
    lost = [r for r in audit_warnings(caplog) if " lost: " in r.getMessage()]
    assert len(lost) == 1  # warned once, however many batches failed
    assert all(r.exc_info is None for r in caplog.records)  # no traceback
    assert "127.0.0.1" in lost[0].getMessage()
    text = caplog.text + status + repr(log) + str(log.status())
    assert password not in text
    assert json.loads(status)["audit"] == {"kind": "postgres", "writing": False, "lost": 12}


async def test_a_connection_killed_mid_run_loses_its_batch_and_the_writer_reconnects(
    tmp_path: Path, postgres_dsn: str, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = manifest_at(tmp_path, table(postgres_dsn, schema))
    await run_turns(manifest, ["deploy 1", "deploy 2"])
    log = sink(manifest)
    assert log.flush(30)
    assert log.written == 2
    assert log._conn is not None
    pid = log._conn.info.backend_pid
    rows(postgres_dsn, schema, f"SELECT pg_terminate_backend({pid})")
    with caplog.at_level(logging.WARNING):
        await run_turns(manifest, ["deploy 3"])  # its batch meets the dead connection
        assert log.flush(30)
        assert (log.written, log.failed) == (2, 1)
        later = await run_turns(manifest, ["deploy 4", "deploy 5"])
        assert log.flush(30)
    await manifest.aclose()
    assert (log.written, log.failed, log.dropped) == (4, 1, 0)
    stored = {row[0] for row in rows(postgres_dsn, schema)}
    assert {r.turn_id for r in later} <= stored
    assert len(stored) == 4
    assert len([r for r in audit_warnings(caplog) if "1 line lost" in r.getMessage()]) == 1
    assert log.status()["writing"] is True


async def test_a_server_stopped_mid_run_and_restarted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with throwaway_postgres() as cluster:
        manifest = manifest_at(tmp_path, table(cluster.dsn, "audit"))
        await run_turns(manifest, ["deploy 1"])
        log = sink(manifest)
        assert log.flush(30)
        assert log.written == 1
        cluster.stop()
        with caplog.at_level(logging.WARNING):
            reports = await run_turns(manifest, [f"deploy {i}" for i in range(2, 7)])
            assert log.flush(30)
        assert len(reports) == 5
        assert (log.written, log.failed + log.dropped) == (1, 5)
        assert len([r for r in audit_warnings(caplog) if " lost: " in r.getMessage()]) == 1
        assert all(r.exc_info is None for r in caplog.records)
        cluster.start()
        await run_turns(manifest, ["deploy 7"])
        assert log.flush(30)
        await manifest.aclose()
        assert log.written == 2
        assert len(rows(cluster.dsn, "audit")) == 2


async def test_huge_texts_and_hostile_branch_ids_land_whole_in_the_line(
    tmp_path: Path, postgres_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 2 MB instruction (kept text), a 10,000-character branch id (past what an index
    entry holds), a NUL and a lone surrogate: each turn lands, its line whole."""
    manifest = manifest_at(tmp_path, table(postgres_dsn, schema), keep=True)
    huge = "deploy " + "y" * 2_000_000
    branch = composer.Branch("S\n", name="bad\0name\ud800")
    branch.id = "b" * 10_000
    principal = "p" * 300
    reports = await run_turns(manifest, [huge, "deploy small"], branch=branch, principal=principal)
    log = sink(manifest)
    await manifest.aclose()
    assert (log.written, log.failed, log.dropped) == (2, 0, 0)
    stored = rows(postgres_dsn, schema, "SELECT branch_id, branch_name, bytes FROM {s}.audit_turns")
    assert {len(row[0]) for row in stored} == {INDEXED_CHARS}
    assert max(row[2] for row in stored) > 2_000_000
    line, _ = find_turn(postgres_dsn, reports[0].turn_id, schema=schema)
    assert line.instruction is not None
    assert line.instruction.text == huge
    assert line.branch.id == "b" * 10_000
    assert line.branch.name == "bad\0name\ud800"  # read back, however strange
    page = read_turns(postgres_dsn, schema=schema, branch="b" * 10_000)
    assert page.total == 2
    near = "b" * 9_999 + "c"  # the same first 256 characters: another branch all the same
    assert read_turns(postgres_dsn, schema=schema, branch=near).total == 0
    assert read_turns(postgres_dsn, schema=schema, principal=principal).total == 2
    assert read_turns(postgres_dsn, schema=schema, principal=principal[:-1] + "q").total == 0


def test_a_missing_table_or_server_is_one_line_naming_it_masked(
    postgres_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "list", postgres_dsn, "--schema", schema]) == 1
    err = capsys.readouterr().err
    assert f"schema '{schema}' holds no audit table" in err
    assert "Traceback" not in err
    dsn = f"postgresql://postgres:Sekr1t-cli-pass@127.0.0.1:{free_port()}/test"
    assert main(["audit", "list", dsn]) == 1
    err = capsys.readouterr().err
    assert "Sekr1t-cli-pass" not in err
    assert err.startswith("composer audit: postgres 127.0.0.1:")
    with pytest.raises(AuditReadError):
        read_turns(dsn)


async def test_a_role_that_may_only_insert_writes_to_a_table_made_for_it(
    tmp_path: Path, postgres_dsn: str, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An administrator makes the table; the writers' role may insert and nothing else (no
    right to create, select or delete): turns land, retention is warned about, not fatal."""
    import uuid

    admin = manifest_at(tmp_path, table(postgres_dsn, schema))
    await run_turns(admin, ["deploy 1"])
    await admin.aclose()
    role = f"audit_writer_{uuid.uuid4().hex[:10]}"
    grants = (
        f"CREATE ROLE {role} LOGIN",
        f"GRANT USAGE ON SCHEMA {{s}} TO {role}",
        f"GRANT INSERT ON {{s}}.audit_turns TO {role}",
        f"GRANT USAGE ON SEQUENCE {{s}}.audit_turns_seq_seq TO {role}",
    )
    try:
        for grant in grants:
            rows(postgres_dsn, schema, grant)
        from psycopg.conninfo import make_conninfo

        writer_dsn = make_conninfo(postgres_dsn, user=role)
        manifest = manifest_at(tmp_path, table(writer_dsn, schema))
        with caplog.at_level(logging.WARNING):
            await run_turns(manifest, ["deploy 2", "deploy 3"])
            log = sink(manifest)
            await manifest.aclose()
        assert (log.written, log.failed) == (2, 0)
        assert len(rows(postgres_dsn, schema)) == 3
        retention = [r for r in audit_warnings(caplog) if "retention failed" in r.getMessage()]
        assert len(retention) == 1
    finally:
        rows(postgres_dsn, schema, f"DROP OWNED BY {role}")
        rows(postgres_dsn, schema, f"DROP ROLE {role}")


def test_a_page_is_bounded_whatever_is_asked(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text("")
    for limit, offset in ((10_001, 0), (1, 100_001), (-1, 0)):
        with pytest.raises(ValueError, match="limit must be 0 to 10000"):
            read_turns(tmp_path / "t.jsonl", limit=limit, offset=offset)
    assert main(["audit", "list", str(tmp_path / "t.jsonl"), "--limit", "10001"]) == 2
    (tmp_path / "t.jsonl").write_text("not a line\n" * 500)
    page = read_turns(tmp_path / "t.jsonl")
    assert (page.total, len(page.skipped), page.unreadable) == (0, 100, 500)


# -- the manifest


def test_exactly_one_sink_and_a_dsns_password_is_a_secret(tmp_path: Path) -> None:
    for audit in ("keep_text: true", "path: t.jsonl, stdout: true"):
        (tmp_path / "m.yaml").write_text(f"version: 1\nruntime: {{audit: {{{audit}}}}}\n")
        with pytest.raises(ManifestError, match="exactly one of path, postgres or stdout"):
            composer.load_manifest(tmp_path / "m.yaml")
    manifest = manifest_at(tmp_path, table("postgresql://auditor:pw-written-here@db/x", "a"))
    assert manifest.redact("pw-written-here auditor") == "*** ***"
    assert "pw-written-here" not in repr(manifest)


# -- standard output


def test_stdout_writes_one_json_line_per_turn(tmp_path: Path) -> None:
    manifest_at(tmp_path, "stdout: true")
    code = textwrap.dedent(
        f"""
        import asyncio, composer
        async def main():
            m = composer.load_manifest({str(tmp_path / "m.yaml")!r})
            b = composer.Branch("S\\n", name="payments")
            composer.attach(b, m)
            for i in range(3):
                t = await composer.prepare_turn(b, f"deploy {{i}}")
                print("#", t.report.turn_id, flush=True)
            await m.aclose()
        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    ids = [line[2:] for line in done.stdout.splitlines() if line.startswith("# ")]
    lines = [
        AuditLine.model_validate_json(line)
        for line in done.stdout.splitlines()
        if not line.startswith("# ")
    ]
    assert len(ids) == 3
    assert sorted(line.turn_id or "" for line in lines) == sorted(ids)  # one line per turn
    assert {line.branch.name for line in lines} == {"payments"}
    assert done.stderr == ""


def test_stdout_audit_is_refused_where_stdout_is_the_mcp_stream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mcp", reason="the serve extra is not installed")
    manifest_at(tmp_path, "stdout: true")
    assert main(["serve", str(tmp_path / "m.yaml"), "--mcp-stdio"]) == 1
    captured = capsys.readouterr()
    assert "runtime.audit.stdout would write into the MCP stream" in captured.err
    assert captured.out == ""
