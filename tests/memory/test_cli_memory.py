"""composer memory import|export|stats: items move between JSONL, SQLite and PostgreSQL with
their ids, a second import adds nothing, and the counts are said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from memory.services import free_port, require_postgres_extra

from builtin_providers.stores import PostgresMemoryStore, open_store
from composer.cli.main import main

RECORDS: list[dict[str, Any]] = [
    {"id": "m1", "content": "restart zone by zone", "tags": ["incident"], "metadata": {"t": 1}},
    {"id": "m2", "content": {"structured": True}, "tags": [], "metadata": {}},
    {"content": "a line without an id"},
]


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    path = tmp_path / "seed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["memory", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_jsonl_to_sqlite_to_postgres_and_back(
    seed: Path,
    tmp_path: Path,
    postgres_dsn: str,
    pg_schema: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "team.sqlite"
    code, out, _ = run(capsys, "import", str(seed), str(db), "--into", "ops")
    assert code == 0
    assert out.splitlines() == [
        f"read 3 items from {seed}; added 3, 0 already there",
        f"{db}: 3 items (ops: 3)",
    ]
    code, out, _ = run(capsys, "import", str(seed), str(db), "--into", "ops")
    assert code == 0
    assert "added 0, 3 already there" in out

    code, out, _ = run(capsys, "import", f"sqlite:{db}", postgres_dsn, "--schema", pg_schema)
    assert code == 0
    assert "added 3, 0 already there" in out
    code, out, _ = run(capsys, "stats", postgres_dsn, "--schema", pg_schema)
    assert code == 0
    assert out.splitlines()[1:] == ["  ops: 3"]

    back = tmp_path / "back.jsonl"
    code, out, _ = run(capsys, "export", postgres_dsn, str(back), "--schema", pg_schema)
    assert code == 0
    assert "exported 3 items" in out
    exported = [json.loads(line) for line in back.read_text().splitlines()]
    assert [r["id"] for r in exported[:2]] == ["m1", "m2"]
    assert isinstance(exported[0].pop("created_at"), float)
    assert exported[0] == {**RECORDS[0], "namespace": "ops"}
    assert exported[1]["content"] == {"structured": True}

    code, out, err = run(capsys, "export", str(db), "--namespace", "ops")
    assert code == 0
    assert [json.loads(line)["id"] for line in out.splitlines()][:2] == ["m1", "m2"]
    assert "exported 3 items" in err


def test_a_store_that_names_nothing_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "stats", str(tmp_path / "memory.txt"))
    assert code == 2
    assert "names no store" in err


def test_a_failing_store_exits_1_without_its_password(capsys: pytest.CaptureFixture[str]) -> None:
    require_postgres_extra()  # without psycopg the message is the install hint instead
    dsn = f"postgresql://agent:hunter2@127.0.0.1:{free_port()}/none?connect_timeout=1"
    code, _, err = run(capsys, "stats", dsn)
    assert code == 1
    assert "composer memory: memory database postgres 127.0.0.1" in err
    assert "hunter2" not in err
    retries = [line for line in err.splitlines() if "error connecting" in line]
    assert len(retries) == 1, err  # the pool's retries, one counted line
    assert retries[0].startswith("composer: warning: ")
    assert retries[0].endswith(" times)")


@pytest.mark.parametrize(
    ("query", "waited"),
    [
        ("", 5.0),
        ("?connect_timeout=7", 7.0),
        ("?connect_timeout=1", 2.0),
        ("?connect_timeout=999", 60.0),
        ("?connect_timeout=soon", 5.0),
        ("?connect_timeout=0", 5.0),
    ],
)
def test_a_urls_connect_timeout_is_how_long_a_connection_is_waited_for(
    query: str, waited: float
) -> None:
    """As libpq reads it (1 is 2, 0 or none is the store's default), bounded."""
    store = open_store(f"postgresql://agent:pw@127.0.0.1:5432/test{query}", schema="composer")
    assert isinstance(store, PostgresMemoryStore)
    assert store.connect_timeout_s == waited


def test_stats_names_the_lines_a_jsonl_read_skips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSONL store's unreadable lines are not items; stats says so instead of counting less."""
    path = tmp_path / "notes.jsonl"
    bad = ["not json", '{"tags": []}'] * 6
    path.write_text('{"content": "a"}\n' + "\n".join(bad) + '\n{"content": "b"}\n')
    code, out, err = run(capsys, "stats", str(path))
    assert code == 0
    assert out.splitlines() == [f"{path}: 2 items in 1 namespace", "  (default): 2"]
    warnings = err.splitlines()
    assert len(warnings) == 11
    assert warnings[0] == (f"{path}:2: not JSON: Expecting value (column 1); skipped, not counted")
    assert warnings[1].startswith(f"{path}:3: ")
    assert "content" in warnings[1]
    assert warnings[10] == f"{path}: 2 more lines skipped, not counted"

    code, out, _ = run(capsys, "stats", str(path), "--json")
    document = json.loads(out)
    assert document["items"] == 2
    assert [skipped["line"] for skipped in document["skipped"]] == list(range(2, 14))

    sqlite = tmp_path / "notes.sqlite"
    assert run(capsys, "import", str(path), str(sqlite))[0] == 1  # import refuses bad lines
    path.write_text('{"content": "a"}\n')
    assert run(capsys, "import", str(path), str(sqlite))[0] == 0
    code, out, err = run(capsys, "stats", str(sqlite), "--json")
    assert (code, json.loads(out)["skipped"], err) == (0, [], "")
