"""composer memory moves items between every pair of store kinds item for item (ids, tags,
metadata, namespace, times and the written-back flag, so imported agent results are still the
first a cap evicts), never creates a store it only reads, and imports a broken file not at all.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from pathlib import Path
from typing import Any

import psycopg
import pytest

from builtin_providers.stores import (
    ItemStore,
    JsonlMemoryStore,
    MemoryItem,
    PostgresMemoryStore,
    SqliteMemoryStore,
)
from builtin_providers.stores.jsonl import DEFAULT_MAX_BYTES, MAX_DEPTH, MAX_WARNINGS
from composer.cli.main import main

KINDS = ["jsonl", "sqlite", "postgres"]

CURATED = MemoryItem("curated: restart zone by zone", ["policy"], {"team": "ops"}, "c1")
TIMED = MemoryItem(
    {"tool": "deployctl", "ok": True},
    ["tool"],
    {"source": "writeback", "nested": {"k": [1, 2]}},
    "w1",
    "ops",
    4102444800.5,
    written_back=True,
    created_at=1700000001.123456,
)
RESULT = MemoryItem("an agent result, stamped by its store", [], {}, "w2")
OTHER = MemoryItem("a note of another team", ["a", "b"], {"n": 3}, "c2", "dev")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["memory", *args])
    out, err = capsys.readouterr()
    return code, out, err


class Place:
    """Where a store of one kind lives in a test: its spec and --schema, and its opener."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.schema = "composer"
        if kind == "jsonl":
            self.spec = str(tmp_path / f"{kind}.jsonl")
        elif kind == "sqlite":
            self.spec = str(tmp_path / f"{kind}.sqlite")
        else:
            self.spec = request.getfixturevalue("postgres_dsn")
            self.schema = request.getfixturevalue("pg_schema")

    def open(self) -> ItemStore:
        if self.kind == "jsonl":
            return JsonlMemoryStore(self.spec)
        if self.kind == "sqlite":
            return SqliteMemoryStore(self.spec)
        return PostgresMemoryStore(self.spec, schema=self.schema)

    def args(self) -> list[str]:
        return [self.spec, "--schema", self.schema]

    def use(self, work: Any) -> Any:
        async def opened() -> Any:
            store = self.open()
            try:
                return await work(store)
            finally:
                await store.aclose()

        return asyncio.run(opened())


def exported(capsys: pytest.CaptureFixture[str], place: Place) -> list[dict[str, Any]]:
    code, out, err = run(capsys, "export", *place.args())
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize(("source_kind", "target_kind"), list(itertools.permutations(KINDS, 2)))
def test_every_pair_of_kinds_keeps_every_field_and_the_written_back_flag(
    source_kind: str,
    target_kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = Place(source_kind, tmp_path, request)
    target = Place(target_kind, tmp_path, request)

    async def fill(store: ItemStore) -> None:
        await store.add([CURATED, TIMED])  # TIMED is written back by its own flag
        await store.add([RESULT], written_back=True)  # RESULT by the writeback's
        await store.add([OTHER])

    source.use(fill)
    before = exported(capsys, source)
    assert [r["id"] for r in before] == ["c1", "w1", "w2", "c2"]
    assert [r.get("written_back", False) for r in before] == [False, True, True, False]
    assert before[1]["created_at"] == 1700000001.123456
    assert before[1]["expires_at"] == 4102444800.5
    assert all(isinstance(r["created_at"], float) for r in before)

    schema = source.schema if source_kind == "postgres" else target.schema  # one, either way
    code, out, err = run(capsys, "import", source.spec, target.spec, "--schema", schema)
    assert code == 0, err
    assert "added 4, 0 already there" in out
    assert exported(capsys, target) == before  # item for item, every field

    items = target.use(lambda store: store.export())
    assert items == [
        CURATED,
        TIMED,
        MemoryItem(RESULT.content, [], {}, "w2", written_back=True),
        OTHER,
    ]
    assert [item.created_at for item in items] == [r["created_at"] for r in before]

    code, out, _ = run(capsys, "import", source.spec, target.spec, "--schema", schema)
    assert code == 0
    assert "added 0, 4 already there" in out
    if target_kind == "jsonl":  # its lines are what export prints
        lines = Path(target.spec).read_text(encoding="utf-8").splitlines()
        assert [json.loads(line) for line in lines] == before
        return  # a JSONL file cannot cap its items

    async def write_back(store: ItemStore) -> list[str]:
        newest = MemoryItem("the newest agent result", [], {}, "w3")
        await store.add([newest], written_back=True, cap=1)
        return [item.id for item in await store.export()]

    # The imported agent result w2 is evicted first; the curated c1 is never evicted.
    assert target.use(write_back) == ["c1", "w1", "c2", "w3"]


def pg_schema_exists(dsn: str, schema: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", (schema,)
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize("action", ["stats", "export"])
def test_reading_a_store_that_is_not_there_creates_nothing(
    action: str,
    tmp_path: Path,
    postgres_dsn: str,
    pg_schema: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    output = tmp_path / "out.jsonl"
    extra = [str(output)] if action == "export" else []
    for missing in [tmp_path / "nothere.sqlite", tmp_path / "nothere.jsonl"]:
        code, _, err = run(capsys, action, str(missing), *extra)
        assert code == 1
        assert err.startswith(f"composer memory: no memory store at {missing}: check the path;")
        assert "nothing was created" in err
        assert not missing.exists()
    assert not output.exists()
    assert list(tmp_path.iterdir()) == []

    code, _, err = run(capsys, action, postgres_dsn, *extra, "--schema", pg_schema)
    assert code == 1
    assert f"check the database in the URL and --schema (here {pg_schema!r})" in err
    assert not pg_schema_exists(postgres_dsn, pg_schema)

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # a schema of something else
        conn.execute(f'CREATE SCHEMA "{pg_schema}"')
        code, _, err = run(capsys, action, postgres_dsn, *extra, "--schema", pg_schema)
        assert code == 1
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (pg_schema,)
        ).fetchone()
    assert tables == (0,)

    empty = tmp_path / "empty.db"  # a file that holds no store is not made into one
    empty.touch()
    code, _, err = run(capsys, action, str(empty), *extra)
    assert code == 1
    assert empty.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_importing_from_a_store_that_is_not_there_creates_no_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "import", str(tmp_path / "typo.jsonl"), str(tmp_path / "t.sqlite"))
    assert code == 1
    assert "no memory store at" in err
    assert list(tmp_path.iterdir()) == []


BROKEN = [
    (b'{"id": "ok", "content": "fine"}\n{"id": "bad", "content": \n', "line 2: not JSON"),
    (b'{"id": "ok", "content": "x"}\n{"id": 1, "content": "x", "tags": "t"}\n', "line 2: 'tags'"),
    (b'{"content": "x", "written_back": "yes"}\n', "line 1: 'written_back' is not true or false"),
    (b'{"content": "x"}\n{"id": "cut", "conte', "truncated last line 2: not JSON"),
    (b'{"content": "x"}\n' + b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"\n", "line 2:"),
]


@pytest.mark.parametrize(("text", "said"), BROKEN)
def test_a_broken_line_fails_the_import_naming_file_and_line_and_imports_nothing(
    text: bytes, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "notes.jsonl"
    source.write_bytes(text)
    target = tmp_path / "team.sqlite"
    code, out, err = run(capsys, "import", str(source), str(target))
    assert code == 1
    assert err.startswith(f"composer memory: memory file {source}, {said}")
    assert err.rstrip().endswith("fix or remove the line; nothing was imported")
    assert not target.exists()
    code, out, err = run(capsys, "export", str(source))
    assert (code, out) == (1, "")
    assert err.rstrip().endswith("nothing was exported")


def test_several_broken_lines_are_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "notes.jsonl"
    source.write_bytes(b"nope\n" * 5 + b'{"content": "x"}\n')
    code, _, err = run(capsys, "import", str(source), str(tmp_path / "t.sqlite"))
    assert code == 1
    assert "line 1: not JSON: Expecting value (column 1) (and 4 more unreadable lines)" in err


def test_an_import_file_over_the_size_limit_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "huge.jsonl"
    with source.open("wb") as f:  # sparse: the size is checked before a byte is read
        f.truncate(DEFAULT_MAX_BYTES + 1)
    target = tmp_path / "t.sqlite"
    code, _, err = run(capsys, "import", str(source), str(target))
    assert code == 1
    assert f"is {DEFAULT_MAX_BYTES + 1} bytes, over the {DEFAULT_MAX_BYTES}-byte limit" in err
    assert not target.exists()
    assert os.stat(source).st_size == DEFAULT_MAX_BYTES + 1


async def test_agent_results_exported_into_a_seed_file_are_still_evicted_first(
    tmp_path: Path,
) -> None:
    seed = tmp_path / "seed.jsonl"
    lines = [
        {"id": "note", "content": "a curated note", "created_at": 1700000000.0},
        {"id": "old", "content": "an exported agent result", "written_back": True},
    ]
    seed.write_text("".join(json.dumps(line) + "\n" for line in lines))
    store = SqliteMemoryStore(tmp_path / "team.sqlite", seed=seed)
    try:
        await store.add([MemoryItem("a new result", [], {}, "new")], written_back=True, cap=1)
        items = await store.export()
    finally:
        await store.aclose()
    assert [item.id for item in items] == ["note", "new"]
    assert items[0].created_at == 1700000000.0


def test_a_file_of_many_bad_lines_is_a_bounded_number_of_log_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    source = tmp_path / "hostile.jsonl"
    duplicate = json.dumps({"id": "x" * 10_000, "content": "again"}).encode() + b"\n"
    source.write_bytes(duplicate * 3 + b"nope\n" * 1000)
    code, _, err = run(capsys, "import", str(source), str(tmp_path / "t.sqlite"))
    assert code == 1
    assert "line 4: not JSON: Expecting value (column 1) (and 999 more unreadable lines)" in err
    logged = [r.getMessage() for r in caplog.records if r.name == JsonlMemoryStore.__module__]
    assert len(logged) == MAX_WARNINGS + 1
    assert logged[-1].endswith("more lines skipped, not logged one by one")
    assert "skipped line 2: id 'xxx" in logged[0]
    assert max(len(line) for line in logged) < 300  # a huge id is not logged whole
